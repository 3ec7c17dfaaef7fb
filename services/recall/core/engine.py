"""RecallCore: search, paged reads, graph traversal and index upkeep; free of gRPC.

Reads of events and frames (read, traverse, and the records behind search hits)
always come from the authoritative store; only the choice and ranking of search
hits comes from the derived index. A recall made for an evaluation sees only what
that evaluation's causal scope may see, plus the shared Mind (visibility.py): another
session's private evidence is answered as a missing one. It is recorded as a new
`recall` observation through the transaction service (never a frame change).

Every entry point takes the `caller` (shared/auth.py) and checks it against the
context's policy (shared/policy.py), read through the same read model as the request:
`recall` on the whole context, or for the session of the evaluation a recall is made
for (a session-bound principal recalls only for its evaluations, so only what that
causal scope sees); rebuilding the index needs `admin`. Once authorized, the recall
observation is recorded as the services (SERVICE_CALLER), as over the wire.
"""
from __future__ import annotations

import dataclasses
import json
import time
import uuid
from typing import Callable, Optional, TypeVar

import numpy as np
from opentelemetry import trace

from morphz.shared.process.telemetry import NO_TRACING

from morphz.shared import cursor as cursors
from morphz.services.recall.core import hybrid
from morphz.services.recall.core.legs import LexicalLeg, RankedLeg, VectorLeg
from morphz.services.recall.core.ports import Indexes, Pinned, Pins, RunsBeside, Transactions
from morphz.services.recall.core.request import (Evaluation, SearchRequest,
                                                 check_limit as _limit)
from morphz.services.recall.core.results import (
    Edge, IndexStatus, Node, ReadResult, RebuildInfo, SearchResult,
    TraverseResult, VectorLegStatus)
from morphz.services.recall.embedding.api import QUERY, embed_texts
from morphz.shared.mind.records import is_ref
from morphz.services.recall.core.search import run_search
from morphz.services.recall.core.traverse import DIRECTIONS, node_bytes, walk
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.shared import policy
from morphz.shared.auth import SERVICE_CALLER, Caller
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.names import check_lookup, check_name
from morphz.shared.mind import records as R, secrets
from morphz.shared.mind.view import MindView
from morphz.shared.mind.visibility import Viewer
from morphz.shared.storage.api import Reader, Store, read_at_one_version

DEFAULT_READ_CHARS, MAX_READ_CHARS = 16384, 1 << 20
DEFAULT_DEPTH, MAX_DEPTH = 2, 4
DEFAULT_NODES, MAX_NODES = 32, 128
DEFAULT_PAGE_BYTES, MAX_PAGE_BYTES = 256 << 10, 4 << 20
MAX_OBSERVATION_BYTES = 1 << 20
# Read your writes: the longest a search waits for its index to reach min_commit_seq,
# whatever the call's deadline (the reply then says what it could not close).
MAX_WAIT_SECONDS = 5.0
Reply = TypeVar("Reply", SearchResult, ReadResult, TraverseResult)


