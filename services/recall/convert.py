"""Protobuf <-> domain for the recall service: its requests, for its servicer and its
client alike, and the core's typed replies (core/results.py) as messages, field by field.
An optional result field left None leaves its message field unset."""
from __future__ import annotations

from typing import Optional

from msgspec.structs import asdict

from morphz.api.recall.v1 import recall_pb2 as pb
from morphz.services.recall.core.request import Evaluation, SearchRequest
from morphz.services.recall.core.results import (
    Hit, IndexStatus, ReadResult, RebuildInfo, RebuildProgress, SearchResult, TraverseResult,
    VectorLegStatus)
from morphz.shared.grpc.client import build_request


def evaluation_from_proto(ev: pb.Evaluation) -> Evaluation:
    """The evaluation a search, read or traversal is made for."""
    return Evaluation(ev.session, ev.activation)


def search_from_proto(r: pb.SearchRequest, *, vectors_off: bool = False) -> SearchRequest:
    """The search asked, checked as it is read (SearchRequest.parse; `vectors_off`: the
    server runs without a vector leg, checked in its turn among the request's checks)."""
    return SearchRequest.parse(
        r.context, r.query, since=r.since, until=r.until, limit=r.limit, kinds=r.kinds,
        states=r.states, sessions=r.sessions, cursor=r.cursor, mode=r.mode,
        evaluation=evaluation_from_proto(r.evaluation), min_commit_seq=r.min_commit_seq,
        vectors_off=vectors_off)


def evaluation_to_proto(evaluation: Optional[dict]) -> Optional[pb.Evaluation]:
    if not evaluation:
        return None
    return build_request(pb.Evaluation, session=evaluation.get("session", ""),
                         activation=evaluation.get("activation", ""))


def hits_to_proto(hits: tuple[Hit, ...]) -> list[dict]:
    """A page's hits as the dicts protobuf builds its `Hit` messages from: built in C, a
    third cheaper than a `pb.Hit(...)` per hit (the hot path). `Hit`'s fields are
    `pb.Hit`'s, by name; a rank that is None is a field not set (0)."""
    return [asdict(h) for h in hits]


def search_to_proto(r: SearchResult) -> pb.SearchResponse:
    return pb.SearchResponse(
        results=hits_to_proto(r.results), next_cursor=r.next_cursor,
        index_position=r.index_position, lag=r.lag, empty=r.empty,
        observation_ref=r.observation_ref or "", unclosed_lag=r.unclosed_lag,
        vector_position=r.vector_position or 0, vector_lag=r.vector_lag or 0)


def read_to_proto(r: ReadResult) -> pb.ReadResponse:
    return pb.ReadResponse(
        kind=r.kind, ref=r.ref, id=r.id, state=r.state, time=r.time, session=r.session,
        event_kind=r.event_kind, revision=r.revision, offset=r.offset, text=r.text,
        total_chars=r.total_chars, next_offset=r.next_offset, has_more=r.has_more,
        observation_ref=r.observation_ref or "", occurred_at=r.occurred_at or "")


def traverse_to_proto(r: TraverseResult) -> pb.TraverseResponse:
    return pb.TraverseResponse(
        root=r.root, direction=r.direction, depth=r.depth, version=r.version,
        nodes=[pb.Node(kind=n.kind, id=n.id, ref=n.ref, depth=n.depth, state=n.state,
                       revision=n.revision, sources=n.sources, body=n.body,
                       protected=n.protected, event_kind=n.event_kind, time=n.time,
                       preview=n.preview, text=n.text, missing=n.missing)
               for n in r.nodes],
        edges=[pb.Edge(kind=e.kind, to=e.to, name=e.name, **{"from": e.from_})
               for e in r.edges],
        next_cursor=r.next_cursor, page_bytes=r.page_bytes,
        observation_ref=r.observation_ref or "")


def status_to_proto(s: IndexStatus) -> pb.IndexStatus:
    out = pb.IndexStatus(
        context=s.context, documents=s.documents, events=s.events, frames=s.frames,
        terms=s.terms, position=s.position, head=s.head, lag=s.lag,
        rebuild=_progress_to_proto(s.rebuild),
        index_bytes=s.index_bytes, path=s.path, feed_position=s.feed_position or 0,
        feed_head=s.feed_head or 0, feed_lag=s.feed_lag or 0, feed_held=s.feed_held or 0,
        vectors=_vectors_to_proto(s.vectors), embedder=s.embedder,
        embedder_note=s.embedder_note, erasure_pending=s.erasure_pending)
    if s.last_rebuild is not None:
        out.last_rebuild.CopyFrom(_rebuild_info_to_proto(s.last_rebuild))
    return out


def _progress_to_proto(p: RebuildProgress) -> pb.RebuildProgress:
    return pb.RebuildProgress(running=p.running, done=p.done, total=p.total)


def _rebuild_info_to_proto(b: RebuildInfo) -> pb.RebuildInfo:
    return pb.RebuildInfo(at=b.at, duration_ms=b.duration_ms, documents=b.documents)


def _vectors_to_proto(v: VectorLegStatus) -> pb.VectorLegStatus:
    return pb.VectorLegStatus(
        built_by=v.built_by, count=v.count, dimension=v.dimension, fit_count=v.fit_count,
        text_version=v.text_version, fingerprint=v.fingerprint, log_bytes=v.log_bytes,
        current=v.current, position=v.position, lag=v.lag, cached=v.cached,
        cache_hits=v.cache_hits, cache_misses=v.cache_misses,
        passage_version=v.passage_version, embed_workers=v.embed_workers,
        documents_per_second=v.documents_per_second, eta_seconds=v.eta_seconds)
