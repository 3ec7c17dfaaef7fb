"""The malloc trims after large requests (shared/process/memory.py): one Trimmer a
server process, built by the composition root, its thread started at the first ask and
ended when the Node stops (issue 56: it was a module global whose thread never ended)."""
from __future__ import annotations

import platform
import threading

import pytest

from morphz.shared.process.memory import Trimmer

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                reason="malloc_trim is glibc's: elsewhere a Trimmer does nothing")


def _trim_threads(before: set) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before and t.name == "malloc-trim"]


def test_asks_share_one_thread_which_close_ends_and_later_asks_do_not_restart():
    before = set(threading.enumerate())
    trimmer = Trimmer(interval=0.01)
    assert _trim_threads(before) == []  # nothing until asked
    for _ in range(5):
        trimmer.trim_soon()
    threads = _trim_threads(before)
    assert len(threads) == 1 and threads[0].is_alive()
    trimmer.close()
    assert not threads[0].is_alive()  # close() waits for it
    trimmer.trim_soon()
    assert _trim_threads(before) == []
