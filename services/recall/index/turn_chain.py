"""The turns of each session in order, by the vector leg's rows: each turn's row links
to the one before and the one after it in its session, and each session knows its last
turn. The vector leg keeps it beside its rows (a turn's VecDoc names the turn before it),
rebuilt as its log is read, so neighbour smoothing (core/hybrid.py) and the passages of the
next turns (core/passages.py) read a session's order without the store. Two int64 per
row; a row that is no longer live (deleted) is stepped over."""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

STEPS = 16  # dead rows stepped over at most, looking for a live neighbour


class TurnChain:
    def __init__(self) -> None:
        self._before = np.zeros(0, dtype=np.int64)  # row -> row + 1 of the turn before (0: none)
        self._after = np.zeros(0, dtype=np.int64)
        self._turn = np.zeros(0, dtype=bool)  # whether a row is a turn at all
        self._last: dict[int, int] = {}  # session code -> its last turn's row

    def grow(self, cap: int) -> None:
        for name in ("_before", "_after", "_turn"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[:len(old)] = old
            setattr(self, name, new)

    def add(self, row: int, session: int, before: Optional[int]) -> None:
        """Row `row` is the session's newest turn; `before`: the row of the turn before it."""
        if before is not None:
            self._before[row] = before + 1
            self._after[before] = row + 1
        self._turn[row] = True
        self._last[session] = row

    def last(self, session: int, live: Callable[[int], bool]) -> Optional[int]:
        row = self._last.get(session)
        return self._live_from(row, self._before, live) if row is not None else None

    def before_key(self, row: int, live: Callable[[int], bool],
                   keys: list[str]) -> Optional[str]:
        """What a VecDoc says of the row (its `prev`): the key of the live turn before it,
        "" for a session's first turn, None for a row that is no turn."""
        if not self._turn[row]:
            return None
        before = self._live_from(self._step(self._before, row), self._before, live)
        return keys[before] if before is not None else ""

    def neighbours(self, row: int, live: Callable[[int], bool]) -> tuple[Optional[int], Optional[int]]:
        """(the live turn before `row` in its session, the live one after), None where none."""
        return (self._live_from(self._step(self._before, row), self._before, live),
                self._live_from(self._step(self._after, row), self._after, live))

    @staticmethod
    def _step(links: np.ndarray, row: int) -> Optional[int]:
        nxt = int(links[row]) if row < len(links) else 0
        return nxt - 1 if nxt else None

    def _live_from(self, row: Optional[int], links: np.ndarray,
                   live: Callable[[int], bool]) -> Optional[int]:
        for _ in range(STEPS):
            if row is None or live(row):
                return row
            row = self._step(links, row)
        return None
