"""Search snapshots kept for their cursors.

A search cursor pages the evidence set its first page saw (RECALL-03). The index moves
on with every commit, so the searcher that answered a page with a next cursor is kept
a while, keyed by the index version the cursor names, and the next pages are answered
from it. A vector or hybrid search also keeps its fused ranking (the vector leg cannot
be read as it was), under a version of its own. Bounded in bytes and age: past either,
the oldest go and their cursors are refused as stale (the caller starts over). Bytes,
not a count: a burst of hybrid searches each keeps a ranking of its own (a count of 64
pushed earlier cursors out within seconds), and what a pin holds is mostly its ranking.
"""
from __future__ import annotations

import sys
import threading
import time
from collections import OrderedDict
from typing import Callable, Optional

from morphz.services.recall.core.ports import Pinned

DEFAULT_BYTES = 64 << 20
DEFAULT_SECONDS = 120.0
# What a pin holds beside its ranking, counted whatever it is: the searcher's objects
# and its key (the searcher's index files are mapped, not held). At most
# DEFAULT_BYTES / PIN_BYTES pins (4,096) however small they are.
PIN_BYTES = 16 << 10
HIT_BYTES = 200  # a ranked hit's object, beside its key's characters


def pinned_bytes(pinned: Pinned) -> int:
    """What keeping `pinned` costs, about."""
    ranking = pinned.ranking
    hits = getattr(ranking, "ranked", ()) if ranking is not None else ()
    return PIN_BYTES + sum(HIT_BYTES + sys.getsizeof(h.key) for h in hits)


class SearchPins:
    """core/ports.py's Pins, held in memory: `max_bytes` of them (pinned_bytes) for
    `seconds` at most."""

    def __init__(self, max_bytes: int = DEFAULT_BYTES, seconds: float = DEFAULT_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._max_bytes, self._seconds, self._clock = max_bytes, seconds, clock
        self._lock = threading.Lock()
        self._pins: OrderedDict[tuple[str, str], tuple[float, Pinned, int]] = OrderedDict()
        self.bytes = 0

    def keep(self, context: str, version: str, pinned: Pinned) -> None:
        """Keep (or refresh) what answered a page of `version`."""
        size = pinned_bytes(pinned)
        if size > self._max_bytes:
            return
        key = (context, version)
        with self._lock:
            old = self._pins.pop(key, None)
            if old is not None:
                self.bytes -= old[2]
            self._pins[key] = (self._clock() + self._seconds, pinned, size)
            self.bytes += size
            now = self._clock()
            while self._pins and (self.bytes > self._max_bytes or
                                  next(iter(self._pins.values()))[0] < now):
                self.bytes -= self._pins.popitem(last=False)[1][2]

    def get(self, context: str, version: str) -> Optional[Pinned]:
        with self._lock:
            found = self._pins.get((context, version))
            if found is None:
                return None
            if found[0] < self._clock():
                del self._pins[(context, version)]
                self.bytes -= found[2]
                return None
            return found[1]

    def __len__(self) -> int:
        return len(self._pins)
