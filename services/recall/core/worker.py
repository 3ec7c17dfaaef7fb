"""The background worker: tails every context's outbox and applies it to the index."""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from morphz.services.recall.core.indexer import Indexer

_log = logging.getLogger("morphz.recall.worker")


class OutboxWorker:
    def __init__(self, indexer: Indexer, contexts: Callable[[], list[str]], *,
                 idle_seconds: float = 0.05, rest_ratio: float = 3.0,
                 max_rest_seconds: float = 0.5) -> None:
        self._indexer = indexer
        self._contexts = contexts
        self._idle = idle_seconds
        # After a pass that indexed something, rest `rest_ratio` times as long as the pass
        # took (within [idle, max_rest]): the worker then holds the interpreter at most
        # ~1/(1 + ratio) of the time the commit path needs it, and under a steady stream
        # of commits each pass covers more of them (one tantivy commit per context and
        # pass is the expensive part). Search lags by about a pass and its rest.
        self._ratio = rest_ratio
        self._max_rest = max_rest_seconds
        self._reachable = True  # whether the last listing of contexts worked (log once)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recall-outbox", daemon=True)

    def start(self) -> "OutboxWorker":
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def run_once(self) -> int:
        """One pass over all contexts; returns the number of intents applied."""
        applied = 0
        try:
            contexts = self._contexts()
        except Exception:  # noqa: BLE001 - a remote store may be away for a while: retry
            if self._reachable:
                _log.warning("cannot list the contexts; will retry", exc_info=True)
            self._reachable = False
            return 0
        self._reachable = True
        for context in contexts:
            if self._stop.is_set():
                break
            try:
                applied += self._indexer.catch_up(context)
            except Exception:  # noqa: BLE001 - keep tailing the other contexts
                _log.exception("indexing %s failed; will retry", context)
        return applied

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            applied = self.run_once()
            spent = time.monotonic() - started
            rest = min(self._max_rest, max(self._idle, spent * self._ratio)) if applied \
                else self._idle
            self._stop.wait(rest)
