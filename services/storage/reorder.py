"""The Commit RPCs a storage servicer is handling, per context, by the version each
expects: a commit that expects a version the store has not reached (a remote writer
pipelines a context's commits, so one may arrive before its predecessor) waits only
while a commit that can be its predecessor is in the servicer, or the context keeps moving.
With neither, nothing can close the gap and it is refused within a short grace (a stale or
made-up `expect_commit_seq` used to hold a worker for the whole reorder wait)."""
from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager
from typing import Iterator


class CommitsInFlight:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._expects: dict[str, Counter] = {}

    @contextmanager
    def entered(self, context: str, expect: int) -> Iterator[None]:
        with self._lock:
            self._expects.setdefault(context, Counter())[expect] += 1
        try:
            yield
        finally:
            with self._lock:
                held = self._expects[context]
                held[expect] -= 1
                if not held[expect]:
                    del held[expect]
                if not held:
                    del self._expects[context]

    def predecessor_pending(self, context: str, expect: int) -> bool:
        """Whether a commit of the context expecting a lower version is being handled."""
        with self._lock:
            return any(e < expect for e in self._expects.get(context, ()))
