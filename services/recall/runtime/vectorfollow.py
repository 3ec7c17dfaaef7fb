"""The vector follower: one thread that brings each context's vector leg up to its
lexical leg, so no commit, append or lexical search waits for an embedding.

A lexical write names its context (`due`); the thread takes the contexts due in turn,
one step each (Indexer.apply_vectors: a batch of changes embedded and committed), so a
large backlog of one context does not hold the others back. A step that fails (a store
that does not answer, say) is tried again RETRY_SECONDS later; the leg's lag shows it
meanwhile. At start every context with an index folder is due: a restart may have left
legs behind that no new write names.

A write's `due` is taken GATHER_SECONDS later, not at once: the writes that come
meanwhile join the same step, so a steady stream of commits costs one step (a read of
the feed, a trip to the worker, a commit of the leg) per gathering, not one per commit.
A backlog's next steps, and every context due at start, run at once.

After a step the thread rests REST_RATIO times the CPU time it spent itself (reading
rows, the cache, appending; not the embedding, which is the worker process's), at most
MAX_REST_SECONDS: that work holds the interpreter, so resting leaves it to commits and
searches, as the lexical follower does (follower.py). A pretrained model's step is
mostly waiting for the worker, so it hardly rests.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional

from morphz.shared.errors import MorphzError

_log = logging.getLogger("morphz.recall.vectors")
RETRY_SECONDS = 5.0
REST_RATIO, MAX_REST_SECONDS = 3.0, 2.0
GATHER_SECONDS = 0.25
STOP_SECONDS = 30.0


class VectorFollower:
    def __init__(self, contexts: Callable[[], list[str]], *,
                 retry_seconds: float = RETRY_SECONDS,
                 gather_seconds: float = GATHER_SECONDS) -> None:
        """`contexts()`: those due at start."""
        self._contexts = contexts
        self._retry = retry_seconds
        self._gather = gather_seconds
        self._cond = threading.Condition()
        self._due: dict[str, float] = {}  # context -> monotonic time it may run again
        self._stopping = False
        self._stopped = threading.Event()
        self._step: Optional[Callable[[str], int]] = None
        self._thread = threading.Thread(target=self._run, name="recall-vectors", daemon=True)

    def start(self, step: Callable[[str], int]) -> "VectorFollower":
        """`step(context)`: one step of its vector leg; how much it did (0: caught up)."""
        self._step = step
        try:
            started = self._contexts()
            with self._cond:
                for c in started:
                    self._due.setdefault(c, 0.0)
        except OSError:  # the folder cannot be listed: writes and searches name them
            _log.warning("cannot list the indexed contexts", exc_info=True)
        self._thread.start()
        return self

    def due(self, context: str) -> None:
        """A write to context: its leg steps within GATHER_SECONDS (a context already
        due keeps its turn: later writes never put it off)."""
        with self._cond:
            if context not in self._due:
                self._due[context] = time.monotonic() + self._gather
                self._cond.notify()

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _next(self) -> Optional[str]:
        with self._cond:
            while not self._stopping:
                now = time.monotonic()
                ready = [c for c, at in self._due.items() if at <= now]
                if ready:
                    context = ready[0]
                    del self._due[context]
                    return context
                wait = min(self._due.values()) - now if self._due else None
                self._cond.wait(wait)
            return None

    def _failed(self, context: str) -> None:
        if self._stopping:
            return
        _log.warning("%s: the vector leg's step failed; trying again in %.0f s", context,
                     self._retry, exc_info=True)
        with self._cond:
            self._due[context] = time.monotonic() + self._retry

    def _run(self) -> None:
        while (context := self._next()) is not None:
            cpu = time.thread_time()
            try:
                more = self._step(context)
            except MorphzError as e:
                if e.reason != "CONTEXT_NOT_FOUND":  # (deleted meanwhile: nothing to follow)
                    self._failed(context)
                continue
            except Exception:  # noqa: BLE001 - derived data: tried again; the lag shows it
                self._failed(context)
                continue
            if more:
                rest = min(MAX_REST_SECONDS, REST_RATIO * (time.thread_time() - cpu))
                with self._cond:  # at the back of the turn: the others go first
                    self._due.pop(context, None)
                    self._due[context] = 0.0
                self._stopped.wait(rest)  # a write's due() does not cut it short
