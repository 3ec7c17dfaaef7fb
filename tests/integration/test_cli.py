"""The `morphz` CLI, run as real subprocesses against the session's real server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

SEED_002_REASON = "测试结果已吸收，继续准备发布"
STATUS_KEYS = {"revision", "cognitive_tick", "frames_by_state", "sessions", "event_count",
               "commit_seq"}


def _env(**extra: str) -> dict:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    env.pop("MORPHZ_SERVER", None)
    return dict(env, **extra)


def run_cli(*args: str | bytes, address: str | None = None, stdin: str | bytes | None = None,
            env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """`morphz ARGS` (with --server ADDRESS when given); stdout/stderr decoded as UTF-8."""
    argv = [sys.executable, "-m", "morphz.services.cli.main", *args]
    if address is not None:
        argv += ["--server", address]
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run(argv, input=data, capture_output=True, timeout=timeout,
                          env=env or _env())
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"))


def run_json(*args: str, address: str, stdin: str | bytes | None = None,
             expect: int = 0) -> dict:
    proc = run_cli(*args, "--format=json", address=address, stdin=stdin)
    assert proc.returncode == expect, (proc.stdout, proc.stderr)
    return json.loads(proc.stdout)


def assert_error(proc: subprocess.CompletedProcess, code: str, reason: str) -> dict:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    out = json.loads(proc.stdout)
    assert set(out) == {"error"}
    err = out["error"]
    assert set(err) == {"code", "reason", "message", "details"}
    assert (err["code"], err["reason"]) == (code, reason), err
    assert err["message"]
    return err


def test_cli_release_walkthrough(address, ctx, tmp_path):
    c = ("--context", ctx)
    create = ("(context-tx (base-version 0) (reason \"发布计划\") "
              "(create release (goal ship-v1) (stage waiting-tests)))")
    receipt = run_json("context", "tx", *c, "-", address=address, stdin=create)
    assert receipt["revision"] == 1

    event = run_json("context", "event", *c, "--session", "release-thread",
                     "--kind", "tool-result", "--text", "regression: 120 passed, 0 failed",
                     address=address)
    ref = event["ref"]
    activation = run_json("context", "activate", *c, "--session", "release-thread",
                          address=address)
    assert ref in activation["claimed"]

    tx_file = tmp_path / "release.tx"
    tx_file.write_text(
        f"(context-tx (base-version 1) (reason \"{SEED_002_REASON}\") "
        f"(derive test-result (from {ref}) (tests passed)) "
        f"(revise release (goal ship-v1) (stage packaging)) "
        f"(relate test-result supports release) "
        f"(retire {ref}))", encoding="utf-8")
    proc = run_cli("context", "tx", *c, "--session", "release-thread", "--file", str(tx_file),
                   address=address)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    assert lines[0] == "revision 2"
    assert "#0 derive test-result -> derived" in lines[1]
    assert "#1 revise release -> revised" in lines[2]
    assert "#2 relate test-result supports release -> related" in lines[3]
    assert f"#3 retire {ref} -> retired" in lines[4]

    frame = run_json("context", "frame", "release", *c, address=address)
    assert frame["body"] == "(goal ship-v1) (stage packaging)"
    assert frame["state"] == "active" and frame["revision"] == 2
    old = run_json("context", "frame", "release", *c, "--at-revision", "1", address=address)
    assert old["body"] == "(goal ship-v1) (stage waiting-tests)"
    derived = run_json("context", "frame", "test-result", *c, address=address)
    assert derived["sources"] == [ref] and derived["body"] == "(tests passed)"

    text = run_cli("context", "frame", "release", *c, address=address)
    assert text.returncode == 0
    assert "state: active" in text.stdout.splitlines()
    assert text.stdout.rstrip().splitlines()[-1] == "(goal ship-v1) (stage packaging)"

    listed = run_json("context", "frames", *c, address=address)
    assert [f["id"] for f in listed["frames"]] == ["release", "test-result"]
    first = run_json("context", "frames", *c, "--max-bytes", "1", address=address)
    assert [f["id"] for f in first["frames"]] == ["release"]
    rest = run_cli("context", "frames", *c, "--max-bytes", "1", "--cursor",
                   first["next_cursor"], address=address)
    assert rest.returncode == 0
    assert rest.stdout.splitlines() == ["test-result [active] rev 1  (tests passed)"]

    read = run_json("context", "read", ref, *c, address=address)
    assert read["state"] == "retired"
    assert read["text"] == "regression: 120 passed, 0 failed"
    read_text = run_cli("context", "read", ref, *c, address=address)
    assert "state: retired" in read_text.stdout.splitlines()
    assert read_text.stdout.rstrip().endswith("regression: 120 passed, 0 failed")

    tx_event = run_json("context", "read", receipt["event_ref"], *c, address=address)
    assert tx_event["kind"] == "context-tx"

    audit = run_cli("context", "audit", ctx, "--format=json", address=address)
    assert audit.returncode == 0, audit.stdout
    assert json.loads(audit.stdout)["match"] is True


def test_cli_event_json_has_exactly_ref_seq_id_replayed(address, ctx):
    out = run_json("context", "event", "--context", ctx, "--session", "s1",
                   "--kind", "user-message", "--text", "你好", "--request-id", "r-1",
                   address=address)
    assert set(out) == {"ref", "seq", "id", "replayed"}
    assert out["ref"] == f"@e{out['seq']}" and out["replayed"] is False
    again = run_json("context", "event", "--context", ctx, "--session", "s1",
                     "--kind", "user-message", "--text", "你好", "--request-id", "r-1",
                     address=address)
    assert again == dict(out, replayed=True)


def test_cli_event_from_file_and_stdin_with_causal_refs(address, ctx, tmp_path):
    path = tmp_path / "report.txt"
    path.write_text("测试日志\nline 2\n", encoding="utf-8")
    first = run_json("context", "event", "--context", ctx, "--session", "s1", "--kind",
                     "tool-result", "--file", str(path), address=address)
    second = run_json("context", "event", "--context", ctx, "--session", "s1", "--kind",
                      "external", "--file", "-", "--causal-ref", first["ref"],
                      "--actor", "ci", address=address, stdin="from stdin")
    assert run_json("context", "read", first["ref"], "--context", ctx,
                    address=address)["text"] == "测试日志\nline 2\n"
    ev = run_json("context", "read", second["ref"], "--context", ctx, address=address)
    assert (ev["text"], ev["causal_refs"], ev["actor"]) == ("from stdin", [first["ref"]], "ci")


def test_cli_conflicting_stale_base_is_aborted_error_json(address, ctx):
    tx = "(context-tx (base-version 0) (reason \"r\") (create a (x 1)))"
    run_json("context", "tx", "--context", ctx, "-", address=address, stdin=tx)
    stale = "(context-tx (base-version 0) (reason \"r\") (create a (x 2)))"
    for fmt in ("text", "json"):  # error output is JSON in both formats
        proc = run_cli("context", "tx", "--context", ctx, "-", f"--format={fmt}",
                       address=address, stdin=stale)
        err = assert_error(proc, "ABORTED", "TX_CONFLICT")
        assert err["details"] == {"base": 0, "latest": 1,
                                  "changed": [{"boundary": "frame:a", "revision": 1}]}


def test_cli_unreachable_server_is_error_json():
    proc = run_cli("context", "status", "anything", "--timeout", "2", address="127.0.0.1:1")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    err = json.loads(proc.stdout)["error"]
    assert err["reason"] in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
    assert set(err) == {"code", "reason", "message", "details"}


def test_cli_missing_tx_file_is_context_input_invalid(address, ctx, tmp_path):
    missing = tmp_path / "nope.tx"
    proc = run_cli("context", "tx", "--context", ctx, "--file", str(missing), address=address)
    err = assert_error(proc, "INVALID_ARGUMENT", "CONTEXT_INPUT_INVALID")
    assert err["details"]["path"] == str(missing)


def test_cli_invalid_utf8_event_file_is_context_input_invalid(address, ctx, tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok \xff\xfe")
    proc = run_cli("context", "event", "--context", ctx, "--session", "s1", "--kind",
                   "external", "--file", str(path), address=address)
    err = assert_error(proc, "INVALID_ARGUMENT", "CONTEXT_INPUT_INVALID")
    assert err["details"]["offset"] == 3


def test_cli_undecodable_argument_is_context_input_invalid(address, ctx):
    proc = run_cli("context", "event", "--context", ctx, "--session", "s1", "--kind",
                   "external", "--text", b"bad \xff bytes", address=address)
    err = assert_error(proc, "INVALID_ARGUMENT", "CONTEXT_INPUT_INVALID")
    assert err["details"]["field"] == "text"


def test_cli_server_from_environment(address, ctx):
    proc = run_cli("context", "status", ctx, "--format=json", env=_env(MORPHZ_SERVER=address))
    assert proc.returncode == 0, proc.stdout
    assert json.loads(proc.stdout)["context"] == ctx


def test_cli_bad_server_address_is_context_input_invalid():
    proc = run_cli("context", "status", "c", address="no-port-here")
    err = assert_error(proc, "INVALID_ARGUMENT", "CONTEXT_INPUT_INVALID")
    assert err["details"]["field"] == "server"


@pytest.mark.parametrize("before", [True, False], ids=["before-subcommand", "after-subcommand"])
def test_cli_format_json_before_or_after_subcommand(address, ctx, before):
    args = ["context", "status", ctx]
    args = ["--format=json", *args] if before else [*args, "--format=json"]
    proc = run_cli(*args, address=address)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["context"] == ctx


def test_cli_status_json_fields_and_context_fallback(address, ctx):
    status = run_json("context", "status", "--context", ctx, address=address)
    assert STATUS_KEYS <= set(status)
    assert status["context"] == ctx and status["revision"] == 0
    assert set(status["frames_by_state"]) == {"active", "retiring", "retired"}
    text = run_cli("context", "status", ctx, address=address)
    assert text.returncode == 0 and f"context: {ctx}" in text.stdout.splitlines()


def test_cli_tx_from_stdin(address, ctx):
    tx = "(context-tx (base-version 0) (reason \"stdin\") (create plan (step one)))"
    receipt = run_json("context", "tx", "--context", ctx, "-", address=address, stdin=tx)
    assert receipt["revision"] == 1
    assert [(r["op"], r["target"], r["outcome"]) for r in receipt["results"]] == [
        ("create", "plan", "created")]
    tx2 = "(context-tx (base-version 1) (reason \"stdin\") (revise plan (step two)))"
    receipt = run_json("context", "tx", "--context", ctx, "--file", "-", address=address,
                       stdin=tx2)
    assert receipt["revision"] == 2


def test_cli_create_activate_deliver(address):
    name = f"cli-{uuid.uuid4().hex[:12]}"
    created = run_json("context", "create", name, "--window", "3", address=address)
    assert (created["context"], created["window"], created["revision"]) == (name, 3, 0)
    assert_error(run_cli("context", "create", name, address=address),
                 "ALREADY_EXISTS", "CONTEXT_EXISTS")
    c = ("--context", name)
    ref = run_json("context", "event", *c, "--session", "s", "--kind", "user-message",
                   "--text", "ship it", address=address)["ref"]
    act = run_cli("context", "activate", *c, "--session", "s", address=address)
    assert act.returncode == 0
    assert f"claimed: {ref}" in act.stdout.splitlines()
    delivered = run_json("context", "deliver", *c, "--activation", "a1", address=address)
    assert delivered["delivered"] is True and delivered["root"] == ref


def test_cli_audit_text_lists_projections(address, ctx):
    proc = run_cli("context", "audit", "--context", ctx, address=address)
    assert proc.returncode == 0, proc.stdout
    lines = proc.stdout.splitlines()
    assert "match" in lines[0]
    assert "ok frames" in lines and "ok meta" in lines


def test_cli_server_error_not_found_is_error_json(address, ctx):
    proc = run_cli("context", "frame", "no-such-frame", "--context", ctx, address=address)
    assert_error(proc, "NOT_FOUND", "FRAME_NOT_FOUND")


def test_cli_stale_frames_cursor_is_error_json(address, ctx):
    c = ("--context", ctx)
    run_json("context", "tx", *c, "--file", "-", address=address,
             stdin="(context-tx (base-version 0) (create a (x)) (create b (y)))")
    first = run_json("context", "frames", *c, "--max-bytes", "1", address=address)
    run_json("context", "tx", *c, "--file", "-", address=address,
             stdin="(context-tx (base-version 1) (create c (z)))")
    proc = run_cli("context", "frames", *c, "--max-bytes", "1", "--cursor",
                   first["next_cursor"], address=address)
    assert_error(proc, "FAILED_PRECONDITION", "FRAMES_CURSOR_STALE")


def test_cli_usage_error_exits_2():
    proc = run_cli("context", "event", "--session", "s", "--kind", "user-message")
    assert proc.returncode == 2
    assert "usage:" in proc.stderr


@pytest.mark.all_in_one(reason="starts an all-in-one `morphz serve` of its own")
def test_cli_serve_runs_until_sigterm(tmp_path):
    argv = [sys.executable, "-m", "morphz.services.cli.main", "serve",
            "--listen", "127.0.0.1:0", "--data", str(tmp_path / "data")]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=_env())
    try:
        line = server.stdout.readline()
        assert line.startswith("morphz: serving on 127.0.0.1:"), line
        address = line.split()[3]
        created = run_json("context", "create", "served", address=address)
        assert created["context"] == "served"
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert server.returncode == 0
