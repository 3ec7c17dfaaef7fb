"""Keeps each context's derived index in step with the authoritative store.

`apply` indexes a context's entries of the storage change feed (each names the events
and frames one commit wrote) and writes the context version it reached in the same
index commit (tantivy_index.py), so an entry the index already holds is skipped.
`rebuild` builds a fresh index from one consistent snapshot of events and frames and
swaps it in; it only reads the authoritative store.

The vector leg (index/vector_index.py) follows the lexical one on its own and keeps
its own position: a lexical write never waits for an embedding. `apply_vectors`
(vector_upkeep.py) takes the context's changes past the leg's position (up to the
lexical position), embeds their texts (embedcache.py: each distinct text once, from the
vector cache when it holds it, else in the embedding worker process) and commits them
at the version of the last; the vector follower (vectorfollow.py) runs it for each
context a write made due. Without a follower (tests, tools) it runs right after each
lexical write. `rebuild` builds the lexical leg and starts an empty vector leg fitted on
the context's text, at version 0; the vector leg then fills from the cache, embedding
only texts it lacks. An index whose documents hold older texts (its lexical meta's
text_version, documents.TEXT_VERSION, older or absent) is rebuilt in the background the
first time this process uses it; meanwhile it answers as it is (search drops what is no
longer indexed when it resolves a hit).

Its parts, each a file of one job: applying the feed's changes (index_apply.py), the
rebuilds (index_rebuild.py); here the index's opening, the vector leg's upkeep as the
core sees it, erasure and deletion, and reading one's writes.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from datetime import datetime, timezone
from typing import Callable, Optional

from opentelemetry import trace

from morphz.shared.process.telemetry import NO_TRACING

from morphz.services.recall.core.ports import VectorPosition
from morphz.services.recall.runtime.embedworkers import EmbedWorkers
from morphz.services.recall.runtime.fitpool import Fitter
from morphz.services.recall.runtime.index_apply import ERASURE_PENDING, ChangeApplying
from morphz.services.recall.runtime.index_rebuild import Rebuilding
from morphz.services.recall.runtime.index_reads import texts_current
from morphz.services.recall.runtime.vector_upkeep import VECTOR_STEP, VectorUpkeep
from morphz.services.recall.embedding.api import QUERY, Embedder, embed_texts
from morphz.services.recall.embedding.hashing import HashingEmbedder
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.services.recall.index.vector_cache import CacheStats, VectorCache
from morphz.services.recall.index.vector_index import VectorLeg
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.storage.api import Store

_log = logging.getLogger("morphz.recall.indexer")
# Read your writes: between pulls while nothing can be indexed (a rebuild runs), and the
# changes a search embeds at a time while it waits for the vector leg (a step's embedding
# is not interrupted: small, so the wait ends close to its bound).
WAIT_STEP_SECONDS = 0.02
SEARCH_VECTOR_STEP = 16
# A search waiting for its index to open looks at its deadline and caller this often.
OPEN_WAIT_SLICE = 0.1


class Indexer(ChangeApplying, Rebuilding):
    """A context's index kept up to date: the core's `Indexes` (core/ports.py)."""

    def __init__(self, store: Store, indexes: IndexDirectory, *,
                 embedder: Optional[Embedder] = None,
                 tracer: Optional[trace.Tracer] = None,
                 fitter: Optional[Fitter] = None,
                 cache: Optional[VectorCache] = None,
                 embed_workers: Optional[EmbedWorkers] = None,
                 vectors_due: Optional[Callable[[str], None]] = None,
                 vectors_off: bool = False,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
                 rebuild_read_chunk: Optional[int] = None) -> None:
        """`fitter`: where the embedder's fits run (wiring.py gives one with a worker
        process; by default every fit runs in this process). `cache`: vectors kept
        across rebuilds; `embed_workers`: where the vector leg's texts are embedded (by
        default in this process); `vectors_due(context)`: tells the vector follower a
        context's vector leg has work (None: apply_vectors runs after each write);
        `rebuild_read_chunk`: events per read transaction of a rebuild, each one a look
        at the call's deadline (None: REBUILD_READ_CHUNK). `vectors_off`: no vector leg
        at all (`--embedder none`): nothing is embedded, started or followed."""
        self._store = store
        self._indexes = indexes
        self.embedder: Embedder = embedder or HashingEmbedder()  # wiring.py picks one
        self._fitter = fitter or Fitter(in_worker_min=None)
        self._vectors_due = vectors_due
        self.vectors_off = vectors_off
        self._tracer = tracer or NO_TRACING
        self._vectors = VectorUpkeep(
            store, self.embedder, index=self.index, position=self.position,
            event_records=lambda context, events: self._event_records(context, events),
            tracer=self._tracer, fitter=self._fitter, cache=cache,
            embed_workers=embed_workers, rebuild_read_chunk=rebuild_read_chunk)
        self._clock = clock
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._progress: dict[str, dict] = {}
        self._deleted: set[str] = set()  # contexts whose deletion the feed brought last
        self._rebuild_read_chunk = rebuild_read_chunk
        self._outdated: set[str] = set()  # contexts whose older-text rebuild was begun
        self._purging: set[str] = set()  # contexts whose post-erasure rebuild runs

    def _lock(self, context: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(context, threading.Lock())

    def _vlock(self, context: str) -> threading.Lock:
        """The vector leg's (taken after the context lock where both are held)."""
        return self._vectors.lock(context)

    def index(self, context: str, head: Optional[int] = None) -> ContextIndex:
        """`head`: the context's version as the caller reads it; an index past it is of a
        context deleted since whose name was made again before the follower took the
        deletion (PRIV-05): dropped, and a new one begun. (One that has not reached the
        old version yet is dropped when the follower takes the deletion, at once.)"""
        idx = self._indexes.get(context)
        meta = idx.snapshot()[1]
        if head is not None and meta.get("position", 0) > head:
            self._dropped(context)
            idx = self._indexes.get(context)
            meta = idx.snapshot()[1]
        if not texts_current(meta):
            self._rebuild_outdated(context)
        elif meta.get(ERASURE_PENDING) and context not in self._purging:
            self._purge(context)  # left pending by a process that stopped before its swap
        return idx

    def is_open(self, context: str) -> bool:
        return self._indexes.is_open(context)

    def opened(self, context: str, deadline: Deadline = NEVER) -> ContextIndex:
        """The context's index, waiting for an open under way (the opener's at start, or
        another request's) no longer than `deadline` allows: DEADLINE_EXCEEDED, or
        CANCELLED once its caller has gone (looked at every OPEN_WAIT_SLICE)."""
        while True:
            deadline.check(f"waiting for the recall index of {context} to open")
            left = deadline.remaining()
            try:
                idx = self._indexes.get(context, OPEN_WAIT_SLICE if left is None
                                        else max(0.0, min(left, OPEN_WAIT_SLICE)))
                break
            except TimeoutError:
                continue
        if not texts_current(idx.snapshot()[1]):
            self._rebuild_outdated(context)
        return idx

    def open(self, context: str) -> dict:
        """Open the context's index and vector leg, and ready the leg's embedder (its
        fitted state restored, a model loaded by a first query), so that the first
        search pays none of it (runtime/opener.py, at start). What was opened."""
        idx = self.index(context)
        leg = idx.vectors
        if not self.vectors_off and self.leg_current(leg):
            embed_texts(self.leg_embedder(context, leg), ["warm up"], role=QUERY)
        counts = ContextIndex.counts(idx.snapshot()[0])
        return {"documents": counts["events"] + counts["frames"],
                "vectors": leg.count if leg.exists else 0}
    def position(self, context: str) -> int:
        """The context version (commit_seq) the live index holds (kept with its commits)."""
        return self.index(context).snapshot()[1].get("position", 0)

    def shown_path(self, context: str) -> str:
        """The live index's folder as a reply shows it: relative to the data folder
        (the index root's parent), never the server's absolute path."""
        return os.path.relpath(self.index(context).path, os.path.dirname(self._indexes.root))

    # -- the vector leg (vector_upkeep.py) ---------------------------------------------------
    def leg_current(self, leg: VectorLeg) -> bool:
        """Whether the leg was built by this server's embedder over today's texts."""
        return self._vectors.leg_current(leg)

    def leg_embedder(self, context: str, leg: VectorLeg) -> Embedder:
        """This server's embedder as fitted for the leg (its stored state restored)."""
        return self._vectors.leg_embedder(context, leg)

    def vector_status(self, context: str, head: int) -> VectorPosition:
        """The vector leg's position and lag behind `head` (the store's version)."""
        if self.vectors_off:  # no leg to be behind
            return VectorPosition(0, 0)
        leg = self.index(context).vectors
        position = leg.position if leg.committed else 0
        return VectorPosition(position, max(0, head - position))

    def vector_pace(self) -> tuple[int, float]:
        """(the processes the vector leg embeds in, documents a second it covered lately)."""
        if self.vectors_off:
            return 0, 0.0
        return self._vectors.embed_workers, self._vectors.pace.per_second()

    def cache_stats(self) -> CacheStats:
        return self._vectors.cache_stats()

    def want_vectors(self, context: str) -> None:
        """Have the vector follower look at the context (a restart leaves legs behind
        that no new write names)."""
        if self._vectors_due is not None and not self.vectors_off:
            self._vectors_due(context)

    def apply_vectors(self, context: str, step: int = VECTOR_STEP) -> int:
        """One step of the context's vector leg behind its lexical leg: the changes past
        the leg's position, up to the lexical position (about `step` events and frames),
        embedded, appended and committed at the version of the last. Returns how many
        changes it took (0: caught up, or a stale leg, left as it is)."""
        if self.vectors_off or self._gone(context):
            return 0
        return self._vectors.apply_vectors(context, step)

    def try_apply_vectors(self, context: str, step: int = VECTOR_STEP) -> Optional[int]:
        """apply_vectors, unless a step of the leg is under way (None): a caller bound
        by a deadline (a search reading its writes) never waits for one."""
        if self.vectors_off or self._gone(context):
            return 0
        return self._vectors.try_apply_vectors(context, step)

    def _gone(self, context: str) -> bool:
        """Whether the context was deleted since its changes were last indexed (a vector
        step would open an index for it again): known from the feed, no store read."""
        return context in self._deleted
    # -- erasure (docs/privacy.md) ----------------------------------------------------------
    def _erase(self, context: str, idx: ContextIndex, keys: set[str]) -> None:
        """What an erasure leaves to this index, once the lexical write of its change
        committed (that write replaced the erased documents with what is left): their
        vectors out of the vector leg and its files, what the vector cache holds of them,
        then a rebuild of the whole index (_purge), since tantivy keeps a replaced
        document's terms in its segment files until they merge, and no call merges them."""
        if not self.vectors_off and idx.vectors.exists:
            with self._vlock(context):
                dropped = self._vectors.erase(context, idx.vectors, keys)
            _log.info("%s: an erasure took %d index keys; %d vector cache entries dropped",
                      context, len(keys), dropped)
        self._purge(context)

    def _dropped(self, context: str) -> None:
        """A deleted context (PRIV-05): what the vector cache holds of its texts goes, then
        its index's folders (every generation, both legs)."""
        self._deleted.add(context)
        with self._lock(context), self._vlock(context):
            idx = self._indexes.get(context)
            if not self.vectors_off and idx.vectors.exists:
                self._vectors.erase(context, idx.vectors, set(idx.vectors.live_keys()))
            self._indexes.reset([context])
            self._progress.pop(context, None)
        _log.info("%s: the context was deleted; its index and vectors are gone", context)
    def _vectors_follow(self, context: str) -> None:
        """After a lexical write: the vector follower's turn, or the leg's steps now."""
        if self.vectors_off:
            return
        if self._vectors_due is not None:
            self._vectors_due(context)
            return
        while self.apply_vectors(context):
            pass

    # -- reading one's writes (RECALL-13) -----------------------------------------------------
    def index_up_to(self, context: str, target: int, give_up: float) -> None:
        """Read your writes (RECALL-13): apply the context's feed here until its index
        reaches `target`, or until `give_up` (monotonic); the feed holds every commit the
        context made (what a rebuild skips, its swap takes)."""
        while self.position(context) < target:
            left = give_up - time.monotonic()
            if left <= 0:
                return
            if not self.catch_up(context):  # a rebuild, or not committed yet
                time.sleep(min(WAIT_STEP_SECONDS, left))

    def vectors_up_to(self, context: str, target: int, give_up: float) -> None:
        """The vector leg's part of reading one's writes: embed the context's changes up
        to `target` (and the lexical leg's position) here, a few at a time, until
        `give_up`; while the vector follower steps the leg, wait for it. What is left
        shows as a search's vector_position and vector_lag."""
        while True:
            want = min(target, self.position(context))
            if self.vector_status(context, want).lag == 0:
                return
            left = give_up - time.monotonic()
            if left <= 0:
                return
            if not self.try_apply_vectors(context, SEARCH_VECTOR_STEP):
                time.sleep(min(WAIT_STEP_SECONDS, left))

    def catch_up(self, context: str) -> int:
        """Pull and apply one page of the context's own feed after the index's position
        (the follower does this for every context from one feed; tests call it to index
        synchronously). Returns how many entries were applied."""
        page = self._store.changes(self.position(context), context=context)
        return self.apply(context, page.changes)
