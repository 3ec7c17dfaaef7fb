"""Waiting in tests for what happens in the background (a follower, a server)."""
from __future__ import annotations

import time


def until(check, bound: float = 30.0, what: object = "") -> None:
    """Poll `check` until it is true; fail after `bound` seconds (saying `what`)."""
    deadline = time.monotonic() + bound
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)
