"""SC-Durable: restarts, crashes at fault points (real processes, SIGKILL), projection
rebuilds and idempotent retries across restarts."""
from __future__ import annotations

import json

import pytest

from morphz.shared.auth import IN_PROCESS_CALLER
from morphz.services.storage.lmdb import LmdbStore
from morphz.shared.errors import MorphzError
from morphz.shared.storage.api import Write

CTX = "durable"
pytestmark = pytest.mark.all_in_one(reason="crashes and restarts an all-in-one server of its own")


def _state(c) -> dict:
    """The context's status without its physical version (every write moves it, a
    repair of projections too)."""
    return {k: v for k, v in c.status(CTX).items() if k != "commit_seq"}


def _tx(c, ops: str, reason: str = "", **kw) -> dict:
    base = c.status(CTX)["revision"]
    why = f' (reason "{reason}")' if reason else ""
    return c.commit(CTX, f"(context-tx (base-version {base}){why} {ops})", **kw)


def test_dur_01_commits_survive_restart_and_sigkill(server_process):
    srv = server_process().start()
    c = srv.client()
    c.create_context(CTX)
    c.append_event(CTX, "s1", "user-message", "ship v1")
    c.activate(CTX, "s1")
    _tx(c, "(create release (goal ship-v1) (stage waiting-tests))")
    _tx(c, "(revise release (goal ship-v1) (stage packaging))")
    before = _state(c)
    assert srv.stop() == 0
    srv.start()
    c = srv.client()
    assert _state(c) == before
    _tx(c, "(create after-restart (x))")
    srv.kill()  # SIGKILL: no shutdown code runs
    srv.start()
    c = srv.client()
    assert c.status(CTX)["revision"] == before["revision"] + 1
    assert c.get_frame(CTX, "release")["body"] == "(goal ship-v1) (stage packaging)"
    assert c.audit(CTX)["match"]


@pytest.mark.parametrize("point", ["before-lmdb-txn", "after-puts-before-commit"])
def test_dur_02_crash_before_commit_leaves_no_partial_change(server_process, point):
    srv = server_process().start(MORPHZ_FAULT=f"{point}:4")  # CreateContext, 2 txs, then die
    c = srv.client(timeout=10)
    c.create_context(CTX)
    _tx(c, "(create a (x))")
    _tx(c, "(create b (x))")
    with pytest.raises(MorphzError) as info:
        _tx(c, "(create c (x)) (revise a (y)) (relate a supports b)", request_id="doomed")
    assert info.value.reason == "UNAVAILABLE"
    srv.kill()
    srv.start()
    c = srv.client()
    assert c.status(CTX)["revision"] == 2
    assert c.get_frame(CTX, "a")["body"] == "(x)" and c.get_frame(CTX, "b")["relations"] == []
    with pytest.raises(MorphzError):
        c.get_frame(CTX, "c")
    assert c.audit(CTX)["match"]
    # The request was never acknowledged: its retry is simply applied, once.
    r = _tx(c, "(create c (x)) (revise a (y)) (relate a supports b)", request_id="doomed")
    assert not r["replayed"] and r["revision"] == 3


def test_dur_02_crash_after_commit_keeps_the_commit_and_retry_replays(server_process):
    srv = server_process().start(MORPHZ_FAULT="after-commit-before-reply:3")
    c = srv.client(timeout=10)
    c.create_context(CTX)
    _tx(c, "(create a (x))")
    text = "(context-tx (base-version 1) (revise a (y)))"
    with pytest.raises(MorphzError):
        c.commit(CTX, text, request_id="retry-me")
    srv.kill()
    srv.start()
    c = srv.client()
    assert c.get_frame(CTX, "a")["body"] == "(y)"  # durable before the crash
    r = c.commit(CTX, text, request_id="retry-me")
    assert r["replayed"] and r["revision"] == 2
    assert c.status(CTX)["revision"] == 2 and c.audit(CTX)["match"]


def test_dur_03_rebuild_projections_gives_the_same_state(server_process):
    srv = server_process().start()
    c = srv.client()
    c.create_context(CTX)
    ev = c.append_event(CTX, "s1", "tool-result", "report")
    c.activate(CTX, "s1")
    _tx(c, f"(derive t (from {ev['ref']}) (ok)) (create r (x)) (relate t supports r) "
           f"(place r first) (retire {ev['ref']})", reason="digested")
    _tx(c, "(retire r) (checkpoint cp)", reason="tidy")
    listed, status = c.list_frames(CTX), _state(c)
    assert c.rebuild_projections(CTX)["rewritten"] == {}  # nothing to repair
    # Damage the projections behind the service's back (the process is stopped).
    srv.stop()
    store = LmdbStore(f"{srv.data_dir}/store")
    with store.reader(CTX) as r:
        seq, frame = r.commit_seq, json.loads(r.get("frames", ("t",)))
    frame["body"], frame["state"] = "(tampered)", "retired"
    store.commit(CTX, seq, [Write("frames", ("t",), json.dumps(frame).encode()),
                            Write("relations", ("t", "supports", "r"), None),
                            Write("sessions", ("s1",), None)])
    store.close()
    srv.start()
    c = srv.client()
    assert not c.audit(CTX)["match"]
    report = c.rebuild_projections(CTX)
    assert report["rewritten"] == {"frames": 1, "relations": 1, "sessions": 1}
    assert c.audit(CTX)["match"]
    assert c.list_frames(CTX) == listed and _state(c) == status


