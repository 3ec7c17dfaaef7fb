"""A recall replica's feed followers track the shards registered now (DIST-06): a
shard added later is followed, one registered again at another address is followed
through its new store, one no longer registered is let go. The followers here are
small records of what Feeds asked of them (Feeds needs only stop, status and running); the
real FeedFollower over real shards: tests/integration/test_placement.py."""
from __future__ import annotations

from morphz.services.recall.core.feeds import Feeds


class _Follower:
    def __init__(self, name: str, store: object) -> None:
        self.name, self.store, self.stopped = name, store, False

    def status(self) -> dict:
        return {"feed_position": 1, "feed_head": 2, "feed_lag": 1}

    def stop(self) -> None:
        self.stopped = True

    def running(self) -> bool:
        return False


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
