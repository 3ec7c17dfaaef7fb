"""Keeps each context's derived index in step with the authoritative store.

`catch_up` applies the outbox intents after the index's position, in order, and
writes the new position in the same index commit (tantivy_index.py). `rebuild`
builds a fresh index from one consistent snapshot of events and frames and swaps
it in; it only reads the authoritative store.
"""
from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from typing import Callable, Optional

from opentelemetry import trace

from morphz.shared.telemetry import NO_TRACING

from morphz.services.recall.core.documents import event_doc, event_key, frame_doc, frame_key
from morphz.services.recall.core.tokenpool import event_docs
from morphz.services.recall.index.tantivy_index import ContextIndex, Doc, IndexDirectory
from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import Reader, Store

BATCH = 2000
REBUILD_HEAP = 256 << 20
REBUILD_READ_CHUNK = 8000  # events per read transaction of a rebuild


def _intents(reader: Reader, after: int, limit: int) -> list[tuple[int, dict]]:
    start = (after - 1,) if after > 0 else None
    return [(k[0], json.loads(v)) for k, v in reader.scan("outbox", after=start, limit=limit)]


def _frame_times(rows: list[tuple[int, dict]], reader: Reader) -> dict[int, int]:
    """Position of each index-frame intent -> seq of the event committed with it (the
    reducer writes a commit's frame intents before its event intent)."""
    out, pending = {}, []
    for pos, intent in rows:
        if intent.get("op") == "index-frame":
            pending.append(pos)
        elif intent.get("op") == "index-event":
            for p in pending:
                out[p] = intent["seq"]
            pending = []
    if pending:  # the batch ended inside a commit: look a little further
        for pos, intent in _intents(reader, pending[-1] + 1, 256):
            if intent.get("op") == "index-event":
                for p in pending:
                    out[p] = intent["seq"]
                break
    return out


