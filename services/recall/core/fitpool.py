"""Fitting an embedder, and re-embedding a refit's texts, in a worker process.

A fit (LSA: feature counting, tf-idf, a randomized SVD) is seconds of CPU-bound work at
20,000 texts, much of it in numpy and scipy calls that keep the GIL: run on the
indexer's thread it stalled every request of the server, up to 130 ms at a time. So a
sample of at least IN_WORKER_MIN texts is fitted in a spawned process (spawn, not fork:
the server has gRPC threads), which sends back the fitted state; this process restores
it (`restore(fitted(sample).state())` embeds exactly as `fitted(sample)` does). The
refit's re-embedding goes there too, a batch at a time (tokenpool.event_batches).

One worker, kept while work comes and stopped after IDLE_SECONDS without any. It is a
process of our own on a pipe only it and this process hold, not a ProcessPoolExecutor:
that executor's workers share one result pipe, and a worker killed while writing a large
result (an OOM kill) left its reader waiting forever. Here the worker's death is an end
of file, or a dead process seen while waiting: the call raises WorkerUnavailable and the
caller does the work itself, as it does for an embedder that cannot be pickled, a small
sample or a stopping server.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import threading
import time
from typing import Any, Callable, Optional, Sequence

from morphz.services.recall.embedding.api import Embedder

_log = logging.getLogger("morphz.recall.fitpool")
IN_WORKER_MIN = 1024  # a fit of 1,024 texts: ~0.2 s, GIL held up to ~10 ms at a time
IDLE_SECONDS = 60.0
ALIVE_CHECK_SECONDS = 1.0  # while waiting for a reply, how often the worker's life is seen


class WorkerUnavailable(Exception):
    """The worker cannot do this call (stopping, or its process died): do it here."""


def _fit_state(blob: bytes, sample: list[str]) -> bytes:
    """In the worker: the state of the embedder `blob` holds, fitted on `sample`."""
    base: Embedder = pickle.loads(blob)
    return base.fitted(sample).state()


def _serve(conn) -> None:
    """The worker process: (fn, args) in, (ok, result or exception) out, until EOF."""
    while True:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (True, fn(*args))
        except BaseException as e:  # noqa: BLE001 - the caller gets it, raised there
            reply = (False, e)
        conn.send(reply)


class _Process:
    """One spawned worker and this process's end of its pipe."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(theirs,), daemon=True,
                                name="morphz-fit-worker")
        self.proc.start()
        theirs.close()  # only the worker holds its end: its death is an end of file here

    def call(self, fn: Callable, args: tuple) -> Any:
        try:
            self.conn.send((fn, args))
            while not self.conn.poll(ALIVE_CHECK_SECONDS):
                if not self.proc.is_alive():
                    raise WorkerUnavailable("the worker process died")
            ok, value = self.conn.recv()
        except (EOFError, OSError) as e:  # BrokenPipeError is an OSError
            raise WorkerUnavailable(f"the worker process died ({type(e).__name__})") from e
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        self.conn.close()  # the worker reads EOF and returns
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


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
        self._proc: Optional[_Process] = None
        self._last_used = 0.0
        self._closed = False
        self.worker_pid: Optional[int] = None  # of the worker that made the last fit
        self.calls_done = 0  # what the worker finished (fits, batches of a refit)

    def takes(self, texts: int) -> bool:
        """Whether work over this many texts goes to the worker."""
        return self._min is not None and texts >= self._min and not self._closed

    def call(self, fn: Callable, *args) -> Any:
        """fn(*args) in the worker (started if need be); fn's own errors are raised
        here, and WorkerUnavailable when the worker cannot do it."""
        with self._calling:
            proc = self._current()
            try:
                value = proc.call(fn, args)
            except WorkerUnavailable:
                _log.warning("the recall worker process died; its work is done here")
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
        with self._lock:
            self._closed = True
            proc, self._proc = self._proc, None
        if proc is not None:
            proc.stop()

    # -- the worker's life -------------------------------------------------------------
    def _current(self) -> _Process:
        with self._lock:
            if self._closed:
                raise WorkerUnavailable("stopping")
            if self._proc is None:
                self._proc = _Process()
            return self._proc

    def _used(self) -> None:
        with self._lock:
            self._last_used = time.monotonic()
        timer = threading.Timer(self._idle, self._stop_if_idle)
        timer.daemon = True
        timer.start()

    def _stop_if_idle(self) -> None:
        if not self._calling.acquire(blocking=False):
            return  # busy: the call's own timer looks again
        try:
            with self._lock:
                if self._proc is None or time.monotonic() - self._last_used < self._idle:
                    return
                proc, self._proc = self._proc, None
            proc.stop()
        finally:
            self._calling.release()

    def _forget(self, proc: _Process) -> None:
        with self._lock:
            if self._proc is proc:
                self._proc = None
        proc.stop()


def _pid_and(fn: Callable, *args) -> tuple[int, Any]:
    """In the worker: (its pid, fn(*args))."""
    return os.getpid(), fn(*args)
