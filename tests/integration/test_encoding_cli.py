"""`morphz context encode` and `morphz context encoding show|replay|check`, run as real
subprocesses against the session's real server."""
from __future__ import annotations

from morphz.shared.sexpr import parse_many
from tests.integration.test_cli import assert_error, run_cli, run_json


def _release(mind) -> dict:
    mind.event("请发布 v1", session="s1")
    mind.tx("(create release (goal ship-v1) (stage waiting-tests))", reason="发布计划")
    return mind.event("regression: 120 passed, 0 failed", kind="tool-result")


def test_cli_encode_json_carries_snapshot_and_hash_beside_the_encoding(endpoints, mind):
    address = endpoints.encoding  # the encoding commands' service
    report = _release(mind)
    c = ("--context", mind.context)
    out = run_json("context", "encode", *c, "--session", "s1", "--budget", "65536",
                   "--model", "m1", "--bind", "cwd=/srv", address=address)
    assert out["snapshot"].startswith("enc-") and out["hash"].startswith("sha256:")
    assert report["ref"] in out["text"] and out["pressure"]["limit_bytes"] == 65536
    shown = run_json("context", "encoding", "show", out["snapshot"], *c, address=address)
    assert shown["snapshot"]["hash"] == out["hash"]
    replay = run_json("context", "encoding", "replay", out["snapshot"], *c, address=address)
    assert replay["match"] and replay["replay_hash"] == out["hash"]
    check = run_json("context", "encoding", "check", out["snapshot"], *c, address=address)
    assert check["current"]


def test_cli_encode_text_is_the_encoding_and_check_exits_nonzero_when_changed(endpoints, mind):
    address = endpoints.encoding  # the encoding commands' service
    report = _release(mind)
    c = ("--context", mind.context)
    proc = run_cli("context", "encode", *c, "--session", "s1", address=address)
    assert proc.returncode == 0, proc.stderr
    heads = [f[0].name for f in parse_many(proc.stdout)]  # `;` trailer lines are comments
    assert heads[0] == "protocol" and heads[-1] == "evaluate"
    snapshot = [ln for ln in proc.stdout.splitlines() if ln.startswith("; snapshot ")][0].split()[2]
    mind.tx(f"(retire {report['ref']})", reason="digested")
    proc = run_cli("context", "encoding", "check", snapshot, *c, address=address)
    assert proc.returncode == 1 and f"event {report['ref']}: source_retired" in proc.stdout
    proc = run_cli("context", "encoding", "replay", snapshot, *c, address=address)
    assert proc.returncode == 0 and "same bytes and hash" in proc.stdout


def test_cli_encoding_errors_are_structured(endpoints, mind):
    address = endpoints.encoding  # the encoding commands' service
    mind.event("hi")
    c = ("--context", mind.context)
    assert_error(run_cli("context", "encoding", "replay", "enc-nope", *c, "--format=json",
                         address=address), "NOT_FOUND", "SNAPSHOT_NOT_FOUND")
    err = assert_error(run_cli("context", "encode", *c, "--session", "s1", "--budget", "1024",
                               "--must-read", "@e999", address=address),
                       "FAILED_PRECONDITION", "MUST_READ_MISSING")
    assert err["details"]["missing"] == ["@e999"]
    assert_error(run_cli("context", "encode", *c, "--session", "s1", "--since", "yesterday",
                         address=address), "INVALID_ARGUMENT", "CONTEXT_INPUT_INVALID")