class Indexer:
    def __init__(self, store: Store, indexes: IndexDirectory, *,
                 tracer: Optional[trace.Tracer] = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        self._store = store
        self._indexes = indexes
        self._tracer = tracer or NO_TRACING
        self._clock = clock
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._seen: dict[str, tuple[int, int]] = {}  # context -> (commit_seq, position)
        self._progress: dict[str, dict] = {}

    def _lock(self, context: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(context, threading.Lock())

    def index(self, context: str) -> ContextIndex:
        return self._indexes.get(context)

    def position(self, context: str) -> int:
        """Where the live index stands in the context's outbox (kept with its commits)."""
        return self.index(context).snapshot()[1].get("position", 0)

    def progress(self, context: str) -> dict:
        return dict(self._progress.get(context) or {"running": False, "done": 0, "total": 0})

    # -- incremental ----------------------------------------------------------------------
    def catch_up(self, context: str, batch: int = BATCH) -> int:
        """Apply up to `batch` pending intents of the context; returns how many."""
        with self._lock(context):
            pos = self.position(context)
            with self._store.reader(context) as reader:
                if self._seen.get(context) == (reader.commit_seq, pos):
                    return 0  # nothing committed since the last look: skip the parse
                m = MindState(reader)
                meta = m.meta()
                if meta is None or meta.outbox_head <= pos:
                    self._seen[context] = (reader.commit_seq, pos)
                    return 0
                with self._tracer.start_as_current_span("recall.index_apply") as span:
                    rows = _intents(reader, pos, batch)
                    docs, deletes = self._docs(m, reader, rows)
                    new_pos = rows[-1][0] + 1
                    idx = self.index(context)
                    old_meta = idx.snapshot()[1]
                    idx.apply(docs.values(), dict(old_meta, context=context, position=new_pos),
                              deletes=deletes)
                    span.set_attribute("morphz.intents", len(rows))
            return len(rows)

    def _docs(self, m: MindState, reader: Reader,
              rows: list[tuple[int, dict]]) -> tuple[dict[str, Doc], list[str]]:
        times = _frame_times(rows, reader)
        docs: dict[str, Doc] = {}
        deletes: list[str] = []
        for pos, intent in rows:
            if intent.get("op") == "index-event":
                ev = m.event(intent["seq"])
                if ev is not None:
                    docs[event_key(ev.seq)] = event_doc(ev)
            elif intent.get("op") == "index-frame":
                key = frame_key(intent["id"])
                f = m.frame(intent["id"])
                if f is None:  # gone (rolled back): drop it from the index too
                    docs.pop(key, None)
                    deletes.append(key)
                else:
                    seq = times.get(pos)
                    docs[key] = frame_doc(f, m.event(seq) if seq is not None else None)
        return docs, deletes

    # -- rebuild ----------------------------------------------------------------------------
    def rebuild(self, context: str) -> dict:
        """Build a new index from one snapshot of events and frames, then swap it in."""
        with self._locks_guard:  # check and claim together: one rebuild per context
            if self._progress.get(context, {}).get("running"):
                raise MorphzError("RECALL_REBUILD_RUNNING", f"a rebuild of {context} is "
                                  "running", context=context)
            self._progress[context] = {"running": True, "done": 0, "total": 0}
        started = time.monotonic()
        try:
            with self._tracer.start_as_current_span("recall.rebuild"):
                # One short snapshot for what can change (frames, the outbox head); the
                # events below it never change, so they are read afterwards in chunks,
                # each in its own short read transaction: a long one would keep LMDB from
                # reusing freed pages and hold off a map growth for the whole rebuild.
                with self._store.reader(context) as reader:
                    m = MindState(reader)
                    meta = m.require_meta(context)
                    head, events = meta.outbox_head, meta.next_seq
                    frames = list(m.frames())
                    times = self._last_frame_events(reader) if frames else {}
                    changed_by = [(f, m.event(times[f.id]) if f.id in times else None)
                                  for f in frames]
                self._progress[context]["total"] = events + len(frames)
                fresh = self._indexes.fresh(context)
                count = fresh.apply(self._snapshot_docs(context, events, changed_by),
                                    {"context": context, "position": head},
                                    heap=REBUILD_HEAP, threads=2, fresh=True)
            info = {"at": self._clock().isoformat(timespec="seconds"),
                    "duration_ms": int((time.monotonic() - started) * 1000), "documents": count}
            with self._lock(context):
                fresh.apply((), {"context": context, "position": head, "last_rebuild": info})
                self._indexes.swap(context, fresh)
            return info
        finally:
            self._progress[context]["running"] = False

    def _snapshot_docs(self, context: str, events: int,
                       changed_by: list[tuple[R.Frame, Optional[R.Event]]]):
        """The documents of events 0..events-1, then of the frames (each with the event
        that last changed it)."""
        prog = self._progress[context]
        for doc in event_docs(self._event_records(context, events), events):
            yield doc
            prog["done"] += 1
        for f, ev in changed_by:
            yield frame_doc(f, ev)
            prog["done"] += 1

    def _event_records(self, context: str, events: int, chunk: int = 0):
        """The stored bytes of events 0..events-1, a chunk per read transaction."""
        chunk = chunk or REBUILD_READ_CHUNK
        seq = 0
        while seq < events:
            with self._store.reader(context) as reader:
                after = (seq - 1,) if seq else None
                rows = [raw for (s,), raw in reader.scan("events", after=after,
                                                          limit=min(chunk, events - seq))]
            if not rows:
                return
            yield from rows
            seq += len(rows)

    @staticmethod
    def _last_frame_events(reader: Reader) -> dict[str, int]:
        """Frame id -> seq of the event of its last index intent (see _frame_times)."""
        out: dict[str, int] = {}
        pending: list[str] = []
        for _, raw in reader.scan("outbox"):
            # Nearly all intents index an event: parse only those that can matter.
            if b'"index-frame"' not in raw and not (pending and b'"index-event"' in raw):
                continue
            intent = json.loads(raw)
            if intent.get("op") == "index-frame":
                pending.append(intent["id"])
            elif intent.get("op") == "index-event":
                for fid in pending:
                    out[fid] = intent["seq"]
                pending = []
        return out
