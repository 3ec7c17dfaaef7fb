"""RecallCore: search, paged reads, graph traversal and index upkeep; free of gRPC.

Reads of events and frames (read, traverse, and the records behind search hits)
always come from the authoritative store; only the choice and ranking of search
hits comes from the derived index. A recall made for an evaluation sees only what
that evaluation's causal scope may see, plus the shared Mind (visibility.py): another
session's private evidence is answered as a missing one. It is recorded as a new
`recall` observation through the transaction service (observation.py).

Every entry point takes the `caller` (shared/auth.py) and checks it once against the
context's policy (shared/policy.py), read through the same read model as the request:
`recall` on the whole context or for the session of the evaluation a recall is made for
(access.py); rebuilding the index needs `admin`. A search's steps are searching.py's.
"""
from __future__ import annotations

from typing import Callable, Optional

from opentelemetry import trace

from morphz.shared.process.telemetry import NO_TRACING

from morphz.shared import cursor as cursors
from morphz.services.recall.core import hybrid
from morphz.services.recall.core.access import admit, viewer
from morphz.services.recall.core.observation import record
from morphz.services.recall.core.ports import Indexes, Pins, RunsBeside, Transactions
from morphz.services.recall.core.ranking import Rankings
from morphz.services.recall.core.request import (Evaluation, SearchRequest,
                                                 check_evaluation, check_limit as _limit)
from morphz.services.recall.core.results import (
    Edge, IndexStatus, Node, ReadResult, RebuildInfo, SearchResult,
    TraverseResult, VectorLegStatus)
from morphz.services.recall.core.searching import Searches
from morphz.shared.mind.records import is_ref
from morphz.services.recall.core.traverse import DIRECTIONS, node_bytes, walk
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.shared import policy
from morphz.shared.auth import Caller
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.names import check_lookup, check_name
from morphz.shared.mind import records as R, secrets
from morphz.shared.mind.view import MindView
from morphz.shared.storage.api import Store

DEFAULT_READ_CHARS, MAX_READ_CHARS = 16384, 1 << 20
DEFAULT_DEPTH, MAX_DEPTH = 2, 4
DEFAULT_NODES, MAX_NODES = 32, 128
DEFAULT_PAGE_BYTES, MAX_PAGE_BYTES = 256 << 10, 4 << 20


