"""Fault injection for crash tests: kill the process at a named point.

MORPHZ_FAULT=POINT[:N] makes the N-th pass (default 1st) through POINT send SIGKILL
to this process. Unset in production: every `hit` is then one attribute test.
"""
from __future__ import annotations

import os
import signal
import threading
from typing import Mapping, Optional

POINTS = (
    "before-lmdb-txn",           # storage: a batch is about to open its write transaction
    "after-puts-before-commit",  # storage: every put done, the transaction not committed
    "after-commit-before-reply",  # transaction: durable, the caller not yet answered
    "mid-rebuild",               # transaction: projections replayed, not yet written
)


class Faults:
    def __init__(self, spec: str = "") -> None:
        point, _, nth = spec.partition(":")
        if point and point not in POINTS:
            raise ValueError(f"MORPHZ_FAULT: unknown point {point!r}; one of {POINTS}")
        self._point: Optional[str] = point or None
        self._nth = int(nth) if nth else 1
        self._seen = 0
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> "Faults":
        return cls(env.get("MORPHZ_FAULT", ""))

    def hit(self, point: str) -> None:
        if point != self._point:
            return
        with self._lock:
            self._seen += 1
            if self._seen == self._nth:
                os.kill(os.getpid(), signal.SIGKILL)


NO_FAULTS = Faults()
