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
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Optional

from opentelemetry import trace

from morphz.shared.process.telemetry import NO_TRACING

from morphz.services.recall.core.documents import (
    TEXT_VERSION, event_doc, event_key, event_text, frame_doc, frame_key, frame_text, indexed)
from morphz.services.recall.runtime import index_reads
from morphz.services.recall.runtime.embedworkers import EmbedWorkers
from morphz.services.recall.runtime.fitpool import Fitter
from morphz.services.recall.runtime.index_reads import (
    APPLY_BYTES, READ_AHEAD_BYTES, REBUILD_READ_CHUNK, change_chunks, frame_changers,
    frame_changers_upto, skipping_damaged, texts_current)
from morphz.services.recall.runtime.tokenpool import event_batches
from morphz.services.recall.runtime.vector_upkeep import VECTOR_STEP, VectorUpkeep
from morphz.services.recall.embedding.api import QUERY, Embedder, embed_texts
from morphz.services.recall.embedding.hashing import HashingEmbedder
from morphz.services.recall.index.tantivy_index import ContextIndex, Doc, IndexDirectory
from morphz.services.recall.index.vector_cache import VectorCache
from morphz.services.recall.index.vector_index import VectorLeg
from morphz.shared.mind.bulk import prefetch_changes
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import Store
from morphz.shared.storage.feed import Change


def erased_keys(change: Change) -> set[str]:
    """The index keys a change's erasure rewrote (of a frame: any of its versions)."""
    return {event_key(s) for s in change.erased} | {frame_key(f) for f in change.erased_frames}

_log = logging.getLogger("morphz.recall.indexer")
# In an index's meta: the commit_seq of an erasure whose earlier content its files may
# still hold, until the rebuild that rewrites them swaps in (Indexer._purge).
ERASURE_PENDING = "erasure_pending"
REBUILD_HEAP = 256 << 20
# Read your writes: between pulls while nothing can be indexed (a rebuild runs), and the
# changes a search embeds at a time while it waits for the vector leg (a step's embedding
# is not interrupted: small, so the wait ends close to its bound).
WAIT_STEP_SECONDS = 0.02
SEARCH_VECTOR_STEP = 16
SUPERSEDED_CHECK = 1000  # events read between looks at whether a rebuild began
# (REBUILD_READ_CHUNK, READ_AHEAD_BYTES, APPLY_BYTES: index_reads.py, named here for the
# lexical leg's reads.)
# A search waiting for its index to open looks at its deadline and caller this often.
OPEN_WAIT_SLICE = 0.1


@dataclass
class _Part:
    """What an application gathered for its next index write."""
    docs: dict[str, Doc] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    text_bytes: int = 0
    changes: int = 0  # changes gathered
    erased: set[str] = field(default_factory=set)  # keys an erasure in them rewrote

    def add(self, key: str, doc: Doc, text: str) -> None:
        self.docs[key] = doc
        self.text_bytes += len(text)


