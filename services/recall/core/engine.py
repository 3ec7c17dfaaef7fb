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
from typing import Callable, Optional, Protocol

import numpy as np
from opentelemetry import trace

from morphz.shared.telemetry import NO_TRACING

from morphz.shared import cursor as cursors
from morphz.services.recall.core import hybrid
from morphz.services.recall.core.beside import INLINE, Beside
from morphz.services.recall.core.indexer import Indexer
from morphz.services.recall.embedding.api import QUERY, embed_texts
from morphz.services.recall.core.pins import Pinned, SearchPins
from morphz.shared.mind.records import is_ref
from morphz.services.recall.core.search import run_search
from morphz.services.recall.core.timeparse import parse_bound
from morphz.services.recall.core.traverse import DIRECTIONS, node_bytes, walk
from morphz.services.recall.index.tantivy_index import ContextIndex, Query
from morphz.shared import policy
from morphz.shared.auth import SERVICE_CALLER, Caller
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.names import check_lookup, check_name
from morphz.shared.mind import records as R, secrets
from morphz.shared.mind.view import MindView
from morphz.shared.mind.visibility import Viewer
from morphz.shared.storage.api import Reader, Store, read_at_one_version
from morphz.shared.text.analyze import query_terms

DEFAULT_LIMIT, MAX_LIMIT = 20, 100
MAX_QUERY_CHARS, MAX_QUERY_TERMS = 4096, 256
DEFAULT_READ_CHARS, MAX_READ_CHARS = 16384, 1 << 20
DEFAULT_DEPTH, MAX_DEPTH = 2, 4
DEFAULT_NODES, MAX_NODES = 32, 128
DEFAULT_PAGE_BYTES, MAX_PAGE_BYTES = 256 << 10, 4 << 20
MAX_FILTER_VALUES = 32
MAX_OBSERVATION_BYTES = 1 << 20
# Read your writes: the longest a search waits for its index to reach min_commit_seq,
# whatever the call's deadline (the reply then says what it could not close).
MAX_WAIT_SECONDS = 5.0
WAIT_STEP_SECONDS = 0.02  # between pulls while nothing can be indexed (a rebuild runs)
# Changes a search embeds at a time while it waits for the vector leg (a step's embedding
# is not interrupted: small, so the wait ends close to its bound).
SEARCH_VECTOR_STEP = 16
KINDS = ("event", "frame")
STATES = (R.ACTIVE, R.RETIRING, R.RETIRED)


class Transactions(Protocol):
    def append_event(self, context: str, session: str, kind: str, text: str, *,
                     request_id: str = "", actor: str = "", causal_refs=(),
                     caller: Caller) -> dict: ...


def _limit(value: int, default: int, cap: int, what: str) -> int:
    if value == 0:
        return default
    if not 0 < value <= cap:
        raise MorphzError("RECALL_LIMIT_INVALID", f"{what} must be 1..{cap}, got {value}",
                          field=what, maximum=cap)
    return value


def _choices(values, allowed, what: str) -> list[str]:
    values = sorted(set(values))
    bad = [v for v in values if v not in allowed]
    if bad or len(values) > MAX_FILTER_VALUES:
        raise MorphzError("RECALL_FILTER_INVALID", f"{what} must be among {', '.join(allowed)}",
                          field=what, value=(bad[0][:64] if bad else None))
    return values


