"""Fitting an embedder, and re-embedding a refit's texts, in a worker process.

A fit (LSA: feature counting, tf-idf, a randomized SVD) is seconds of CPU-bound work at
20,000 texts, much of it in numpy and scipy calls that keep the GIL: run on the
indexer's thread it stalled every request of the server, up to 130 ms at a time. So a
sample of at least IN_WORKER_MIN texts is fitted in a spawned process (spawn, not fork:
the server has gRPC threads), which sends back the fitted state; this process restores
it (`restore(fitted(sample).state())` embeds exactly as `fitted(sample)` does). The
refit's re-embedding goes there too, a batch at a time (tokenpool.event_batches).

One worker (worker_process.py), kept while work comes and stopped after IDLE_SECONDS
without any. A worker that died or cannot start raises WorkerUnavailable and the caller
does the work itself, as it does for an embedder that cannot be pickled, a small sample
or a stopping server.
"""
from __future__ import annotations

import logging
import os
import pickle
import threading
import time
from typing import Any, Callable, Optional, Sequence

from morphz.services.recall.runtime.worker_process import WorkerProcess, WorkerUnavailable
from morphz.services.recall.embedding.api import Embedder

_log = logging.getLogger("morphz.recall.fitpool")
IN_WORKER_MIN = 1024  # a fit of 1,024 texts: ~0.2 s, GIL held up to ~10 ms at a time
IDLE_SECONDS = 60.0
START_BACKOFF_SECONDS = 60.0


def _fit_state(blob: bytes, sample: list[str]) -> bytes:
    """In the worker: the state of the embedder `blob` holds, fitted on `sample`."""
    base: Embedder = pickle.loads(blob)
    return base.fitted(sample).state()


class Fitter:
    """`fitted(base, sample)`, and `call(fn, *args)`, in a worker process when the work
    is large (`takes`)."""

    def __init__(self, *, in_worker_min: Optional[int] = IN_WORKER_MIN,
                 idle_seconds: float = IDLE_SECONDS) -> None:
        """`in_worker_min`: None does all the work in this process."""
        self._min = in_worker_min
        self._idle = idle_seconds
        self._lock = threading.Lock()  # the worker's life
        self._calling = threading.Lock()  # one call at a time on its pipe
        self._proc: Optional[WorkerProcess] = None
        self._last_used = 0.0
        self._timer: Optional[threading.Timer] = None  # looks for idleness once due
        self._closed = False
        self._start_again = 0.0  # monotonic time a worker may be started again
        self.worker_pid: Optional[int] = None  # of the worker that made the last fit
        self.calls_done = 0  # what the worker finished (fits, batches of a refit)

    @property
    def closed(self) -> bool:
        return self._closed

    def takes(self, texts: int) -> bool:
        """Whether work over this many texts goes to the worker (not while one that died
        before answering anything waits out its START_BACKOFF_SECONDS)."""
        return (self._min is not None and texts >= self._min and not self._closed
                and time.monotonic() >= self._start_again)

    def call(self, fn: Callable, *args) -> Any:
        """fn(*args) in the worker (started if need be); fn's own errors are raised
        here, and WorkerUnavailable when the worker cannot do it."""
        with self._calling:
            try:
                return self._call(fn, *args)
            finally:
                if self._closed:  # close() left the worker to this thread, the pipe's user
                    self._stop_worker()

    def _call(self, fn: Callable, *args) -> Any:
        proc = self._current()
        try:
            value = proc.call(fn, *args)
        except WorkerUnavailable:
            if self._closed:
                pass  # close() cut the call short: no warning, nothing to wait out
            elif proc.answered:
                _log.warning("the recall worker process died; its work is done here")
            else:  # it cannot start (a program that runs a server without a
                # `__main__` guard: spawn runs the module again): not at every call
                _log.warning("the recall worker process did not start; work is done "
                             "here for %.0f s", START_BACKOFF_SECONDS)
                self._start_again = time.monotonic() + START_BACKOFF_SECONDS
            self._forget(proc)
            raise
        finally:
            self._used()
        self.calls_done += 1
        return value

    def fitted(self, base: Embedder, sample: Sequence[str]) -> Embedder:
        if not self.takes(len(sample)):
            return base.fitted(sample)
        try:
            blob = pickle.dumps(base)
        except Exception:  # noqa: BLE001 - e.g. a native session: fit in this process
            return base.fitted(sample)
        try:
            pid, state = self.call(_pid_and, _fit_state, blob, list(sample))
        except WorkerUnavailable:
            return base.fitted(sample)
        self.worker_pid = pid
        return base.restore(state)

    def close(self) -> None:
        """Stop the worker. A call on it is cut short: the worker is killed, and the
        calling thread, which sees it gone (WorkerUnavailable: the caller does the work
        itself), stops it when the call ends. Only the thread using the pipe closes it:
        a descriptor closed under another thread's poll or read may be reused by a file
        opened meanwhile, and that thread would read the file."""
        with self._lock:
            self._closed = True
            proc = self._proc
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if proc is None:
            return
        if self._calling.acquire(blocking=False):
            try:
                self._stop_worker()
            finally:
                self._calling.release()
        else:  # a call, or the idle timer, holds the pipe: it stops the worker after
            proc.kill()

    # -- the worker's life -------------------------------------------------------------
    def _current(self) -> WorkerProcess:
        with self._lock:
            if self._closed:
                raise WorkerUnavailable("stopping")
            if self._proc is None:
                self._proc = WorkerProcess("morphz-fit-worker")
            return self._proc

    def _used(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._last_used = time.monotonic()
            if self._timer is None:  # one timer at a time, however many calls come
                self._timer = self._start_timer(self._idle)

    def _start_timer(self, delay: float) -> threading.Timer:
        timer = threading.Timer(delay, self._stop_if_idle)
        timer.daemon = True
        timer.start()
        return timer

    def _stop_if_idle(self) -> None:
        with self._lock:
            self._timer = None
        if not self._calling.acquire(blocking=False):
            return  # busy: the call's _used() starts the next timer
        try:
            with self._lock:
                if self._proc is None:
                    return
                left = self._idle - (time.monotonic() - self._last_used)
                if left > 0 and not self._closed:  # used since this timer started
                    if self._timer is None:
                        self._timer = self._start_timer(left)
                    return
            self._stop_worker()
        finally:
            self._calling.release()

    def _stop_worker(self) -> None:
        """Stop the worker, if any (with `_calling` held: nobody else uses its pipe)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            proc.stop()

    def _forget(self, proc: WorkerProcess) -> None:
        with self._lock:
            if self._proc is proc:
                self._proc = None
        proc.stop()


def _pid_and(fn: Callable, *args) -> tuple[int, Any]:
    """In the worker: (its pid, fn(*args))."""
    return os.getpid(), fn(*args)
