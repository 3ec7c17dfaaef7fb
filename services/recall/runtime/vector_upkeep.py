"""The vector leg of each context's recall index (index/vector_index.py), kept on its own
behind the lexical leg (indexer.py): the embedder as fitted for each leg, a step that
embeds the changes past the leg's position (up to the lexical position) and commits them
at the version of the last, the sample a learned embedder is fitted on, and the refit
that re-embeds every text into a new log when the leg has grown to REFIT_GROWTH times
what its fit saw (amortized linear work). A leg built by another embedder identity is
left as it is, never extended with vectors of this one."""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

import numpy as np
from opentelemetry import trace

from morphz.services.recall.core.documents import (
    TEXT_VERSION, event_key, event_text, frame_key, frame_text, indexed, raw_event_text)
from morphz.services.recall.core.passages import PASSAGE_VERSION, Passages, rows, said
from morphz.services.recall.core.timeparse import event_time_us
from morphz.services.recall.embedding.api import Embedder
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.services.recall.index.vector_cache import CacheStats, VectorCache, text_key
from morphz.services.recall.index.vector_index import VecDoc, VectorLeg
from morphz.services.recall.runtime.embedcache import LegEmbedder
from morphz.services.recall.runtime.embedworkers import EmbedWorkers
from morphz.services.recall.runtime.fitpool import Fitter
from morphz.services.recall.runtime.vector_pace import Pace
from morphz.services.recall.runtime.index_reads import (
    APPLY_BYTES, READ_AHEAD_BYTES, REBUILD_READ_CHUNK, change_chunks, frame_changers,
    frame_changers_upto, skipping_damaged)
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.mind.bulk import decode_event, event_records, prefetch_changes
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import Store
from morphz.shared.storage.feed import Change

EMBED_BATCH = 1000
VECTOR_STEP = 2000  # events and frames a step of the vector leg takes at most
FIT_SAMPLE = 20000  # texts a (re)fit sees at most: evenly spaced events, then frames
FIT_SAMPLE_CHARS, FIT_TEXT_CHARS = 64 << 20, 4096  # what a fit's sample holds at most
REFIT_GROWTH, REFIT_MIN = 2, 256


@dataclass
class _VecPart:
    """What a step of the vector leg gathered: documents, their texts (one or two each:
    core/passages.py), deletes."""
    docs: dict[str, VecDoc] = field(default_factory=dict)
    texts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)


