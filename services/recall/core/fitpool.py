"""Fitting an embedder on a large sample in a worker process.

A fit (LSA: feature counting, tf-idf, a randomized SVD) is seconds of CPU-bound work at
20,000 texts, much of it in numpy and scipy calls that keep the GIL: run on the
indexer's thread it stalled every request of the server, up to 130 ms at a time. So a
sample of at least IN_WORKER_MIN texts is fitted in a spawned process (spawn, not fork:
the server has gRPC threads), which sends back the fitted state; this process restores
it (`restore(fitted(sample).state())` embeds exactly as `fitted(sample)` does). One
worker is kept while fits keep coming and stopped after IDLE_SECONDS without one.
An embedder that cannot be pickled, a small sample, or a worker that died fits here.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Optional, Sequence

from morphz.services.recall.embedding.api import Embedder

_log = logging.getLogger("morphz.recall.fitpool")
IN_WORKER_MIN = 1024  # a fit of 1,024 texts: ~0.2 s, GIL held up to ~10 ms at a time
IDLE_SECONDS = 60.0


def _fit_state(blob: bytes, sample: list[str]) -> tuple[int, bytes]:
    """In the worker: (its pid, the state of the embedder fitted on `sample`)."""
    base: Embedder = pickle.loads(blob)
    return os.getpid(), base.fitted(sample).state()


class Fitter:
    """`fitted(base, sample)`, in a worker process when the sample is large."""

    def __init__(self, *, in_worker_min: Optional[int] = IN_WORKER_MIN,
                 idle_seconds: float = IDLE_SECONDS) -> None:
        """`in_worker_min`: None fits every sample in this process."""
        self._min = in_worker_min
        self._idle = idle_seconds
        self._lock = threading.Lock()
        self._pool: Optional[ProcessPoolExecutor] = None
        self._busy = 0
        self._last_used = 0.0
        self._closed = False
        self.worker_pid: Optional[int] = None  # of the last fit made in a worker

    def fitted(self, base: Embedder, sample: Sequence[str]) -> Embedder:
        if self._min is None or len(sample) < self._min:
            return base.fitted(sample)
        try:
            blob = pickle.dumps(base)
        except Exception:  # noqa: BLE001 - e.g. a native session: fit in this process
            return base.fitted(sample)
        pool = self._acquire()
        if pool is None:  # closed: the server is stopping
            return base.fitted(sample)
        try:
            pid, state = pool.submit(_fit_state, blob, list(sample)).result()
        except BrokenProcessPool:
            _log.warning("the fit worker died; fitting %d texts in the server process",
                         len(sample))
            self._discard(pool)
            return base.fitted(sample)
        except RuntimeError as e:  # shut down between _acquire and submit (a stop)
            if self._pool is pool and not self._closed:
                raise  # the fit's own error, from the worker
            _log.debug("the fit worker stopped (%s); fitting in the server process", e)
            return base.fitted(sample)
        finally:
            self._release()
        self.worker_pid = pid
        return base.restore(state)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    # -- the worker's life -------------------------------------------------------------
    def _acquire(self) -> Optional[ProcessPoolExecutor]:
        with self._lock:
            if self._closed:
                return None
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=1, mp_context=multiprocessing.get_context("spawn"))
            self._busy += 1
            return self._pool

    def _release(self) -> None:
        with self._lock:
            self._busy -= 1
            self._last_used = time.monotonic()
        timer = threading.Timer(self._idle, self._stop_if_idle)
        timer.daemon = True
        timer.start()

    def _stop_if_idle(self) -> None:
        with self._lock:
            if (self._pool is None or self._busy
                    or time.monotonic() - self._last_used < self._idle):
                return
            pool, self._pool = self._pool, None
        pool.shutdown(wait=True)

    def _discard(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)
