"""The core's read answers built from records: a frame's view and an event's."""
from __future__ import annotations

from typing import Optional

from morphz.services.transaction.core import payloads as P
from morphz.services.transaction.core.results import (
    ErasedNote, EventResult, FrameResult, Relation, RetireView)
from morphz.shared.mind import records as R, secrets
from morphz.shared.mind.view import MindView


def erased_note(m: MindView, erasure: str) -> Optional[ErasedNote]:
    """What an erased item says of the erasure `erasure` (@eN) that took it: who, why,
    when (PRIV-01); None for an item never erased."""
    if not erasure:
        return None
    ev = m.event_by_ref(erasure)
    if ev is None:  # a history that lost it: audit says so; the item still says erased
        return ErasedNote(erasure, "", "", "")
    return ErasedNote(erasure, ev.actor, str(ev.data.get("reason", "")), ev.time)


def frame_view(m: MindView, meta: R.Meta, f: R.Frame, as_of: int,
               with_relations: bool = True, reveal: bool = False) -> FrameResult:
    """A frame as GetFrame and ListFrames answer it (`reveal`: secret parts as stored;
    an erased body is the erased marker, revealed or not: nothing is left of it)."""
    if f.erased:
        return _frame_result(m, meta, f, as_of, with_relations,
                             secrets.erased_marker(f.erased), False)
    shown = secrets.frame_body(f.id, f.body)  # parsed once: the flag and the redaction
    return _frame_result(m, meta, f, as_of, with_relations, f.body if reveal else shown,
                         shown != f.body)


def _frame_result(m: MindView, meta: R.Meta, f: R.Frame, as_of: int, with_relations: bool,
                  body: str, secret: bool) -> FrameResult:
    r = f.retire
    retire = None if r is None else RetireView(
        r.generation, r.requested_tick, r.due_tick, r.reason, r.frame_revision,
        max(0, r.due_tick - meta.tick))
    # Edges are a current-state projection; as-of reads give bodies only, not old edges.
    edges = sorted(set(m.relations_from(f.id)) | set(m.relations_to(f.id))) \
        if with_relations else []
    return FrameResult(f.id, f.revision, body, tuple(f.sources),
                       f.state, f.protected, retire, f.generation, f.changed_at,
                       secret, as_of, tuple(Relation(*e) for e in edges),
                       erased_note(m, f.erased))


def event_view(ev: R.Event, obs: Optional[R.Observation], reveal: bool,
               erased: Optional[ErasedNote] = None) -> EventResult:
    """An event as GetEvent answers it. Runtime internals (payload hashes, ids) stay
    inside, except where the event belongs (_belongs). `erased`: the note of the
    erasure that took its content (erased_note)."""
    where = P.decode(ev) if ev.kind in (R.ACTION, R.TOOL_RESULT, R.MESSAGE,
                                        R.CONTEXT_TX) else None
    return EventResult(
        ev.seq, ev.id, ev.kind, ev.time, ev.context, ev.session, ev.actor,
        tuple(ev.causal_refs), secrets.shown_text(ev, reveal), ev.request_id,
        secrets.is_secret_event(ev.data), R.occurred_at(ev.data), R.ref(ev.seq),
        (R.RETIRED if obs.retired else R.ACTIVE) if obs else "",
        bool(obs and obs.protected), **_belongs(where), erased=erased)


def _belongs(payload: Optional[P.Payload]) -> dict:
    """Where an event belongs, as its view names it: an action's activation (or the
    evaluation a transaction was committed for), a call result's call, a message's target."""
    if isinstance(payload, P.Commit):
        return {"activation": payload.activation} if payload.activation else {}
    if isinstance(payload, P.Input):
        return {k: v for k, v in (("activation", payload.activation), ("call", payload.call),
                                  ("target_session", payload.target_session)) if v}
    return {}
