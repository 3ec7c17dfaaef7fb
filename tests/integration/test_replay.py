"""AUDIT-01: the replay behind audit and rebuild-projections folds each event's writes into
one set of rows and carries the context's meta from one event to the next; what it gives,
table by table, is what applying each stored event on its own candidate Mind over the
rows written before it, and keeping every write that Mind makes, gives."""
from __future__ import annotations

import pytest

from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core import replay as rp
from morphz.services.transaction.core.engine import TransactionCore
from morphz.services.transaction.core.reducer import apply_event
from morphz.shared.auth import IN_PROCESS_CALLER as CALLER
from morphz.shared.mind.replay_rows import AUDITED
from morphz.shared.mind.state import MindState
from morphz.shared.storage.overlay import Overlay, OverlayReader

CTX = "replayed"


def reference_replay(events) -> dict[str, dict]:
    """One fresh MindState per event over the rows before it; all its writes() kept."""
    rows = Overlay()
    done = OverlayReader(rows)
    for ev in events:
        m = MindState(done)
        apply_event(m, ev)
        for w in m.writes():
            rows.put(w.table, w.key, w.value)
    return {t: dict(done.scan(t)) for t in AUDITED}


def _history(core: TransactionCore) -> None:
    """Every kind of event, with frames retired by the window, a rollback, a place and a
    run of inputs."""
    core.create_context(CTX, window=1, caller=CALLER)
    def tx(base: int, ops: str, reason: str = "", **kw) -> int:
        why = f' (reason "{reason}")' if reason else ""
        return core.commit(CTX, f"(context-tx (base-version {base}){why} {ops})",
                           caller=CALLER, **kw).revision
    rev = tx(0, "(create a (v 1)) (create b (v 2)) (create c (v 3))")
    seen = core.append_event(CTX, "s1", "user-message", "look at this", caller=CALLER)
    act = core.activate(CTX, "s1", caller=CALLER)
    rev = tx(rev, f"(derive d (from {seen.ref}) (saw it)) (relate d supports a) "
             f"(checkpoint cp) (place c first) (retire b)", reason="done")
    core.append_event(CTX, "s1", "action", "call the tool", activation=act.id,
                      caller=CALLER)
    core.deliver(CTX, act.id, caller=CALLER)
    core.append_event(CTX, "s2", "message", "hello", target_session="s1", caller=CALLER)
    core.append_event(CTX, "s1", "tool-result", "a result", caller=CALLER)
    core.activate(CTX, "s1", caller=CALLER)  # the window runs out: b retires
    rev = tx(rev, "(revise a (v 4)) (protect c)", reason="keep", request_id="req-1")
    rev = tx(rev, "(rollback cp)")
    core.set_policy(CTX, "grant", "someone", ["read"], caller=CALLER)
    tx(rev, "(create e (v 5) (from a)) (relate e supports a)")
    core.append_event(CTX, "s1", "user-message", "still pending", caller=CALLER)
    # A run of plain inputs (a replay applies them to one candidate): new sessions in the
    # middle of it, one with a request id, then an activation that claims some.
    core.append_event(CTX, "s3", "user-message", "run 0", caller=CALLER)
    core.append_event(CTX, "s3", "user-message", "run 1", request_id="req-2", caller=CALLER)
    core.append_event(CTX, "s4", "user-message", "run 2", caller=CALLER)
    core.append_event(CTX, "s1", "user-message", "run 3", caller=CALLER)
    core.activate(CTX, "s3", caller=CALLER)
    core.append_event(CTX, "s3", "user-message", "after the run", caller=CALLER)


@pytest.fixture
def history(tmp_path):
    """A real LMDB store holding _history(), and the core that wrote it."""
    store = LmdbStore(str(tmp_path / "lmdb"), sync=False)
    core = TransactionCore(store)
    _history(core)
    yield store, core
    store.close()


def test_audit_01_replay_equals_one_candidate_mind_per_event(history, monkeypatch):
    """The replay (of records alone; of the stored history, as audit runs it; and of the
    stored history keeping none of its events, so every event the reducer reads again
    comes from the store) equals one fresh candidate Mind per event."""
    store, core = history
    with store.reader(CTX) as reader:
        m = MindState(reader)
        events = list(m.events())
        fast, count = rp.replay(CTX, events)
        stored, _ = rp._replay(rp._events(rp.stored_events(m)), m.event_row)
        monkeypatch.setattr(rp, "RECENT_EVENT_BYTES", 0)
        read_back = []
        from_store = lambda seq: read_back.append(seq) or m.event_row(seq)  # noqa: E731
        from_history, _ = rp._replay(rp._events(rp.stored_events(m)), from_store)
        want = reference_replay(events)
        actual = {t: m.rows(t) for t in AUDITED}
    assert count == len(events) > 12
    assert {t for t in AUDITED if want[t]} >= {
        "meta", "frames", "relations", "order", "checkpoints", "sessions", "activations",
        "calls", "boundaries", "idempotency", "policy", "observations", "pending"}
    assert fast == want
    assert stored == want
    assert from_history == want and read_back  # the reducer read some events again
    assert want == actual  # and the history as committed
    assert core.audit(CTX, caller=CALLER).match


def test_audit_01_one_walk_of_the_history_judges_the_chain_and_a_store_failure_is_raised(
        history):
    """Audit walks the history once for the chain and the replay, holding none of it;
    a store that fails partway through the walk raises its own error (it is not
    reported as a history that cannot be replayed)."""
    from morphz.shared.errors import MorphzError

    store, _ = history
    with store.reader(CTX) as reader:
        report = rp.audit_report(CTX, MindState(reader))
    assert report.match and report.events_replayed > 12
    # every event carries its link (the first an empty one), and every link holds
    assert report.chain.plain() == {"match": True, "checked": report.events_replayed,
                                    "erased": 0, "first_broken": "", "problem": ""}

    class FailsPartway(MindState):
        def event_rows(self):
            for n, row in enumerate(super().event_rows()):
                if n == 5:
                    raise MorphzError("STORAGE_SNAPSHOT_EXPIRED", "the snapshot went away")
                yield row
    with store.reader(CTX) as reader:
        with pytest.raises(MorphzError) as raised:
            rp.audit_report(CTX, FailsPartway(reader))
    assert raised.value.reason == "STORAGE_SNAPSHOT_EXPIRED"
