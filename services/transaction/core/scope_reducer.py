"""The reducer's handlers for causal-scope events (reducer.py dispatches to them):
actions, results of calls, messages between sessions, and the promotion of evidence a
committed frame cites. They apply what causal.py decided (the event's session and
data) to the candidate Mind; live and replayed events take the same path."""
from __future__ import annotations

from morphz.shared.mind import records as R
from morphz.shared.mind.receipts import AppendReceipt
from morphz.shared.mind.records import is_ref, ref_seq
from morphz.shared.mind.state import MindState
from morphz.services.transaction.core.payloads import Input
from morphz.services.transaction.core.txlang import FrameOp, Tx


def _receipt(ev: R.Event, **extra: str) -> AppendReceipt:
    return AppendReceipt(ev.seq, ev.id, ev.session, **extra)


def apply_action(m: MindState, ev: R.Event, data: Input) -> AppendReceipt:
    """A call of an open activation: no observation, not pending, no tick."""
    aid = data.activation
    m.put_call(ev.seq, R.Call(aid, ev.session))
    return _receipt(ev, activation=aid)


def apply_call_result(m: MindState, ev: R.Event, data: Input) -> AppendReceipt:
    """The result of a call returns to the activation that issued it: into it while it is
    open (an observation of that evaluation, not pending, no tick), else to its session
    as a pending input, which the session's encodings announce as a late result."""
    call_seq = ref_seq(data.call)
    call = m.call(call_seq)
    act = m.activation(call.activation)
    m.add_observation(ev.seq)
    call.result, call.late = ev.seq, act.delivered
    if call.late:
        m.set_pending(ev.session, ev.seq, True)
        m.count_waiting(ev.session, 1)
    else:
        act.results.append(ev.seq)
        m.put_activation(act)
    m.put_call(call_seq, call)
    return _receipt(ev, call=data.call, activation=act.id,
                    returned_to="session" if call.late else "activation")


def apply_message(m: MindState, ev: R.Event, data: Input) -> AppendReceipt:
    """A message waits, pending, in its target's inbox; the target is not activated."""
    target = data.target_session
    if not m.has_session(ev.session):
        m.new_session(ev.session)
    m.add_observation(ev.seq)
    m.set_pending(target, ev.seq, True)
    m.count_waiting(target, 1, 1)
    return _receipt(ev, target_session=target)


def promote_sources(m: MindState, tx: Tx, revision: int) -> None:
    """Events a committed frame cites as sources join the shared Mind, for good."""
    for op in tx.ops:
        if isinstance(op, FrameOp) and op.sources:
            for s in op.sources:
                if is_ref(s):
                    m.promote(ref_seq(s), revision)
