"""RecallCore.search's steps: authorize once, wait for the index where the search must
(its first open in this process, or the writes it names), then read one page at one
version of the store, one read view handed to every leg.

One storage reader and one authorization per search: the caller is authorized on the
view the page is read from, unless the search must wait first; then it is authorized on
a view of its own before it waits (nobody unauthorized makes the server open an index,
wait, or tell whether the context exists), and the page is read from a view opened
after the wait, at a version the index has not passed (Indexes.index's `head`).
A search that names writes the index already holds waits for nothing: one view."""
from __future__ import annotations

import time
import uuid
from typing import Callable, Optional

from opentelemetry import trace

from morphz.shared import cursor as cursors
from morphz.services.recall.core import hybrid
from morphz.services.recall.core.access import admit, viewer
from morphz.services.recall.core.legs import LexicalLeg, RankedLeg
from morphz.services.recall.core.ports import Indexes, Pinned, Pins
from morphz.services.recall.core.ranking import Rankings
from morphz.services.recall.core.request import SearchRequest
from morphz.services.recall.core.results import SearchResult
from morphz.services.recall.core.search import SearchPage, run_search
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.shared.auth import Caller
from morphz.shared.deadline import Deadline
from morphz.shared.mind.view import MindView
from morphz.shared.storage.api import Reader, Store, read_at_one_version

# Read your writes: the longest a search waits for its index to reach min_commit_seq,
# whatever the call's deadline (the reply then says what it could not close)...
MAX_WAIT_SECONDS = 5.0
# ... and of what the call's deadline leaves, the part the wait may take (the rest is
# the search's own).
DEADLINE_MARGIN = 0.8


