"""The background worker: tails every context's outbox and applies it to the index."""
from __future__ import annotations

import logging
import threading
from typing import Callable

from morphz.services.recall.core.indexer import Indexer

_log = logging.getLogger("morphz.recall.worker")


class OutboxWorker:
    def __init__(self, indexer: Indexer, contexts: Callable[[], list[str]], *,
                 idle_seconds: float = 0.05, busy_seconds: float = 0.1) -> None:
        self._indexer = indexer
        self._contexts = contexts
        self._idle = idle_seconds
        # After a pass that indexed something, wait a little: under a steady stream of
        # commits each index commit then covers many intents, and the worker does not
        # compete with the commit path for the interpreter (search lags <= ~0.1 s more).
        self._busy = busy_seconds
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
        for context in self._contexts():
            if self._stop.is_set():
                break
            try:
                applied += self._indexer.catch_up(context)
            except Exception:  # noqa: BLE001 - keep tailing the other contexts
                _log.exception("indexing %s failed; will retry", context)
        return applied

    def _run(self) -> None:
        while not self._stop.is_set():
            self._stop.wait(self._busy if self.run_once() else self._idle)
