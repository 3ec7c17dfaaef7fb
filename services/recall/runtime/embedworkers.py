"""The vector leg's embedding workers: one spawned process per core recall may use
(fitpool.Fitter each: started at the first batch, stopped when idle), so a large
backlog (an imported history, a rebuilt leg) is embedded at the hardware's pace, not
one core's (issue 53: a million events took a day on one worker).

A batch is cut into one contiguous share per worker, each share sent on a thread of
this pool (the thread only waits on its worker's pipe), and the shares' vectors put
back in order. A share whose worker cannot take it (stopping, its process died) is
left to the caller (`None` in its place), which embeds it in this process.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional, Sequence

from morphz.services.recall.runtime.fitpool import Fitter
from morphz.services.recall.runtime.worker_process import WorkerUnavailable

MIN_SHARE = 8  # texts a worker is given at least (below, fewer workers take the batch)


def cores() -> int:
    """The cores this process may run on (its CPU affinity; os.cpu_count() elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class EmbedWorkers:
    def __init__(self, count: int = 0) -> None:
        """`count`: worker processes (0: one per core, `cores()`)."""
        self.count = count or cores()
        self._workers = [Fitter(in_worker_min=1) for _ in range(self.count)]
        self._threads = ThreadPoolExecutor(self.count, thread_name_prefix="morphz-embed")

    @property
    def closed(self) -> bool:
        return self._workers[0].closed

    def takes(self, texts: int) -> bool:
        return self._workers[0].takes(texts)

    def map(self, call: Callable[[Fitter, list], object],
            items: Sequence) -> list[tuple[list, Optional[object]]]:
        """[(share, call(worker, share) or None)] for contiguous shares of `items` in
        order, one a worker, side by side; None where the worker could not take it."""
        n = max(1, min(self.count, len(items) // MIN_SHARE))
        size = -(-len(items) // n)
        shares = [list(items[i:i + size]) for i in range(0, len(items), size)]

        def run(worker: Fitter, share: list) -> tuple[list, Optional[object]]:
            try:
                return share, call(worker, share)
            except WorkerUnavailable:
                return share, None
        if len(shares) == 1:
            return [run(self._workers[0], shares[0])]
        return list(self._threads.map(run, self._workers, shares))

    def close(self) -> None:
        for w in self._workers:
            w.close()
        self._threads.shutdown(wait=False)
