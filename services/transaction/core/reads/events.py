"""An event read (TransactionCore.get_event): by ref or id, shown only to a caller who
may read a session that sees it, its secret text only with `reveal` for such a session."""
from __future__ import annotations

from morphz.services.transaction.core import read_views
from morphz.services.transaction.core.results import EventResult
from morphz.shared import policy
from morphz.shared.auth import Caller
from morphz.shared.errors import MorphzError
from morphz.shared.mind import secrets
from morphz.shared.mind.state import MindState
from morphz.shared.mind.visibility import Viewer
from morphz.shared.values import EventRef


def get_event(m: MindState, context: str, ref_or_id: str, reveal_secrets: bool,
              caller: Caller) -> EventResult:
    policy.check_any(m, context, caller, policy.READ)
    if reveal_secrets:
        policy.check_any(m, context, caller, policy.REVEAL)
    readable = policy.sessions(m, caller, policy.READ)
    meta = m.require_meta(context)
    ref = EventRef.find(ref_or_id)
    seq = ref.seq if ref is not None else m.event_seq_by_id(ref_or_id)
    ev = m.event(seq) if seq is not None and seq < meta.next_seq else None
    if ev is not None and readable is not None and \
            not any(Viewer(m, s).sees(ev) for s in readable):
        ev = None  # evidence of a session the caller may not read: as missing
    if ev is None:
        raise MorphzError("EVENT_NOT_FOUND", f"no event {ref_or_id[:80]}",
                          ref=ref_or_id[:80])
    if reveal_secrets:  # `reveal` for a session that sees this event
        revealing = policy.sessions(m, caller, policy.REVEAL)
        if revealing is not None and not any(Viewer(m, s).sees(ev) for s in revealing):
            raise policy.forbidden(context, caller, policy.REVEAL, ev.session)
    return read_views.event_view(ev, m.observation(seq), reveal_secrets,
                                 read_views.erased_note(m, secrets.erasure_of(ev.data)))
