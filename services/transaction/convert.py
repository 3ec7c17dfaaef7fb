"""Protobuf <-> domain for the transaction service: the structured context-tx form, and
the core's results (core/results.py) as reply messages.

The structured form says exactly what the text form says, no more and no less: what
proto3 cannot show (an empty `from` clause) is an explicit field, a oneof member whose
value would contradict its name (`first: false`) is rejected, never guessed, @eN refs
are read as the text form reads them, and the text form's limits hold for the whole
transaction. The rules are documented on the messages in transaction.proto.
"""
from __future__ import annotations

from typing import Optional

from morphz.api.transaction.v1 import transaction_pb2 as pb
from morphz.services.transaction.core.export import ExportPage
from morphz.services.transaction.core.requests import AppendItem
from morphz.services.transaction.core.results import (
    ActivationResult, AppendBatchResult, AppendResult, AuditResult, CommitResult, ContextList, DeleteResult,
    ErasedNote, ErasureResult, EventResult, FrameListResult, FrameResult, PolicyResult,
    Reclaimed, RebuildResult, RetentionView, StatusResult)
from morphz.services.transaction.core.txlang import (
    MAX_OPS, TX_LIMITS, EdgeOp, FrameOp, NamedOp, Op, PlaceOp, TargetsOp, Tx, check_tx,
    header_nodes, limit_details, parse_body, text_nodes, too_many_ops)
from morphz.shared import sexpr
from morphz.shared.errors import MorphzError
from morphz.shared.mind.records import is_ref, ref, ref_seq

_TARGET_FIELDS = ("retire", "restore", "protect", "unprotect")


def tx_from_proto(t: pb.Transaction, limits: sexpr.Limits = TX_LIMITS) -> Tx:
    size = t.ByteSize()
    if size > limits.max_bytes:
        raise MorphzError("TX_PARSE_ERROR", f"the transaction exceeds {limits.max_bytes} "
                          "bytes", syntax="SEXPR_TOO_LARGE", bytes=size,
                          **limit_details("SEXPR_TOO_LARGE", limits))
    if len(t.ops) > MAX_OPS:
        raise too_many_ops(len(t.ops), MAX_OPS)
    tx = Tx(t.base_version, t.reason, [], t.base_tick if t.HasField("base_tick") else None)
    nodes = header_nodes(tx)
    for i, o in enumerate(t.ops):
        # Counted op by op, each body read no further than the budget left.
        op, body_nodes = _op_from_proto(o, i, limits, limits.max_nodes - nodes)
        tx.ops.append(op)
        nodes += text_nodes(op) + body_nodes
        if nodes > limits.max_nodes:
            raise MorphzError("TX_PARSE_ERROR", f"the transaction has more than "
                              f"{limits.max_nodes} nodes in its text form",
                              syntax="SEXPR_TOO_MANY_NODES", op_index=i,
                              **limit_details("SEXPR_TOO_MANY_NODES", limits))
    return check_tx(tx)


def _op_from_proto(o: pb.Op, i: int, limits: sexpr.Limits,
                   nodes_left: int) -> tuple[Op, int]:
    """One operation and the nodes of its body (read no further than `nodes_left`);
    shape checks are left to check_tx."""
    kind = o.WhichOneof("op")
    if kind is None:
        raise MorphzError("TX_UNKNOWN_OP", "an op with no operation set", op_index=i)
    v = getattr(o, kind)
    name = kind.replace("_", "-")
    if kind in ("create", "derive", "revise"):
        body, body_nodes = parse_body(v.body, i, limits, nodes_left)
        return FrameOp(name, v.frame_id, body, _sources(v, kind, i)), body_nodes
    if kind in _TARGET_FIELDS:
        return TargetsOp(name, [_target(s) for s in v.targets]), 0
    if kind in ("relate", "unrelate"):
        return EdgeOp(name, v.subject, v.name, v.object), 0
    if kind == "place":
        return _place(v, i), 0
    return NamedOp(name, v), 0


def _sources(v: pb.FrameBody, kind: str, i: int):
    """The from clause: None when absent (revise keeps the frame's sources)."""
    if v.clear_sources and (v.sources or kind == "create"):
        raise MorphzError("TX_INVALID", "clear_sources says `(from)` with no sources: "
                          + ("create has no sources" if kind == "create"
                             else "it cannot come with sources"),
                          op_index=i, ref=v.frame_id, field=f"{kind}.clear_sources")
    if v.sources or v.clear_sources:
        return [_target(s) for s in v.sources]
    return [] if kind == "derive" else None  # derive without sources: check_tx says so


def _target(s: str) -> str:
    # The text form reads `@e007` as @e7: so must this form, or one observation would
    # have two names (and two conflict boundaries).
    return ref(ref_seq(s)) if is_ref(s) else s


