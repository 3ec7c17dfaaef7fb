"""Python's cycle collector paused while one big piece of work runs.

A replay, or a transaction of thousands of ops, keeps every row and record it makes until
it ends and frees no cycles on the way, so each full collection in between only walks the
growing heap again: the work's cost grows faster than the work (a quarter of a replay's
time at 100,000 events; a 10,000-op transaction cost 12.5x a 1,000-op one, 11x paused).
An encoding compile is the same on a smaller scale: some 5,000 dicts, lists and tuples
for 1,000 frames, all alive until it returns, walked by several collections each time.
The collector is process-wide, so the pause covers every thread until the work ends; the
collector is on again after, unless it was off before (nested or concurrent pauses leave
it as the outermost one found it, and the next allocation may collect as usual).
"""
from __future__ import annotations

import contextlib
import functools
import gc
from typing import Callable, Iterator, TypeVar

F = TypeVar("F", bound=Callable)


@contextlib.contextmanager
def cycles_paused(pause: bool = True) -> Iterator[None]:
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def cycles_not_collected(fn: F) -> F:
    """fn run under cycles_paused()."""
    @functools.wraps(fn)
    def paused(*args, **kwargs):
        with cycles_paused():
            return fn(*args, **kwargs)
    return paused  # type: ignore[return-value]
