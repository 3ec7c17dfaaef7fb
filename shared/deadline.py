"""How long a call may still work, as the cores see it: a Deadline the servicer builds
from the call (shared/grpc/deadline.py) and passes to a core's long loops, which call
check() as they go. A call past its deadline or cancelled by its caller stops there with
DEADLINE_EXCEEDED / CANCELLED, before it writes anything: nobody is waiting for the rest."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from morphz.shared.errors import MorphzError


def _not_cancelled() -> bool:
    return False


def _no_pause(remaining: Optional[float]) -> None:
    pass


def _no_progress(done: int, total: int) -> None:
    pass


@dataclass(frozen=True)
class Deadline:
    """`expires_at`: a time.monotonic() value (None: no deadline); `cancelled`: whether
    the caller has gone (its cancellation or a dropped connection); `pace(remaining)`:
    a pause an expensive call takes at each check while cheap calls are served
    (shared/admission.py), never past the deadline; `progress(done, total)`: told by
    the long loops how far they are (a job's progress, shared/jobs.py)."""
    expires_at: Optional[float] = None
    cancelled: Callable[[], bool] = field(default=_not_cancelled, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)
    pace: Callable[[Optional[float]], None] = field(default=_no_pause, compare=False,
                                                    repr=False)
    progress: Callable[[int, int], None] = field(default=_no_progress, compare=False,
                                                 repr=False)

    @classmethod
    def after(cls, seconds: Optional[float], cancelled: Callable[[], bool] = _not_cancelled,
              clock: Callable[[], float] = time.monotonic,
              pace: Callable[[Optional[float]], None] = _no_pause) -> "Deadline":
        return cls(None if seconds is None else clock() + seconds, cancelled, clock, pace)

    def remaining(self) -> Optional[float]:
        return None if self.expires_at is None else self.expires_at - self.clock()

    def advanced(self, done: int, total: int) -> None:
        """Say how far the work is (`done` of `total` units)."""
        self.progress(done, total)

    def check(self, doing: str = "the call") -> None:
        """Raise if the work should stop: DEADLINE_EXCEEDED, else CANCELLED (after the
        pause pacing asks for, if any)."""
        self.pace(self.remaining())
        if self.expires_at is not None and self.clock() >= self.expires_at:
            raise MorphzError("DEADLINE_EXCEEDED", f"{doing} passed the call's deadline; "
                              "nothing was changed")
        if self.cancelled():
            raise MorphzError("CANCELLED", f"the caller cancelled {doing}; nothing was "
                              "changed")


NEVER = Deadline()  # in-process callers (start-up checks, tools, tests)