class VectorUpkeep:
    def __init__(self, store: Store, embedder: Embedder, *,
                 index: Callable[[str], ContextIndex], position: Callable[[str], int],
                 event_records: Callable[[str, int], Iterable[bytes]],
                 tracer: trace.Tracer, fitter: Fitter,
                 cache: Optional[VectorCache] = None,
                 embed_workers: Optional[EmbedWorkers] = None,
                 rebuild_read_chunk: Optional[int] = None) -> None:
        """`index(context)`, `position(context)`: the context's live index and the version
        its lexical leg holds (the leg follows it); `event_records(context, events)`: the
        stored bytes of events 0..events-1, read in short read transactions. `cache`:
        vectors kept across rebuilds; `embed_workers`: where the texts are embedded (by
        default in this process); `fitter`: where the embedder's fits run."""
        self._store = store
        self.embedder = embedder
        self._index, self._position = index, position
        self._event_records = event_records
        self._tracer = tracer
        # context -> (log, fitted embedder, its LegEmbedder)
        self._fitted: dict[str, tuple[str, Embedder, LegEmbedder]] = {}
        self._typicals: dict[str, np.ndarray] = {}  # shared by the LegEmbedders
        self._fitter = fitter
        self._cache = cache
        self._embed_workers = embed_workers
        self._rebuild_read_chunk = rebuild_read_chunk
        self._is_learned: Optional[bool] = None
        self.pace = Pace()  # documents a second its steps covered lately (HYB-08)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def lock(self, context: str) -> threading.Lock:
        """The context's leg's (taken after the indexer's context lock where both are held)."""
        with self._locks_guard:
            return self._locks.setdefault(context, threading.Lock())

    def cache_stats(self) -> CacheStats:
        return self._cache.stats() if self._cache is not None else CacheStats()

    @property
    def embed_workers(self) -> int:
        """The processes the leg embeds in (0: this one)."""
        return self._embed_workers.count if self._embed_workers is not None else 0

    def erase(self, context: str, leg: VectorLeg, keys: set[str]) -> int:
        """An erasure's part of the vector leg (docs/privacy.md): the keys' vectors out
        of the leg and its files (VectorLeg.erase), then what the vector cache holds of
        every text their content was embedded in (VectorCache.erase). The leg's lock is
        held by the caller. How many cache entries went."""
        prefix = self._leg_vectors(context, leg).cache_prefix if self.leg_current(leg) \
            else b""  # a leg of another embedder: keep none of the cache's other vectors
        taken = leg.erase(keys)
        return self._cache.erase(prefix, taken) if self._cache is not None else 0

    def leg_current(self, leg: VectorLeg) -> bool:
        """Whether the leg was built by this server's embedder over today's texts."""
        return (leg.exists and leg.meta.get("embedder") == self.embedder.identity.label()
                and leg.meta.get("text_version") == TEXT_VERSION
                and leg.meta.get("passage_version") == PASSAGE_VERSION)

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
                           workers=self._embed_workers, typicals=self._typicals)

    def start_leg(self, context: str, leg: VectorLeg, sample: list[str]) -> Embedder:
        fitted = self._fitter.fitted(self.embedder, sample)
        ident = self.embedder.identity
        leg.start(ident.label(), ident.dimension, TEXT_VERSION, fitted.state(), len(sample),
                  PASSAGE_VERSION)
        self._fitted[context] = (os.path.join(leg.dir, leg.meta["log"]), fitted,
                                 self._vectors_of(fitted))
        return fitted

    def learned(self) -> bool:
        """Whether the embedder learns from the context's text (a pretrained one
        returns itself from fitted(): no fit sample is needed, no refit ever)."""
        if self._is_learned is None:
            try:
                self._is_learned = self.embedder.fitted(["probe"]) is not self.embedder
            except Exception:  # noqa: BLE001 - cannot fit on one text: it learns
                self._is_learned = True
        return self._is_learned

    def fit_sample(self, context: str, events: int, frames: list[R.Frame],
                    deadline: Deadline = NEVER) -> list[str]:
        """At most FIT_SAMPLE texts: evenly spaced events, then frames (deterministic),
        each cut to its share of FIT_SAMPLE_CHARS (FIT_TEXT_CHARS at least): a context of
        large texts is fitted on their beginnings, not held whole. `deadline` is looked
        at before each read chunk (of `rebuild_read_chunk` events) and once read, before
        the fit, which can be long (SEC-07)."""
        if not self.learned():
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
                rows = event_records(reader, seqs[start:start + chunk],
                                     max_bytes=READ_AHEAD_BYTES)
            out.extend(raw_event_text(decode_event(raw))[:cap] for raw in rows if raw is not None)
            start += len(rows)
        out.extend(frame_text(f)[:cap] for f in frames[:max(0, FIT_SAMPLE - len(out))])
        deadline.check("the rebuild")
        return out

    def _fill_leg(self, context: str, leg: VectorLeg, events: int,
                  changed_by: list[tuple[R.Frame, Optional[R.Event]]]) -> dict:
        """(Re)fit and embed every text into a new log of `leg` (a refit); its meta."""
        self.start_leg(context, leg, self.fit_sample(
            context, events, [f for f, _ in changed_by]))
        vectors = self._leg_vectors(context, leg)
        passages = Passages(lambda session: None, lambda key: self._said_of(context, key))
        batch: list[tuple[VecDoc, tuple[str, ...]]] = []
        for raw in self._event_records(context, events):
            with skipping_damaged(context, "an event"):
                ev = decode_event(raw)
                if indexed(ev["kind"]):
                    batch.append(_composed(passages, ev["seq"], ev["kind"],
                                           ev.get("session", ""), ev.get("actor", ""),
                                           raw_event_text(ev), ev["time"], ev.get("data")))
            if len(batch) == EMBED_BATCH:
                leg.append([d for d, _ in batch], row_vectors(vectors, [t for _, t in batch]),
                           partition=False)
                batch = []
        if batch:
            leg.append([d for d, _ in batch], row_vectors(vectors, [t for _, t in batch]),
                       partition=False)
        for start in range(0, len(changed_by), EMBED_BATCH):
            part = changed_by[start:start + EMBED_BATCH]
            leg.append([VecDoc(frame_key(f.id), "", event_time_us(ev.time) if ev else None,
                               digests=(text_key(frame_text(f)),)) for f, ev in part],
                       row_vectors(vectors, [(frame_text(f),) for f, _ in part]),
                       partition=False)
        return self._filled(leg)

    @staticmethod
    def _filled(leg: VectorLeg) -> dict:
        """A filled leg's meta: partitioned once, and the next refit due when it has grown
        REFIT_GROWTH times past this size (not the sample's: a fit sees at most
        FIT_SAMPLE texts)."""
        leg.repartition()
        leg.meta["fitted_at"] = leg.count
        return dict(leg.meta)

    def apply_vectors(self, context: str, step: int = VECTOR_STEP) -> int:
        """One step of the context's vector leg behind its lexical leg: the changes past
        the leg's position, up to the lexical position (about `step` events and frames),
        embedded, appended and committed at the version of the last. Returns how many
        changes it took (0: caught up, or a stale leg, left as it is)."""
        with self.lock(context):
            return self._apply_vectors_locked(context, step)

    def try_apply_vectors(self, context: str, step: int = VECTOR_STEP) -> Optional[int]:
        """apply_vectors, unless a step of the leg is under way (None): a caller bound
        by a deadline (a search reading its writes) never waits for one."""
        lock = self.lock(context)
        if not lock.acquire(blocking=False):
            return None
        try:
            return self._apply_vectors_locked(context, step)
        finally:
            lock.release()

    def _apply_vectors_locked(self, context: str, step: int) -> int:
        idx = self._index(context)
        leg = idx.vectors
        target = self._position(context)
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
        chunk = next(iter(change_chunks(changes, step)))
        pace = _StepPace(self.pace)
        with self._tracer.start_as_current_span("recall.vector_apply") as span:
            part, chunk = self._gather_vectors(context, leg, chunk)
            if self.learned() and leg.count + len(part.docs) >= max(
                    REFIT_MIN, REFIT_GROWTH * int(leg.meta.get("fitted_at", 0))):
                self._refit(context, idx)
            else:
                vectors = self._leg_vectors(context, leg)
                # Partitioned (when due) only at the step that reaches the lexical
                # leg: a leg far behind (after a rebuild) is partitioned once.
                leg.append(list(part.docs.values()),
                           row_vectors(vectors, list(part.texts.values()), pace.covered),
                           part.deletes, partition=chunk[-1].commit_seq >= target)
                pace.covered(len(part.docs) - pace.documents)  # before it shows
                leg.commit(chunk[-1].commit_seq)
            span.set_attribute("morphz.changes", len(chunk))
        return len(chunk)

    def _begin_leg(self, context: str, leg: VectorLeg) -> None:
        """Start the leg empty at version 0, fitted on a sample of the context."""
        with self._store.reader(context) as reader:
            m = MindState(reader)
            events = m.require_meta(context).next_seq
            frames = list(m.frames())
        self.start_leg(context, leg, self.fit_sample(context, events, frames))
        leg.commit(0)

    def _gather_vectors(self, context: str, leg: VectorLeg,
                        chunk: list[Change]) -> tuple[_VecPart, list[Change]]:
        """The vector documents and texts of a run of changes, rows as they are now (a
        frame read past them is what the leg should hold anyway); the run is cut after
        the change whose events bring the texts to APPLY_BYTES (large events: fewer
        held at once). Returns the part and the changes it covers."""
        part = _VecPart()
        size = 0
        with self._store.latest(context) as reader:
            m = MindState(reader)
            passages = Passages(leg.last_turn, lambda key: _said_in(m, key))
            changed = frame_changers(chunk)
            prefetch_changes(m, [s for c in chunk for s in c.events]
                             + [e for e in changed.values() if e is not None],
                             changed, max_bytes=READ_AHEAD_BYTES)
            for i, change in enumerate(chunk):
                for seq in change.events:
                    with skipping_damaged(context, event_key(seq)):
                        ev = m.event(seq)
                        if ev is None or not indexed(ev.kind):  # as the lexical leg
                            part.deletes.append(event_key(seq))
                        else:
                            doc, texts = _composed(passages, seq, ev.kind, ev.session,
                                                   ev.actor, event_text(ev), ev.time, ev.data)
                            part.docs[doc.key], part.texts[doc.key] = doc, texts
                            size += sum(map(len, texts))
                if size >= APPLY_BYTES:
                    chunk = chunk[:i + 1]
                    break
            changed = frame_changers(chunk)
            for fid, changer in changed.items():
                with skipping_damaged(context, frame_key(fid)):
                    f = m.frame(fid)
                    if f is None:
                        part.deletes.append(frame_key(fid))
                    else:
                        ev = m.event(changer) if changer is not None else None
                        key = frame_key(fid)
                        part.docs[key] = VecDoc(key, "", event_time_us(ev.time) if ev
                                                else None)
                        part.texts[key] = (frame_text(f),)
                        part.docs[key].digests = (text_key(part.texts[key][0]),)
        return part, chunk

    def _said_of(self, context: str, key: str) -> Optional[str]:
        with self._store.reader(context) as reader:
            return _said_in(MindState(reader), key)

    def _refit(self, context: str, idx: ContextIndex) -> None:
        """Fit again on every current text and re-embed, all of it read at one version,
        into a new log filled aside while searches keep using the old leg whole; its
        commit (at that version) makes it the live leg."""
        with self._store.reader(context) as reader:
            m = MindState(reader)
            version = reader.commit_seq
            events = m.require_meta(context).next_seq
            frames = list(m.frames())
            times = frame_changers_upto(self._store, context, version) if frames else {}
            changed_by = [(f, m.event(times[f.id]) if times.get(f.id) is not None
                           else None) for f in frames]
        refitted = VectorLeg(os.path.dirname(idx.vectors.dir), None)
        self._fill_leg(context, refitted, events, changed_by)
        refitted.commit(version)
        idx.vectors = refitted