class Searches:
    def __init__(self, store: Store, indexer: Indexes, pins: Pins, rankings: Rankings,
                 tracer: trace.Tracer, catch_up: Callable[[str, bool], None]) -> None:
        """`catch_up(context, search)`: applies the feed changes held back for the
        context, before its index is read."""
        self._store = store
        self._indexer = indexer
        self._pins = pins  # search snapshots kept for their cursors (RECALL-03)
        self._rankings = rankings
        self._tracer = tracer
        self._catch_up = catch_up

    def search(self, req: SearchRequest, caller: Caller, deadline: Deadline) -> SearchResult:
        """The page `req` asks for (RecallCore.search says what it answers)."""
        context = req.context
        admitted = False
        if not self._indexer.is_open(context):  # its first search in this process
            admitted = self._admit(req, caller)  # authorized before it waits
            self._indexer.opened(context, deadline)
        with self._tracer.start_as_current_span("recall.search") as span:
            # Counts, never the words: a query's text stays out of spans.
            span.set_attribute("morphz.context", context)
            span.set_attribute("morphz.search.terms", len(req.terms))
            span.set_attribute("morphz.limit", req.limit)
            # A next page reads the first one's view, waiting for none.
            if req.min_commit_seq and not req.cursor and not self._holds_writes(req):
                admitted = admitted or self._admit(req, caller)  # before any work
                self._wait(req, deadline)
            return read_at_one_version(self._store, context, lambda reader: self._page(
                reader, req, caller if not admitted else None, span))

    def _admit(self, req: SearchRequest, caller: Caller) -> bool:
        """Authorize the search on a view of its own (one that will wait); True."""
        with self._store.reader(req.context) as reader:
            m = MindView(reader)
            admit(m, req.context, caller, req.evaluation)
            m.require_meta(req.context)
        return True

    def _holds_writes(self, req: SearchRequest) -> bool:
        """Whether the index already holds min_commit_seq in each leg the search reads
        (read from the index alone: nothing the caller is told)."""
        context, target = req.context, req.min_commit_seq
        if self._indexer.index(context).snapshot()[1].get("position", 0) < target:
            return False
        if not (req.reads_vectors and self._rankings.vectors_wanted(context, req.asked_mode)):
            return True
        return self._indexer.vector_status(context, target).lag == 0

    def _wait(self, req: SearchRequest, deadline: Deadline) -> None:
        """Index the context up to min_commit_seq (and its vector leg, when the search
        reads it), within MAX_WAIT_SECONDS and part of what the deadline leaves."""
        context, target = req.context, req.min_commit_seq
        left = deadline.remaining()
        wait = MAX_WAIT_SECONDS if left is None else min(MAX_WAIT_SECONDS,
                                                         left * DEADLINE_MARGIN)
        give_up = time.monotonic() + max(0.0, wait)
        # Indexed here rather than waited for: the follower may be resting or busy with
        # other contexts (the held changes first, then the feed's).
        self._catch_up(context, True)
        self._indexer.index_up_to(context, target, give_up)
        if req.reads_vectors and self._rankings.vectors_wanted(context, req.asked_mode):
            self._indexer.vectors_up_to(context, target, give_up)

    def _page(self, reader: Reader, req: SearchRequest, caller: Optional[Caller],
              span: trace.Span) -> SearchResult:
        """The page at the reader's version (`caller`: to authorize, None if done)."""
        context = req.context
        m = MindView(reader)
        if caller is not None:
            admit(m, context, caller, req.evaluation)
        m.require_meta(context)
        self._catch_up(context, True)
        idx = self._indexer.index(context, head=reader.commit_seq)
        params = _cursor_params(req)
        snapshot, ranking, version, start = self._resumed(req, idx, params)
        position = snapshot[1].get("position", 0)
        lexical = LexicalLeg(idx, snapshot[0], req.lexical_query())
        leg = lexical
        # (a next page without a kept ranking: its first page was lexical only)
        if ranking is None and not req.cursor and req.reads_vectors and \
                (req.asked_mode or self._rankings.vectors_answer(idx)):
            ranking, empty_reason = self._rankings.ranking(m, req, idx, lexical)
            leg = RankedLeg(ranking, lexical, empty_reason)
            version = f"p{position}-h{uuid.uuid4().hex[:12]}"
        elif ranking is not None:
            leg = RankedLeg(ranking, lexical, lexical.empty_reason)
        seen = viewer(m, req.evaluation)
        page = run_search(m, req, leg, start, seen.sees_seq if seen else None)
        span.set_attribute("morphz.results", len(page.hits))
        span.set_attribute("morphz.index_position", position)
        next_cursor = ""
        if page.next_offset is not None:
            next_cursor = cursors.encode("search", params, version, page.next_offset)
            self._pins.keep(context, version, Pinned(snapshot, ranking))
        return self._result(req, reader.commit_seq, position, page, start, next_cursor)

    def _resumed(self, req: SearchRequest, idx: ContextIndex, params: dict
                 ) -> tuple[tuple, Optional[hybrid.Ranking], str, int]:
        """(index snapshot, kept ranking, version, raw offset) a page starts from: the
        live index's for a first page; a next page's from what answered the first."""
        snapshot, ranking = idx.snapshot(), None
        if req.cursor:
            pinned = self._pins.get(req.context, cursors.version_of(req.cursor))
            if pinned is not None:
                snapshot, ranking = pinned.snapshot, pinned.ranking
        # A fused ranking's pages name it: without it kept, its cursor is stale.
        version = cursors.version_of(req.cursor) if ranking is not None else \
            f"p{snapshot[1].get('position', 0)}"
        start = cursors.decode(req.cursor, "search", params, version) if req.cursor else 0
        return snapshot, ranking, version, start

    def _result(self, req: SearchRequest, head: int, position: int, page: SearchPage,
                start: int, next_cursor: str) -> SearchResult:
        """The reply: the page, and where each leg stands against the store's `head`."""
        vector_position = vector_lag = None
        if req.mode != "lexical":  # the vector leg follows on its own: its own lag
            vec = self._indexer.vector_status(req.context, head)
            vector_position, vector_lag = vec.position, vec.lag
            if vec.lag:
                self._indexer.want_vectors(req.context)
        return SearchResult(
            results=page.hits, next_cursor=next_cursor, index_position=position,
            lag=max(0, head - position), unclosed_lag=max(0, req.min_commit_seq - position),
            empty=page.empty if not page.hits and not start else "",
            vector_position=vector_position, vector_lag=vector_lag,
            observation_ref=None if req.evaluation is not None else "")


def _cursor_params(req: SearchRequest) -> dict:
    """What the search's cursors bind: pages of one causal scope's evidence set."""
    return req.cursor_params(req.evaluation.session if req.evaluation is not None else None)