class Indexer:
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

    def _rebuild_outdated(self, context: str) -> None:
        """Begin, once per process, the rebuild of an index built from older texts."""
        with self._locks_guard:
            if context in self._outdated:
                return
            self._outdated.add(context)
        _log.info("%s: the recall index holds texts of an older version; rebuilding", context)
        threading.Thread(target=self._rebuild_quietly, args=(context,), daemon=True,
                         name="recall-rebuild-outdated").start()

    def _rebuild_quietly(self, context: str) -> None:
        try:
            self.rebuild(context)
        except Exception:  # noqa: BLE001 - derived data: `recall-index rebuild` remains
            _log.warning("%s: rebuilding an index of older texts failed", context,
                         exc_info=True)

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

    def vector_status(self, context: str, head: int) -> dict:
        """The vector leg's position and lag behind `head` (the store's version)."""
        if self.vectors_off:  # no leg to be behind
            return {"position": 0, "lag": 0}
        leg = self.index(context).vectors
        position = leg.position if leg.committed else 0
        return {"position": position, "lag": max(0, head - position)}

    def vector_pace(self) -> tuple[int, float]:
        """(the processes the vector leg embeds in, documents a second it covered lately)."""
        if self.vectors_off:
            return 0, 0.0
        return self._vectors.embed_workers, self._vectors.pace.per_second()

    def cache_stats(self) -> dict:
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

    def _lexical_docs(self, context: str, events: int,
                      changed_by: list[tuple[R.Frame, Optional[R.Event]]],
                      deadline: Deadline = NEVER):
        """One pass over events 0..events-1, then the frames (each with the event that
        last changed it): their lexical documents."""
        prog = self._progress.get(context) or {}
        damaged = 0
        for b in event_batches(self._event_records(context, events, deadline=deadline),
                               events,
                               base=self.embedder, fitted=None, lexical=True,
                               worker=self._fitter):
            damaged += b.damaged
            if prog.get("running"):
                prog["done"] += len(b.vec_docs) + b.damaged + b.skipped
                deadline.advanced(prog["done"], prog["total"])
            yield from b.docs
        if damaged:
            _log.warning("%s: %d events do not decode; not indexed", context, damaged)
        for f, ev in changed_by:
            if prog.get("running"):
                prog["done"] += 1
            yield frame_doc(f, ev)

    def progress(self, context: str) -> dict:
        return dict(self._progress.get(context) or {"running": False, "done": 0, "total": 0})

    # -- incremental ----------------------------------------------------------------------
    def apply(self, context: str, changes: list[Change]) -> int:
        """Index one context's feed entries (in commit order); those the index already
        holds are skipped, and those it never saw before them (commit_seq counts every
        commit of a context: a hole is a rebuild that died after the follower had left
        them to it) are read from the context's own feed first. While a rebuild of the
        context runs, nothing: its swap catches up from the version it read (indexing
        into the index it replaces would be work thrown away, and slows it down).
        Returns how many were applied."""
        gone = [i for i, c in enumerate(changes) if c.deleted]
        if gone:  # the context was deleted: what came before it goes with it
            self._dropped(context)
            changes = changes[gone[-1] + 1:]
            if not changes:
                return 0
        self._deleted.discard(context)  # (made again under its name, if it was)
        with self._lock(context):
            if self._rebuilding(context):
                return 0
            position = self.position(context)
            fresh = [c for c in changes if c.commit_seq > position]
            if not fresh:
                return 0
            applied = 0
            while fresh[0].commit_seq > position + 1:
                hole = [c for c in self._store.changes(position, context=context).changes
                        if c.commit_seq < fresh[0].commit_seq]
                if not hole:
                    break
                applied += self._apply_locked(context, hole)
                position = hole[-1].commit_seq
            return applied + self._apply_locked(context, fresh)

    def _rebuilding(self, context: str) -> bool:
        return bool(self._progress.get(context, {}).get("running"))

    def _apply_locked(self, context: str, fresh: list[Change]) -> int:
        """apply() of changes past the index's position, its context lock held: a chunk
        of changes at a time (their rows read in one round trip), written to the index
        once the documents gathered reach APPLY_BYTES of text, and at the end; each write
        records the version of the last change it covers. A backlog of large events is
        indexed in several writes instead of held whole. Given up when a rebuild of the
        context starts meanwhile (a first application can be long: a whole backlog
        read, tokenized, fitted on), and the rebuild covers the rest. Returns how many
        changes were written."""
        idx = self.index(context)
        written = 0
        # Each row as it is now (no snapshot held): a frame read past these changes is
        # what the index should hold anyway, and the later change indexes it again.
        with self._tracer.start_as_current_span("recall.index_apply") as span, \
                self._store.latest(context) as reader:
            m = MindState(reader)
            part = _Part()
            for chunk in change_chunks(fresh, SUPERSEDED_CHECK):
                if self._rebuilding(context):
                    return written
                m.forget_prefetched()
                changed = frame_changers(chunk)
                prefetch_changes(m, [s for c in chunk for s in c.events]
                                 + [e for e in changed.values() if e is not None],
                                 changed, max_bytes=READ_AHEAD_BYTES)
                start = 0  # the chunk's changes whose frames are not gathered yet
                for i, change in enumerate(chunk):
                    for seq in change.events:
                        self._gather_event(context, m, seq, part)
                    part.changes += 1
                    part.erased.update(erased_keys(change))
                    if part.text_bytes >= APPLY_BYTES or change is fresh[-1]:
                        self._gather_frames(context, m, frame_changers(chunk[start:i + 1]),
                                            part)
                        if not self._write(context, idx, m, part, change):
                            return written
                        written += part.changes
                        part, start = _Part(), i + 1
                        m.forget_prefetched()
                if start < len(chunk):  # the whole chunk's, unless a write cut it
                    self._gather_frames(context, m, changed if start == 0
                                        else frame_changers(chunk[start:]), part)
            span.set_attribute("morphz.changes", len(fresh))
        return written

    def _gather_event(self, context: str, m: MindState, seq: int, part: "_Part") -> None:
        with skipping_damaged(context, event_key(seq)):
            ev = m.event(seq)
            if ev is None or not indexed(ev.kind):  # moved aside by a repair; not indexed
                part.deletes.append(event_key(seq))
            else:
                part.add(event_key(seq), event_doc(ev), event_text(ev))

    def _gather_frames(self, context: str, m: MindState, changed: dict[str, Optional[int]],
                       part: "_Part") -> None:
        for fid, changer in changed.items():
            with skipping_damaged(context, frame_key(fid)):
                f = m.frame(fid)
                if f is None:  # gone (rolled back): drop it from the index too
                    part.deletes.append(frame_key(fid))
                else:
                    ev = m.event(changer) if changer is not None else None
                    part.add(frame_key(fid), frame_doc(f, ev), frame_text(f))

    def _write(self, context: str, idx: ContextIndex, m: MindState, part: "_Part",
               last: Change) -> bool:
        """One index commit of what `part` gathered, at `last`'s version; False (nothing
        written) when a rebuild of the context began."""
        if self._rebuilding(context):
            return False
        old_meta = idx.snapshot()[1]
        # A new index holds today's texts; an older one keeps saying it does not.
        meta = dict(old_meta or {"text_version": TEXT_VERSION}, context=context,
                    position=last.commit_seq)
        meta.pop("vectors", None)  # (an older index's: the leg's HEAD names it now)
        if part.erased:  # until a rebuild's files replace these (self._purge)
            meta[ERASURE_PENDING] = last.commit_seq
        idx.apply(part.docs.values(), meta, deletes=part.deletes)
        if part.erased:
            self._erase(context, idx, part.erased)
        self._vectors_follow(context)
        return True

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

    def _purge(self, context: str) -> None:
        """Rebuild the context's index in the background, so that no file of it keeps
        what an erasure took: the new generation is built from the store as it is now,
        and the old one's files are removed at the swap. Its meta says ERASURE_PENDING
        until then (`recall-index inspect`: erasure_pending). One at a time: a rebuild
        under way whose read came before the erasure catches the change up after its
        swap, which purges again."""
        with self._locks_guard:
            if context in self._purging or self._progress.get(context, {}).get("running"):
                return
            self._purging.add(context)

        def run() -> None:
            try:
                self.rebuild(context)
            except Exception as e:  # noqa: BLE001 - the next use of the index purges again
                if getattr(e, "reason", "") == "CONTEXT_NOT_FOUND":
                    # Deleted since: its index goes whole when the feed brings the deletion.
                    _log.info("%s: deleted before its index was rewritten", context)
                else:
                    _log.warning("%s: rewriting the index after an erasure failed", context,
                                 exc_info=True)
            finally:
                with self._locks_guard:
                    self._purging.discard(context)
        threading.Thread(target=run, daemon=True, name="recall-erasure-purge").start()

    def _vectors_follow(self, context: str) -> None:
        """After a lexical write: the vector follower's turn, or the leg's steps now."""
        if self.vectors_off:
            return
        if self._vectors_due is not None:
            self._vectors_due(context)
            return
        while self.apply_vectors(context):
            pass

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
            if self.vector_status(context, want)["lag"] == 0:
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

    def _catch_up_locked(self, context: str) -> int:
        """Every change of the context's own feed past the index's position, a page at a
        time (the context lock held: what the follower left to a rebuild)."""
        applied = 0
        while True:
            page = self._store.changes(self.position(context), context=context).changes
            if not page:
                return applied
            applied += self._apply_locked(context, page)

    # -- rebuild ----------------------------------------------------------------------------
    def rebuild(self, context: str, deadline: Deadline = NEVER) -> dict:
        """Build a new index from one snapshot of events and frames, then swap it in.
        Past `deadline` (looked at between read chunks and before the swap) it stops
        with DEADLINE_EXCEEDED / CANCELLED, its new generation removed and the live
        index untouched (SEC-07)."""
        with self._locks_guard:  # check and claim together: one rebuild per context
            if self._progress.get(context, {}).get("running"):
                raise MorphzError("RECALL_REBUILD_RUNNING", f"a rebuild of {context} is "
                                  "running", context=context)
            self._progress[context] = {"running": True, "done": 0, "total": 0}
        started = time.monotonic()
        fresh: Optional[ContextIndex] = None
        swapped = False
        try:
            with self._tracer.start_as_current_span("recall.rebuild"):
                # One short snapshot for what can change (the frames, the version); the
                # events below it never change, so they are read afterwards in chunks,
                # each in its own short read transaction: a long one would keep LMDB from
                # reusing freed pages and hold off a map growth for the whole rebuild.
                with self._store.reader(context) as reader:
                    m = MindState(reader)
                    events = m.require_meta(context).next_seq
                    head = reader.commit_seq
                    frames = list(m.frames())
                times = frame_changers_upto(self._store, context, head) if frames else {}
                with self._store.reader(context) as reader:
                    m = MindState(reader)
                    changed_by = [(f, m.event(times[f.id]) if times.get(f.id) is not None
                                   else None) for f in frames]
                fresh = self._indexes.fresh(context)
                self._progress[context]["total"] = events + len(frames)
                count = fresh.apply(self._lexical_docs(context, events, changed_by, deadline),
                                    {"context": context, "position": head,
                                     "text_version": TEXT_VERSION},
                                    heap=REBUILD_HEAP, threads=2, fresh=True)
                # The vector leg starts over empty, at version 0, fitted on the context's
                # text; it follows on its own (from the cache, for the texts it holds).
                if not self.vectors_off:
                    self._vectors.start_leg(context, fresh.vectors, self._vectors.fit_sample(
                        context, events, frames, deadline))
                    fresh.vectors.commit(0)
            info = {"at": self._clock().isoformat(timespec="seconds"),
                    "duration_ms": int((time.monotonic() - started) * 1000), "documents": count}
            with self._lock(context), self._vlock(context):  # no vector step on the old
                deadline.check("the rebuild")  # the last moment the caller may give up
                fresh.apply((), {"context": context, "position": head, "last_rebuild": info,
                                 "text_version": TEXT_VERSION})
                self._indexes.swap(context, fresh)
                swapped = True
            return info
        finally:
            if fresh is not None and not swapped:  # stopped or failed: the live one stays
                self._indexes.discard(context, fresh)
            with self._lock(context):
                self._progress[context]["running"] = False
                try:  # the changes the follower left to this rebuild (or, failed, to none)
                    self._catch_up_locked(context)
                    self._vectors_follow(context)
                except Exception:  # noqa: BLE001 - the next apply fills the hole it leaves
                    _log.warning("%s: catching up after the rebuild failed", context,
                                 exc_info=True)

    def _event_records(self, context: str, events: int, chunk: int = 0,
                       deadline: Deadline = NEVER):
        """The stored bytes of events 0..events-1, a chunk per read transaction (of
        `chunk` events or READ_AHEAD_BYTES, whichever comes first), `deadline` looked
        at before each."""
        return index_reads.event_records(
            self._store, context, events, chunk or self._rebuild_read_chunk or REBUILD_READ_CHUNK,
            READ_AHEAD_BYTES, deadline)
