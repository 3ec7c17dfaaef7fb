"""Follows the storage change feed and keeps every context's index in step with it.

One thread reads the feed (a Watch stream, or the in-process store's), another applies
what has arrived: after a page that indexed something it rests (three times as long as
the application took, at most 2 s), so that under a steady stream of commits each
application covers many of them and the commit path keeps the interpreter most of the
time. One tantivy commit per context and application is the expensive part (some 20 ms
of CPU however little it holds), so with many contexts written at once an application
takes long, and a rest capped lower would leave indexing most of the time. A longer
ratio saved little more CPU (7.5 against 8.1 ms a commit over 64 contexts) for several
times the lag under load. The position applied is saved beside the indexes after their
commits; a restart resumes from it, and each context index skips the changes it already
holds, so nothing is missed or indexed twice. An in-process store's feed is read only
when the applier asks for more (one page for all the commits made while it worked and
rested, not a read per commit); a remote store streams its pages regardless. Either
way an application takes the whole backlog up to the head known when it starts, not
only the pages read by then (each application commits every context it touches).

A position means something only in the feed of one store. It is saved with the store's
identity; when the feed comes from another store (a restored backup gets a new identity,
and its positions past the backup name other commits than the original's) or its head is
behind the position (a store without an identity replaced), every index is dropped and
the feed followed again from the start: the indexes are derived, and skipping by a
version the replaced store reached would leave out the new store's commits.

Changes of contexts nobody has searched lately are held back (holds.py) and applied at
the context's next read (`catch_up`) or within `idle` seconds; the position saved stays below
them. The follower remembers the last change it took (`taken`, applied or held) apart
from the position everything up to which is applied.

Over sharded storage there is one follower per shard (`feed`: the shard's name), each
with a position of its own; starting over drops only the indexes of that shard's contexts.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Optional

from morphz.services.recall.runtime.holds import Holds
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.shared.storage.api import Store
from morphz.shared.storage.feed import Change, FeedPage

_log = logging.getLogger("morphz.recall.follower")
QUEUED_CHANGES = 50_000  # changes read ahead of the applier (the reader waits beyond this)
BACKLOG_WAIT_SECONDS = 1.0  # for the next page of a backlog being read
# The shortest rest between applications. With nothing to index (changes held), an
# application is a few microseconds, and without this the follower woke, read a page
# and took it for each commit: at one client, 10-15% of the server's CPU a commit. A
# pushed feed (a storage service's) is asked to gather its pages as long.
MIN_REST_SECONDS = 0.05
STOP_SECONDS = 10.0  # how long stop() waits for an application under way


class _PageQueue:
    """Feed pages read ahead of the applier (with the epoch they were read in), bounded by
    the changes they hold, not by pages: a followed stream sends a page for every few
    commits, and a bound of 256 pages capped an application at a few hundred commits:
    over 64 contexts, one tantivy commit per context for every four commits or so. A page
    always fits an empty queue."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._items: deque[tuple[int, FeedPage]] = deque()
        self._changes = 0
        self._moved = threading.Condition()

    def put(self, item: tuple[int, FeedPage], timeout: float) -> bool:
        """Queue the page, waiting up to `timeout` for room; whether it was queued."""
        with self._moved:
            if self._items and self._changes >= self._limit:
                self._moved.wait(timeout)
                if self._items and self._changes >= self._limit:
                    return False
            self._items.append(item)
            self._changes += len(item[1].changes)
            self._moved.notify_all()
            return True

    def get(self, timeout: float) -> Optional[tuple[int, FeedPage]]:
        """The oldest page, waiting up to `timeout` for one (None: none came)."""
        with self._moved:
            if not self._items:
                self._moved.wait(timeout)
                if not self._items:
                    return None
            return self._pop()

    def drain(self) -> list[tuple[int, FeedPage]]:
        with self._moved:
            return [self._pop() for _ in range(len(self._items))]

    def _pop(self) -> tuple[int, FeedPage]:
        item = self._items.popleft()
        self._changes -= len(item[1].changes)
        self._moved.notify_all()
        return item


