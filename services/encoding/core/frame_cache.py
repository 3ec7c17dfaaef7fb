"""Frames as compiles show them, kept from one compile to the next.

A frame's stored row fixes everything its rendered item holds (id, revision, state,
protection, sources, body), so the row's bytes, with whether secrets are revealed,
are the key: a hit skips decoding, redaction and rendering, and a changed frame is a
new row, never a stale hit. Retiring frames are not kept (their remaining ticks follow
the clock). Bounded by entries and by the bytes of the rows held; a full cache starts
over. One per EncodingCore (injected), shared by its requests: the values are never
changed once stored."""
from __future__ import annotations

from typing import Optional

from morphz.services.encoding.core.material import FrameIn

MAX_ENTRIES = 100_000
MAX_BYTES = 64 << 20


class FrameCache:
    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self._max_entries, self._max_bytes = max_entries, max_bytes
        self._entries: dict[tuple[bytes, bool], FrameIn] = {}
        self._bytes = 0

    def get(self, row: bytes, reveal: bool) -> Optional[FrameIn]:
        return self._entries.get((row, reveal))

    def put(self, row: bytes, reveal: bool, frame: FrameIn) -> None:
        if len(self._entries) >= self._max_entries or \
                self._bytes + len(row) > self._max_bytes:
            # Rebound, not cleared: a request iterating nothing here, and a concurrent
            # get sees the old dict or the new one, both sound.
            self._entries, self._bytes = {}, 0
        self._entries[(row, reveal)] = frame
        self._bytes += len(row)

    def __len__(self) -> int:
        return len(self._entries)