class RecallCore:
    def __init__(self, store: Store, transactions: Transactions, indexer: Indexer, *,
                 tracer: Optional[trace.Tracer] = None,
                 pins: Optional[SearchPins] = None,
                 feed_status: Callable[[], dict] = dict,
                 catch_up: Callable[[str, bool], None] = lambda context, search: None,
                 beside: Beside = INLINE) -> None:
        self._store = store
        self._beside = beside  # a hybrid search's lexical leg runs beside its vector leg
        self._feed_status = feed_status  # this replica's place in the change feed
        # Before a context's index is read (a search or not): apply the feed changes
        # held back for it.
        self._catch_up = catch_up
        self._tx = transactions
        self._indexer = indexer
        self._pins = pins if pins is not None else SearchPins()
        self._tracer = tracer or NO_TRACING

    # -- helpers ------------------------------------------------------------------------
    def _check_evaluation(self, context: str, evaluation: Optional[dict],
                          caller: Caller) -> Optional[dict]:
        if not evaluation or not (evaluation.get("session") or evaluation.get("activation")):
            return None
        session, activation = evaluation.get("session", ""), evaluation.get("activation", "")
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
        return {"session": session, "activation": activation}

    def _record(self, context: str, evaluation: Optional[dict], op: str, request: dict,
                reply: dict, caller: Caller) -> dict:
        """Record the recall as an observation of the evaluation's session."""
        if evaluation is None:
            return dict(reply, observation_ref="")
        text = json.dumps({"recall": op, "activation": evaluation["activation"],
                           "request": request, "reply": reply}, ensure_ascii=False)
        if len(text.encode()) > MAX_OBSERVATION_BYTES:
            text = json.dumps({"recall": op, "activation": evaluation["activation"],
                               "request": request, "truncated": True,
                               "refs": _refs_of(reply)}, ensure_ascii=False)
        receipt = self._tx.append_event(context, evaluation["session"], "recall", text,
                                        actor="recall", caller=SERVICE_CALLER)
        return dict(reply, observation_ref=receipt["ref"])

    # -- search ---------------------------------------------------------------------------
    def search(self, context: str, query: str = "", *, since: str = "", until: str = "",
               limit: int = 0, kinds=(), states=(), sessions=(), cursor: str = "",
               mode: str = "", evaluation: Optional[dict] = None, min_commit_seq: int = 0,
               wait_seconds: float = MAX_WAIT_SECONDS, caller: Caller) -> dict:
        """`min_commit_seq`: the context version the lexical index must reach before the
        search looks (read your writes), and its vector leg too when the search uses it;
        the wait lasts at most `wait_seconds` (capped at MAX_WAIT_SECONDS). `unclosed_lag`
        in the reply is what the lexical leg could not close (`vector_position`: where
        the vector leg got). A next page reads what its first one kept, waiting for none."""
        check_name(context, "context")
        asked, mode = mode, mode or hybrid.DEFAULT_MODE
        if mode not in hybrid.MODES:
            raise MorphzError("RECALL_MODE_INVALID", f"mode must be one of "
                              f"{', '.join(hybrid.MODES)}", field="mode")
        if self._indexer.vectors_off and mode != "lexical":
            if mode == "vector":
                raise MorphzError("RECALL_VECTORS_OFF", "this server runs with its vector leg "
                                  "off (--embedder none): search in lexical or hybrid mode "
                                  "(hybrid answers from the lexical leg)", field="mode")
            mode = "lexical"  # hybrid, named or by default: as while the leg is unbuilt
        if len(query) > MAX_QUERY_CHARS:
            raise MorphzError("RECALL_QUERY_INVALID", f"query longer than {MAX_QUERY_CHARS} "
                              "characters", field="query")
        words = query_terms(query)
        if query.strip() and not words:
            raise MorphzError("RECALL_QUERY_INVALID", "the query has no searchable words",
                              field="query")
        if len(words) > MAX_QUERY_TERMS:
            raise MorphzError("RECALL_QUERY_INVALID", f"the query has {len(words)} terms; at "
                              f"most {MAX_QUERY_TERMS}", field="query")
        since_us, until_us = parse_bound(since, "since"), parse_bound(until, "until")
        if not words and since_us is None and until_us is None:
            raise MorphzError("RECALL_QUERY_INVALID", "give words to search for, a time range "
                              "(--since/--until), or both", field="query")
        if since_us is not None and until_us is not None and since_us >= until_us:
            raise MorphzError("RECALL_TIME_INVALID", "since must be before until",
                              field="since")
        limit = _limit(limit, DEFAULT_LIMIT, MAX_LIMIT, "limit")
        kinds = _choices(kinds, KINDS, "kinds")
        states = _choices(states, STATES, "states")
        sessions = sorted({check_name(s, "session") for s in sessions})
        if len(sessions) > MAX_FILTER_VALUES:
            raise MorphzError("RECALL_FILTER_INVALID", "too many sessions", field="sessions")
        evaluation = self._check_evaluation(context, evaluation, caller)
        params = {"op": "search", "context": context, "terms": words, "since": since_us,
                  "until": until_us, "limit": limit, "kinds": kinds, "states": states,
                  "sessions": sessions}
        if evaluation is not None:  # pages of one causal scope's evidence set
            params["viewer"] = evaluation["session"]
        if mode != "lexical" and words:  # (lexical cursors stay as they were)
            params["mode"] = mode
        with self._tracer.start_as_current_span("recall.search") as span:
            # Counts, never the words: a query's text stays out of spans.
            span.set_attribute("morphz.context", context)
            span.set_attribute("morphz.search.terms", len(words))
            span.set_attribute("morphz.limit", limit)
            if min_commit_seq and not cursor:  # a next page reads the first one's view
                with self._store.reader(context) as reader:  # authorized before any work
                    m = MindView(reader)
                    _authorize(m, context, caller, evaluation)
                    m.require_meta(context)
                give_up = time.monotonic() + max(0.0, min(wait_seconds, MAX_WAIT_SECONDS))
                self._index_up_to(context, min_commit_seq, give_up)
                if mode != "lexical" and words and self._vectors_wanted(context, asked):
                    self._vectors_up_to(context, min_commit_seq, give_up)

            def read(reader: Reader) -> dict:
                m = MindView(reader)
                _authorize(m, context, caller, evaluation)
                m.require_meta(context)
                self._catch_up(context, True)
                idx = self._indexer.index(context)
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
                lex_query = Query(terms=words, kinds=kinds, sessions=sessions,
                                  since_us=since_us, until_us=until_us)
                legs, empty_reason = {}, None
                # (a next page without a kept ranking: its first page was lexical only)
                if ranking is None and not cursor and mode != "lexical" and words and \
                        (asked or self._vectors_answer(idx)):
                    ranking, empty_reason = self._legs(m, context, query, mode, idx, searcher,
                                                       lex_query)
                    version = f"p{position}-h{uuid.uuid4().hex[:12]}"
                if ranking is not None:
                    legs = {"fetch": _fetch(idx, searcher, lex_query, ranking),
                            "empty_reason": empty_reason}
                hits, next_offset, empty = run_search(
                    m, idx, searcher, words, since_us, until_us, kinds, states, sessions,
                    start, limit, viewer.sees_seq if viewer else None, **legs)
                span.set_attribute("morphz.results", len(hits))
                span.set_attribute("morphz.index_position", position)
                reply = {"results": hits, "next_cursor": "", "index_position": position,
                         "lag": max(0, reader.commit_seq - position),
                         "unclosed_lag": max(0, min_commit_seq - position),
                         "empty": empty if not hits and not start else ""}
                if mode != "lexical":  # the vector leg follows on its own: its own lag
                    vec = self._indexer.vector_status(context, reader.commit_seq)
                    reply["vector_position"], reply["vector_lag"] = vec["position"], vec["lag"]
                    if vec["lag"]:
                        self._indexer.want_vectors(context)
                if next_offset is not None:
                    reply["next_cursor"] = cursors.encode("search", params, version,
                                                          next_offset)
                    self._pins.keep(context, version, Pinned(snapshot, ranking))
                return reply
            reply = read_at_one_version(self._store, context, read)
        request = {"query": query, "since": since, "until": until, "limit": limit}
        return self._record(context, evaluation, "search", request, reply, caller)

    def _vectors_answer(self, idx: ContextIndex) -> bool:
        """Whether the default mode may use the vector leg: built by this embedder (a
        stale or missing leg leaves a search that named no mode to the lexical leg;
        one that asked for vector or hybrid is refused, RECALL_INDEX_STALE)."""
        return self._indexer.leg_current(idx.vectors)

    def _index_up_to(self, context: str, target: int, give_up: float) -> None:
        """Apply the context's held changes and then its own feed until its index reaches
        `target`, until `give_up` (monotonic). Indexed here rather than waited for: the
        follower may be resting or busy with other contexts, and the context's feed holds
        every commit it made (what a rebuild skips, its swap takes)."""
        self._catch_up(context, True)
        while self._indexer.position(context) < target:
            left = give_up - time.monotonic()
            if left <= 0:
                return
            if not self._indexer.catch_up(context):  # a rebuild, or not committed yet
                time.sleep(min(WAIT_STEP_SECONDS, left))

    def _vectors_wanted(self, context: str, asked: str) -> bool:
        """Whether a search of this mode reads the vector leg and the leg can follow (one
        another embedder built never does: such a search is refused or lexical)."""
        leg = self._indexer.index(context).vectors
        current = self._indexer.leg_current(leg)
        return current or (bool(asked) and not leg.exists)

    def _vectors_up_to(self, context: str, target: int, give_up: float) -> None:
        """The vector leg's part of reading one's writes: embed the context's changes up
        to `target` (and the lexical leg's position) here, a few at a time, until
        `give_up`; while the vector follower steps the leg, wait for it. What is left
        shows as the reply's vector_position and vector_lag."""
        while True:
            want = min(target, self._indexer.position(context))
            if self._indexer.vector_status(context, want)["lag"] == 0:
                return
            left = give_up - time.monotonic()
            if left <= 0:
                return
            if not self._indexer.try_apply_vectors(context, SEARCH_VECTOR_STEP):
                time.sleep(min(WAIT_STEP_SECONDS, left))

    def _legs(self, m: MindView, context: str, query: str, mode: str, idx: ContextIndex,
              searcher, lex_query: Query) -> tuple[hybrid.Ranking, Callable[[], str]]:
        """A vector or hybrid search's ranking, and run_search's `empty_reason`."""
        kinds, sessions = lex_query.kinds, lex_query.sessions
        since_us, until_us = lex_query.since_us, lex_query.until_us
        exact, key = hybrid.exact_target(m, query)
        leg = idx.vectors
        lexical_empty = searcher.num_docs <= 1

        def fixed(ranked: list, lexical: Optional[list] = None) -> hybrid.Ranking:
            """`lexical`: the lexical leg's first hits, when its rest follows the list."""
            return hybrid.Ranking(tuple(ranked), lexical is not None
                                  and len(lexical) >= hybrid.FUSE_DEPTH)
        if exact:
            lex = idx.search(searcher, lex_query, 0, hybrid.FUSE_DEPTH)
            found = hybrid.ranked(lex, "lexical")
            # The named item only if it passes the same kind/session/time filters.
            item = idx.search(searcher, dataclasses.replace(lex_query, terms=[], keys=[key]),
                              0, 1) if key is not None else []
            ranked = hybrid.pinned_first(
                hybrid.RankedHit(item[0].key, 0.0, item[0].time_us) if item else None, found)
            return fixed(ranked, lex), lambda: "empty_index" if lexical_empty else "no_match"
        if not leg.exists and lexical_empty:  # nothing indexed yet, by any embedder
            return fixed([]), lambda: "empty_index"
        if leg.exists and not self._indexer.leg_current(leg):
            built = leg.meta.get("embedder")
            raise MorphzError(
                "RECALL_INDEX_STALE",
                f"the vector leg of {context}'s recall index was built by {built}, not by "
                f"this server's embedder {self._indexer.embedder.identity.label()}; run "
                f"`morphz context recall-index rebuild {context}` (lexical search still "
                "works)", context=context, built_by=built,
                embedder=self._indexer.embedder.identity.label())

        def vector_leg() -> list:
            if not leg.count:  # not begun, or not filled yet: the reply says it lags
                return []
            qvec = _query_vector(self._indexer.leg_embedder(context, leg), query)
            return leg.search(qvec, hybrid.FUSE_DEPTH, kinds=kinds, sessions=sessions,
                              since_us=since_us, until_us=until_us,
                              min_score=hybrid.VECTOR_MIN_SCORE) if qvec is not None else []
        if mode == "vector":
            ranking = fixed(hybrid.ranked(vector_leg(), "vector"))
        else:
            lex, vec = self._beside.both(
                lambda: idx.search(searcher, lex_query, 0, hybrid.FUSE_DEPTH), vector_leg)
            ranking = fixed(hybrid.fuse(lex, vec, sum(ContextIndex.idf(searcher,
                                                                       lex_query.terms))),
                            lex)

        def empty() -> str:
            """empty_index: nothing embedded to compare with (and, for hybrid, the
            lexical leg empty too); else no_match."""
            if leg.searchable() or (mode == "hybrid" and not lexical_empty):
                return "no_match"
            return "empty_index"
        return ranking, empty

    # -- paged reads ------------------------------------------------------------------------
    def read(self, context: str, ref: str, *, offset: int = 0, limit: int = 0,
             evaluation: Optional[dict] = None, caller: Caller) -> dict:
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
                head = {"kind": "event", "ref": R.ref(ev.seq), "id": ev.id,
                        "state": m.observation_state(ev.seq),
                        "time": ev.time, "session": ev.session, "event_kind": ev.kind,
                        "revision": 0, "occurred_at": R.occurred_at(ev.data)}
                text = secrets.shown_text(ev)
            else:
                f = None if is_ref(ref) else m.frame(ref)
                if f is None:
                    raise MorphzError("EVENT_NOT_FOUND" if is_ref(ref) else "FRAME_NOT_FOUND",
                                      f"no event or frame {ref[:80]}", ref=ref[:80])
                head = {"kind": "frame", "ref": "", "id": f.id, "state": f.state, "time": "",
                        "session": "", "event_kind": "", "revision": f.revision}
                text = secrets.frame_body(f.id, f.body)
        if offset > len(text):
            raise MorphzError("RECALL_LIMIT_INVALID", f"offset {offset} is past the end "
                              f"({len(text)} characters)", field="offset", total=len(text))
        end = min(len(text), offset + limit)
        reply = dict(head, offset=offset, text=text[offset:end], total_chars=len(text),
                     next_offset=end, has_more=end < len(text))
        return self._record(context, evaluation, "read",
                            {"ref": ref, "offset": offset, "limit": limit}, reply, caller)

    # -- graph --------------------------------------------------------------------------------
    def traverse(self, context: str, frame_id: str, *, depth: Optional[int] = None,
                 direction: str = "", include_bodies: bool = False,
                 include_events: bool = False, max_nodes: int = 0, max_bytes: int = 0,
                 cursor: str = "", evaluation: Optional[dict] = None, caller: Caller,
                 deadline: Deadline = NEVER) -> dict:
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
            nodes, edges, size, index, more = [], [], 0, 0, False
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
        reply = {"root": frame_id, "direction": direction, "depth": depth, "version": version,
                 "nodes": nodes, "edges": edges, "page_bytes": size,
                 "next_cursor": cursors.encode("frame", params, version, index) if more else ""}
        request = {"frame_id": frame_id, "depth": depth, "direction": direction}
        return self._record(context, evaluation, "frame", request, reply, caller)

    # -- index upkeep ------------------------------------------------------------------------
    def inspect(self, context: str, *, caller: Caller) -> dict:
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
        return {"context": context, "documents": counts["events"] + counts["frames"],
                **counts, "terms": ContextIndex.term_count(searcher), "position": position,
                "head": head, "lag": max(0, head - position), **self._feed_status(),
                "last_rebuild": imeta.get("last_rebuild"),
                "rebuild": self._indexer.progress(context),
                "index_bytes": idx.size_bytes(), "path": self._indexer.shown_path(context),
                "vectors": self._vector_status(context, idx, head),
                **self._embedder_status()}

    def _embedder_status(self) -> dict:
        if self._indexer.vectors_off:
            return {"embedder": "none", "embedder_note": "the vector leg is off "
                    "(--embedder none): searches use the lexical leg"}
        return {"embedder": self._indexer.embedder.identity.label(),
                "embedder_note": getattr(self._indexer.embedder, "note", "")}

    def _vector_status(self, context: str, idx: ContextIndex, head: int) -> dict:
        """The vector leg beside the lexical one: who built it, how many, its fingerprint,
        where it is and how far behind; the vector cache's counts."""
        leg = idx.vectors
        meta = leg.meta
        status = self._indexer.vector_status(context, head)
        if status["lag"]:
            self._indexer.want_vectors(context)
        cache = self._indexer.cache_stats()
        return {"built_by": meta.get("embedder", ""), "count": leg.count,
                "dimension": leg.dimension, "fit_count": meta.get("fit_count", 0),
                "text_version": meta.get("text_version", 0),
                "fingerprint": meta.get("digest", ""), "log_bytes": meta.get("bytes", 0),
                "current": self._indexer.leg_current(leg), **status,
                "cached": cache.get("entries", 0), "cache_hits": cache.get("hits", 0),
                "cache_misses": cache.get("misses", 0)}

    def rebuild(self, context: str, *, caller: Caller, deadline: Deadline = NEVER) -> dict:
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
               evaluation: Optional[dict]) -> None:
    """`recall` for the evaluation's session, else on the whole context."""
    policy.check(m, context, caller, policy.RECALL,
                 evaluation["session"] if evaluation else policy.WHOLE)


def _viewer(m: MindView, evaluation: Optional[dict]) -> Optional[Viewer]:
    """The evaluating session's view; None for an operator's read (sees everything)."""
    return Viewer(m, evaluation["session"]) if evaluation else None


def _fetch(idx: ContextIndex, searcher, lex_query: Query,
           ranking: hybrid.Ranking) -> Callable[[int, int], list]:
    """run_search's `fetch` over a fixed ranking, continued by the rest of the lexical
    leg from the searcher that made it."""
    more = (lambda offset, count: idx.search(searcher, lex_query, offset, count)) \
        if ranking.lexical_continues else None
    return lambda offset, count: hybrid.lexical_tail(ranking.ranked, more, offset, count)


def _query_vector(embedder, query: str):
    """The query's unit vector, or None when it has nothing to embed (all zeros)."""
    v = embed_texts(embedder, [query], role=QUERY)[0]
    return v if np.any(v) else None


def _refs_of(reply: dict) -> list[str]:
    items = reply.get("results") or reply.get("nodes") or []
    return [i.get("ref") or i.get("id") for i in items]
