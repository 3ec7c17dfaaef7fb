"""One spawned worker process on a pipe only it and this process hold.

Spawned, not forked: the server has gRPC threads. Not a ProcessPoolExecutor: that
executor's workers share one result pipe, and a worker killed while writing a large
result (an OOM kill) left its reader waiting forever. Here the worker's death is an end
of file, or a dead process seen while waiting: the call raises WorkerUnavailable and the
caller does the work itself. What spawn pickles for the child is only its pipe end:
spawn writes that to the child while still holding the child's end of that pipe, so a
large one (an executor's initializer arguments: a fitted embedder) blocked this process
forever when the child died first (a program without a `__main__` guard, run again by
spawn, does).

Calls are answered in order: `send` calls, `receive` their results, or `call` one. The
worker reads calls on a thread of its own while it works, so this process may send the
next call before receiving a result (keeping the worker busy) without both sides ever
blocked on full pipes: the worker writing a large result, this process a large call.
"""
from __future__ import annotations

import multiprocessing
import os
import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable

ALIVE_CHECK_SECONDS = 1.0  # while waiting for a reply, how often the worker's life is seen
# One BLAS thread in a worker, as in the server (wiring.py): set before numpy loads its
# BLAS, which otherwise starts a thread a core that spins. Starting a fit worker (its
# imports included) took 370-530 ms of CPU with them, 290-340 without; the rebuild's
# workers, one a core, each started as many.
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class WorkerUnavailable(Exception):
    """The worker cannot do this call (stopping, or its process died): do it here."""


@dataclass(frozen=True)
class Keeping:
    """A call that is handed, as its first argument, what its worker keeps between calls:
    a dict the worker's loop owns, empty when the worker starts (an embedder restored
    once there serves the calls after)."""
    fn: Callable


def _serve(conn) -> None:
    """The worker process: (fn, args) in, (ok, result or exception) out, until EOF.
    ONE_BLAS_THREAD is set first: before the first call's unpickling imports anything
    (only the program's main module, which spawn imports here first, comes before it:
    `morphz serve`'s loads no numpy)."""
    os.environ.update(ONE_BLAS_THREAD)
    calls: queue.SimpleQueue = queue.SimpleQueue()
    kept: dict = {}  # Keeping calls' (this worker's whole life)

    def read() -> None:
        while True:
            try:
                calls.put(conn.recv())
            except (EOFError, OSError):
                calls.put(None)
                return
    threading.Thread(target=read, name="calls", daemon=True).start()
    while (call := calls.get()) is not None:
        fn, args = call
        try:
            reply = (True, fn.fn(kept, *args) if isinstance(fn, Keeping) else fn(*args))
        except BaseException as e:  # noqa: BLE001 - the caller gets it, raised there
            reply = (False, e)
        try:
            conn.send(reply)
        except OSError:  # this process closed the pipe (stopping): nobody waits for it
            return


class WorkerProcess:
    """One spawned worker and this process's end of its pipe."""

    def __init__(self, name: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(theirs,), daemon=True, name=name)
        self.proc.start()
        theirs.close()  # only the worker holds its end: its death is an end of file here
        self.answered = 0  # results received (0 after a death: it never started)

    def send(self, fn: Callable, *args) -> None:
        """Queue fn(*args) there (a Keeping(fn): fn(what the worker keeps, *args))."""
        try:
            self.conn.send((fn, args))
        except OSError as e:  # BrokenPipeError is an OSError
            raise WorkerUnavailable(f"the worker process died ({type(e).__name__})") from e

    def receive(self) -> Any:
        """The result of the oldest call not received yet; fn's own error is raised
        here."""
        try:
            while not self.conn.poll(ALIVE_CHECK_SECONDS):
                if not self.proc.is_alive():
                    raise WorkerUnavailable("the worker process died")
            ok, value = self.conn.recv()
        except (EOFError, OSError) as e:
            raise WorkerUnavailable(f"the worker process died ({type(e).__name__})") from e
        self.answered += 1
        if not ok:
            raise value
        return value

    def call(self, fn: Callable, *args) -> Any:
        self.send(fn, *args)
        return self.receive()

    def kill(self) -> None:
        """End the worker now, from any thread: a call waiting on it raises
        WorkerUnavailable, and its thread then stops it (the pipe is left to that thread)."""
        self.proc.kill()

    def stop(self) -> None:
        """Close the pipe and end the worker. By the thread that calls it, or while no
        call is on it (see kill)."""
        self.conn.close()  # the worker reads EOF and returns
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
