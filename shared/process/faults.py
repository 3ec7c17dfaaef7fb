"""Fault injection for crash and pause tests: kill or stop the process at a named point.

MORPHZ_FAULT=POINT[:N] makes every N-th pass (default: every pass) through POINT send
SIGKILL to this process (it dies at the first), or SIGSTOP for the pause points: a
process frozen there (as by a long GC pause or a stopped VM) goes on when a SIGCONT
comes. Unset in production: every `hit` is then one attribute test.
"""
from __future__ import annotations

import os
import signal
import threading
from typing import Mapping, Optional

POINTS = (  # where the process dies
    "before-lmdb-txn",           # storage: a batch is about to open its write transaction
    "after-puts-before-commit",  # storage: every put done, the transaction not committed
    "after-commit-before-reply",  # transaction: durable, the caller not yet answered
    "mid-rebuild",               # transaction: projections replayed, not yet written
)
PAUSES = (  # where it stops
    "after-token-before-submit",  # transaction: fencing token taken, commit not yet sent
)


class Faults:
    def __init__(self, spec: str = "") -> None:
        point, _, nth = spec.partition(":")
        if point and point not in POINTS + PAUSES:
            raise ValueError(f"MORPHZ_FAULT: unknown point {point!r}; one of "
                             f"{POINTS + PAUSES}")
        self._point: Optional[str] = point or None
        self._nth = int(nth) if nth else 1
        if self._nth < 1:
            raise ValueError(f"MORPHZ_FAULT: {point}:N needs N >= 1, got {nth}")
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
            if self._seen % self._nth:
                return
        if point in PAUSES:
            # To this thread: it stops on its way out of the call, before going on (a
            # signal to the process may be taken by another thread while this one sends).
            signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
        else:
            os.kill(os.getpid(), signal.SIGKILL)


NO_FAULTS = Faults()
