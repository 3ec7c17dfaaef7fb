"""Feed changes held back from the indexes of contexts nobody searches.

Committing a context's index costs some 20 ms of CPU however little it holds, so when
many contexts are written at once, indexing each of them at every application of the
feed costs more CPU than the commits themselves. A context that no search has asked
for in the last `idle` seconds has its changes held here instead, and they are applied
together:
  - when the context is next read (searched or inspected): the read applies them before
    it looks (it sees every change the replica has taken from the feed, fresher than a
    background application);
  - when the first of them has been held `idle` seconds;
  - when the context holds MAX_CHANGES, or every context together MAX_TOTAL;
  - at once when a change carries an erasure or a deletion (what it took must leave the
    index now).
A context searched within the last `idle` seconds is applied at every application, as
before. An inspection does not count as a search: a monitor polling every context would
otherwise keep them all indexed eagerly. (Elasticsearch skips the refresh of search-idle
shards the same way, and its statistics calls do not wake them.)

Nothing is lost: the feed position saved is just below the first change held or being
applied (`floor`), so a restart reads held changes from the feed again.
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import Callable, Optional

from morphz.shared.storage.feed import Change

MAX_CHANGES = 1000   # held for one context: then applied (the commit's cost is spread)
MAX_TOTAL = 20_000   # held for all: bounds memory and what a restart reads again


class Holds:
    def __init__(self, idle: float, clock: Callable[[], float] = time.monotonic) -> None:
        """`idle`: seconds without a search before a context's changes are held, and the
        longest they are held (0: nothing is ever held)."""
        self.idle = idle
        self._clock = clock
        self._lock = threading.Lock()
        self._held: dict[str, tuple[float, list[Change]]] = {}  # context -> (since, changes)
        self._total = 0
        self._searched_at: dict[str, float] = {}  # searched within `idle` seconds
        self._pruned = clock()  # when searches older than that were last forgotten
        # Reads applying held changes: token -> (first position, clears before the claim).
        self._claimed: dict[int, tuple[int, int]] = {}
        self._tokens = itertools.count()
        self._cleared = 0  # a claim made before a clear puts nothing back

    def take(self, context: str, changes: list[Change]) -> list[Change]:
        """What to apply now of the context's `changes` (feed order) and what it held
        before them; [] when they are held too."""
        now = self._clock()
        with self._lock:
            since, held = self._held.get(context, (now, []))
            searched = context in self._searched_at and now - self._searched_at[context] < self.idle
            erasing = any(c.erased or c.erased_frames or c.deleted for c in changes)  # at once
            if (self.idle > 0 and not searched and not erasing and now - since < self.idle
                    and len(held) + len(changes) < MAX_CHANGES
                    and self._total + len(changes) <= MAX_TOTAL):
                self._held[context] = (since, held)
                held.extend(changes)  # in place: a context's changes come a few at a time
                self._total += len(changes)
                return []
            self._held.pop(context, None)
            self._total -= len(held)
            return held + changes

    def due(self) -> list[tuple[str, list[Change]]]:
        """The contexts held `idle` seconds, with their changes (no longer held)."""
        now = self._clock()
        with self._lock:
            out = [(c, ch) for c, (since, ch) in self._held.items() if now - since >= self.idle]
            for context, changes in out:
                del self._held[context]
                self._total -= len(changes)
            if now - self._pruned >= self.idle:  # not on every call: it may be long
                self._searched_at = {c: t for c, t in self._searched_at.items()
                                     if now - t < self.idle}
                self._pruned = now
            return out

    def claim(self, context: str, search: bool = True) -> tuple[Optional[int], list[Change]]:
        """A read of `context` (`search`: a search, which keeps the context from being
        held for `idle` seconds): (token, what is held for it) for the reader to apply,
        counted in `floor` until `release(token)`; (None, []) when nothing is held."""
        now = self._clock()
        with self._lock:
            if search:
                self._searched_at[context] = now
            if context not in self._held:
                return None, []
            _, changes = self._held.pop(context)
            self._total -= len(changes)
            token = next(self._tokens)
            self._claimed[token] = (changes[0].position, self._cleared)
            return token, changes

    def release(self, token: int, context: str, unapplied: list[Change] = ()) -> None:
        """A claim ended; `unapplied`: its changes, when applying them failed (held again,
        before any held since, unless everything held was cleared meanwhile)."""
        with self._lock:
            _, cleared = self._claimed.pop(token)
            if unapplied and cleared == self._cleared:
                since, held = self._held.pop(context, (self._clock(), []))
                self._held[context] = (since, list(unapplied) + held)
                self._total += len(unapplied)

    def floor(self, taken: int) -> int:
        """The feed position up to which every change is applied, given that the follower
        has taken (applied or held) every change up to `taken`."""
        with self._lock:
            firsts = [ch[0].position for _, ch in self._held.values()]
            firsts.extend(first for first, _ in self._claimed.values())
        return min(firsts) - 1 if firsts else taken

    def held(self) -> int:
        with self._lock:
            return self._total

    def clear(self) -> None:
        """Forget what is held (it will be read from the feed again)."""
        with self._lock:
            self._held.clear()
            self._total = 0
            self._cleared += 1
