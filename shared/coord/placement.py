"""Which storage shard holds a context: a placement map kept in the coordination service.

Storage processes started with `--etcd --shard NAME` register `/morphz/shards/NAME`
(their address, no lease: a shard is a persistent volume, and a placement target must
not vanish while its process restarts). A context is placed when it is first written:
by rendezvous hashing, the registered shard with the highest sha256(shard NUL context)
wins, and the choice is written once to `/morphz/placement/<context>` with a
create-if-absent transaction. Whoever loses that race reads the winner's choice, so
every process routes a context to the same shard, and adding a shard never moves a
placed context (only new contexts may land on it). Reads of a context not placed yet go
to the shard the rule would choose, without writing anything: it holds nothing there.
"""
from __future__ import annotations

import hashlib
import json
import threading

from morphz.shared.coord.api import CoordinationUnavailable, Coordinator
from morphz.shared.errors import MorphzError

SHARDS_PREFIX = "/morphz/shards/"
PLACEMENT_PREFIX = "/morphz/placement/"


def rendezvous(context: str, shards: list[str]) -> str:
    """The shard a new context goes to: the highest hash of (shard, context)."""
    return max(shards, key=lambda s: (hashlib.sha256(
        s.encode("utf-8") + b"\0" + context.encode("utf-8")).digest(), s))


def _unavailable(what: str, e: Exception) -> MorphzError:
    return MorphzError("COORDINATION_UNAVAILABLE", f"cannot {what}: etcd did not answer "
                       f"({e})", cause=str(e)[:200])


class Placement:
    def __init__(self, coordinator: Coordinator) -> None:
        self._coord = coordinator
        self._lock = threading.Lock()
        self._placed: dict[str, str] = {}  # context -> shard: a placement never moves
        self._seen_shards: dict[str, str] = {}  # the last registrations shards() read

    def register(self, shard: str, address: str) -> None:
        """Announce a storage shard (or its new address after a restart)."""
        try:
            self._coord.put(SHARDS_PREFIX + shard, json.dumps({"address": address}).encode())
        except CoordinationUnavailable as e:
            raise _unavailable(f"register storage shard {shard}", e) from None

    def shards(self) -> dict[str, str]:
        """Every registered shard's address."""
        try:
            found = self._coord.list(SHARDS_PREFIX)
        except CoordinationUnavailable as e:
            raise _unavailable("list the storage shards", e) from None
        out = {}
        for name, raw in found.items():
            try:
                out[name] = str(json.loads(raw)["address"])
            except (ValueError, KeyError, TypeError):
                continue  # not a shard's registration: ignored
        self._seen_shards = out
        return out

    def shard_of(self, context: str, *, place: bool) -> str:
        """The context's shard; `place`: record the rule's choice if it has none yet."""
        with self._lock:
            known = self._placed.get(context)
        if known:
            return known
        try:
            holder = self._coord.get(PLACEMENT_PREFIX + context)
            if holder is None:
                # Placing needs the registrations as they are; a read of a context no
                # one placed (it exists nowhere yet) may use the last list seen.
                shards = sorted(self.shards() if place or not self._seen_shards
                                else self._seen_shards)
                if not shards:
                    raise MorphzError("COORDINATION_UNAVAILABLE", "no storage shard is "
                                      f"registered in etcd (under {SHARDS_PREFIX})",
                                      context=context)
                choice = rendezvous(context, shards)
                if not place:
                    return choice
                _, holder = self._coord.create(PLACEMENT_PREFIX + context,
                                               choice.encode("utf-8"), 0)
        except CoordinationUnavailable as e:
            raise _unavailable(f"find the shard of context {context}", e) from None
        shard = holder.value.decode("utf-8")
        with self._lock:
            self._placed[context] = shard
        return shard
