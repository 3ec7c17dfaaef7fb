"""What a recall worker process keeps between calls (issue 56: in no module global): a
Keeping call is handed a dict its worker's own loop owns, so what one call leaves there
the next call to the same worker finds, while another worker, or a new one, starts
empty. Real spawned workers (services/recall/runtime/worker_process.py)."""
from __future__ import annotations

from morphz.services.recall.runtime.worker_process import Keeping, WorkerProcess


def _remember(kept: dict, key: str, value: int):
    """In the worker: what `key` held before, then `value` in its place."""
    before = kept.get(key)
    kept[key] = value
    return before


REMEMBER = Keeping(_remember)


def test_a_keeping_call_finds_what_earlier_calls_left_in_its_worker_and_no_other():
    first, second = WorkerProcess("keeping-1"), WorkerProcess("keeping-2")
    try:
        assert first.call(REMEMBER, "embedder", 1) is None
        assert first.call(REMEMBER, "embedder", 2) == 1
        assert second.call(REMEMBER, "embedder", 3) is None  # its own, empty at start
        assert first.call(len, [1, 2, 3]) == 3  # a plain call is called as it was
        assert first.call(REMEMBER, "embedder", 4) == 2
    finally:
        first.stop()
        second.stop()
    again = WorkerProcess("keeping-3")
    try:
        assert again.call(REMEMBER, "embedder", 5) is None  # a new worker starts empty
    finally:
        again.stop()
