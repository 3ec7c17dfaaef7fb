"""The single reducer: every event, live or replayed, changes the Mind only here.

Live requests build an event and apply it to a candidate MindState; audit and
projection rebuilds apply the stored events in order to an empty store. Both run
the same code, so a replay that differs from the stored projection is real damage.
"""
from __future__ import annotations

from typing import Callable, Optional, Union

from morphz.shared.mind import records as R
from morphz.shared.mind.receipts import AppendReceipt, IdempotencyRecord, OpOutcome, TxReceipt
from morphz.services.transaction.core import (
    payloads as P, policy_change, rules as rulebook, scope_reducer)
from morphz.services.transaction.core.boundaries import WINDOW, Boundary, footprint
from morphz.services.transaction.core.changes import changed_boundaries
from morphz.services.transaction.core.ops import apply_ops
from morphz.shared.mind.state import MindState
from morphz.shared.errors import MorphzError

# What applying an event gives its request: a receipt (kept for a request id's retries),
# the activation an activation or delivery event changed, or nothing.
Applied = Union[TxReceipt, AppendReceipt, R.Activation, None]


def apply_event(m: MindState, ev: R.Event,
                sees: Optional[Callable[[int], bool]] = None, *,
                reply: bool = True, payload: Optional[P.Payload] = None) -> Applied:
    """Apply one event (its seq is the next one); returns what it did for the caller's
    reply. `sees`: which events a live commit naming a session may cite (replay never
    restricts). `reply=False` (a replay, which has no caller): a transaction's receipt is
    built only where the state keeps it (an idempotency record), else None is returned;
    the state written is the same. `payload`: the event's data, typed, as the live
    request built it (payloads.py); a stored event's is decoded here, once."""
    if payload is None:
        payload = P.decode(ev)
    if ev.kind == R.CONTEXT_CREATED:
        m.init_meta(R.Meta(ev.context, window=payload.window, counts=payload.counts))
    meta = m.require_meta(ev.context)
    if ev.seq != meta.next_seq:
        raise MorphzError("INTERNAL", f"event seq {ev.seq} out of order (next {meta.next_seq})")
    handler = _HANDLERS.get(ev.kind, _apply_input)
    if ev.kind == R.CONTEXT_TX:
        done = handler(m, ev, payload, sees, reply or bool(ev.request_id))
    else:
        done = handler(m, ev, payload)
    # The event exists only after its own effects: a transaction cannot cite itself.
    meta.next_seq += 1
    m.add_event(ev)
    if ev.request_id and isinstance(done, (TxReceipt, AppendReceipt)):
        m.put_idempotency(ev.request_id, IdempotencyRecord(P.payload_hash(ev), done))
    return done


def shares_candidate(ev: R.Event) -> bool:
    """Whether `ev` is a plain input (_apply_input): it reads only what the candidate Mind
    reads through its writes, never the rows before them (a transaction compares its
    writes with those), so a replay may apply a run of them to one candidate."""
    return ev.kind not in _HANDLERS and ev.kind in R.INPUT_KINDS


def _apply_created(m: MindState, ev: R.Event, created: P.Created) -> None:
    policy_change.apply_created(m, created)


def _apply_input(m: MindState, ev: R.Event, _: P.Input = None) -> AppendReceipt:
    if ev.kind not in R.INPUT_KINDS:
        raise MorphzError("EVENT_KIND_INVALID", f"unknown event kind {ev.kind!r}", kind=ev.kind)
    if not m.has_session(ev.session):
        m.new_session(ev.session)
    m.set_pending(ev.session, ev.seq, True)
    m.count_waiting(ev.session, 1)
    m.add_observation(ev.seq)
    return AppendReceipt(ev.seq, ev.id)


def _apply_activation(m: MindState, ev: R.Event, data: P.Activation) -> R.Activation:
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
    if claimed:
        m.count_waiting(sid, -len(claimed), -sum(k == R.MESSAGE for k in kinds.values()))
    advanced = any(k in R.EXTERNAL_KINDS for k in kinds.values())
    retired: list[str] = []
    if advanced:
        meta.tick += 1
        retired = _mature(m, meta.tick)
        if retired and rulebook.rules(data.rules).stamp_window_retirements:
            # No revision is made: the stamp names the latest revision and this tick, so a
            # transaction that read before it cannot undo the retirement unseen.
            m.set_boundaries([Boundary.life(fid) for fid in retired] + [WINDOW], meta.revision,
                             meta.tick)
    root = next((s for s in claimed if kinds[s] == "user-message"), None)
    meta.activations += 1
    act = R.Activation(data.activation_id, sid, claimed, root, meta.tick, advanced, retired)
    m.put_activation(act)
    return act


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


def _apply_erasure(m: MindState, ev: R.Event, data: P.Erasure) -> None:
    """Nothing: what an erasure took is gone from the events before it (their stored
    records), and a replay of those gives the erased Mind; the commit that made it wrote
    the same rows (erasure.py)."""


def _apply_delivery(m: MindState, ev: R.Event, data: P.Delivery) -> R.Activation:
    act = m.activation(data.activation_id)
    if act is None:
        raise MorphzError("ACTIVATION_NOT_FOUND", f"no activation {data.activation_id}",
                          activation=data.activation_id)
    act.delivered = True
    m.put_activation(act)
    return act


def _apply_tool_result(m: MindState, ev: R.Event, data: P.Input) -> AppendReceipt:
    """A tool result answering a call returns to the scope that issued it (CONC-04)."""
    if data.call:
        return scope_reducer.apply_call_result(m, ev, data)
    return _apply_input(m, ev)


def _apply_tx(m: MindState, ev: R.Event, data: P.Commit,
              sees: Optional[Callable[[int], bool]] = None,
              reply: bool = True) -> Optional[TxReceipt]:
    meta = m.meta()
    rules = rulebook.rules(data.rules)
    tx = data.tx
    meta.revision += 1
    run = apply_ops(m, tx, sees=sees,
                    rollback_settles_frames=rules.rollback_settles_frames, results=reply)
    if rules.promote_cited_evidence:
        scope_reducer.promote_sources(m, tx, meta.revision)
    _, stamped = footprint(tx)
    stamped |= {Boundary.life(fid) for fid in run.superseded}
    if rules.stamp_actual_changes:
        stamped |= changed_boundaries(m, frozenset(stamped))
    m.set_boundaries(stamped, meta.revision)
    if not reply:
        return None
    return TxReceipt(
        ev.seq, meta.revision, tx.base_version, meta.tick,
        tuple(OpOutcome(r.index, r.op, r.target, r.outcome, r.frame_revision, r.due_tick)
              for r in run.results),
        tuple(sorted(run.released_now)), sum(run.released_now.values()),
        tuple(sorted(run.released_later)), sum(run.released_later.values()),
        data.rebased_from is not None, data.rebased_from or 0)


_HANDLERS = {
    R.CONTEXT_CREATED: _apply_created,
    R.ACTIVATION: _apply_activation,
    R.DELIVERY: _apply_delivery,
    R.CONTEXT_TX: _apply_tx,
    R.ACTION: scope_reducer.apply_action,
    R.MESSAGE: scope_reducer.apply_message,
    R.TOOL_RESULT: _apply_tool_result,
    R.POLICY: policy_change.apply_change,
    R.ERASURE: _apply_erasure,
}
