"""Analyzing a whole context's events for a rebuild (or a refit), spread over worker
processes: one read of the events gives both legs what they need.

Parsing, ICU segmentation and embedding are CPU-bound Python; a large context runs them
in spawned worker processes of its own (worker_process.py: one pipe each, so a worker
that dies is seen and its batches are done here) while this process reads the store
and feeds the index. Batches go out as the raw stored bytes
and come back as the JSON documents the lexical index adds directly (doc_json) and the
batch's vectors: cheap to pickle, cheap to add. The workers embed with the same fitted
embedder (its unfitted self pickled, then `restore(state)`); one that cannot be pickled
(an ONNX session) leaves the embedding to this process, which then gets the texts.
Small contexts stay in-process.
"""
from __future__ import annotations

import hashlib
import logging
import os
import pickle
from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional

import numpy as np

from morphz.services.recall.core.documents import event_key, indexed, raw_event_text
from morphz.services.recall.runtime.fitpool import Fitter
from morphz.services.recall.runtime.worker_process import (Keeping, WorkerProcess,
                                                           WorkerUnavailable)
from morphz.services.recall.core.timeparse import event_time_us
from morphz.services.recall.embedding.api import Embedder, embed_texts
from morphz.services.recall.index.tantivy_docs import Doc, doc_json
from morphz.services.recall.index.vector_index import VecDoc
from morphz.shared.mind.bulk import decode_event
from morphz.shared.text.analyze import terms_text

_log = logging.getLogger("morphz.recall.tokenpool")
BATCH = 2000
BATCH_BYTES = 16 << 20  # a batch's stored bytes at most (with AHEAD, what a worker holds)
MIN_PARALLEL = 20000  # below this, starting processes costs more than it saves
AHEAD = 2  # batches sent to a rebuild worker before its first result is in
DAMAGE = (ValueError, TypeError, KeyError, AttributeError)


@dataclass
class Batch:
    """What a batch of stored events gives the two legs, in event order."""
    docs: list = field(default_factory=list)  # Doc, or its doc_json from a worker
    vec_docs: list[VecDoc] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # kept only when not embedded here
    vectors: Optional[np.ndarray] = None  # None: embed `texts` (or no embedder asked)
    damaged: int = 0  # events that do not decode: left out (audit reports the damage)
    skipped: int = 0  # events of a kind not indexed (documents.indexed)


def analyze(raws: list[bytes], embedder: Optional[Embedder] = None, *,
            lexical: bool = True, as_json: bool = False) -> Batch:
    """The batch's documents (when `lexical`), vector documents and texts, and its vectors
    when an embedder is given."""
    out = Batch()
    for raw in raws:
        try:
            ev = decode_event(raw)
            if not indexed(ev["kind"]):
                out.skipped += 1
                continue
            key, text = event_key(ev["seq"]), raw_event_text(ev)
            time_us, session = event_time_us(ev["time"], ev.get("data")), ev.get("session", "")
            if lexical:  # event_doc, from the stored JSON (no record object)
                doc = Doc(key, "event", terms_text(text), time_us, session)
                out.docs.append(doc_json(doc) if as_json else doc)
        except DAMAGE:
            out.damaged += 1
            continue
        out.vec_docs.append(VecDoc(key, session, time_us))
        out.texts.append(text)
    if embedder is not None:
        out.vectors = embed_texts(embedder, out.texts)
        out.texts = []
    return out


def portable(base: Embedder, fitted: Optional[Embedder]) -> Optional[bytes]:
    """What a worker process needs to embed like `fitted`, or None when it cannot travel."""
    if fitted is None:
        return None
    try:
        return pickle.dumps((base, fitted.state()))
    except Exception:  # noqa: BLE001 - e.g. a native session: embed in this process
        return None


def _restored(blob: bytes) -> Embedder:
    """In a worker: the embedder portable() packed."""
    base, state = pickle.loads(blob)
    return base.restore(state) if state else base


def _init_worker(kept: dict, blob: Optional[bytes], lexical: bool) -> None:
    """A rebuild worker's first call: what its _work calls use, kept in the worker
    ("rebuild": (embedder or None, lexical))."""
    kept["rebuild"] = (_restored(blob) if blob is not None else None, lexical)


def _work(kept: dict, raws: list[bytes]) -> Batch:
    embedder, lexical = kept.get("rebuild", (None, True))
    return analyze(raws, embedder, lexical=lexical, as_json=True)


_INIT_WORKER, _WORK = Keeping(_init_worker), Keeping(_work)