def _place(v: pb.Place, i: int) -> PlaceOp:
    where = v.WhichOneof("where")
    if where is None:
        raise MorphzError("TX_INVALID", "place needs one of before, after, first, last",
                          op_index=i, field="place.where")
    if where in ("first", "last"):
        # A oneof member is present even when false; `first: false` has no meaning
        # (it does not say "not first"), so it is rejected rather than obeyed.
        if not getattr(v, where):
            raise MorphzError("TX_INVALID", f"place {where} must be true when set",
                              op_index=i, field=f"place.{where}")
        return PlaceOp("place", v.frame_id, where)
    return PlaceOp("place", v.frame_id, where, getattr(v, where))


def tx_to_proto(tx: Tx) -> pb.Transaction:
    out = pb.Transaction(base_version=tx.base_version, reason=tx.reason)
    if tx.base_tick is not None:
        out.base_tick = tx.base_tick
    for o in tx.ops:
        field = o.op.replace("-", "_")
        op = out.ops.add()
        if isinstance(o, FrameOp):
            getattr(op, field).CopyFrom(pb.FrameBody(
                frame_id=o.frame_id, body=o.body, sources=o.sources or [],
                clear_sources=o.sources == []))
        elif isinstance(o, TargetsOp):
            getattr(op, field).targets.extend(o.targets)
        elif isinstance(o, EdgeOp):
            getattr(op, field).CopyFrom(pb.Edge(subject=o.subject, name=o.name, object=o.object))
        elif isinstance(o, PlaceOp):
            place = pb.Place(frame_id=o.frame_id)
            if o.where in ("before", "after"):
                setattr(place, o.where, o.anchor)
            else:
                setattr(place, o.where, True)
            op.place.CopyFrom(place)
        else:
            setattr(op, field, o.name)
    return out


def append_item_from_proto(r: pb.AppendEventRequest) -> AppendItem:
    """An event to append (append_event's arguments; append_events' items)."""
    return AppendItem(r.session, r.kind, r.text, r.request_id, r.actor, tuple(r.causal_refs),
                      r.activation, r.target_session, r.secret, r.occurred_at)


# -- results (core/results.py) -> reply messages --------------------------------------------
def commit_to_proto(r: CommitResult) -> pb.Receipt:
    """Spelled out, field by field (every commit answers one: measured faster than the
    constructor given nested messages, or from_plain's walk of the plain form)."""
    out = pb.Receipt(revision=r.revision, base_version=r.base_version,
                     cognitive_tick=r.cognitive_tick, event_ref=r.event_ref,
                     replayed=r.replayed, rebased=r.rebased, rebased_from=r.rebased_from,
                     commit_seq=r.commit_seq or 0)
    add = out.results.add
    for o in r.results:
        add(index=o.index, op=o.op, target=o.target, outcome=o.outcome,
            frame_revision=o.frame_revision, due_tick=o.due_tick)
    c, cap = r.capacity, out.capacity
    cap.SetInParent()  # present even when all zero, as the dict reply made it
    cap.released_now_bytes = c.released_now_bytes
    cap.released_after_window_bytes = c.released_after_window_bytes
    cap.released_now.extend(c.released_now)
    cap.released_after_window.extend(c.released_after_window)
    return out


def append_to_proto(r: AppendResult) -> pb.AppendEventResponse:
    out = pb.AppendEventResponse(ref=r.ref, seq=r.seq, id=r.id, replayed=r.replayed,
                                 commit_seq=r.commit_seq or 0)
    for name in ("session", "activation", "call", "returned_to", "target_session"):
        value = getattr(r, name)
        if value is not None:  # optional fields: set only where the event has them
            setattr(out, name, value)
    return out


def append_batch_to_proto(r: AppendBatchResult) -> pb.AppendEventsResponse:
    return pb.AppendEventsResponse(events=[append_to_proto(e) for e in r.events])


# Each reply message field by field. An optional result field left None leaves its
# message field unset, as the dict walk these replaced (protojson.from_plain) did.
def status_to_proto(r: StatusResult) -> pb.ContextStatus:
    out = pb.ContextStatus(
        context=r.context, revision=r.revision, cognitive_tick=r.cognitive_tick,
        window=r.window, frames_by_state=r.frames_by_state,
        sessions=[pb.Session(id=s.id, state=s.state, level=s.level, pending=s.pending,
                             messages_waiting=s.messages_waiting,
                             outstanding_calls=s.outstanding_calls) for s in r.sessions],
        event_count=r.event_count, commit_seq=r.commit_seq, shard=r.shard,
        owner=r.owner or "", owner_address=r.owner_address or "",
        fencing_token=r.fencing_token or 0)
    _set_retention(out.retention, r.retention)
    return out


def activation_to_proto(r: ActivationResult) -> pb.Activation:
    return pb.Activation(id=r.id, session=r.session, claimed=r.claimed, root=r.root,
                         tick=r.tick, tick_advanced=r.tick_advanced,
                         retired_frames=r.retired_frames, delivered=r.delivered,
                         results=r.results)


