"""The followers of a recall replica: one FeedFollower per change feed, the store's own
or each storage shard's, as the shards are registered now: shards registered after the
replica started, moved to another address, or gone are looked for again every
`interval` seconds (a lookup that fails, etcd not answering say, is tried at the next)."""
from __future__ import annotations

import logging
import threading
from typing import Callable, Optional

from morphz.services.recall.runtime.follower import FeedFollower
from morphz.shared.storage.api import Store

_log = logging.getLogger("morphz.recall.feeds")


class Feeds:
    def __init__(self, feeds: Callable[[], dict[str, Store]],
                 follow: Callable[[str, Store], FeedFollower], *,
                 interval: Optional[float] = None) -> None:
        """`feeds()`: feed name -> store (name "" for a store's single feed);
        `follow(name, store)`: a started follower; `interval`: None for a fixed set."""
        self._feeds, self._follow, self._interval = feeds, follow, interval
        self._lock = threading.Lock()  # guards self._followers and self._stopped
        self._followers: dict[str, tuple[Store, FeedFollower]] = {}  # name -> (store, it)
        self._stopped: list[FeedFollower] = []  # stopped ones, for release_when_stopped
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="recall-feeds", daemon=True)

    def start(self) -> "Feeds":
        self._sync(first=True)  # fails the start-up if the feeds cannot be listed at all
        if self._interval is not None:
            self._thread.start()
        return self

    def _sync(self, first: bool = False) -> None:
        """Follow every feed listed now: a new shard, or one registered again at another
        address (its store changed), gets a follower; a follower whose shard is gone, or
        whose store was replaced, stops (its position file stays for a later return)."""
        feeds = self._feeds()
        with self._lock:
            stale = [n for n, (store, _) in self._followers.items()
                     if feeds.get(n) is not store]
            ended = [self._followers.pop(n)[1] for n in stale]
        for follower in ended:
            follower.stop()
        with self._lock:
            self._stopped = [f for f in self._stopped if f.running()] + ended
        for name, store in sorted(feeds.items()):
            with self._lock:
                if name in self._followers:
                    continue
            follower = self._follow(name, store)
            with self._lock:
                self._followers[name] = (store, follower)
            if not first:
                _log.info("following the feed of storage shard %s (registered since "
                          "start-up, or moved)", name)
        for name in stale:
            if name not in feeds:
                _log.info("storage shard %s is no longer registered: not followed", name)

    def _watch(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._sync()
            except Exception as e:  # noqa: BLE001 - etcd or a shard away: look again later
                _log.warning("could not look for new storage shards: %s", e)

    def status(self) -> dict:
        """Every feed's place as one: positions and heads add up, and so does the lag."""
        with self._lock:
            statuses = [f.status() for _, f in self._followers.values()]
        return {k: sum(s[k] for s in statuses) for k in statuses[0]} if statuses else {}

    def catch_up(self, context: str, search: bool = True) -> None:
        """Before a read of the context: every follower applies what it holds for it
        (only the follower of the context's shard holds any)."""
        with self._lock:
            followers = [f for _, f in self._followers.values()]
        for f in followers:
            f.catch_up(context, search)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._lock:
            followers = [f for _, f in self._followers.values()]
            self._stopped += followers
        for f in followers:
            f.stop()

    def release_when_stopped(self, release: Callable[[], None]) -> None:
        """After stop(): run `release` (the index folder's lock) once no follower thread
        is left: now, or, when an application outlived stop()'s wait, on a thread that
        waits for it to end. Until then another process must not take the folder: the
        application still writes indexes and the feed position there."""
        with self._lock:
            lingering = [f for f in self._stopped if f.running()]
        if not lingering:
            release()
            return
        _log.warning("%d feed follower(s) still applying after the stop: the index folder "
                     "stays locked until they end", len(lingering))

        def release_after() -> None:
            for f in lingering:
                f.join()
            release()
        threading.Thread(target=release_after, name="recall-feeds-release",
                         daemon=True).start()