def test_dur_03_crash_mid_rebuild_leaves_the_projections_as_they_were(server_process):
    srv = server_process().start()
    c = srv.client(timeout=10)
    c.create_context(CTX)
    _tx(c, "(create a (x)) (create b (y))")
    srv.stop()
    store = LmdbStore(f"{srv.data_dir}/store")  # damage two projections, service stopped
    with store.reader(CTX) as r:
        seq, frame = r.commit_seq, json.loads(r.get("frames", ("a",)))
    frame["body"] = "(tampered)"
    store.commit(CTX, seq, [Write("frames", ("a",), json.dumps(frame).encode()),
                            Write("frames", ("b",), None)])
    store.close()
    srv.start(MORPHZ_FAULT="mid-rebuild")
    c = srv.client(timeout=10)
    damaged = c.audit(CTX)
    assert not damaged["match"]
    with pytest.raises(MorphzError) as info:
        c.rebuild_projections(CTX)
    assert info.value.reason in ("UNAVAILABLE", "INTERNAL", "CANCELLED")
    srv.proc.wait(timeout=20)
    assert srv.died() and srv.proc.returncode == -9  # killed itself at the fault point
    srv.start()
    c = srv.client()
    # Nothing of the interrupted repair is visible: the same damage, the same revision.
    assert c.audit(CTX) == damaged and c.status(CTX)["revision"] == 1
    assert c.rebuild_projections(CTX)["rewritten"] == {"frames": 2}
    assert c.audit(CTX)["match"]


def test_dur_04_idempotent_retry_across_restart(server_process, expect_rejected):
    srv = server_process().start()
    c = srv.client()
    c.create_context(CTX)
    first = c.commit(CTX, "(context-tx (base-version 0) (create a (x)))", request_id="req-1")
    ev = c.append_event(CTX, "s1", "user-message", "hello", request_id="msg-1")
    srv.kill()
    srv.start()
    c = srv.client()
    again = c.commit(CTX, "(context-tx (base-version 0) (create a (x)))", request_id="req-1")
    assert again == {**first, "replayed": True}
    assert c.append_event(CTX, "s1", "user-message", "hello", request_id="msg-1") == \
        {**ev, "replayed": True}
    expect_rejected("IDEMPOTENCY_MISMATCH", c.commit, CTX,
                    "(context-tx (base-version 0) (create a (other)))", request_id="req-1")
    expect_rejected("IDEMPOTENCY_MISMATCH", c.append_event, CTX, "s1", "user-message", "bye",
                    request_id="msg-1")
    assert c.status(CTX)["revision"] == 1 and c.status(CTX)["event_count"] == 3


def test_map_full_is_a_typed_error_with_nothing_written_and_the_map_can_grow(tmp_path):
    small = LmdbStore(str(tmp_path / "s"), map_size=256 << 10, max_map_size=256 << 10)
    small.commit("c", 0, [Write("frames", ("a",), b"small")])
    with pytest.raises(MorphzError) as info:
        small.commit("c", 1, [Write("frames", ("b",), b"x" * (512 << 10))])
    assert info.value.reason == "STORAGE_FULL"
    with small.reader("c") as r:
        assert r.commit_seq == 1 and r.get("frames", ("b",)) is None
    small.close()
    grown = LmdbStore(str(tmp_path / "s"), map_size=256 << 10, max_map_size=8 << 20)
    assert grown.commit("c", 1, [Write("frames", ("b",), b"x" * (512 << 10))]) == 2
    assert grown.map_size > 256 << 10
    with grown.reader("c") as r:
        assert r.get("frames", ("a",)) == b"small" and len(r.get("frames", ("b",))) == 512 << 10
    grown.close()


def test_startup_check_reports_a_projection_that_ends_early(tmp_path):
    from morphz.services.server.app import AllInOne, ServerConfig
    app = AllInOne(ServerConfig(str(tmp_path), "127.0.0.1:0"))
    app.transactions.create_context(CTX, caller=IN_PROCESS_CALLER)
    app.transactions.append_event(CTX, "s", "user-message", "hi", caller=IN_PROCESS_CALLER)
    with app.store.reader(CTX) as r:
        seq, meta = r.commit_seq, json.loads(r.get("meta", ()))
    meta["next_seq"] = 7
    app.store.commit(CTX, seq, [Write("meta", (), json.dumps(meta).encode())])
    app.stop(grace=0)
    again = AllInOne(ServerConfig(str(tmp_path), "127.0.0.1:0"))
    assert again.startup_problems == [f"{CTX}: events end at 1, meta expects next 7"]
    again.stop(grace=0)
