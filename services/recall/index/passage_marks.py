"""What each row of the vector leg was made from (core/passages.py): the vector cache's
keys of its passages' texts, and the row whose text its context passage read. An erasure
(docs/privacy.md) takes from the cache every text an erased event was embedded in: its own
passages, and the context passages of the turns that read it (the turn after it, a tool
result answering it), whose vectors the rebuild that follows embeds again without it."""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np

from morphz.services.recall.index.vector_log import DIGEST_BYTES, PASSAGES


class PassageMarks:
    def __init__(self) -> None:
        self._digests = np.zeros((0, PASSAGES, DIGEST_BYTES), dtype=np.uint8)
        self._source = np.zeros(0, dtype=np.int64)  # row -> row + 1 its context read (0: none)

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
        """The key of the row the row's context passage read (None: none)."""
        return keys[int(self._source[row]) - 1] if self._source[row] else None

    def taken(self, erased: Iterable[int], rows: int) -> list[bytes]:
        """The cache keys of every text an erased row's content was embedded in (of
        `rows` rows): the erased rows' passages, and the context passage (the last) of
        each row whose context read one of them."""
        erased = np.fromiter(erased, dtype=np.int64)
        out = [d for r in erased for d in self.digests(int(r))]
        readers = np.flatnonzero(np.isin(self._source[:rows] - 1, erased) &
                                 (self._source[:rows] > 0))
        for r in readers:
            own = self.digests(int(r))
            if len(own) == PASSAGES:
                out.append(own[-1])
        return out
