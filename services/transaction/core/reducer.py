"""The single reducer: every event, live or replayed, changes the Mind only here.

Live requests build an event and apply it to a candidate MindState; audit and
projection rebuilds apply the stored events in order to an empty store. Both run
the same code, so a replay that differs from the stored projection is real damage.
"""
from __future__ import annotations

from typing import Callable, Optional

from morphz.shared.mind import records as R
from morphz.services.transaction.core import policy_change, rules as rulebook, scope_reducer
from morphz.services.transaction.core.boundaries import WINDOW, footprint
from morphz.services.transaction.core.changes import changed_boundaries
from morphz.services.transaction.core.ops import apply_ops
from morphz.shared.mind.state import MindState
from morphz.services.transaction.core.txlang import Tx
from morphz.shared.errors import MorphzError


def apply_event(m: MindState, ev: R.Event,
                sees: Optional[Callable[[int], bool]] = None, *,
                reply: bool = True) -> Optional[dict]:
    """Apply one event (its seq is the next one); returns the caller's reply. `sees`:
    which events a live commit naming a session may cite (replay never restricts).
    `reply=False` (a replay, which has no caller): a transaction's reply is built only
    where the state keeps it (an idempotency record), else None is returned; the
    state written is the same."""
    if ev.kind == R.CONTEXT_CREATED:
        m.init_meta(R.Meta(ev.context, window=ev.data["window"]))
    meta = m.require_meta(ev.context)
    if ev.seq != meta.next_seq:
        raise MorphzError("INTERNAL", f"event seq {ev.seq} out of order (next {meta.next_seq})")
    handler = _HANDLERS.get(ev.kind, _apply_input)
    if ev.kind == R.CONTEXT_TX:
        reply = handler(m, ev, sees, reply or bool(ev.request_id))
    else:
        reply = handler(m, ev)
    # The event exists only after its own effects: a transaction cannot cite itself.
    meta.next_seq += 1
    m.add_event(ev)
    if ev.request_id:
        m.put_idempotency(ev.request_id, {"hash": ev.data.get("payload_hash", ""),
                                           "reply": reply})
    return reply


def shares_candidate(ev: R.Event) -> bool:
    """Whether `ev` is a plain input (_apply_input): it reads only what the candidate Mind
    reads through its writes, never the rows before them (a transaction compares its
    writes with those), so a replay may apply a run of them to one candidate."""
    return ev.kind not in _HANDLERS and ev.kind in R.INPUT_KINDS


def _apply_created(m: MindState, ev: R.Event) -> dict:
    policy_change.apply_created(m, ev)
    return {"context": ev.context, "window": ev.data["window"]}


def _apply_input(m: MindState, ev: R.Event) -> dict:
    if ev.kind not in R.INPUT_KINDS:
        raise MorphzError("EVENT_KIND_INVALID", f"unknown event kind {ev.kind!r}", kind=ev.kind)
    if not m.has_session(ev.session):
        m.put_session(R.Session(ev.session))
    m.set_pending(ev.session, ev.seq, True)
    m.add_observation(ev.seq)
    return {"ref": R.ref(ev.seq), "seq": ev.seq, "id": ev.id}


def _apply_activation(m: MindState, ev: R.Event) -> dict:
    """Claim the session's pending inputs as one batch; the clock advances once if the
    batch holds an external fact, then retirements that fell due take effect."""
    meta = m.meta()
    sid = ev.session
    if not m.has_session(sid):
        raise MorphzError("SESSION_NOT_FOUND", f"no session {sid}", session=sid)
    claimed = m.pending(sid)
    kinds = {seq: m.event(seq).kind for seq in claimed}
    for seq in claimed:
        m.set_pending(sid, seq, False)
    advanced = any(k in R.EXTERNAL_KINDS for k in kinds.values())
    retired: list[str] = []
    if advanced:
        meta.tick += 1
        retired = _mature(m, meta.tick)
        if retired and rulebook.of_event(ev.data).stamp_window_retirements:
            # No revision is made: the stamp names the latest revision and this tick, so a
            # transaction that read before it cannot undo the retirement unseen.
            m.set_boundaries([f"life:{fid}" for fid in retired] + [WINDOW], meta.revision,
                             meta.tick)
    root = next((s for s in claimed if kinds[s] == "user-message"), None)
    meta.activations += 1
    act = R.Activation(ev.data["activation_id"], sid, claimed, root, meta.tick, advanced, retired)
    m.put_activation(act)
    return R.activation_view(act)


def _mature(m: MindState, tick: int) -> list[str]:
    """Retire frames whose window ended, if the request is still the one that was
    made: same generation and same frame revision (CORE-12)."""
    done = []
    for due, fid, generation in m.due_until(tick):
        m.set_due(due, fid, None)
        f = m.frame(fid)
        if f is None or f.state != R.RETIRING or f.retire is None:
            continue
        if f.retire.generation != generation or f.retire.frame_revision != f.revision:
            continue
        f.state = R.RETIRED
        m.put_frame(f)
        done.append(fid)
    return done


def _apply_delivery(m: MindState, ev: R.Event) -> dict:
    act = m.activation(ev.data["activation_id"])
    if act is None:
        raise MorphzError("ACTIVATION_NOT_FOUND", f"no activation {ev.data['activation_id']}",
                          activation=ev.data["activation_id"])
    act.delivered = True
    m.put_activation(act)
    return R.activation_view(act)


def _apply_tool_result(m: MindState, ev: R.Event) -> dict:
    """A tool result answering a call returns to the scope that issued it (CONC-04)."""
    if ev.data.get("call"):
        return scope_reducer.apply_call_result(m, ev)
    return _apply_input(m, ev)


def _apply_tx(m: MindState, ev: R.Event, sees: Optional[Callable[[int], bool]] = None,
              reply: bool = True) -> Optional[dict]:
    meta = m.meta()
    rules = rulebook.of_event(ev.data)
    tx = Tx.from_dict(ev.data["tx"])
    meta.revision += 1
    run = apply_ops(m, tx, sees=sees,
                    rollback_settles_frames=rules.rollback_settles_frames, results=reply)
    if rules.promote_cited_evidence:
        scope_reducer.promote_sources(m, tx, meta.revision)
    _, stamped = footprint(tx)
    stamped |= {f"life:{fid}" for fid in run.superseded}
    if rules.stamp_actual_changes:
        stamped |= changed_boundaries(m, frozenset(stamped))
    m.set_boundaries(stamped, meta.revision)
    if not reply:
        return None
    return {
        "revision": meta.revision,
        "base_version": tx.base_version,
        "results": [R.plain(r) for r in run.results],
        "capacity": {
            "released_now_bytes": sum(run.released_now.values()),
            "released_after_window_bytes": sum(run.released_later.values()),
            "released_now": sorted(run.released_now),
            "released_after_window": sorted(run.released_later),
        },
        "cognitive_tick": meta.tick,
        "event_ref": R.ref(ev.seq),
        "rebased": ev.data.get("rebased_from") is not None,
        "rebased_from": ev.data.get("rebased_from") or 0,
    }


_HANDLERS = {
    R.CONTEXT_CREATED: _apply_created,
    R.ACTIVATION: _apply_activation,
    R.DELIVERY: _apply_delivery,
    R.CONTEXT_TX: _apply_tx,
    R.ACTION: scope_reducer.apply_action,
    R.MESSAGE: scope_reducer.apply_message,
    R.TOOL_RESULT: _apply_tool_result,
    R.POLICY: policy_change.apply_change,
}
