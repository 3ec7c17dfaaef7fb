"""Rebuilding a context's index (part of indexer.py's Indexer): a fresh generation built
from one consistent snapshot of events and frames, read in short read transactions, its
vector leg started empty and fitted on the context's text, then swapped in; the changes
the follower left to it caught up after the swap. Also the rebuilds begun in the
background: of an index built from older texts, and after an erasure (its files may
still hold what was erased)."""
from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Optional

from morphz.services.recall.core.documents import TEXT_VERSION, frame_doc
from morphz.services.recall.core.results import RebuildInfo, RebuildProgress
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.services.recall.runtime import index_reads
from morphz.services.recall.runtime.fitpool import Fitter
from morphz.services.recall.runtime.index_reads import (
    READ_AHEAD_BYTES, REBUILD_READ_CHUNK, frame_changers_upto)
from morphz.services.recall.runtime.tokenpool import event_batches
from morphz.services.recall.runtime.vector_upkeep import VectorUpkeep
from morphz.services.recall.embedding.api import Embedder
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import Store

if TYPE_CHECKING:
    from opentelemetry import trace

_log = logging.getLogger("morphz.recall.indexer")
REBUILD_HEAP = 256 << 20


class Rebuilding:
    """Indexer's rebuilds (a mixin: Indexer holds the state named below and the steps it
    calls back, `_lock`, `_vlock`, `position`, `_apply_locked`, `_vectors_follow`)."""
    _store: Store
    _indexes: IndexDirectory
    _tracer: "trace.Tracer"
    _fitter: Fitter
    _vectors: VectorUpkeep
    _clock: Callable[[], datetime]
    _progress: dict[str, dict]
    _outdated: set[str]
    _purging: set[str]
    _locks_guard: threading.Lock
    _rebuild_read_chunk: Optional[int]
    embedder: Embedder
    vectors_off: bool

    def progress(self, context: str) -> RebuildProgress:
        """How far the context's rebuild is (none running: not running, at 0 of 0)."""
        p = self._progress.get(context)
        return RebuildProgress(p["running"], p["done"], p["total"]) if p else \
            RebuildProgress(False, 0, 0)

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
    # -- rebuild ----------------------------------------------------------------------------
    def rebuild(self, context: str, deadline: Deadline = NEVER) -> RebuildInfo:
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
            return RebuildInfo(**info)
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

    def _catch_up_locked(self, context: str) -> int:
        """Every change of the context's own feed past the index's position, a page at a
        time (the context lock held: what the follower left to a rebuild)."""
        applied = 0
        while True:
            page = self._store.changes(self.position(context), context=context).changes
            if not page:
                return applied
            applied += self._apply_locked(context, page)