class FeedFollower:
    def __init__(self, store: Store, indexer: Indexer, indexes: IndexDirectory, *,
                 rest_ratio: float = 3.0, max_rest_seconds: float = 2.0,
                 min_rest_seconds: float = MIN_REST_SECONDS,
                 retry_seconds: float = 0.5, feed: str = "", idle_seconds: float = 0.0) -> None:
        """After each application the follower rests `rest_ratio` times as long as it
        took, at least `min_rest_seconds` and at most `max_rest_seconds`, so commits made
        meanwhile come as one page. `idle_seconds`: how long a context goes unsearched
        before its changes are held (holds.py; 0: every change is applied as it comes)."""
        self._store, self._indexer, self._indexes = store, indexer, indexes
        self._ratio, self._max_rest, self._retry = rest_ratio, max_rest_seconds, retry_seconds
        self._min_rest = min_rest_seconds
        self._feed = feed
        self._position, self._store_id = indexes.feed_position(feed)
        self._taken = self._position
        self._head = self._position
        self._holds = Holds(idle_seconds)
        # Pages are queued with the epoch they were read in; starting over (a replaced
        # store) moves the epoch, so pages of the old store left in the queue are dropped.
        self._pages = _PageQueue(QUEUED_CHANGES)
        self._epoch = 0
        self._applying = threading.Lock()  # one application, or one start-over, at a time
        self._stop = threading.Event()
        self._rewind = threading.Event()  # the applier asks the reader to reconnect
        # Set while the applier waits for pages. A lazy feed (an in-process store) is asked
        # for its next page only then, so the commits made while the applier worked and
        # rested come as one page (one read) instead of a page per commit.
        self._wanted = threading.Event()
        self._threads = [threading.Thread(target=self._read, name=f"recall-feed-read{feed}",
                                          daemon=True),
                         threading.Thread(target=self._apply_loop,
                                          name=f"recall-feed-apply{feed}", daemon=True)]

    def start(self) -> "FeedFollower":
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        """Stop reading and applying, waiting up to STOP_SECONDS for each thread; an
        application under way is not cut short (running() says if one is)."""
        self._stop.set()
        for t in self._threads:
            t.join(STOP_SECONDS)

    def running(self) -> bool:
        """Whether a thread of this follower is still alive (after stop(): an
        application outlived its wait and may still write indexes and the position)."""
        return any(t.is_alive() for t in self._threads)

    def join(self) -> None:
        """Wait, however long it takes, until every thread has ended."""
        for t in self._threads:
            t.join()

    def status(self) -> dict:
        """This replica's place in the feed: the position everything up to which is
        applied (where a restart resumes), the head, and the lag: the changes up to the
        head not applied yet, held ones included (`feed_held`). The head: a lazy feed's
        store is asked (it is in process; the follower hears of nothing while it rests, so
        the head it last read would say caught up with commits waiting), a streaming
        feed's is the head its last page named."""
        taken = self._taken
        head = max(self._head, self._position, taken)
        if self._store.watch_is_lazy:
            try:
                head = max(head, self._store.feed_head())
            except Exception:  # noqa: BLE001 - a closed store: what was last heard of
                _log.debug("feed head unavailable", exc_info=True)
        held = self._holds.held()
        return {"feed_position": self._position, "feed_head": head,
                "feed_lag": head - taken + held, "feed_held": held}

    def catch_up(self, context: str, search: bool = True) -> None:
        """Before a read of the context: apply what is held for it (the read sees every
        change this follower has taken); after a `search`, none of its changes are held
        for `idle` seconds. When that fails, the changes are held again and the read sees
        the index as is."""
        token, held = self._holds.claim(context, search)
        if token is None:
            return
        try:
            self._indexer.apply(context, held)
        except Exception:  # noqa: BLE001 - derived data: the read goes on; lag shows it
            _log.warning("%s: applying held changes failed; will retry", context, exc_info=True)
            self._holds.release(token, context, held)
            return
        self._holds.release(token, context)

    # -- reading -----------------------------------------------------------------------
    def _read(self) -> None:
        reachable = True
        while not self._stop.is_set():
            self._rewind.clear()
            after, epoch = self._taken, self._epoch  # from what is applied or held
            try:
                for page in self._store.watch(after, stop=self._stop,
                                              gather=self._min_rest):
                    if self._rewind.is_set():
                        break
                    if self._replaced(page, after):
                        self._start_over(page.store)
                        break
                    reachable = True
                    self._put((epoch, page))
                    behind = bool(page.changes) and page.changes[-1].position < page.head
                    if self._store.watch_is_lazy and not behind:  # read a backlog at once
                        self._until_wanted()
            except Exception:  # noqa: BLE001 - a remote store may be away for a while
                if reachable:
                    _log.warning("cannot follow the change feed; will retry", exc_info=True)
                reachable = False
                self._stop.wait(self._retry)

    def _replaced(self, page: FeedPage, after: int) -> bool:
        if page.store and page.store != self._store_id:
            if not self._store_id:  # the first store seen, or a position saved without one
                self._store_id = page.store
            else:
                _log.warning("the feed is now another store's (%s, was %s): dropping the "
                             "indexes, following from the start", page.store, self._store_id)
                return True
        if page.head < after:
            _log.warning("feed head %d is behind the saved position %d: dropping the "
                         "indexes, following from the start", page.head, after)
            return True
        return False

    def _start_over(self, store: str) -> None:
        with self._applying:
            self._epoch += 1
            self._pages.drain()
            self._holds.clear()
            self._indexes.reset(self._store.contexts() if self._feed else None)
            self._position, self._taken, self._head, self._store_id = 0, 0, 0, store
            self._indexes.save_feed_position(0, store, self._feed)

    def _until_wanted(self) -> None:
        while not self._wanted.wait(0.2):
            if self._stop.is_set() or self._rewind.is_set():
                return

    def _put(self, item: tuple[int, FeedPage]) -> None:
        while not self._stop.is_set() and not self._rewind.is_set():
            if self._pages.put(item, timeout=0.2):
                return

    # -- applying ----------------------------------------------------------------------
    def _apply_loop(self) -> None:
        while not self._stop.is_set():
            self._wanted.set()
            first = self._pages.get(timeout=0.2)
            if first is None:
                self._settle_now()
                continue
            self._wanted.clear()
            items = self._backlog(first)
            started = time.monotonic()
            with self._applying:
                pages = [p for epoch, p in items if epoch == self._epoch]
                if not pages:
                    continue
                self._head = max(self._head, max(p.head for p in pages))
                changes, gap = self._next_run(c for p in pages for c in p.changes)
                if gap:  # a page from a stream older than the position: read again from it
                    self._rewind.set()
                if not changes:
                    continue
                try:
                    self.apply(changes)
                    failed = False
                except Exception:  # noqa: BLE001 - keep the position: retried from it
                    _log.exception("indexing from feed position %d failed; will retry",
                                   self._position)
                    self._forget_taken()
                    failed = True
            if failed:
                self._stop.wait(self._retry)
                continue
            took = time.monotonic() - started
            self._stop.wait(min(self._max_rest, max(self._min_rest, took * self._ratio)))

    def _backlog(self, first: tuple[int, FeedPage]) -> list[tuple[int, FeedPage]]:
        """`first` and the pages after it up to the head known now, as far as the reader
        brings them without a pause. A page that ends before its head means the reader
        is reading the rest of a backlog; applying what is queued at that instant would
        commit every context's index once per page (over 64 contexts, 1,000 commits took
        three applications of some 2 s each). Commits made after this stay for the next
        application, so a steady load cannot hold one back."""
        items = [first] + self._pages.drain()
        target = max(p.head for _, p in items)
        taken = sum(len(p.changes) for _, p in items)  # then counted as pages come
        while taken < QUEUED_CHANGES:
            last = items[-1][1]
            if not last.changes or last.changes[-1].position >= target:
                break
            more = self._pages.get(timeout=BACKLOG_WAIT_SECONDS)
            if more is None:
                break
            came = [more] + self._pages.drain()
            items += came
            taken += sum(len(p.changes) for _, p in came)
        return items

    def _next_run(self, changes) -> tuple[list[Change], bool]:
        """The changes that continue the last one taken without a hole (feed positions
        are consecutive), and whether a hole cut the run short."""
        run, expected = [], self._taken + 1
        for c in changes:
            if c.position < expected:
                continue  # already applied or held
            if c.position > expected:
                return run, True
            run.append(c)
            expected += 1
        return run, False

    def apply(self, changes: list[Change]) -> None:
        """Index the changes (in feed order) or hold them, then save the position
        everything before is applied up to."""
        by_context: dict[str, list[Change]] = {}
        for c in changes:
            if c.context:  # not a deleted context's filler (storage/feed.py FILLER)
                by_context.setdefault(c.context, []).append(c)
        for context, mine in by_context.items():
            if self._stop.is_set():
                return  # the position stays before what was not applied
            now = self._holds.take(context, mine)
            if now:
                self._indexer.apply(context, now)
        self._taken = changes[-1].position
        self._settle()

    def _settle(self) -> None:
        """Apply the changes held long enough, and save the position reached."""
        for context, held in self._holds.due():
            if self._stop.is_set():
                return
            self._indexer.apply(context, held)
        floor = self._holds.floor(self._taken)
        if floor != self._position:
            self._indexes.save_feed_position(floor, self._store_id, self._feed)
            self._position = floor  # never reported ahead of what is saved

    def _settle_now(self) -> None:
        """While no page comes: what `_settle` does after an application."""
        with self._applying:
            try:
                self._settle()
            except Exception:  # noqa: BLE001 - as a failed application: retried from it
                _log.exception("indexing held changes failed; will retry from feed "
                               "position %d", self._position)
                self._forget_taken()

    def _forget_taken(self) -> None:
        """After a failure: drop what is held and read the feed again from the position
        saved (applied changes are skipped by each index's own position)."""
        self._holds.clear()
        self._taken = self._position
        self._rewind.set()
