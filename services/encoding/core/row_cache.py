"""What compiles made of stored rows, kept from one compile to the next.

A stored row fixes everything made of it, so the row's bytes (MindView's cache key for a
frame or an event), with whether secrets are revealed, are the key: a hit skips decoding,
redaction and rendering, and a changed record is a new row, never a stale hit. Two kinds
of rows are kept:

- a frame's row (MindView.frame_cache_keys): its FrameIn, with its rendered item and snapshot input
  (material.py). A frame row fixes the item's id, revision, state, protection, sources
  and body. Retiring frames are not kept (their remaining ticks follow the clock).
- an event's row (MindView.event_cache_key): its SeenEvent, the event decoded with its shown text
  and the inbox items made of it. Events never change, and the row holds the event's
  context, sequence number and id, so a row names one event of one context.

Bounded by entries and by an estimate of the memory held; a full cache drops its
oldest entries, and a row past MAX_ROW_BYTES is not kept. One per EncodingCore
(injected), shared by its requests, which only read the values (render fills an item's
template and its stored row once, the same for every request; an inbox item made twice by
two requests at once is the same item)."""
from __future__ import annotations

import threading
from typing import Any, Optional, Union

# What an entry holds, approximately: the row (the key), the body, the rendered line
# and its agent part (each about the row's size), and ~2.6 KB of objects around them
# (measured: 2.8 KB an entry for 175-byte frame rows).
ENTRY_OVERHEAD = 2600
MAX_ENTRIES = 40_000
MAX_BYTES = 128 << 20  # of that estimate: ~40,000 small frames
# A larger row is not kept: one 32 MiB event would push out thousands of small rows.
MAX_ROW_BYTES = 1 << 20

Key = Union[bytes, tuple[bytes, bool]]


class RowCache:
    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self._max_entries, self._max_bytes = max_entries, max_bytes
        # Keyed by the row, or (row, True) where secrets are revealed: the common lookup
        # hashes the row alone, with no key to build.
        self._entries: dict[Key, Any] = {}
        self._bytes = 0
        self._lock = threading.Lock()  # put only: a get is one dict lookup

    def get(self, row: bytes, reveal: bool) -> Optional[Any]:
        return self._entries.get((row, True) if reveal else row)

    def get_many(self, rows: list[bytes], reveal: bool) -> list[Optional[Any]]:
        """get() of each row, in order."""
        entries = self._entries
        if reveal:
            return [entries.get((row, True)) for row in rows]
        return list(map(entries.get, rows))

    def put(self, row: bytes, reveal: bool, value: Any) -> bool:
        """Keep `value` for the row; False: the row is past MAX_ROW_BYTES, not kept."""
        if len(row) > MAX_ROW_BYTES:
            return False
        cost = ENTRY_OVERHEAD + 4 * len(row)
        with self._lock:
            # Full: the oldest entries go (dicts keep insertion order), not all of them:
            # a context with more frames than fit would otherwise empty it every compile.
            while self._entries and (len(self._entries) >= self._max_entries or
                                     self._bytes + cost > self._max_bytes):
                oldest = next(iter(self._entries))
                del self._entries[oldest]
                self._bytes -= ENTRY_OVERHEAD + 4 * len(_row_of(oldest))
            self._entries[(row, True) if reveal else row] = value
            self._bytes += cost
        return True

    def __len__(self) -> int:
        return len(self._entries)


def _row_of(key: Key) -> bytes:
    return key[0] if isinstance(key, tuple) else key
