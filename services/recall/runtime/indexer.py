"""Keeps each context's derived index in step with the authoritative store.

`apply` indexes a context's entries of the storage change feed (each names the events
and frames one commit wrote) and writes the context version it reached in the same
index commit (tantivy_index.py), so an entry the index already holds is skipped.
`rebuild` builds a fresh index from one consistent snapshot of events and frames and
swaps it in; it only reads the authoritative store.

The vector leg (index/vector_index.py) follows the lexical one on its own and keeps
its own position: a lexical write never waits for an embedding. `apply_vectors` takes
the context's changes past the leg's position (up to the lexical position), embeds
their texts (embedcache.py: each distinct text once, from the vector cache when it
holds it, else in the embedding worker process) and commits them at the version of the
last; the vector follower (vectorfollow.py) runs it for each context a write made due.
Without a follower (tests, tools) it runs right after each lexical write. `rebuild`
builds the lexical leg and starts an empty vector leg fitted on the context's text, at
version 0; the vector leg then fills from the cache, embedding only texts it lacks.
A leg built by another embedder identity is left as it is, never extended with vectors
of this one: searches refuse it as stale until a rebuild. An index whose documents hold
older texts (its lexical meta's text_version, documents.TEXT_VERSION, older or absent) is
rebuilt in the background the first time this process uses it; meanwhile it answers as
it is (search drops what is no longer indexed when it resolves a hit).
Refitting (embedders learned from the context's text): at a rebuild, and whenever the
leg has grown to REFIT_GROWTH times what its fit saw, the embedder is fitted again on
every current text and the leg re-embedded into a new log (amortized linear work).
"""
from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable, Optional

from opentelemetry import trace

from morphz.shared.telemetry import NO_TRACING

from morphz.services.recall.core.documents import (
    TEXT_VERSION, event_doc, event_key, event_text, frame_doc, frame_key, frame_text,
    indexed, raw_event_text)
from morphz.services.recall.runtime.embedcache import LegEmbedder
from morphz.services.recall.runtime.fitpool import Fitter
from morphz.services.recall.core.timeparse import event_time_us
from morphz.services.recall.runtime.tokenpool import analyze, event_batches
from morphz.services.recall.embedding.api import QUERY, Embedder, embed_texts
from morphz.services.recall.embedding.hashing import HashingEmbedder
from morphz.services.recall.index.tantivy_index import ContextIndex, Doc, IndexDirectory
from morphz.services.recall.index.vector_cache import VectorCache
from morphz.services.recall.index.vector_index import VecDoc, VectorLeg
from morphz.shared.mind.bulk import (decode_event, event_records, event_run,
                                     prefetch_changes)
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import Change, Store

_log = logging.getLogger("morphz.recall.indexer")
REBUILD_HEAP = 256 << 20
REBUILD_READ_CHUNK = 8000  # events per read transaction of a rebuild
EMBED_BATCH = 1000
VECTOR_STEP = 2000  # events and frames a step of the vector leg takes at most
# Read your writes: between pulls while nothing can be indexed (a rebuild runs), and the
# changes a search embeds at a time while it waits for the vector leg (a step's embedding
# is not interrupted: small, so the wait ends close to its bound).
WAIT_STEP_SECONDS = 0.02
SEARCH_VECTOR_STEP = 16
FIT_SAMPLE = 20000  # texts a (re)fit sees at most: evenly spaced events, then frames
FIT_SAMPLE_CHARS, FIT_TEXT_CHARS = 64 << 20, 4096  # what a fit's sample holds at most
REFIT_GROWTH, REFIT_MIN = 2, 256
SUPERSEDED_CHECK = 1000  # events read between looks at whether a rebuild began
# An application's bounds on what it holds: rows read ahead per chunk, and the text of
# the documents gathered before they are written (a commit's rows may pass each once).
READ_AHEAD_BYTES = 16 << 20
APPLY_BYTES = 32 << 20
# A search waiting for its index to open looks at its deadline and caller this often.
OPEN_WAIT_SLICE = 0.1


def texts_current(meta: dict) -> bool:
    """Whether an index's documents hold today's texts (an empty index holds none)."""
    return not meta or meta.get("text_version") == TEXT_VERSION


