"""The vector leg's pace (HYB-08): documents a second its steps covered lately, so
`inspect` can say how fast a history is being embedded and how long the rest takes."""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable

WINDOW_SECONDS = 120.0  # steps older than this no longer count


class Pace:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._steps: deque[tuple[float, int, float]] = deque()  # (ended, documents, seconds)
        self._lock = threading.Lock()

    def note(self, documents: float, seconds: float) -> None:
        """A step (or part of one) that covered `documents` in `seconds` (none: time it
        spent all the same)."""
        if documents <= 0 and seconds <= 0:
            return
        with self._lock:
            self._steps.append((self._clock(), max(documents, 0.0), max(seconds, 1e-6)))
            self._trim()

    def per_second(self) -> float:
        """Documents a second over the recent steps (0.0: none lately)."""
        with self._lock:
            self._trim()
            seconds = sum(s for _, _, s in self._steps)
            return sum(d for _, d, _ in self._steps) / seconds if seconds else 0.0

    def _trim(self) -> None:
        oldest = self._clock() - WINDOW_SECONDS
        while self._steps and self._steps[0][0] < oldest:
            self._steps.popleft()