def _composed(passages: Passages, seq: int, kind: str, session: str, actor: str, text: str,
              time: str, data: Optional[dict[str, Any]]) -> tuple[VecDoc, tuple[str, ...]]:
    """An event's vector document and the texts its vector is the mean of."""
    call = R.parse_ref((data or {}).get("call", ""))
    key = event_key(seq)
    prev, source, texts = passages.event(key, kind, session, actor, text,
                                         event_key(call) if call is not None else "")
    return VecDoc(key, session, event_time_us(time, data), prev, source,
                  tuple(text_key(t) for t in texts)), texts


def _said_in(m: MindState, key: str) -> Optional[str]:
    """An earlier turn's text as said (core/passages.py), read from the store."""
    seq = int(key.partition(":")[2])
    ev = m.event(seq)
    return said(event_text(ev), ev.actor) if ev is not None else None


class _StepPace:
    """A step's part of the leg's pace, noted as it goes (each batch embedded), so a
    step of thousands of documents shows a pace while it lags (HYB-08)."""

    def __init__(self, pace: Pace) -> None:
        self._pace, self._since, self.documents = pace, time.monotonic(), 0.0

    def covered(self, documents: float) -> None:
        now = time.monotonic()
        self._pace.note(documents, now - self._since)
        self._since, self.documents = now, self.documents + documents


def row_vectors(vectors: LegEmbedder, groups: list[tuple[str, ...]],
                progress: Optional[Callable[[float], None]] = None) -> np.ndarray:
    """One row per group of texts (Passages.event): its own vector mixed with its
    context's (passages.rows), zero for an event with nothing to say (the embedder's
    vector of an empty text: a runtime event without text, an erased turn).
    `progress(documents)`: the groups' share of each batch of texts embedded."""
    flat = [t for g in groups for t in g]
    share = (lambda texts: progress(texts * len(groups) / len(flat))) \
        if progress is not None and flat else None
    made = vectors.vectors(flat, share)
    if not len(groups):
        return made
    return rows(made, [len(g) for g in groups], vectors.typical())