def frame_changers(changes: Iterable[Change]) -> dict[str, Optional[int]]:
    """Frame id -> the event of the last commit that wrote it (its time is the frame's
    time in the index); None when that commit wrote no event."""
    out: dict[str, Optional[int]] = {}
    for c in changes:
        for fid in c.frames:
            out[fid] = c.events[-1] if c.events else None
    return out


@dataclass
class _Part:
    """What an application gathered for its next index write."""
    docs: dict[str, Doc] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    text_bytes: int = 0
    changes: int = 0  # changes gathered

    def add(self, key: str, doc: Doc, text: str) -> None:
        self.docs[key] = doc
        self.text_bytes += len(text)


@dataclass
class _VecPart:
    """What a step of the vector leg gathered: documents, their texts, deletes."""
    docs: dict[str, VecDoc] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)


def _change_chunks(changes: list[Change], items: int) -> Iterable[list[Change]]:
    """Runs of whole changes of about `items` events and frames (a larger change alone)."""
    chunk: list[Change] = []
    size = 0
    for c in changes:
        n = len(c.events) + len(c.frames)
        if chunk and size + n > items:
            yield chunk
            chunk, size = [], 0
        chunk.append(c)
        size += n
    if chunk:
        yield chunk


@contextmanager
def _skipping_damaged(context: str, key: str):
    """A record that does not decode is left out of the index (audit reports the damage)
    rather than holding back every later change of every context."""
    try:
        yield
    except (ValueError, TypeError, KeyError, AttributeError):
        _log.warning("%s: %s does not decode; not indexed", context, key, exc_info=True)


