"""EncodingCore's results <-> protobuf, the one place they meet (the servicer's)."""
from __future__ import annotations

import json

import msgspec

from morphz.api.encoding.v1 import encoding_pb2 as pb
from morphz.services.encoding.core.record import SnapshotRecord
from morphz.services.encoding.core.scope import Scope
from morphz.services.encoding.core.results import (
    CheckReport, Encoding, ReadPage, ReplayReport, SearchResult)
from morphz.shared.protojson import from_plain


def scope_of(msg: pb.Scope) -> Scope:
    """The requested scope, checked here (INPUT_INVALID naming the field)."""
    return Scope.make(list(msg.sessions), list(msg.kinds), msg.since, msg.until,
                      list(msg.frames), msg.reveal_secrets)


def encoding(e: Encoding) -> pb.Encoding:
    # render's items are maps already: only the few records around them are made plain
    return from_plain({
        "snapshot": e.snapshot, "hash": e.hash, "text": e.text, "bytes": e.bytes,
        "chars": e.chars, "regions": msgspec.to_builtins(e.regions), "items": e.items,
        "pressure": msgspec.to_builtins(e.pressure), "activation": e.activation,
        "claimed": e.claimed, "revision": e.revision, "tick": e.tick,
        "omitted": msgspec.to_builtins(e.omitted), "omitted_total": e.omitted_total},
        pb.Encoding)


def snapshot_record(record: SnapshotRecord) -> pb.SnapshotRecord:
    return pb.SnapshotRecord(record_json=json.dumps(record.plain(),
                                                    ensure_ascii=False).encode())


def _check(c: CheckReport) -> dict:
    return {"snapshot": c.snapshot, "snapshot_revision": c.snapshot_revision,
            "checked_revision": c.checked_revision, "current": c.current,
            "valid_for_new_use": c.valid_for_new_use, "inputs_checked": c.inputs_checked,
            "changed": [{"key": d.key, "kind": d.kind, "status": d.status, "reason": d.reason,
                         "recorded_revision": d.recorded_revision,
                         "current_revision": d.current_revision} for d in c.changed]}


def check_report(c: CheckReport) -> pb.CheckReport:
    return from_plain(_check(c), pb.CheckReport)


def replay_report(r: ReplayReport) -> pb.ReplayReport:
    return from_plain({"snapshot": r.snapshot, "hash": r.hash, "replay_hash": r.replay_hash,
                       "match": r.match, "ranges_match": r.ranges_match, "bytes": r.bytes,
                       "text": r.text, "dependencies": _check(r.dependencies),
                       "problems": r.problems}, pb.ReplayReport)


def read_result(p: ReadPage) -> pb.ReadResult:
    return pb.ReadResult(ref=p.ref, kind=p.kind, text=p.text, offset=p.offset,
                         next_offset=p.next_offset, total_chars=p.total_chars,
                         has_more=p.has_more, state=p.state, revision=p.revision)


def search_result(s: SearchResult) -> pb.SearchResult:
    return pb.SearchResult(hits=[pb.SearchHit(key=h.key, kind=h.kind, snippet=h.snippet)
                                 for h in s.hits], empty_reason=s.empty_reason,
                           message=s.message, searched=s.searched)
