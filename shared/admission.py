"""Fair admission of expensive calls (SEC-07): audits, rebuilds, compiles, traversals,
listings and large writes draw on budgets, per principal and server-wide, so that one
caller cannot take the server from the others, and the cheap calls (status, appends,
small reads) keep the workers the expensive ones may not take.

Two budgets of each kind: concurrency (expensive calls running at once) and CPU time
(CPU-seconds per minute, a bucket refilled continuously; a call is charged the CPU its
thread used when it ends). A call that does not fit is refused at once with
RESOURCE_EXHAUSTED and the reason of the budget it met (retry later). The per-principal
budgets apply to authenticated callers; without authentication every caller is the same
anonymous one, and the server-wide budgets apply alone. Nothing here imports gRPC
(shared/rpc_admission.py applies it to a server)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from morphz.shared import limits
from morphz.shared.errors import MorphzError

WINDOW_SECONDS = 60.0  # a CPU budget is CPU-seconds per this many seconds


@dataclass(frozen=True)
class Budgets:
    """The configured budgets (`morphz serve` flags of the same names)."""
    expensive_rpcs: int = limits.EXPENSIVE_RPCS.max
    principal_rpcs: int = limits.PRINCIPAL_RPCS.max
    expensive_cpu_seconds: float = limits.EXPENSIVE_CPU.max
    principal_cpu_seconds: float = limits.PRINCIPAL_CPU.max

    def check(self, max_workers: int) -> None:
        """The expensive calls leave workers to the cheap ones (a CONTEXT_INPUT_INVALID
        naming the flag otherwise)."""
        def bad(name: str, why: str) -> MorphzError:
            return MorphzError("CONTEXT_INPUT_INVALID", f"--{name.replace('_', '-')} {why}",
                               field=name)
        if not 0 < self.expensive_rpcs < max_workers:
            raise bad("max_expensive_rpcs", f"must be 1..{max_workers - 1}: the workers "
                      f"({max_workers}) it leaves are kept for the cheap calls")
        if not 0 < self.principal_rpcs <= self.expensive_rpcs:
            raise bad("max_principal_rpcs", "must be 1..--max-expensive-rpcs")
        for name in ("expensive_cpu_seconds", "principal_cpu_seconds"):
            if not getattr(self, name) > 0:
                raise bad(name, "must be more than 0")


@dataclass
class _Bucket:
    """CPU-seconds left of a budget of `size` per WINDOW_SECONDS, refilled continuously;
    a call may start while something is left (it may overdraw: it is charged after)."""
    size: float
    level: float
    at: float
    running: int = 0

    def refill(self, now: float) -> None:
        self.level = min(self.size, self.level + (now - self.at) * self.size / WINDOW_SECONDS)
        self.at = now

    @property
    def idle(self) -> bool:  # as good as a new one: it can be forgotten
        return self.running == 0 and self.level >= self.size


@dataclass(frozen=True)
class Ticket:
    """An admitted expensive call's hold on its budgets: a context manager that gives the
    slots back and charges the CPU its thread used, once, when the call ends."""
    admission: "Admission"
    principal: Optional[str]
    cpu_start: float
    released: list = field(default_factory=list)

    def __enter__(self) -> "Ticket":
        return self

    def __exit__(self, *exc) -> None:
        if not self.released:
            self.released.append(True)
            self.admission._release(self)


class Admission:
    def __init__(self, budgets: Budgets = Budgets(), *,
                 clock: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.thread_time) -> None:
        self.budgets = budgets
        self._clock, self._cpu_clock = clock, cpu_clock
        self._lock = threading.Lock()
        now = clock()
        self._server = _Bucket(budgets.expensive_cpu_seconds, budgets.expensive_cpu_seconds,
                               now)
        self._principals: dict[str, _Bucket] = {}

    def admit(self, principal: Optional[str]) -> Ticket:
        """Hold a slot of every budget of an expensive call by `principal` (None: an
        unauthenticated caller), or raise the refusal of the first it does not fit."""
        b = self.budgets
        with self._lock:
            now = self._clock()
            self._server.refill(now)
            mine = None
            if principal is not None:
                mine = self._principals.get(principal)
                if mine is None:
                    mine = _Bucket(b.principal_cpu_seconds, b.principal_cpu_seconds, now)
                mine.refill(now)
            if mine is not None and mine.running >= b.principal_rpcs:
                raise _refusal(limits.PRINCIPAL_RPCS, b.principal_rpcs, principal,
                               f"{principal} is running its limit of {b.principal_rpcs} "
                               "expensive calls at once")
            if mine is not None and mine.level <= 0:
                raise _refusal(limits.PRINCIPAL_CPU, b.principal_cpu_seconds, principal,
                               f"{principal} has used its {b.principal_cpu_seconds:g} "
                               f"CPU-seconds of expensive calls per {WINDOW_SECONDS:.0f} s",
                               retry_after_seconds=_until_positive(mine))
            if self._server.running >= b.expensive_rpcs:
                raise _refusal(limits.EXPENSIVE_RPCS, b.expensive_rpcs, principal,
                               f"the server is running its limit of {b.expensive_rpcs} "
                               "expensive calls at once")
            if self._server.level <= 0:
                raise _refusal(limits.EXPENSIVE_CPU, b.expensive_cpu_seconds, principal,
                               f"the server's expensive calls have used their "
                               f"{b.expensive_cpu_seconds:g} CPU-seconds per "
                               f"{WINDOW_SECONDS:.0f} s",
                               retry_after_seconds=_until_positive(self._server))
            self._server.running += 1
            if mine is not None:
                mine.running += 1
                self._principals[principal] = mine
        return Ticket(self, principal, self._cpu_clock())

    def _release(self, ticket: Ticket) -> None:
        used = max(0.0, self._cpu_clock() - ticket.cpu_start)
        with self._lock:
            now = self._clock()
            buckets = [self._server]
            mine = self._principals.get(ticket.principal) if ticket.principal is not None \
                else None
            if mine is not None:
                buckets.append(mine)
            for bucket in buckets:
                bucket.refill(now)
                bucket.running -= 1
                bucket.level -= used
            if mine is not None and mine.idle:
                del self._principals[ticket.principal]

    def running(self, principal: Optional[str] = None) -> int:
        """Expensive calls running now (of `principal`, else of all)."""
        with self._lock:
            if principal is None:
                return self._server.running
            mine = self._principals.get(principal)
            return mine.running if mine is not None else 0


def _until_positive(bucket: _Bucket) -> float:
    return round(max(0.0, -bucket.level) * WINDOW_SECONDS / bucket.size + 0.001, 3)


def _refusal(limit: limits.Limit, value, principal: Optional[str], message: str,
             **more) -> MorphzError:
    return MorphzError(limit.reason, f"{message}; retry later",
                       **limit.details(value, principal=principal, **more))
