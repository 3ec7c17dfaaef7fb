"""Where an appended event belongs (CONC-04, CONC-05): checked before the event is built.

- An `action` is a tool call of an open activation of its own session.
- A `tool-result` that names an action among its causal refs is that call's result and
  belongs to the call's session, whatever session is active now; naming another
  session is a CAUSAL_SCOPE_VIOLATION. Without a call it needs a session.
- A `message` goes from its session to `target_session`, an existing other session.
- Every other causal ref must be visible to the event's session (visibility.py); a
  foreign private event gets the answer of a missing one.

The outcome (the event's session and its payload) is what the reducer applies; the
reducer never re-judges these rules, so replaying history does not depend on them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.mind.records import is_ref, ref_seq
from morphz.shared.mind.state import MindState
from morphz.shared.mind.visibility import Viewer
from morphz.shared.names import check_name
from morphz.services.transaction.core.payloads import Input

MAX_CAUSAL_REFS = 256


@dataclass
class Append:
    """One append request, as the caller sent it."""
    session: str
    kind: str
    refs: list[str] = field(default_factory=list)
    activation: str = ""
    target_session: str = ""


def check_shape(a: Append) -> None:
    """The rules that need no state: which fields go with which kind."""
    if a.kind not in R.APPEND_KINDS:
        raise MorphzError("EVENT_KIND_INVALID", f"kind must be one of {', '.join(R.APPEND_KINDS)}",
                          kind=a.kind[:64])
    if a.session or a.kind != R.TOOL_RESULT:  # a call's result may leave it to the call
        check_name(a.session, "session")
    if len(a.refs) > MAX_CAUSAL_REFS:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"at most {MAX_CAUSAL_REFS} causal refs",
                          field="causal_refs")
    if (a.kind == R.ACTION) != bool(a.activation):
        raise MorphzError("CONTEXT_INPUT_INVALID", "an action names the activation that issued "
                          "it, and only an action names one", field="activation", kind=a.kind)
    if a.activation:
        check_name(a.activation, "activation")
    if (a.kind == R.MESSAGE) != bool(a.target_session):
        raise MorphzError("CONTEXT_INPUT_INVALID", "a message names its target session, and "
                          "only a message names one", field="target_session", kind=a.kind)
    if a.target_session:
        check_name(a.target_session, "target_session")
        if a.target_session == a.session:
            raise MorphzError("CONTEXT_INPUT_INVALID", "a message goes to another session than "
                              "its source", field="target_session", session=a.session)


def route(m: MindState, a: Append) -> tuple[str, Input]:
    """(the event's session, where its payload says it belongs) or a structured
    rejection."""
    meta = m.meta()
    events = {}
    for r in a.refs:
        ev = m.event(ref_seq(r)) if is_ref(r) and ref_seq(r) < meta.next_seq else None
        if ev is None:
            raise _missing(r)
        events[r] = ev
    session, routed = a.session, Input()
    call = None
    if a.kind == R.ACTION:
        routed = Input(activation=_open_activation(m, a))
    elif a.kind == R.MESSAGE:
        if m.session(a.target_session) is None:
            raise MorphzError("SESSION_NOT_FOUND", f"no session {a.target_session}",
                              session=a.target_session, field="target_session")
        routed = Input(target_session=a.target_session)
    elif a.kind == R.TOOL_RESULT:
        call, session = _call(m, a, events)
        routed = Input(call=call)
    viewer = Viewer(m, session)
    for r, ev in events.items():
        if r != call and not viewer.sees(ev):
            raise _missing(r)
    return session, routed


def _missing(r: str) -> MorphzError:
    return MorphzError("EVENT_NOT_FOUND", f"causal ref {r[:40]} does not exist", ref=r[:40])


def _open_activation(m: MindState, a: Append) -> str:
    act = m.activation(a.activation)
    if act is None:
        raise MorphzError("ACTIVATION_NOT_FOUND", f"no activation {a.activation}",
                          activation=a.activation)
    if act.session != a.session:
        raise MorphzError("CAUSAL_SCOPE_VIOLATION", f"activation {act.id} is a causal scope "
                          f"of session {act.session}, not of {a.session}", activation=act.id,
                          session=a.session)
    if act.delivered:
        raise MorphzError("ACTIVATION_DELIVERED", f"activation {act.id} was delivered: its "
                          "causal scope issues no more actions", activation=act.id)
    return act.id


def _call(m: MindState, a: Append, events: dict[str, R.Event]) -> tuple[str, str]:
    """(the call a tool result answers or '', the session it belongs to)."""
    calls = sorted({r for r, ev in events.items() if ev.kind == R.ACTION}, key=ref_seq)
    if len(calls) > 1:
        raise MorphzError("CONTEXT_INPUT_INVALID", "a tool result answers one call, not "
                          f"{len(calls)}", field="causal_refs", calls=calls[:20])
    if not calls:
        if not a.session:
            raise MorphzError("CONTEXT_INPUT_INVALID", "a tool result names its session or "
                              "the call (action) it answers", field="session")
        return "", a.session
    call = calls[0]
    c = m.call(ref_seq(call))
    if c.result is not None:
        raise MorphzError("CALL_ANSWERED", f"call {call} was already answered by "
                          f"{R.ref(c.result)}", call=call, result=R.ref(c.result))
    if a.session and a.session != c.session:
        raise MorphzError("CAUSAL_SCOPE_VIOLATION", f"{call} was issued by session "
                          f"{c.session} (activation {c.activation}); its result returns "
                          f"there, not to {a.session}", call=call, activation=c.activation,
                          call_session=c.session, session=a.session)
    return call, c.session
