"""Opens every context's recall index at start, on a thread of its own, so that the first
search after a restart does not pay the open alone.

Opening a large index is seconds of work (the tantivy searcher, the vector leg's rows
loaded and partitioned, its embedder's fitted state restored, a model loaded by a first
query: Indexer.open). Done lazily, the first search of each context paid all of it. At
start the opener takes the contexts with an index folder one at a time and opens each;
a search that arrives while its context is being opened waits for that open only,
bounded by its deadline (Indexer.opened), and one of a context opened already, or not
yet begun, goes on (it opens its own index if the opener has not reached it).

One log line per context opened ("opened the recall index of NAME ..."), and one when
all are. A context whose open fails is left to its first request (logged). Contexts
named by a digest (names too long for a folder name) are not listed, so opened at
their first use."""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

_log = logging.getLogger("morphz.recall.opener")


class IndexOpener:
    def __init__(self, contexts: Callable[[], list[str]], open_one: Callable[[str], dict]) -> None:
        """`contexts()`: those to open; `open_one(context)`: open it, returning what it
        opened (documents, vectors) for the log line."""
        self._contexts, self._open_one = contexts, open_one
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recall-opener", daemon=True)

    def start(self) -> "IndexOpener":
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """No more contexts opened (the one under way finishes first, bounded)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        started = time.monotonic()
        try:
            contexts = self._contexts()
        except OSError:  # the folder cannot be listed: each opens at its first use
            _log.warning("cannot list the indexed contexts to open them", exc_info=True)
            return
        opened = 0
        for context in contexts:
            if self._stopping.is_set():
                return
            t = time.monotonic()
            try:
                what = self._open_one(context)
            except Exception:  # noqa: BLE001 - derived data: its first request opens it
                _log.warning("%s: opening its recall index at start failed; its first "
                             "request opens it", context, exc_info=True)
                continue
            opened += 1
            _log.info("opened the recall index of %s (%d documents, %d vectors) in %.2f s",
                      context, what.get("documents", 0), what.get("vectors", 0),
                      time.monotonic() - t)
        _log.info("opened the recall indexes of %d contexts in %.2f s", opened,
                  time.monotonic() - started)
