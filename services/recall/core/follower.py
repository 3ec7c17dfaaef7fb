"""Follows the storage change feed and keeps every context's index in step with it.

One thread reads the feed (a Watch stream, or the in-process store's), another applies
what has arrived: after a page that indexed something it rests a little, so that under
a steady stream of commits each application covers many of them (one tantivy commit per
context and application is the expensive part) and the commit path keeps the
interpreter most of the time. The position applied is saved beside the indexes after
their commits; a restart resumes from it, and each context index skips the changes it
already holds, so nothing is missed or indexed twice.
"""
from __future__ import annotations

import logging
import queue
import threading
import time

from morphz.services.recall.core.indexer import Indexer
from morphz.services.recall.index.tantivy_index import IndexDirectory
from morphz.shared.storage.api import Change, FeedPage, Store

_log = logging.getLogger("morphz.recall.follower")
QUEUED_PAGES = 256  # pages read ahead of the applier (the reader waits beyond this)


class FeedFollower:
    def __init__(self, store: Store, indexer: Indexer, indexes: IndexDirectory, *,
                 rest_ratio: float = 3.0, max_rest_seconds: float = 0.5,
                 retry_seconds: float = 0.5) -> None:
        self._store, self._indexer, self._indexes = store, indexer, indexes
        self._ratio, self._max_rest, self._retry = rest_ratio, max_rest_seconds, retry_seconds
        self._position = indexes.feed_position()
        self._head = self._position
        self._pages: "queue.Queue[FeedPage]" = queue.Queue(QUEUED_PAGES)
        self._stop = threading.Event()
        self._rewind = threading.Event()  # the applier asks the reader to reconnect
        self._threads = [threading.Thread(target=self._read, name="recall-feed-read", daemon=True),
                         threading.Thread(target=self._apply_loop, name="recall-feed-apply",
                                          daemon=True)]

    def start(self) -> "FeedFollower":
        for t in self._threads:
            t.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout)

    def status(self) -> dict:
        """This replica's place in the feed: applied position, the head it last heard of."""
        head = max(self._head, self._position)
        return {"feed_position": self._position, "feed_head": head,
                "feed_lag": head - self._position}

    # -- reading -----------------------------------------------------------------------
    def _read(self) -> None:
        reachable = True
        while not self._stop.is_set():
            self._rewind.clear()
            after = self._position  # a (re)connection starts from what is applied
            try:
                for page in self._store.watch(after, stop=self._stop):
                    if self._rewind.is_set():
                        break
                    if page.head < after:
                        # The feed is behind this replica: the store was replaced (a
                        # restore, a new data folder). Start over; indexes skip by version.
                        _log.warning("feed head %d is behind the saved position %d: "
                                     "following from the start", page.head, after)
                        self._position = 0
                        break
                    reachable = True
                    self._put(page)
            except Exception:  # noqa: BLE001 - a remote store may be away for a while
                if reachable:
                    _log.warning("cannot follow the change feed; will retry", exc_info=True)
                reachable = False
                self._stop.wait(self._retry)

    def _put(self, page: FeedPage) -> None:
        while not self._stop.is_set() and not self._rewind.is_set():
            try:
                self._pages.put(page, timeout=0.2)
                return
            except queue.Full:
                continue

    def _drain(self) -> list[FeedPage]:
        out = []
        while True:
            try:
                out.append(self._pages.get_nowait())
            except queue.Empty:
                return out

    # -- applying ----------------------------------------------------------------------
    def _apply_loop(self) -> None:
        while not self._stop.is_set():
            try:
                first = self._pages.get(timeout=0.2)
            except queue.Empty:
                continue
            pages = [first] + self._drain()
            self._head = max(self._head, max(p.head for p in pages))
            changes, gap = self._next_run(c for p in pages for c in p.changes)
            if gap:  # a page from a stream older than the position: read again from it
                self._rewind.set()
            if not changes:
                continue
            started = time.monotonic()
            try:
                self.apply(changes)
            except Exception:  # noqa: BLE001 - keep the position: retried from it
                _log.exception("indexing from feed position %d failed; will retry",
                               self._position)
                self._rewind.set()
                self._stop.wait(self._retry)
                continue
            self._stop.wait(min(self._max_rest, (time.monotonic() - started) * self._ratio))

    def _next_run(self, changes) -> tuple[list[Change], bool]:
        """The changes that continue the applied position without a hole (feed positions
        are consecutive), and whether a hole cut the run short."""
        run, expected = [], self._position + 1
        for c in changes:
            if c.position < expected:
                continue  # already applied
            if c.position > expected:
                return run, True
            run.append(c)
            expected += 1
        return run, False

    def apply(self, changes: list[Change]) -> None:
        """Index the changes (in feed order), then save the position they reach."""
        by_context: dict[str, list[Change]] = {}
        for c in changes:
            by_context.setdefault(c.context, []).append(c)
        for context, mine in by_context.items():
            if self._stop.is_set():
                return  # the position stays before what was not applied
            self._indexer.apply(context, mine)
        self._indexes.save_feed_position(changes[-1].position)
        self._position = changes[-1].position  # never reported ahead of what is saved
