"""DUR-07: when the storage quota or the disk is full, every write is refused
STORAGE_FULL (RESOURCE_EXHAUSTED, the free bytes in its details), reads go on, nothing
acknowledged is lost, health shows it, the server logs a line per interval (not a
traceback per refusal), and writes resume when space returns. Real servers (`morphz
serve` child processes) over real LMDB; the disk-full case on a real tmpfs."""
from __future__ import annotations

import os
import subprocess

import pytest

from morphz.services.encoding.client import EncodingClient
from morphz.services.server.serving import SPACE_HEALTH
from morphz.shared.errors import MorphzError
from tests.integration.test_cli import run_cli, run_json
from tests.topology import ServerProcess, health

pytestmark = pytest.mark.all_in_one(reason="fills the disk of an all-in-one server of its own")

CTX = "full"
EVENT_TEXT = 96 << 10  # bytes of text per appended event
LOG_LINES_WHILE_FULL = 10  # DUR-07: fewer a minute; the full phase below lasts under one
REFUSALS = 60  # writes tried while full (each refused)


def _text(i: int) -> str:
    return f"{i:06d} " + os.urandom(EVENT_TEXT // 2).hex()  # incompressible


def _fill(c) -> list[tuple[str, str]]:
    """Append events until the store refuses one: the (ref, text) of each acknowledged."""
    acked = []
    for i in range(100_000):
        text = _text(i)
        try:
            ref = c.append_event(CTX, "s1", "tool-result", text)["ref"]
        except MorphzError as e:
            _assert_full(e)
            return acked
        acked.append((ref, text))
    raise AssertionError("the store never filled up")


def _assert_full(e: MorphzError) -> None:
    assert e.reason == "STORAGE_FULL", e.to_dict()
    assert e.to_dict()["code"] == "RESOURCE_EXHAUSTED"
    assert int(e.details["free_bytes"]) >= 0, e.details


def _refused(write, *args) -> None:
    with pytest.raises(MorphzError) as info:
        write(*args)
    _assert_full(info.value)


def _every_write_refused(srv: ServerProcess, c, rounds: int) -> None:
    enc = EncodingClient(srv.channel(), timeout=30)
    for i in range(rounds):
        _refused(c.append_event, CTX, "s1", "user-message", _text(i))
        base = c.status(CTX)["revision"]
        _refused(c.commit, CTX, f"(context-tx (base-version {base}) (create f{i} (x {i})))")
        _refused(c.create_context, f"another-{i}")
        _refused(enc.compile, CTX, "s1")  # a compile stores its snapshot: a write too


def _reads_served(c, acked: list[tuple[str, str]]) -> None:
    assert c.status(CTX)["revision"] >= 0
    for ref, text in acked:  # nothing acknowledged lost
        assert c.get_event(CTX, ref)["text"] == text


def _log_lines(srv: ServerProcess) -> int:
    return len(srv.stderr().splitlines())


def _cli_status(srv: ServerProcess) -> dict:
    return run_json("context", "status", CTX, address=srv.address)


def test_dur_07_past_the_storage_quota_every_write_is_refused_and_reads_go_on(tmp_path):
    srv = ServerProcess(tmp_path / "data", args=["--storage-quota", "6MiB"]).start()
    try:
        c = srv.client()
        c.create_context(CTX)
        assert health(srv.address, SPACE_HEALTH) == 1  # SERVING
        assert _cli_status(srv)["storage_space"] == "ok"
        acked = _fill(c)
        assert acked, "nothing fit under the quota"
        lines = _log_lines(srv)
        _every_write_refused(srv, c, REFUSALS // 4)
        _reads_served(c, acked)
        assert health(srv.address, SPACE_HEALTH) == 2  # NOT_SERVING: the alarm
        assert health(srv.address) == 1  # the server still serves (reads)
        assert _cli_status(srv)["storage_space"] == "full"  # `morphz context status` shows it
        text = run_cli("context", "status", CTX, address=srv.address).stdout
        assert "storage_space: full: writes are refused STORAGE_FULL" in text, text
        assert _log_lines(srv) - lines < LOG_LINES_WHILE_FULL, srv.stderr()[-3000:]
        assert "Traceback" not in srv.stderr()
        # Space returns (a raised quota): writes resume, and every acknowledged one is there.
        assert srv.stop() == 0
        srv.args = ["--storage-quota", "64MiB"]
        srv.start()
        c = srv.client()
        _reads_served(c, acked)
        c.append_event(CTX, "s1", "user-message", "after")
        assert health(srv.address, SPACE_HEALTH) == 1
        assert _cli_status(srv)["storage_space"] == "ok"
        assert c.audit(CTX)["match"]
    finally:
        srv.kill()


@pytest.fixture
def tmpfs(tmp_path):
    """A 64 MiB tmpfs (root only: skipped, saying so, where mounting is refused)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()[:200]}); the quota "
                    "test covers the same refusals")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_dur_07_a_full_disk_refuses_every_write_and_writes_resume_when_space_returns(tmpfs):
    ballast = tmpfs / "ballast"
    ballast.write_bytes(b"\0" * (12 << 20))  # freed below: the space that returns
    srv = ServerProcess(tmpfs / "data").start()
    try:
        c = srv.client()
        c.create_context(CTX)
        acked = _fill(c)
        assert acked
        lines = _log_lines(srv)
        _every_write_refused(srv, c, REFUSALS // 4)
        _reads_served(c, acked)
        assert health(srv.address, SPACE_HEALTH) == 2
        assert _log_lines(srv) - lines < LOG_LINES_WHILE_FULL, srv.stderr()[-3000:]
        assert "Traceback" not in srv.stderr()
        ballast.unlink()  # space returns: the next write commits, no restart
        ref = c.append_event(CTX, "s1", "user-message", "after")["ref"]
        assert c.get_event(CTX, ref)["text"] == "after"
        assert health(srv.address, SPACE_HEALTH) == 1
        _reads_served(c, acked)
        assert c.audit(CTX)["match"]
    finally:
        srv.kill()
