"""Search snapshots kept for their cursors.

A search cursor pages the evidence set its first page saw (RECALL-03). The index moves
on with every commit, so the searcher that answered a page with a next cursor is kept
a while, keyed by the index version the cursor names, and the next pages are answered
from it. A vector or hybrid search also keeps its fused ranking (the vector leg cannot
be read as it was), under a version of its own. Bounded in count and age: past either,
the cursor is refused as stale and the caller starts over.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Callable, Optional

from morphz.services.recall.core.ports import Pinned

DEFAULT_CAPACITY = 64
DEFAULT_SECONDS = 120.0


class SearchPins:
    """core/ports.py's Pins, held in memory."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, seconds: float = DEFAULT_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._capacity, self._seconds, self._clock = capacity, seconds, clock
        self._lock = threading.Lock()
        self._pins: OrderedDict[tuple[str, str], tuple[float, Pinned]] = OrderedDict()

    def keep(self, context: str, version: str, pinned: Pinned) -> None:
        """Keep (or refresh) what answered a page of `version`."""
        if self._capacity <= 0:
            return
        with self._lock:
            self._pins[(context, version)] = (self._clock() + self._seconds, pinned)
            self._pins.move_to_end((context, version))
            while len(self._pins) > self._capacity:
                self._pins.popitem(last=False)

    def get(self, context: str, version: str) -> Optional[Pinned]:
        with self._lock:
            found = self._pins.get((context, version))
            if found is None:
                return None
            if found[0] < self._clock():
                del self._pins[(context, version)]
                return None
            return found[1]