class RecallCore:
    def __init__(self, store: Store, transactions: Transactions, indexer: Indexes, *,
                 pins: Pins,
                 tracer: Optional[trace.Tracer] = None,
                 feed_status: Callable[[], dict] = dict,
                 catch_up: Callable[[str, bool], None] = lambda context, search: None,
                 beside: Optional[RunsBeside] = None) -> None:
        self._store = store
        self._feed_status = feed_status  # this replica's place in the change feed
        # Before a context's index is read (a search or not): apply the feed changes
        # held back for it.
        self._catch_up = catch_up
        self._tx = transactions
        self._indexer = indexer
        self._tracer = tracer or NO_TRACING
        # A hybrid search's lexical leg runs beside its vector leg (None: one after the other).
        rankings = Rankings(indexer, beside.both if beside is not None else hybrid.inline)
        self._searches = Searches(store, indexer, pins, rankings, self._tracer, catch_up)

    @property
    def vectors_off(self) -> bool:
        """Whether this server runs without a vector leg (`--embedder none`): what its
        searches are parsed for (SearchRequest.parse)."""
        return self._indexer.vectors_off

    # -- search ---------------------------------------------------------------------------
    def search(self, request: SearchRequest, *, caller: Caller,
               deadline: Deadline = NEVER) -> SearchResult:
        """A page of hits for `request` (SearchRequest.parse checked it). Its
        `min_commit_seq`: the context version the lexical index must reach before the
        search looks (read your writes), and its vector leg too when the search uses it;
        the wait lasts at most MAX_WAIT_SECONDS and part of what `deadline` leaves
        (searching.py). `unclosed_lag` in the reply is what the lexical leg could not
        close (`vector_position`: where the vector leg got). A next page reads what its
        first one kept, waiting for none. An index still being opened (at start) is
        waited for within `deadline`."""
        req = request.served_by(self._indexer.vectors_off)
        reply = self._searches.search(req, caller, deadline)
        asked = {"query": req.query, "since": req.since, "until": req.until,
                 "limit": req.limit}
        return record(self._tx, req.context, req.evaluation, "search", asked, reply)

    # -- paged reads ------------------------------------------------------------------------
    def read(self, context: str, ref: str, *, offset: int = 0, limit: int = 0,
             evaluation: Optional[Evaluation] = None, caller: Caller) -> ReadResult:
        check_name(context, "context")
        if not isinstance(ref, str) or not 0 < len(ref) <= 256:
            raise MorphzError("CONTEXT_INPUT_INVALID", "give an @eN ref, an event id or a "
                              "frame id", field="ref")
        limit = _limit(limit, DEFAULT_READ_CHARS, MAX_READ_CHARS, "limit")
        evaluation = check_evaluation(evaluation)
        with self._store.reader(context) as reader:
            m = MindView(reader)
            admit(m, context, caller, evaluation)
            m.require_meta(context)
            ev = m.event_by_ref(ref)
            seen = viewer(m, evaluation)
            if ev is not None and seen and not seen.sees(ev):
                ev = None  # another session's private evidence: as if missing
            if ev is not None:
                head = dict(kind="event", ref=R.ref(ev.seq), id=ev.id,
                            state=m.observation_state(ev.seq), time=ev.time,
                            session=ev.session, event_kind=ev.kind, revision=0,
                            occurred_at=R.occurred_at(ev.data))
                text = secrets.shown_text(ev)
            else:
                f = None if is_ref(ref) else m.frame(ref)
                if f is None:
                    raise MorphzError("EVENT_NOT_FOUND" if is_ref(ref) else "FRAME_NOT_FOUND",
                                      f"no event or frame {ref[:80]}", ref=ref[:80])
                head = dict(kind="frame", ref="", id=f.id, state=f.state, time="",
                            session="", event_kind="", revision=f.revision, occurred_at=None)
                text = secrets.shown_body(f)
        if offset > len(text):
            raise MorphzError("RECALL_LIMIT_INVALID", f"offset {offset} is past the end "
                              f"({len(text)} characters)", field="offset", total=len(text))
        end = min(len(text), offset + limit)
        reply = ReadResult(**head, offset=offset, text=text[offset:end], total_chars=len(text),
                           next_offset=end, has_more=end < len(text))
        return record(self._tx, context, evaluation, "read",
                      {"ref": ref, "offset": offset, "limit": limit}, reply)

    # -- graph --------------------------------------------------------------------------------
    def traverse(self, context: str, frame_id: str, *, depth: Optional[int] = None,
                 direction: str = "", include_bodies: bool = False,
                 include_events: bool = False, max_nodes: int = 0, max_bytes: int = 0,
                 cursor: str = "", evaluation: Optional[Evaluation] = None, caller: Caller,
                 deadline: Deadline = NEVER) -> TraverseResult:
        check_name(context, "context")
        check_lookup(frame_id, "frame_id")
        depth = DEFAULT_DEPTH if depth is None else depth
        if not 0 <= depth <= MAX_DEPTH:
            raise MorphzError("RECALL_LIMIT_INVALID", f"depth must be 0..{MAX_DEPTH}, got "
                              f"{depth}", field="depth", maximum=MAX_DEPTH)
        direction = direction or "ancestors"
        if direction not in DIRECTIONS:
            raise MorphzError("RECALL_DIRECTION_INVALID", f"direction must be one of "
                              f"{', '.join(DIRECTIONS)}", field="direction")
        max_nodes = _limit(max_nodes, DEFAULT_NODES, MAX_NODES, "max_nodes")
        max_bytes = _limit(max_bytes, DEFAULT_PAGE_BYTES, MAX_PAGE_BYTES, "max_bytes")
        evaluation = check_evaluation(evaluation)
        params = {"op": "frame", "context": context, "frame": frame_id, "depth": depth,
                  "direction": direction, "bodies": include_bodies, "events": include_events,
                  "max_nodes": max_nodes, "max_bytes": max_bytes}
        with self._tracer.start_as_current_span("recall.traverse") as span, \
                self._store.reader(context) as reader:
            span.set_attribute("morphz.context", context)
            span.set_attribute("morphz.traverse.depth", depth)
            m = MindView(reader)
            admit(m, context, caller, evaluation)
            meta = m.require_meta(context)
            # Transactions move the revision; matured retirements move the tick.
            version = f"r{meta.revision}-t{meta.tick}"
            start = cursors.decode(cursor, "frame", params, version) if cursor else 0
            if m.frame(frame_id) is None:
                raise MorphzError("FRAME_NOT_FOUND", f"frame {frame_id[:80]} does not exist",
                                  ref=frame_id[:80])
            nodes: list[Node] = []
            edges: list[Edge] = []
            size, index, more = 0, 0, False
            seen = viewer(m, evaluation)
            for index, (make, found) in enumerate(walk(m, frame_id, depth, direction,
                                                       include_bodies, include_events,
                                                       seen.sees_seq if seen else None)):
                deadline.check("the traversal")  # SEC-07: a walk stops at the deadline
                if index < start:
                    continue
                node = make()
                n = node_bytes(node, found)
                if nodes and (len(nodes) >= max_nodes or size + n > max_bytes):
                    more = True
                    break
                nodes.append(node)
                edges.extend(found)
                size += n
            span.set_attribute("morphz.nodes", len(nodes))
            span.set_attribute("morphz.bytes", size)
        reply = TraverseResult(
            root=frame_id, direction=direction, depth=depth, version=version,
            nodes=tuple(nodes), edges=tuple(edges), page_bytes=size,
            next_cursor=cursors.encode("frame", params, version, index) if more else "")
        request = {"frame_id": frame_id, "depth": depth, "direction": direction}
        return record(self._tx, context, evaluation, "frame", request, reply)

    # -- index upkeep ------------------------------------------------------------------------
    def inspect(self, context: str, *, caller: Caller) -> IndexStatus:
        check_name(context, "context")
        with self._store.reader(context) as reader:
            m = MindView(reader)
            policy.check_any(m, context, caller, policy.RECALL)
            m.require_meta(context)
            head = reader.commit_seq
        self._catch_up(context, False)
        idx = self._indexer.index(context)
        searcher, imeta = idx.snapshot()
        counts = ContextIndex.counts(searcher)
        position = imeta.get("position", 0)
        feed = self._feed_status()  # {} where this replica follows no feed
        last_rebuild = imeta.get("last_rebuild")
        embedder, embedder_note = self._embedder_status()
        return IndexStatus(
            context=context, documents=counts["events"] + counts["frames"],
            events=counts["events"], frames=counts["frames"],
            terms=ContextIndex.term_count(searcher), position=position, head=head,
            lag=max(0, head - position), feed_position=feed.get("feed_position"),
            feed_head=feed.get("feed_head"), feed_lag=feed.get("feed_lag"),
            feed_held=feed.get("feed_held"),
            last_rebuild=RebuildInfo(**last_rebuild) if last_rebuild else None,
            rebuild=self._indexer.progress(context),
            index_bytes=idx.size_bytes(), path=self._indexer.shown_path(context),
            vectors=self._vector_status(context, idx, head,
                                        counts["events"] + counts["frames"]),
            embedder=embedder, embedder_note=embedder_note,
            erasure_pending=int(imeta.get("erasure_pending", 0)))

    def _embedder_status(self) -> tuple[str, str]:
        """(the embedder's label, a note on it)."""
        if self._indexer.vectors_off:
            return "none", "the vector leg is off (--embedder none): searches use the lexical leg"
        return (self._indexer.embedder.identity.label(),
                getattr(self._indexer.embedder, "note", ""))

    def _vector_status(self, context: str, idx: ContextIndex, head: int,
                       documents: int) -> VectorLegStatus:
        """The vector leg beside the lexical one: who built it, how many, its fingerprint,
        where it is and how far behind (`documents`: the lexical leg's), its pace; the
        vector cache's counts."""
        leg = idx.vectors
        meta = leg.meta
        status = self._indexer.vector_status(context, head)
        if status.lag:
            self._indexer.want_vectors(context)
        cache = self._indexer.cache_stats()
        workers, pace = self._indexer.vector_pace()
        behind = max(0, documents - leg.count) if status.lag else 0
        return VectorLegStatus(
            built_by=meta.get("embedder", ""), count=leg.count, dimension=leg.dimension,
            fit_count=meta.get("fit_count", 0), text_version=meta.get("text_version", 0),
            fingerprint=meta.get("digest", ""), log_bytes=meta.get("bytes", 0),
            current=self._indexer.leg_current(leg), position=status.position,
            lag=status.lag, cached=cache.entries, cache_hits=cache.hits,
            cache_misses=cache.misses,
            passage_version=meta.get("passage_version", 0), embed_workers=workers,
            documents_per_second=round(pace, 3),
            eta_seconds=round(max(behind / pace, 0.1), 1) if behind and pace else 0.0)

    def rebuild(self, context: str, *, caller: Caller,
                deadline: Deadline = NEVER) -> IndexStatus:
        """Rebuild the context's index; past `deadline` nothing is swapped in (SEC-07)."""
        self.may_rebuild(context, caller=caller)
        self._indexer.rebuild(context, deadline)
        return self.inspect(context, caller=caller)

    def may_rebuild(self, context: str, *, caller: Caller) -> None:
        """Raise unless `caller` may rebuild the context's index (its admins)."""
        check_name(context, "context")
        with self._store.reader(context) as reader:
            m = MindView(reader)
            policy.check(m, context, caller, policy.ADMIN)
            m.require_meta(context)

