"""EncodingCore's results <-> protobuf, the one place they meet (the servicer's)."""
from __future__ import annotations

import json

from morphz.api.encoding.v1 import encoding_pb2 as pb
from morphz.services.encoding.core.listing import Entry, SnapshotPage, SnapshotQuery
from morphz.services.encoding.core.record import SnapshotRecord
from morphz.services.encoding.core.scope import Scope
from morphz.services.encoding.core.results import (
    CheckReport, Encoding, Evaluation, EventRef, ReadPage, ReplayReport, SearchResult,
    Transaction)


def scope_of(msg: pb.Scope) -> Scope:
    """The requested scope, checked here (INPUT_INVALID naming the field)."""
    return Scope.make(list(msg.sessions), list(msg.kinds), msg.since, msg.until,
                      list(msg.frames), msg.reveal_secrets)


def encoding(e: Encoding) -> pb.Encoding:
    # render's items are maps of Item's fields (parts as maps): handed to the message's
    # constructor as they are, which builds the thousands of a compile in C.
    p = e.pressure
    return pb.Encoding(
        snapshot=e.snapshot, hash=e.hash, text=e.text, bytes=e.bytes, chars=e.chars,
        regions=[pb.Region(name=r.name, start=r.start, end=r.end) for r in e.regions],
        items=e.items,
        pressure=pb.Pressure(used_bytes=p.used_bytes, limit_bytes=p.limit_bytes,
                             used_tokens=p.used_tokens, limit_tokens=p.limit_tokens,
                             permille=p.permille, level=p.level,
                             external_actions_deferred=p.external_actions_deferred),
        activation=e.activation, claimed=e.claimed, revision=e.revision, tick=e.tick,
        omitted=[pb.Omission(key=o.key, reason=o.reason) for o in e.omitted],
        omitted_total=e.omitted_total)


def snapshot_record(record: SnapshotRecord) -> pb.SnapshotRecord:
    # The record's JSON is the message's content (bytes record_json), not a walk to it.
    return pb.SnapshotRecord(record_json=json.dumps(record.plain(),
                                                    ensure_ascii=False).encode())


def check_report(c: CheckReport) -> pb.CheckReport:
    return pb.CheckReport(
        snapshot=c.snapshot, snapshot_revision=c.snapshot_revision,
        checked_revision=c.checked_revision, current=c.current,
        valid_for_new_use=c.valid_for_new_use, inputs_checked=c.inputs_checked,
        changed=[pb.Dependency(key=d.key, kind=d.kind, status=d.status, reason=d.reason,
                               recorded_revision=d.recorded_revision,
                               current_revision=d.current_revision) for d in c.changed])


def replay_report(r: ReplayReport) -> pb.ReplayReport:
    return pb.ReplayReport(snapshot=r.snapshot, hash=r.hash, replay_hash=r.replay_hash,
                           match=r.match, ranges_match=r.ranges_match, bytes=r.bytes,
                           text=r.text, dependencies=check_report(r.dependencies),
                           problems=r.problems)


def read_result(p: ReadPage) -> pb.ReadResult:
    return pb.ReadResult(ref=p.ref, kind=p.kind, text=p.text, offset=p.offset,
                         next_offset=p.next_offset, total_chars=p.total_chars,
                         has_more=p.has_more, state=p.state, revision=p.revision)


def search_result(s: SearchResult) -> pb.SearchResult:
    return pb.SearchResult(hits=[pb.SearchHit(key=h.key, kind=h.kind, snippet=h.snippet)
                                 for h in s.hits], empty_reason=s.empty_reason,
                           message=s.message, searched=s.searched)


def snapshot_query(msg: pb.ListSnapshotsRequest) -> SnapshotQuery:
    """The listing asked for, checked here (INPUT_INVALID naming the field)."""
    return SnapshotQuery.make(msg.session, msg.activation, msg.since, msg.until, msg.limit,
                              msg.cursor)


def _entry(e: Entry) -> pb.SnapshotEntry:
    return pb.SnapshotEntry(
        snapshot=e.snapshot, hash=e.hash, session=e.session, activation=e.activation,
        time=e.time, bytes=e.bytes, limit_bytes=e.limit_bytes, tokens=e.tokens,
        limit_tokens=e.limit_tokens, level=e.level, permille=e.permille, parent=e.parent,
        revision=e.revision, tick=e.tick, claimed=e.claimed, reveal_secrets=e.reveal_secrets)


def snapshot_list(p: SnapshotPage) -> pb.SnapshotList:
    return pb.SnapshotList(snapshots=[_entry(e) for e in p.entries],
                           next_cursor=p.next_cursor)


def _event_ref(e: EventRef) -> pb.EventRef:
    return pb.EventRef(ref=e.ref, kind=e.kind, session=e.session, time=e.time,
                       actor=e.actor, preview=e.preview, chars=e.chars, secret=e.secret)


def _transaction(t: Transaction) -> pb.EvaluationTransaction:
    return pb.EvaluationTransaction(
        ref=t.ref, session=t.session, time=t.time, revision=t.revision,
        base_version=t.base_version, reason=t.reason, rebased=t.rebased,
        results=[pb.TxOutcome(op=o.op, target=o.target, outcome=o.outcome,
                              frame_revision=o.frame_revision) for o in t.results])


def evaluation_view(v: Evaluation) -> pb.EvaluationView:
    mind = pb.MindDiff(from_revision=v.mind.from_revision, to_revision=v.mind.to_revision,
                       changes=[pb.MindChange(kind=c.kind, key=c.key, change=c.change,
                                              frame_revision=c.frame_revision,
                                              revision=c.revision) for c in v.mind.changes])
    return pb.EvaluationView(
        context=v.context, activation=v.activation, session=v.session, tick=v.tick,
        tick_advanced=v.tick_advanced, delivered=v.delivered, root=v.root, time=v.time,
        activation_ref=v.activation_ref, delivery_ref=v.delivery_ref,
        inputs=[_event_ref(e) for e in v.inputs], snapshots=[_entry(e) for e in v.snapshots],
        recalls=[pb.RecallCall(ref=r.ref, op=r.op, query=r.query, hits=list(r.hits),
                               hit_count=r.hit_count, time=r.time) for r in v.recalls],
        actions=[pb.EvaluationAction(ref=a.ref, time=a.time, preview=a.preview,
                                     result=a.result) for a in v.actions],
        results=[_event_ref(e) for e in v.results],
        messages=[_event_ref(e) for e in v.messages],
        transactions=[_transaction(t) for t in v.transactions], mind=mind,
        previous=v.previous, next=v.next, complete=v.complete, scanned_to=v.scanned_to)