class RecallCore:
    def __init__(self, store: Store, transactions: Transactions, indexer: Indexes, *,
                 pins: Pins,
                 tracer: Optional[trace.Tracer] = None,
                 feed_status: Callable[[], dict] = dict,
                 catch_up: Callable[[str, bool], None] = lambda context, search: None,
                 beside: Optional[RunsBeside] = None) -> None:
        self._store = store
        # A hybrid search's lexical leg runs beside its vector leg (None: one after the other).
        self._both: hybrid.Both = beside.both if beside is not None else hybrid.inline
        self._feed_status = feed_status  # this replica's place in the change feed
        # Before a context's index is read (a search or not): apply the feed changes
        # held back for it.
        self._catch_up = catch_up
        self._tx = transactions
        self._indexer = indexer
        self._pins = pins  # search snapshots kept for their cursors (RECALL-03)
        self._tracer = tracer or NO_TRACING

    # -- helpers ------------------------------------------------------------------------
    def _check_evaluation(self, context: str, evaluation: Optional[Evaluation],
                          caller: Caller) -> Optional[Evaluation]:
        """The evaluation, checked (None: none named)."""
        if not evaluation:
            return None
        session, activation = evaluation.session, evaluation.activation
        if not session or not activation:
            raise MorphzError("RECALL_ACTIVATION_INVALID",
                              "a recall for an evaluation names both session and activation")
        check_name(session, "session")
        check_name(activation, "activation")
        with self._store.reader(context) as reader:
            m = MindView(reader)
            policy.check_any(m, context, caller, policy.RECALL)  # before anything is told
            act = m.activation(activation)
        if act is None or act.session != session:
            raise MorphzError("RECALL_ACTIVATION_INVALID",
                              f"no activation {activation} in session {session}",
                              session=session, activation=activation)
        if act.delivered:
            raise MorphzError("RECALL_ACTIVATION_INVALID",
                              f"activation {activation} was already delivered",
                              activation=activation)
        return evaluation

    def _record(self, context: str, evaluation: Optional[Evaluation], op: str, request: dict,
                reply: Reply, caller: Caller) -> Reply:
        """Record the recall as an observation of the evaluation's session (the reply in
        its plain form: the observation's text)."""
        if evaluation is None:  # (a search's reply is built so: no copy on its hot path)
            return reply if reply.observation_ref == "" else \
                dataclasses.replace(reply, observation_ref="")
        plain = reply.plain()
        text = json.dumps({"recall": op, "activation": evaluation.activation,
                           "request": request, "reply": plain}, ensure_ascii=False)
        if len(text.encode()) > MAX_OBSERVATION_BYTES:
            text = json.dumps({"recall": op, "activation": evaluation.activation,
                               "request": request, "truncated": True,
                               "refs": _refs_of(plain)}, ensure_ascii=False)
        receipt = self._tx.append_event(context, evaluation.session, "recall", text,
                                        actor="recall", caller=SERVICE_CALLER)
        return dataclasses.replace(reply, observation_ref=receipt.ref)

    # -- search ---------------------------------------------------------------------------
    def search(self, context: str, query: str = "", *, since: str = "", until: str = "",
               limit: int = 0, kinds=(), states=(), sessions=(), cursor: str = "",
               mode: str = "", evaluation: Optional[Evaluation] = None,
               min_commit_seq: int = 0,
               wait_seconds: float = MAX_WAIT_SECONDS, caller: Caller,
               deadline: Deadline = NEVER) -> SearchResult:
        """`min_commit_seq`: the context version the lexical index must reach before the
        search looks (read your writes), and its vector leg too when the search uses it;
        the wait lasts at most `wait_seconds` (capped at MAX_WAIT_SECONDS). `unclosed_lag`
        in the reply is what the lexical leg could not close (`vector_position`: where
        the vector leg got). A next page reads what its first one kept, waiting for none.
        An index still being opened (at start) is waited for within `deadline`."""
        req = SearchRequest.parse(context, query, since=since, until=until, limit=limit,
                                  kinds=kinds, states=states, sessions=sessions,
                                  cursor=cursor, mode=mode, min_commit_seq=min_commit_seq,
                                  vectors_off=self._indexer.vectors_off)
        evaluation = self._check_evaluation(context, evaluation, caller)
        # pages of one causal scope's evidence set
        params = req.cursor_params(evaluation.session if evaluation is not None else None)
        words = req.terms
        if not self._indexer.is_open(context):  # its first search in this process
            with self._store.reader(context) as reader:  # authorized before it waits
                m = MindView(reader)
                _authorize(m, context, caller, evaluation)
                m.require_meta(context)
            self._indexer.opened(context, deadline)
        with self._tracer.start_as_current_span("recall.search") as span:
            # Counts, never the words: a query's text stays out of spans.
            span.set_attribute("morphz.context", context)
            span.set_attribute("morphz.search.terms", len(words))
            span.set_attribute("morphz.limit", req.limit)
            if min_commit_seq and not cursor:  # a next page reads the first one's view
                with self._store.reader(context) as reader:  # authorized before any work
                    m = MindView(reader)
                    _authorize(m, context, caller, evaluation)
                    m.require_meta(context)
                give_up = time.monotonic() + max(0.0, min(wait_seconds, MAX_WAIT_SECONDS))
                # Indexed here rather than waited for: the follower may be resting or
                # busy with other contexts (the held changes first, then the feed's).
                self._catch_up(context, True)
                self._indexer.index_up_to(context, min_commit_seq, give_up)
                if req.reads_vectors and self._vectors_wanted(context, req.asked_mode):
                    self._indexer.vectors_up_to(context, min_commit_seq, give_up)

            def read(reader: Reader) -> SearchResult:
                m = MindView(reader)
                _authorize(m, context, caller, evaluation)
                m.require_meta(context)
                self._catch_up(context, True)
                idx = self._indexer.index(context, head=reader.commit_seq)
                snapshot, ranking = idx.snapshot(), None
                if cursor:  # the next page: from what answered the first
                    pinned = self._pins.get(context, cursors.version_of(cursor))
                    if pinned is not None:
                        snapshot, ranking = pinned.snapshot, pinned.ranking
                searcher, imeta = snapshot
                position = imeta.get("position", 0)
                # A fused ranking's pages name it: without it kept, its cursor is stale.
                version = cursors.version_of(cursor) if ranking is not None else f"p{position}"
                start = cursors.decode(cursor, "search", params, version) if cursor else 0
                viewer = _viewer(m, evaluation)
                lexical = LexicalLeg(idx, searcher, req.lexical_query())
                leg = lexical
                # (a next page without a kept ranking: its first page was lexical only)
                if ranking is None and not cursor and req.reads_vectors and \
                        (req.asked_mode or self._vectors_answer(idx)):
                    ranking, empty_reason = self._ranking(m, req, idx, lexical)
                    leg = RankedLeg(ranking, lexical, empty_reason)
                    version = f"p{position}-h{uuid.uuid4().hex[:12]}"
                elif ranking is not None:
                    leg = RankedLeg(ranking, lexical, lexical.empty_reason)
                page = run_search(m, req, leg, start, viewer.sees_seq if viewer else None)
                span.set_attribute("morphz.results", len(page.hits))
                span.set_attribute("morphz.index_position", position)
                vector_position = vector_lag = None
                if req.mode != "lexical":  # the vector leg follows on its own: its own lag
                    vec = self._indexer.vector_status(context, reader.commit_seq)
                    vector_position, vector_lag = vec.position, vec.lag
                    if vec.lag:
                        self._indexer.want_vectors(context)
                next_cursor = ""
                if page.next_offset is not None:
                    next_cursor = cursors.encode("search", params, version, page.next_offset)
                    self._pins.keep(context, version, Pinned(snapshot, ranking))
                return SearchResult(
                    results=page.hits, next_cursor=next_cursor, index_position=position,
                    lag=max(0, reader.commit_seq - position),
                    unclosed_lag=max(0, min_commit_seq - position),
                    empty=page.empty if not page.hits and not start else "",
                    vector_position=vector_position, vector_lag=vector_lag,
                    observation_ref=None if evaluation is not None else "")
            reply = read_at_one_version(self._store, context, read)
        request = {"query": query, "since": since, "until": until, "limit": req.limit}
        return self._record(context, evaluation, "search", request, reply, caller)

    def _vectors_answer(self, idx: ContextIndex) -> bool:
        """Whether the default mode may use the vector leg: built by this embedder (a
        stale or missing leg leaves a search that named no mode to the lexical leg;
        one that asked for vector or hybrid is refused, RECALL_INDEX_STALE)."""
        return self._indexer.leg_current(idx.vectors)

    def _vectors_wanted(self, context: str, asked: str) -> bool:
        """Whether a search of this mode reads the vector leg and the leg can follow (one
        another embedder built never does: such a search is refused or lexical)."""
        leg = self._indexer.index(context).vectors
        current = self._indexer.leg_current(leg)
        return current or (bool(asked) and not leg.exists)

    def _ranking(self, m: MindView, req: SearchRequest, idx: ContextIndex,
                 lexical: LexicalLeg) -> tuple[hybrid.Ranking, Callable[[], str]]:
        """A vector or hybrid search's ranking, and why it would find nothing."""
        context = req.context
        exact, key = hybrid.exact_target(m, req.query)
        if exact:
            # The named item only if it passes the same kind/session/time filters.
            item = lexical.narrowed(terms=[], keys=[key]).hits(0, 1) if key is not None \
                else []
            return hybrid.exact_ranking(lexical, hybrid.RankedHit(
                item[0].key, 0.0, item[0].time_us) if item else None), lexical.empty_reason
        vectors = idx.vectors
        if not vectors.exists and lexical.is_empty:  # nothing indexed yet, by any embedder
            return hybrid.Ranking((), False), lambda: "empty_index"
        if vectors.exists and not self._indexer.leg_current(vectors):
            built = vectors.meta.get("embedder")
            how = (f"by {built}, not by this server's embedder "
                   f"{self._indexer.embedder.identity.label()}"
                   if built != self._indexer.embedder.identity.label() else
                   "from the texts of an older version (passages "
                   f"{vectors.meta.get('passage_version', 0)}, text "
                   f"{vectors.meta.get('text_version', 0)})")
            raise MorphzError(
                "RECALL_INDEX_STALE",
                f"the vector leg of {context}'s recall index was built {how}; run "
                f"`morphz context recall-index rebuild {context}` (lexical search still "
                "works)", context=context, built_by=built,
                embedder=self._indexer.embedder.identity.label())
        vector = VectorLeg(vectors, lambda: _query_vector(
            self._indexer.leg_embedder(context, vectors), req.query), lexical.query)
        if req.mode == "vector":
            return hybrid.vector_ranking(vector), vector.empty_reason
        ranking = hybrid.fused_ranking(lexical, vector, lexical.idf_total(), self._both,
                                       hybrid.filtered(vectors.neighbours, lexical.passing))
        # empty_index: nothing embedded to compare with and the lexical leg empty too
        return ranking, lambda: "no_match" if "no_match" in (
            vector.empty_reason(), lexical.empty_reason()) else "empty_index"

    # -- paged reads ------------------------------------------------------------------------
    def read(self, context: str, ref: str, *, offset: int = 0, limit: int = 0,
             evaluation: Optional[Evaluation] = None, caller: Caller) -> ReadResult:
        check_name(context, "context")
        if not isinstance(ref, str) or not 0 < len(ref) <= 256:
            raise MorphzError("CONTEXT_INPUT_INVALID", "give an @eN ref, an event id or a "
                              "frame id", field="ref")
        limit = _limit(limit, DEFAULT_READ_CHARS, MAX_READ_CHARS, "limit")
        evaluation = self._check_evaluation(context, evaluation, caller)
        with self._store.reader(context) as reader:
            m = MindView(reader)
            _authorize(m, context, caller, evaluation)
            m.require_meta(context)
            ev = m.event_by_ref(ref)
            viewer = _viewer(m, evaluation)
            if ev is not None and viewer and not viewer.sees(ev):
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
        return self._record(context, evaluation, "read",
                            {"ref": ref, "offset": offset, "limit": limit}, reply, caller)

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
        evaluation = self._check_evaluation(context, evaluation, caller)
        params = {"op": "frame", "context": context, "frame": frame_id, "depth": depth,
                  "direction": direction, "bodies": include_bodies, "events": include_events,
                  "max_nodes": max_nodes, "max_bytes": max_bytes}
        with self._tracer.start_as_current_span("recall.traverse") as span, \
                self._store.reader(context) as reader:
            span.set_attribute("morphz.context", context)
            span.set_attribute("morphz.traverse.depth", depth)
            m = MindView(reader)
            _authorize(m, context, caller, evaluation)
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
            viewer = _viewer(m, evaluation)
            for index, (make, found) in enumerate(walk(m, frame_id, depth, direction,
                                                       include_bodies, include_events,
                                                       viewer.sees_seq if viewer else None)):
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
        return self._record(context, evaluation, "frame", request, reply, caller)

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


def _authorize(m: MindView, context: str, caller: Caller,
               evaluation: Optional[Evaluation]) -> None:
    """`recall` for the evaluation's session, else on the whole context."""
    policy.check(m, context, caller, policy.RECALL,
                 evaluation.session if evaluation else policy.WHOLE)


def _viewer(m: MindView, evaluation: Optional[Evaluation]) -> Optional[Viewer]:
    """The evaluating session's view; None for an operator's read (sees everything)."""
    return Viewer(m, evaluation.session) if evaluation else None


def _query_vector(embedder, query: str):
    """The query's unit vector, or None when it has nothing to embed (all zeros)."""
    v = embed_texts(embedder, [query], role=QUERY)[0]
    return v if np.any(v) else None


def _refs_of(reply: dict) -> list[str]:
    """The refs (or ids) of a reply's hits or nodes, in its plain form."""
    items = reply.get("results") or reply.get("nodes") or []
    return [i.get("ref") or i.get("id") for i in items]
