"""ShardedStore: one Store over several storage shards, each context's reads and commits
sent to the shard its placement names (shared/coord/placement.py).

A context is placed by its first write (commit or side record); reads of an unplaced
context go where it would be placed, and find nothing. The change feed is each shard's
own (positions mean something in one store only): followers follow `shard_stores()`
one by one; the per-context feed is routed like the context's reads.
"""
from __future__ import annotations

import threading
from typing import Callable, Optional

from morphz.shared.errors import MorphzError
from morphz.shared.storage.api import Reader, Store, Ticket, Write
from morphz.shared.storage.feed import FEED_PAGE, FeedPage


class Locator:
    """What ShardedStore needs from the placement: a context's shard, the shards."""

    def shard_of(self, context: str, *, place: bool) -> str: ...

    def shards(self) -> dict[str, str]: ...


class ShardedStore(Store):
    def __init__(self, placement: Locator, connect: Callable[[str], Store]) -> None:
        """`connect(address)`: a Store reaching the shard at that address."""
        self._placement, self._connect = placement, connect
        self._lock = threading.Lock()
        self._stores: dict[str, tuple[str, Store]] = {}  # shard -> (address, store)

    def shard_stores(self) -> dict[str, Store]:
        """A store per registered shard (connected on first use)."""
        return {name: self._shard(name, address)
                for name, address in sorted(self._placement.shards().items())}

    def shard_of(self, context: str) -> str:
        return self._placement.shard_of(context, place=False)

    def _shard(self, name: str, address: str = "") -> Store:
        with self._lock:
            known = self._stores.get(name)
        if known and (not address or known[0] == address):
            return known[1]
        if not address:
            address = self._placement.shards().get(name, "")
            if not address:
                raise MorphzError("COORDINATION_UNAVAILABLE", f"storage shard {name} is "
                                  "not registered in etcd", shard=name)
        store = self._connect(address)  # a shard that moved: the old channel is dropped
        with self._lock:
            self._stores[name] = (address, store)
        return store

    def _for(self, context: str, *, place: bool = False) -> Store:
        return self._shard(self._placement.shard_of(context, place=place))

    def reader(self, context: str) -> Reader:
        return self._for(context).reader(context)

    def latest(self, context: str) -> Reader:
        return self._for(context).latest(context)

    def commit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0) -> int:
        return self._for(context, place=True).commit(context, expect_commit_seq, writes,
                                                     fence=fence)

    def submit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0, timeout: Optional[float] = None) -> Ticket:
        store = self._for(context, place=True)
        ticket = store.submit(context, expect_commit_seq, writes, fence=fence, timeout=timeout)
        ticket.store = store  # wait() on the shard that took it
        return ticket

    def wait(self, ticket: Ticket) -> int:
        store = getattr(ticket, "store", None)
        return store.wait(ticket) if store is not None else ticket.get()

    def put_records(self, context: str, records: list[Write]) -> None:
        self._for(context, place=True).put_records(context, records)

    def delete_context(self, context: str) -> int:
        return self._for(context).delete_context(context)

    def reclaim(self, context: str = "") -> dict:
        """The context's shard's (every shard's, for no context)."""
        if context:
            return self._for(context).reclaim(context)
        done = [s.reclaim() for s in self.shard_stores().values()]
        return done[0] if len(done) == 1 else {}

    def contexts(self) -> list[str]:
        return sorted({c for s in self.shard_stores().values() for c in s.contexts()})

    def changes(self, after: int, limit: int = FEED_PAGE, context: str = "") -> FeedPage:
        if not context:
            raise _one_feed_per_shard()
        return self._for(context).changes(after, limit, context)

    def wait_changes(self, after: int, timeout: float) -> int:
        raise _one_feed_per_shard()

    def feed_head(self) -> int:
        raise _one_feed_per_shard()

    def close(self) -> None:
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for _, s in stores:
            s.close()


def _one_feed_per_shard() -> MorphzError:
    return MorphzError("INTERNAL", "a sharded store has no feed of its own: follow each "
                       "shard's (shard_stores())")
