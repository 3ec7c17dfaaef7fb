"""What each row of the vector leg was made from (core/passages.py): the vector cache's
keys of its texts (its own, then the answered turn's), and the row it answers. An erasure
(docs/privacy.md) takes from the cache the erased events' own texts; the rows that mixed
one of them in (the turn after it, a tool result answering it) are made again without it by
the rebuild that follows."""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np

from morphz.services.recall.index.vector_log import DIGEST_BYTES, PASSAGES


class PassageMarks:
    def __init__(self) -> None:
        self._digests = np.zeros((0, PASSAGES, DIGEST_BYTES), dtype=np.uint8)
        self._source = np.zeros(0, dtype=np.int64)  # row -> row + 1 it mixes in (0: none)

    def grow(self, cap: int) -> None:
        digests = np.zeros((cap, PASSAGES, DIGEST_BYTES), dtype=np.uint8)
        digests[:len(self._digests)] = self._digests
        source = np.zeros(cap, dtype=np.int64)
        source[:len(self._source)] = self._source
        self._digests, self._source = digests, source

    def mark(self, row: int, digests: tuple[bytes, ...], source: Optional[int]) -> None:
        self._digests[row] = 0
        for j, digest in enumerate(digests[:PASSAGES]):
            self._digests[row, j] = np.frombuffer(digest, dtype=np.uint8)
        self._source[row] = source + 1 if source is not None else 0

    def digests(self, row: int) -> tuple[bytes, ...]:
        return tuple(bytes(d) for d in self._digests[row] if d.any())

    def source_key(self, row: int, keys: list[str]) -> Optional[str]:
        """The key of the row whose vector the row mixes in (None: none)."""
        return keys[int(self._source[row]) - 1] if self._source[row] else None

    def taken(self, erased: Iterable[int]) -> list[bytes]:
        """The cache keys of the erased rows' own texts: a row's other
        text is the turn it answers, not erased with it."""
        return [own[0] for own in (self.digests(int(r)) for r in erased) if own]
