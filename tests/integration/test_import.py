"""`morphz context import FILE` (DUR-09, RECALL-11): the real CLI process against a real
server process, killed with SIGKILL midway and run again."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from morphz.services.recall.client import RecallClient
from tests.integration.test_cli import _env, run_cli
from tests.polling import until

LINES = 20_000
START = datetime(2018, 1, 1, 8, 0, tzinfo=timezone(timedelta(hours=8)))  # one a minute
STEP = timedelta(minutes=1)


def write_jsonl(path, n: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i in range(1, n + 1):
            f.write(json.dumps({
                "kind": "user-message" if i % 3 else "tool-result", "session": "s1",
                "actor": "importer", "text": f"line{i:05d} migrated note 第{i}条",
                "occurred_at": (START + (i - 1) * STEP).isoformat(), "secret": False},
                ensure_ascii=False) + "\n")


def cli(address: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "morphz.services.cli.main", "context", *args,
            "--server", address, "--format=json"]


def import_cli(address: str, ctx: str, path, *args: str) -> subprocess.CompletedProcess:
    return run_cli("context", "import", str(path), "--context", ctx, "--format=json", *args,
                   address=address, timeout=600)


def first_progress(proc: subprocess.Popen) -> None:
    """Block until the CLI drew its progress bar once (a batch was acknowledged)."""
    seen = b""
    while b"lines," not in seen:
        chunk = os.read(proc.stderr.fileno(), 4096)
        assert chunk, (f"the import ended before a batch was acknowledged: {seen!r} "
                       f"{proc.stdout.read()!r}")
        seen += chunk


def window_hits(recall: RecallClient, ctx: str, since: datetime, until_: datetime) -> list:
    hits, cursor = [], ""
    while True:
        r = recall.search(ctx, since=since.isoformat(), until=until_.isoformat(), limit=100,
                          kinds=["event"], cursor=cursor)
        hits += r["results"]
        cursor = r["next_cursor"]
        if not cursor:
            return hits


# -- DUR-09 ------------------------------------------------------------------------------
def test_dur_09_an_import_killed_midway_and_run_again_applies_every_line_once(
        server_process, tmp_path):
    srv = server_process().start()
    client = srv.client()
    ctx = "dur-09-import"
    client.create_context(ctx)
    client.append_event(ctx, "s1", "user-message", "recorded live, no source time")
    end = START + LINES * STEP  # the window's exclusive end
    for t in (START - timedelta(seconds=1), end):  # just outside the window, both sides
        client.append_event(ctx, "s1", "external", "outside the window",
                            occurred_at=t.isoformat())
    path = tmp_path / "history.jsonl"
    write_jsonl(path, LINES)

    proc = subprocess.Popen(cli(srv.address, "import", str(path), "--context", ctx,
                                "--batch", "100"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    first_progress(proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    proc.stderr.close()
    # At least one batch is in; the killed CLI's next batch may still land after this
    # read (its call was on the wire), so `before` is a lower bound of what the second
    # run finds there.
    before = client.status(ctx)["event_count"] - 4  # context-created and the 3 above
    assert 0 < before < LINES, f"the kill was not midway ({before} lines in)"

    done = import_cli(srv.address, ctx, path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    reply = json.loads(done.stdout)
    assert reply["lines"] == LINES
    assert before <= reply["replayed"] < LINES, (before, reply)
    assert reply["applied"] == LINES - reply["replayed"]
    assert "lines," in done.stderr  # the progress bar
    assert client.status(ctx)["event_count"] == 4 + LINES

    # Every line once, found by its occurred time: exactly the imported window.
    recall = RecallClient(srv.channel(), timeout=30)
    until(lambda: recall.inspect(ctx)["lag"] == 0, 300, "the index did not catch up")
    hits = window_hits(recall, ctx, START, end)
    numbers = sorted(int(h["preview"].split()[0].strip("«»")[4:]) for h in hits)
    assert numbers == list(range(1, LINES + 1))
    assert {h["time_basis"] for h in hits} == {"occurred"}
    some = client.get_event(ctx, hits[0]["ref"])
    assert some["occurred_at"] and some["actor"] == "importer"
    assert client.audit(ctx)["match"]


def test_dur_09_a_bad_line_is_named_and_nothing_is_imported(server_process, tmp_path):
    srv = server_process().start()
    client = srv.client()
    ctx = "dur-09-bad-line"
    client.create_context(ctx)
    path = tmp_path / "bad.jsonl"
    write_jsonl(path, 5)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = json.dumps(dict(json.loads(lines[2]), occurred_at="2018-01-01T08:02:00"))
    lines[3] = "{not json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = import_cli(srv.address, ctx, path)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    err = json.loads(proc.stdout)["error"]
    assert err["reason"] == "CONTEXT_INPUT_INVALID"
    bad = err["details"]["lines"]
    assert [b["line"] for b in bad] == [3, 4]
    assert bad[0]["field"] == "occurred_at"
    assert client.status(ctx)["event_count"] == 1  # nothing applied
    # `context event --occurred-at` refuses a time without an offset the same way.
    naive = run_cli("context", "event", "--context", ctx, "--session", "s1", "--kind",
                    "user-message", "--text", "x", "--occurred-at", "2018-01-01T08:00:00",
                    "--format=json", address=srv.address)
    assert naive.returncode == 1
    assert json.loads(naive.stdout)["error"]["details"]["field"] == "occurred_at"
    dated = run_cli("context", "event", "--context", ctx, "--session", "s1", "--kind",
                    "user-message", "--text", "x", "--occurred-at", "2018-01-01T08:00:00Z",
                    "--format=json", address=srv.address)
    ref = json.loads(dated.stdout)["ref"]
    read = run_cli("context", "read", ref, "--context", ctx, address=srv.address)
    assert "occurred_at: 2018-01-01T08:00:00.000000+00:00" in read.stdout


@pytest.mark.parametrize("batch", ["0", "10001"])
def test_import_batch_size_is_bounded(server_process, tmp_path, batch):
    srv = server_process().start()
    path = tmp_path / "one.jsonl"
    write_jsonl(path, 1)
    proc = import_cli(srv.address, "any", path, "--batch", batch)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["error"]["details"]["field"] == "batch"
