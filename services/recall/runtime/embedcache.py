"""Vectors for the vector leg: each distinct text once, from the vector cache when it
holds it, else embedded in the embedding workers, a batch at a time.

Embedding is the slow part of indexing (a pretrained model: milliseconds a text), so it
runs in spawned workers (embedworkers.py: one process a core, each stopped when idle),
a batch cut into one share per worker, and never on a thread that holds the interpreter
for a commit or a search. A worker keeps the last embedder it was sent (by key): a call
carries only the texts, and the embedder itself (pickled with its fitted state) only
when the worker answers that it lacks it. An embedder that cannot be pickled (a user's
ONNX session), a stopping server or a dead worker leaves its share to this process.

Every vector goes through float16 (what the cache keeps), whether embedded now or read
back, so the leg gets the same values either way.
"""
from __future__ import annotations

import hashlib
import os
from typing import Callable, Optional, Sequence

import numpy as np

from morphz.services.recall.core.passages import TYPICAL
from morphz.services.recall.runtime.embedworkers import EmbedWorkers
from morphz.services.recall.runtime.fitpool import Fitter
from morphz.services.recall.runtime.tokenpool import portable
from morphz.services.recall.runtime.worker_process import WorkerUnavailable
from morphz.services.recall.embedding.api import Embedder, embed_texts
from morphz.services.recall.index.vector_cache import VectorCache, identity_key, text_key

BATCH = 256  # texts per worker call: a pretrained model's batch is seconds of work
# The embedding worker runs at a lower CPU priority: on a host with few cores, the
# server's request threads (commits, searches) go first, the vector leg's lag grows.
WORKER_NICE = 10
TYPICALS_KEPT = 64  # typical vectors a server keeps (a pretrained embedder needs one)

# The embedding worker's embedder, only in that process: (key, embedder).
_kept: tuple[str, Optional[Embedder]] = ("", None)


def _embed_there(key: str, blob: Optional[bytes], texts: list[str]) -> Optional[np.ndarray]:
    """In the worker: the texts' vectors, or None when it lacks embedder `key` and was
    not sent it."""
    global _kept
    if _kept[0] != key:
        if blob is None:
            return None
        if not _kept[0]:  # the worker's first embedder: lower its priority once
            os.nice(WORKER_NICE)
        import pickle  # noqa: PLC0415 - only in the worker
        base, state = pickle.loads(blob)
        _kept = (key, base.restore(state) if state else base)
    return embed_texts(_kept[1], texts)


class LegEmbedder:
    """One fitted embedder's vectors: cached, deduplicated, embedded in the worker."""

    def __init__(self, base: Embedder, fitted: Embedder, *,
                 cache: Optional[VectorCache] = None,
                 workers: Optional[EmbedWorkers] = None,
                 typicals: Optional[dict[str, np.ndarray]] = None) -> None:
        """`typicals`: typical vectors by fitted embedder, shared by the LegEmbedders of
        one server (every context's leg of a pretrained embedder has the same one)."""
        self._fitted, self._cache, self._workers = fitted, cache, workers
        state = fitted.state()
        self._key = hashlib.sha256(base.identity.label().encode() + b"|" + state).hexdigest()
        self._prefix = identity_key(base.identity.label(),
                                    hashlib.sha256(state).hexdigest() if state else "")
        self._blob = portable(base, fitted)
        self._typicals = typicals if typicals is not None else {}
        self.embedded = 0  # texts this embedded (not found in the cache)

    def typical(self) -> np.ndarray:
        """The mean vector of passages.TYPICAL's texts: what a row without context mixes
        in (made once per fitted embedder, its texts cached like any other)."""
        found = self._typicals.get(self._key)
        if found is None:
            if len(self._typicals) >= TYPICALS_KEPT:  # learned embedders: one per fit
                self._typicals.clear()
            found = self._typicals[self._key] = self.vectors(TYPICAL).mean(axis=0)
        return found

    @property
    def dimension(self) -> int:
        return self._fitted.identity.dimension

    @property
    def cache_prefix(self) -> bytes:
        """The vector cache's key prefix of this fitted embedder's vectors."""
        return self._prefix

    def vectors(self, texts: Sequence[str],
                progress: Optional[Callable[[int], None]] = None) -> np.ndarray:
        """float32 rows, one per text (float16 precision); `progress(n)` after each batch
        of n texts embedded (a long step shows its pace before it ends: HYB-08)."""
        dim = self._fitted.identity.dimension
        unique: dict[str, int] = {}
        for t in texts:
            unique.setdefault(t, len(unique))
        distinct = list(unique)
        rows = np.zeros((len(distinct), dim), dtype=np.float16)
        digests = [text_key(t) for t in distinct]
        found = (self._cache.get_many(self._prefix, digests) if self._cache is not None
                 else [None] * len(distinct))
        missing = [i for i, v in enumerate(found) if v is None]
        for i, v in enumerate(found):
            if v is not None:
                rows[i] = v
        for start in range(0, len(missing), BATCH):
            part = missing[start:start + BATCH]
            made = np.asarray(self._embed([distinct[i] for i in part]), dtype=np.float16)
            rows[part] = made
            self.embedded += len(part)
            if self._cache is not None:
                self._cache.put_many(self._prefix, [digests[i] for i in part], made)
            if progress is not None:
                progress(len(part))
        order = np.fromiter((unique[t] for t in texts), dtype=np.int64, count=len(texts))
        return rows[order].astype(np.float32)

    def _embed(self, texts: list[str]) -> np.ndarray:
        workers = self._workers
        if workers is not None and workers.closed:  # stopping: no embedding here either
            raise WorkerUnavailable("stopping")
        if workers is None or self._blob is None or not workers.takes(len(texts)):
            return embed_texts(self._fitted, texts)
        shares = workers.map(self._embed_share, texts)
        if workers.closed:
            raise WorkerUnavailable("stopping")
        return np.concatenate([out if out is not None else embed_texts(self._fitted, share)
                               for share, out in shares])

    def _embed_share(self, worker: Fitter, texts: list[str]) -> np.ndarray:
        out = worker.call(_embed_there, self._key, None, texts)
        if out is None:  # a new worker, or another embedder there: send this one
            out = worker.call(_embed_there, self._key, self._blob, texts)
        return out