class Indexer:
    def __init__(self, store: Store, indexes: IndexDirectory, *,
                 embedder: Optional[Embedder] = None,
                 tracer: Optional[trace.Tracer] = None,
                 fitter: Optional[Fitter] = None,
                 cache: Optional[VectorCache] = None,
                 embed_worker: Optional[Fitter] = None,
                 vectors_due: Optional[Callable[[str], None]] = None,
                 vectors_off: bool = False,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
                 rebuild_read_chunk: Optional[int] = None) -> None:
        """`fitter`: where the embedder's fits run (wiring.py gives one with a worker
        process; by default every fit runs in this process). `cache`: vectors kept
        across rebuilds; `embed_worker`: where the vector leg's texts are embedded (by
        default in this process); `vectors_due(context)`: tells the vector follower a
        context's vector leg has work (None: apply_vectors runs after each write);
        `rebuild_read_chunk`: events per read transaction of a rebuild, each one a look
        at the call's deadline (None: REBUILD_READ_CHUNK). `vectors_off`: no vector leg
        at all (`--embedder none`): nothing is embedded, started or followed."""
        self._store = store
        self._indexes = indexes
        self.embedder: Embedder = embedder or HashingEmbedder()  # wiring.py picks one
        # context -> (log, fitted embedder, its LegEmbedder)
        self._fitted: dict[str, tuple[str, Embedder, LegEmbedder]] = {}
        self._fitter = fitter or Fitter(in_worker_min=None)
        self._cache = cache
        self._embed_worker = embed_worker
        self._vectors_due = vectors_due
        self.vectors_off = vectors_off
        self._vlocks: dict[str, threading.Lock] = {}
        self._is_learned: Optional[bool] = None
        self._tracer = tracer or NO_TRACING
        self._clock = clock
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._progress: dict[str, dict] = {}
        self._rebuild_read_chunk = rebuild_read_chunk
        self._outdated: set[str] = set()  # contexts whose older-text rebuild was begun

    def _lock(self, context: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(context, threading.Lock())

    def _vlock(self, context: str) -> threading.Lock:
        """The vector leg's (taken after the context lock where both are held)."""
        with self._locks_guard:
            return self._vlocks.setdefault(context, threading.Lock())

    def index(self, context: str) -> ContextIndex:
        idx = self._indexes.get(context)
        if not texts_current(idx.snapshot()[1]):
            self._rebuild_outdated(context)
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

    # -- the vector leg -----------------------------------------------------------------
    def leg_current(self, leg: VectorLeg) -> bool:
        """Whether the leg was built by this server's embedder over today's texts."""
        return (leg.exists and leg.meta.get("embedder") == self.embedder.identity.label()
                and leg.meta.get("text_version") == TEXT_VERSION)

    def leg_embedder(self, context: str, leg: VectorLeg) -> Embedder:
        """This server's embedder as fitted for the leg (its stored state restored)."""
        return self._leg_fit(context, leg)[1]

    def _leg_vectors(self, context: str, leg: VectorLeg) -> LegEmbedder:
        return self._leg_fit(context, leg)[2]

    def _leg_fit(self, context: str, leg: VectorLeg) -> tuple[str, Embedder, LegEmbedder]:
        log = os.path.join(leg.dir, leg.meta.get("log", ""))
        cached = self._fitted.get(context)
        if cached is None or cached[0] != log:
            state = leg.state()
            fitted = self.embedder.restore(state) if state else self.embedder.fitted(())
            cached = (log, fitted, self._vectors_of(fitted))
            self._fitted[context] = cached
        return cached

    def _vectors_of(self, fitted: Embedder) -> LegEmbedder:
        return LegEmbedder(self.embedder, fitted, cache=self._cache,
                           worker=self._embed_worker)

    def _start_leg(self, context: str, leg: VectorLeg, sample: list[str]) -> Embedder:
        fitted = self._fitter.fitted(self.embedder, sample)
        ident = self.embedder.identity
        leg.start(ident.label(), ident.dimension, TEXT_VERSION, fitted.state(), len(sample))
        self._fitted[context] = (os.path.join(leg.dir, leg.meta["log"]), fitted,
                                 self._vectors_of(fitted))
        return fitted

    def vector_status(self, context: str, head: int) -> dict:
        """The vector leg's position and lag behind `head` (the store's version)."""
        if self.vectors_off:  # no leg to be behind
            return {"position": 0, "lag": 0}
        leg = self.index(context).vectors
        position = leg.position if leg.committed else 0
        return {"position": position, "lag": max(0, head - position)}

    def cache_stats(self) -> dict:
        return self._cache.stats() if self._cache is not None else {}

    def want_vectors(self, context: str) -> None:
        """Have the vector follower look at the context (a restart leaves legs behind
        that no new write names)."""
        if self._vectors_due is not None and not self.vectors_off:
            self._vectors_due(context)

    def _learned(self) -> bool:
        """Whether the embedder learns from the context's text (a pretrained one
        returns itself from fitted(): no fit sample is needed, no refit ever)."""
        if self._is_learned is None:
            try:
                self._is_learned = self.embedder.fitted(["probe"]) is not self.embedder
            except Exception:  # noqa: BLE001 - cannot fit on one text: it learns
                self._is_learned = True
        return self._is_learned

    def _fit_sample(self, context: str, events: int, frames: list[R.Frame],
                    deadline: Deadline = NEVER) -> list[str]:
        """At most FIT_SAMPLE texts: evenly spaced events, then frames (deterministic),
        each cut to its share of FIT_SAMPLE_CHARS (FIT_TEXT_CHARS at least): a context of
        large texts is fitted on their beginnings, not held whole. `deadline` is looked
        at before each read chunk (of `rebuild_read_chunk` events) and once read, before
        the fit, which can be long (SEC-07)."""
        if not self._learned():
            return []
        step = max(1, -(-events // FIT_SAMPLE))
        seqs = list(range(0, events, step))
        cap = max(FIT_TEXT_CHARS, FIT_SAMPLE_CHARS // max(1, len(seqs)))
        out: list[str] = []
        # A chunk per short read transaction, each one round trip to a remote store, of
        # READ_AHEAD_BYTES at most (rows of large events: fewer in a chunk).
        start, chunk = 0, self._rebuild_read_chunk or REBUILD_READ_CHUNK
        while start < len(seqs):
            deadline.check("the rebuild")
            with self._store.reader(context) as reader:
                rows = event_records(reader, seqs[start:start + chunk], max_bytes=READ_AHEAD_BYTES)
            out.extend(raw_event_text(decode_event(raw))[:cap] for raw in rows if raw is not None)
            start += len(rows)
        out.extend(frame_text(f)[:cap] for f in frames[:max(0, FIT_SAMPLE - len(out))])
        deadline.check("the rebuild")
        return out

    def _fill_leg(self, context: str, leg: VectorLeg, events: int,
                  changed_by: list[tuple[R.Frame, Optional[R.Event]]]) -> dict:
        """(Re)fit and embed every text into a new log of `leg` (a refit); its meta."""
        self._start_leg(context, leg, self._fit_sample(
            context, events, [f for f, _ in changed_by]))
        vectors = self._leg_vectors(context, leg)
        raws: list[bytes] = []
        for raw in self._event_records(context, events):
            raws.append(raw)
            if len(raws) == EMBED_BATCH:
                b = analyze(raws, None, lexical=False)
                leg.append(b.vec_docs, vectors.vectors(b.texts), partition=False)
                raws = []
        if raws:
            b = analyze(raws, None, lexical=False)
            leg.append(b.vec_docs, vectors.vectors(b.texts), partition=False)
        for start in range(0, len(changed_by), EMBED_BATCH):
            part = changed_by[start:start + EMBED_BATCH]
            leg.append([VecDoc(frame_key(f.id), "", event_time_us(ev.time) if ev else None)
                        for f, ev in part],
                       vectors.vectors([frame_text(f) for f, _ in part]), partition=False)
        return self._filled(leg)

    @staticmethod
    def _filled(leg: VectorLeg) -> dict:
        """A filled leg's meta: partitioned once, and the next refit due when it has grown
        REFIT_GROWTH times past this size (not the sample's: a fit sees at most
        FIT_SAMPLE texts)."""
        leg.repartition()
        leg.meta["fitted_at"] = leg.count
        return dict(leg.meta)

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
            for chunk in _change_chunks(fresh, SUPERSEDED_CHECK):
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
        with _skipping_damaged(context, event_key(seq)):
            ev = m.event(seq)
            if ev is None or not indexed(ev.kind):  # moved aside by a repair; not indexed
                part.deletes.append(event_key(seq))
            else:
                part.add(event_key(seq), event_doc(ev), event_text(ev))

    def _gather_frames(self, context: str, m: MindState, changed: dict[str, Optional[int]],
                       part: "_Part") -> None:
        for fid, changer in changed.items():
            with _skipping_damaged(context, frame_key(fid)):
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
        idx.apply(part.docs.values(), meta, deletes=part.deletes)
        self._vectors_follow(context)
        return True

    def _vectors_follow(self, context: str) -> None:
        """After a lexical write: the vector follower's turn, or the leg's steps now."""
        if self.vectors_off:
            return
        if self._vectors_due is not None:
            self._vectors_due(context)
            return
        while self.apply_vectors(context):
            pass

    # -- the vector leg, on its own ---------------------------------------------------------
    def apply_vectors(self, context: str, step: int = VECTOR_STEP) -> int:
        """One step of the context's vector leg behind its lexical leg: the changes past
        the leg's position, up to the lexical position (about `step` events and frames),
        embedded, appended and committed at the version of the last. Returns how many
        changes it took (0: caught up, or a stale leg, left as it is)."""
        if self.vectors_off:
            return 0
        with self._vlock(context):
            return self._apply_vectors_locked(context, step)

    def try_apply_vectors(self, context: str, step: int = VECTOR_STEP) -> Optional[int]:
        """apply_vectors, unless a step of the leg is under way (None): a caller bound
        by a deadline (a search reading its writes) never waits for one."""
        if self.vectors_off:
            return 0
        lock = self._vlock(context)
        if not lock.acquire(blocking=False):
            return None
        try:
            return self._apply_vectors_locked(context, step)
        finally:
            lock.release()

    def _apply_vectors_locked(self, context: str, step: int) -> int:
        idx = self.index(context)
        leg = idx.vectors
        target = self.position(context)
        if leg.exists and not self.leg_current(leg):
            return 0
        if not target:
            return 0
        if not leg.committed:  # a new context, or an index from before the leg
            self._begin_leg(context, leg)
        if leg.position >= target:
            return 0
        changes = [c for c in self._store.changes(leg.position, context=context).changes
                   if c.commit_seq <= target]
        if not changes:
            return 0
        chunk = next(iter(_change_chunks(changes, step)))
        with self._tracer.start_as_current_span("recall.vector_apply") as span:
            part, chunk = self._gather_vectors(context, chunk)
            if self._learned() and leg.count + len(part.docs) >= max(
                    REFIT_MIN, REFIT_GROWTH * int(leg.meta.get("fitted_at", 0))):
                self._refit(context, idx)
            else:
                vectors = self._leg_vectors(context, leg)
                # Partitioned (when due) only at the step that reaches the lexical
                # leg: a leg far behind (after a rebuild) is partitioned once.
                leg.append(list(part.docs.values()),
                           vectors.vectors(list(part.texts.values())), part.deletes,
                           partition=chunk[-1].commit_seq >= target)
                leg.commit(chunk[-1].commit_seq)
            span.set_attribute("morphz.changes", len(chunk))
        return len(chunk)

    def _begin_leg(self, context: str, leg: VectorLeg) -> None:
        """Start the leg empty at version 0, fitted on a sample of the context."""
        with self._store.reader(context) as reader:
            m = MindState(reader)
            events = m.require_meta(context).next_seq
            frames = list(m.frames())
        self._start_leg(context, leg, self._fit_sample(context, events, frames))
        leg.commit(0)

    def _gather_vectors(self, context: str,
                        chunk: list[Change]) -> tuple[_VecPart, list[Change]]:
        """The vector documents and texts of a run of changes, rows as they are now (a
        frame read past them is what the leg should hold anyway); the run is cut after
        the change whose events bring the texts to APPLY_BYTES (large events: fewer
        held at once). Returns the part and the changes it covers."""
        part = _VecPart()
        size = 0
        with self._store.latest(context) as reader:
            m = MindState(reader)
            changed = frame_changers(chunk)
            prefetch_changes(m, [s for c in chunk for s in c.events]
                             + [e for e in changed.values() if e is not None],
                             changed, max_bytes=READ_AHEAD_BYTES)
            for i, change in enumerate(chunk):
                for seq in change.events:
                    with _skipping_damaged(context, event_key(seq)):
                        ev = m.event(seq)
                        if ev is None or not indexed(ev.kind):  # as the lexical leg
                            part.deletes.append(event_key(seq))
                        else:
                            key = event_key(seq)
                            part.docs[key] = VecDoc(key, ev.session,
                                                    event_time_us(ev.time, ev.data))
                            part.texts[key] = event_text(ev)
                            size += len(part.texts[key])
                if size >= APPLY_BYTES:
                    chunk = chunk[:i + 1]
                    break
            changed = frame_changers(chunk)
            for fid, changer in changed.items():
                with _skipping_damaged(context, frame_key(fid)):
                    f = m.frame(fid)
                    if f is None:
                        part.deletes.append(frame_key(fid))
                    else:
                        ev = m.event(changer) if changer is not None else None
                        key = frame_key(fid)
                        part.docs[key] = VecDoc(key, "", event_time_us(ev.time) if ev
                                                else None)
                        part.texts[key] = frame_text(f)
        return part, chunk

    def _refit(self, context: str, idx: ContextIndex) -> None:
        """Fit again on every current text and re-embed, all of it read at one version,
        into a new log filled aside while searches keep using the old leg whole; its
        commit (at that version) makes it the live leg."""
        with self._store.reader(context) as reader:
            m = MindState(reader)
            version = reader.commit_seq
            events = m.require_meta(context).next_seq
            frames = list(m.frames())
            times = self._frame_changers(context, version) if frames else {}
            changed_by = [(f, m.event(times[f.id]) if times.get(f.id) is not None
                           else None) for f in frames]
        refitted = VectorLeg(os.path.dirname(idx.vectors.dir), None)
        self._fill_leg(context, refitted, events, changed_by)
        refitted.commit(version)
        idx.vectors = refitted

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
                times = self._frame_changers(context, head) if frames else {}
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
                    self._start_leg(context, fresh.vectors, self._fit_sample(
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
        chunk = chunk or self._rebuild_read_chunk or REBUILD_READ_CHUNK
        seq = 0
        while seq < events:
            deadline.check("the rebuild")  # SEC-07; raised through the tokenizing workers
            with self._store.reader(context) as reader:  # large events: fewer per transaction
                rows = event_run(reader, seq, min(chunk, events - seq), READ_AHEAD_BYTES)
            if not rows:
                return
            yield from rows
            seq += len(rows)

    def _frame_changers(self, context: str, head: int) -> dict[str, Optional[int]]:
        """frame_changers over the context's feed up to version `head`."""
        out: dict[str, Optional[int]] = {}
        after = 0
        while after < head:
            page = self._store.changes(after, context=context)
            mine = [c for c in page.changes if c.commit_seq <= head]
            out.update(frame_changers(mine))
            if len(mine) < len(page.changes) or not page.changes:
                break
            after = page.changes[-1].commit_seq
        return out

