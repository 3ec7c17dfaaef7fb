"""A recall replica's feed followers track the shards registered now (DIST-06): a
shard added later is followed, one registered again at another address is followed
through its new store, one no longer registered is let go. The followers here are
small records of what Feeds asked of them (Feeds needs only stop, status, running and join); the
real FeedFollower over real shards: tests/integration/test_placement.py."""
from __future__ import annotations

import threading

from morphz.services.recall.runtime.feeds import Feeds


class _Follower:
    def __init__(self, name: str, store: object) -> None:
        self.name, self.store, self.stopped = name, store, False
        self.ended = threading.Event()  # its threads have ended (set: none ever ran)
        self.ended.set()

    def status(self) -> dict:
        return {"feed_position": 1, "feed_head": 2, "feed_lag": 1}

    def stop(self) -> None:
        self.stopped = True

    def running(self) -> bool:
        return not self.ended.is_set()

    def join(self) -> None:
        self.ended.wait()


def test_dist_06_followers_follow_the_shards_registered_now():
    a, b, b_moved = object(), object(), object()
    registered = {"a": a}
    made: list[_Follower] = []

    def follow(name, store):
        made.append(_Follower(name, store))
        return made[-1]

    feeds = Feeds(lambda: dict(registered), follow, interval=None).start()
    assert [(f.name, f.store) for f in made] == [("a", a)]
    registered["b"] = b  # a shard registered since
    feeds._sync()
    assert [(f.name, f.store) for f in made] == [("a", a), ("b", b)]
    assert feeds.status() == {"feed_position": 2, "feed_head": 4, "feed_lag": 2}
    registered["b"] = b_moved  # registered again at another address: another store
    feeds._sync()
    assert made[1].stopped and (made[2].name, made[2].store) == ("b", b_moved)
    del registered["a"]  # no longer registered
    feeds._sync()
    assert made[0].stopped and not made[2].stopped
    assert feeds.status() == {"feed_position": 1, "feed_head": 2, "feed_lag": 1}
    feeds.stop()
    assert made[2].stopped and len(made) == 3


def _released_feeds(names: list[str]):
    registered = {n: object() for n in names}
    made: dict[str, _Follower] = {}

    def follow(name, store):
        made[name] = _Follower(name, store)
        return made[name]
    return Feeds(lambda: dict(registered), follow, interval=None).start(), registered, made


def test_dist_06_the_folder_is_released_at_once_when_no_follower_runs():
    feeds, _, _ = _released_feeds(["a", "b"])
    released = threading.Event()
    feeds.stop()
    feeds.release_when_stopped(released.set)
    assert released.is_set()


def test_dist_06_the_folder_waits_for_every_follower_still_applying():
    """Those stopped at the end, and one let go earlier (its shard moved) whose
    application outlived its stop: the release waits for both."""
    feeds, registered, made = _released_feeds(["a", "b"])
    let_go = made["b"]
    let_go.ended.clear()  # still applying when it is let go
    registered["b"] = object()  # moved: followed anew, the old follower stopped
    feeds._sync()
    assert let_go.stopped and made["b"] is not let_go
    made["a"].ended.clear()
    released = threading.Event()
    feeds.stop()
    feeds.release_when_stopped(released.set)
    assert not released.wait(0.1)
    made["a"].ended.set()
    assert not released.wait(0.1)  # the one let go earlier still runs
    let_go.ended.set()
    assert released.wait(5)