def frame_to_proto(r: FrameResult) -> pb.Frame:
    out = pb.Frame(id=r.id, revision=r.revision, state=r.state, protected=r.protected,
                   sources=r.sources, body=r.body, changed_at=r.changed_at,
                   as_of_revision=r.as_of_revision, generation=r.generation,
                   relations=[pb.Relation(subject=e.subject, name=e.name, object=e.object)
                              for e in r.relations], secret=r.secret)
    if r.retire is not None:
        t = r.retire
        out.retire.CopyFrom(pb.RetireRequest(
            generation=t.generation, requested_tick=t.requested_tick, due_tick=t.due_tick,
            remaining_ticks=t.remaining_ticks, reason=t.reason,
            frame_revision=t.frame_revision))
    _set_erased(out.erased, r.erased)
    return out


def frame_list_to_proto(r: FrameListResult) -> pb.FrameList:
    return pb.FrameList(revision=r.revision, frames=[frame_to_proto(f) for f in r.frames],
                        next_cursor=r.next_cursor)


def event_to_proto(r: EventResult) -> pb.Event:
    out = pb.Event(id=r.id, seq=r.seq, ref=r.ref, kind=r.kind, actor=r.actor,
                   session=r.session, causal_refs=r.causal_refs, time=r.time, text=r.text,
                   state=r.state, protected=r.protected, context=r.context,
                   request_id=r.request_id, secret=r.secret, occurred_at=r.occurred_at)
    for name in ("activation", "call", "target_session"):
        value = getattr(r, name)
        if value is not None:  # optional fields: set only where the event has them
            setattr(out, name, value)
    _set_erased(out.erased, r.erased)
    return out


def audit_to_proto(r: AuditResult) -> pb.AuditReport:
    c = r.chain
    return pb.AuditReport(
        context=r.context, match=r.match, events_replayed=r.events_replayed,
        projections=[pb.ProjectionCheck(projection=p.projection, match=p.match,
                                        differences=p.differences) for p in r.projections],
        chain=pb.ChainCheck(match=c.match, checked=c.checked, first_broken=c.first_broken,
                            problem=c.problem, erased=c.erased),
        replay_error=r.replay_error)


def rebuild_to_proto(r: RebuildResult) -> pb.RebuildReport:
    return pb.RebuildReport(context=r.context, events_replayed=r.events_replayed,
                            rewritten=r.rewritten, unrepairable=r.unrepairable,
                            quarantined=r.quarantined)


def policy_to_proto(r: PolicyResult) -> pb.Policy:
    out = pb.Policy(context=r.context, event_ref=r.event_ref,
                    grants=[pb.Grant(principal=g.principal, right=g.right, session=g.session)
                            for g in r.grants])
    _set_retention(out.retention, r.retention)
    return out


def erasure_to_proto(r: ErasureResult) -> pb.Erasure:
    out = pb.Erasure(context=r.context, dry_run=r.dry_run, erasures=r.erasures,
                     events=r.events, transactions=r.transactions, frames=r.frames,
                     frame_versions=r.frame_versions, checkpoints=r.checkpoints,
                     snapshots=r.snapshots, commit_seq=r.commit_seq)
    _set_reclaimed(out.reclaimed, r.reclaimed)
    return out


def export_page_to_proto(r: ExportPage) -> pb.ExportPage:
    return pb.ExportPage(
        events=[pb.ExportedEvent(kind=e.kind, session=e.session, actor=e.actor, text=e.text,
                                 occurred_at=e.occurred_at, secret=e.secret,
                                 erased=e.erased, ref=e.ref) for e in r.events],
        done=r.done, total=r.total, skipped=r.skipped)


def deleted_to_proto(r: DeleteResult) -> pb.ContextDeleted:
    out = pb.ContextDeleted(context=r.context, event_count=r.event_count)
    _set_reclaimed(out.reclaimed, r.reclaimed)
    return out


def context_list_to_proto(r: ContextList) -> pb.ContextList:
    return pb.ContextList(contexts=r.contexts)


def _set_retention(out: pb.Retention, r: Optional[RetentionView]) -> None:
    if r is not None:
        out.CopyFrom(pb.Retention(policy=r.policy, kinds=r.kinds, days=r.days,
                                  set_at=r.set_at, next_due=r.next_due,
                                  every_seconds=r.every_seconds))


def _set_erased(out: pb.Erased, r: Optional[ErasedNote]) -> None:
    if r is not None:
        out.CopyFrom(pb.Erased(erasure=r.erasure, by=r.by, reason=r.reason, at=r.at))


def _set_reclaimed(out: pb.Reclaimed, r: Optional[Reclaimed]) -> None:
    if r is not None:
        out.CopyFrom(pb.Reclaimed(engine=r.engine, bytes_before=r.bytes_before,
                                  bytes_after=r.bytes_after, duration_ms=r.duration_ms))
