"""Fair admission of expensive calls (SEC-07): audits, rebuilds, compiles, traversals,
listings and large writes draw on budgets, per principal and server-wide, so that one
caller cannot take the server from the others, and the cheap calls (status, appends,
small reads) keep the workers the expensive ones may not take.

Two budgets of each kind: concurrency (expensive calls running at once) and CPU time
(CPU-seconds per minute, a bucket refilled continuously; a call is charged the CPU its
thread used when it ends). A call that does not fit is refused at once with
RESOURCE_EXHAUSTED and the reason of the budget it met (retry later).

Admitted expensive calls are paced while other callers' cheap calls are being served (one
in flight, or one ended within CONTENDED_SECONDS; a caller is its principal, or without
authentication its connection, so a client's own appends never slow its compile): together they may use `expensive_share` of a core,
and each pauses at its deadline checks (shared/deadline.py) to stay within it. With the
interpreter's lock, a thread decoding a 31 MiB event holds every other thread for tens of
milliseconds: only time left free makes a cheap call as fast as on an idle server. The
per-principal
budgets apply to authenticated callers; without authentication every caller is the same
anonymous one, and the server-wide budgets apply alone. Nothing here imports gRPC
(shared/grpc/admission.py applies it to a server)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from morphz.shared import limits
from morphz.shared.errors import MorphzError

WINDOW_SECONDS = 60.0  # a CPU budget is CPU-seconds per this many seconds
CONTENDED_SECONDS = 1.0  # cheap calls this recent pace the expensive ones
PACE_BURST_SECONDS = 0.05  # CPU an expensive call may use at once before it is paced
MAX_PAUSE_SECONDS = 1.0  # one pause at most (the deadline is checked after each)


@dataclass(frozen=True)
class Budgets:
    """The configured budgets (`morphz serve` flags of the same names)."""
    expensive_rpcs: int = limits.EXPENSIVE_RPCS.max
    principal_rpcs: int = limits.PRINCIPAL_RPCS.max
    expensive_cpu_seconds: float = limits.EXPENSIVE_CPU.max
    principal_cpu_seconds: float = limits.PRINCIPAL_CPU.max
    expensive_share: float = 0.25  # of a core, while cheap calls are served

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
        if not 0 < self.expensive_share <= 1:
            raise bad("expensive_share", "must be more than 0 and at most 1")


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


class Ticket:
    """An admitted expensive call's hold on its budgets: a context manager that gives the
    slots back and charges the CPU its thread used, once, when the call ends; pace()
    pauses it while cheap calls want the server (called from its thread)."""
    __slots__ = ("admission", "principal", "caller", "cpu_start", "cpu_paced", "released")

    def __init__(self, admission: "Admission", principal: Optional[str], caller: str,
                 cpu: float) -> None:
        self.admission, self.principal, self.caller = admission, principal, caller
        self.cpu_start = self.cpu_paced = cpu
        self.released = False

    def pace(self, remaining: Optional[float] = None) -> None:
        self.admission._pace(self, remaining)

    def __enter__(self) -> "Ticket":
        return self

    def __exit__(self, *exc) -> None:
        if not self.released:
            self.released = True
            self.admission._release(self)


class Admission:
    def __init__(self, budgets: Budgets = Budgets(), *,
                 clock: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.thread_time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.budgets = budgets
        self._clock, self._cpu_clock, self._sleep = clock, cpu_clock, sleep
        self._lock = threading.Lock()
        now = clock()
        self._server = _Bucket(budgets.expensive_cpu_seconds, budgets.expensive_cpu_seconds,
                               now)
        self._principals: dict[str, _Bucket] = {}
        self._pacer = _Bucket(PACE_BURST_SECONDS, PACE_BURST_SECONDS, now)
        # caller -> [cheap calls in flight, when the last one started or ended]
        self._cheap: dict[str, list] = {}

    def admit(self, principal: Optional[str], caller: str = "") -> Ticket:
        """Hold a slot of every budget of an expensive call by `principal` (None: an
        unauthenticated caller), or raise the refusal of the first it does not fit.
        `caller`: who it is for pacing (the principal, else the connection)."""
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
        return Ticket(self, principal, caller, self._cpu_clock())

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

    # -- pacing -------------------------------------------------------------------------
    def cheap_started(self, caller: str = "") -> None:
        with self._lock:
            seen = self._cheap.setdefault(caller, [0, 0.0])
            seen[0] += 1
            seen[1] = self._clock()

    def cheap_ended(self, caller: str = "") -> None:
        with self._lock:
            seen = self._cheap[caller]
            seen[0] -= 1
            seen[1] = self._clock()

    def _contended(self, caller: str, now: float) -> bool:
        """Another caller's cheap call is in flight or just ended (under the lock)."""
        for who, (running, last) in list(self._cheap.items()):
            if not running and now - last >= CONTENDED_SECONDS:
                del self._cheap[who]  # forgotten: it paces nothing any more
            elif who != caller:
                return True
        return False

    def _pace(self, ticket: Ticket, remaining: Optional[float]) -> None:
        """Charge the CPU `ticket`'s thread used since its last pace to the expensive
        calls' share; while cheap calls are served, pause until the share is positive."""
        cpu = self._cpu_clock()
        used, ticket.cpu_paced = cpu - ticket.cpu_paced, cpu
        share = self.budgets.expensive_share
        with self._lock:
            now = self._clock()
            pacer = self._pacer
            pacer.level = min(pacer.size, pacer.level + (now - pacer.at) * share)
            pacer.at = now
            if not self._contended(ticket.caller, now):
                pacer.level = pacer.size  # nobody waits: full speed
                return
            pacer.level -= used
            pause = -pacer.level / share if pacer.level < 0 else 0.0
        pause = min(pause, MAX_PAUSE_SECONDS, remaining if remaining is not None else pause)
        if pause > 0:
            self._sleep(pause)

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