def event_batches(raws: Iterable[bytes], total: int, *, base: Embedder,
                  fitted: Optional[Embedder] = None, lexical: bool = True,
                  workers: Optional[int] = None,
                  worker: Optional[Fitter] = None) -> Iterator[Batch]:
    """The Batch of each BATCH stored events (their JSON bytes), in order. `fitted`:
    embed with it (in the workers when it can travel there, else here); `base` is the
    server's embedder it was fitted from. `worker`: the fit worker, which takes a
    context too small for a pool of its own but large enough to stall the server."""
    workers = workers if workers is not None else min(4, os.cpu_count() or 1)
    blob = portable(base, fitted)
    if total < MIN_PARALLEL or workers < 2:
        if worker is not None and blob is not None and worker.takes(total):
            yield from _in_worker(raws, worker, blob, fitted, lexical)
            return
        for chunk in _chunks(raws):
            yield analyze(chunk, fitted, lexical=lexical)
        return
    yield from _pooled(raws, workers, blob, fitted, lexical)


def _pooled(raws: Iterable[bytes], workers: int, blob: Optional[bytes],
            fitted: Optional[Embedder], lexical: bool) -> Iterator[Batch]:
    """event_batches over worker processes of this rebuild's own, AHEAD batches sent to
    each and the next as soon as a result is in; a batch whose worker died (or never
    started) is analyzed here, and so is every later one of that worker's turn."""
    procs = [WorkerProcess("morphz-rebuild-worker") for _ in range(workers)]
    try:
        ready: list[Optional[WorkerProcess]] = []
        for proc in procs:
            try:
                proc.call(_INIT_WORKER, blob, lexical)
                ready.append(proc)
            except WorkerUnavailable:
                ready.append(None)
            except Exception:  # noqa: BLE001 - e.g. the embedder cannot be restored there
                _log.warning("a rebuild worker could not take the embedder; its batches "
                             "are done here", exc_info=True)
                ready.append(None)
        chunks = _chunks(raws)
        pending: deque[tuple[Optional[WorkerProcess], list[bytes]]] = deque()

        def start(proc: Optional[WorkerProcess], chunk: list[bytes]) -> None:
            try:
                if proc is not None:
                    proc.send(_WORK, chunk)
            except WorkerUnavailable:
                proc = None
            pending.append((proc, chunk))
        for proc, chunk in zip(ready * AHEAD, chunks):
            start(proc, chunk)
        while pending:
            proc, chunk = pending.popleft()
            batch = None
            if proc is not None:
                try:
                    batch = proc.receive()
                except WorkerUnavailable:
                    _log.warning("a rebuild worker process died; its batches are done here")
                    proc = None
            following = next(chunks, None)
            if following is not None:
                start(proc, following)  # before this batch is used: the worker goes on
            if batch is None:
                batch = analyze(chunk, fitted, lexical=lexical)
            yield _embedded(batch, fitted)
    finally:
        for proc in procs:
            proc.stop()


def _work_with(kept: dict, key: str, blob: bytes, lexical: bool, raws: list[bytes]) -> Batch:
    """In the fit worker: analyze() with the embedder `blob` holds, restored once: the
    worker keeps the last one it was sent ("fit": (key, embedder); each batch carries
    it)."""
    held = kept.get("fit")
    if held is None or held[0] != key:
        held = kept["fit"] = (key, _restored(blob))
    return analyze(raws, held[1], lexical=lexical, as_json=True)


_WORK_WITH = Keeping(_work_with)


def _in_worker(raws: Iterable[bytes], worker: Fitter, blob: bytes,
               fitted: Optional[Embedder], lexical: bool) -> Iterator[Batch]:
    """event_batches through the fit worker; a batch it cannot take (stopping, its
    process died) is analyzed here."""
    key = hashlib.sha256(blob).hexdigest()
    for chunk in _chunks(raws):
        try:
            batch = worker.call(_WORK_WITH, key, blob, lexical, chunk)
        except WorkerUnavailable:
            batch = analyze(chunk, fitted, lexical=lexical)
        yield _embedded(batch, fitted)


def _embedded(batch: Batch, fitted: Optional[Embedder]) -> Batch:
    """A worker's batch, embedded here if the worker could not."""
    if fitted is not None and batch.vectors is None:
        batch.vectors, batch.texts = embed_texts(fitted, batch.texts), []
    return batch


def _chunks(raws: Iterable[bytes]) -> Iterator[list[bytes]]:
    """Batches of BATCH events, or of BATCH_BYTES when the events are large."""
    batch: list[bytes] = []
    size = 0
    for raw in raws:
        batch.append(raw)
        size += len(raw)
        if len(batch) == BATCH or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch
