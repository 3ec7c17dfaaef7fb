"""Calls whose reply their client does not read (SEC-08): once its handler returns, a
reply waits in gRPC's buffers until the client's flow-control window lets it go; a
client that never reads would pin it for as long as it keeps the connection. Each reply
handed to gRPC is watched: one not delivered within `seconds` is cancelled (the client
gets RST_STREAM), which frees it. One thread per server, started at the first reply
watched, idle while nothing is pending."""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Callable

_log = logging.getLogger("morphz.rpc")


class StalledReplies:
    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self._clock = seconds, clock
        self._cond = threading.Condition()
        self._pending: OrderedDict[int, tuple[float, Callable[[], None]]] = OrderedDict()
        self._count = 0
        self._thread: threading.Thread | None = None
        self.dropped = 0

    def watch(self, cancel: Callable[[], None]) -> Callable[[], None]:
        """Watch a reply just handed to gRPC; `cancel` ends its call. Returns what to
        call once it is delivered (or the call ended otherwise)."""
        with self._cond:
            self._count += 1
            key = self._count
            # Same `seconds` for all: the OrderedDict is in the order they fall due.
            self._pending[key] = (self._clock() + self.seconds, cancel)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="morphz-stalled",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

        def delivered() -> None:
            with self._cond:
                self._pending.pop(key, None)
        return delivered

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending:
                    self._cond.wait()
                now = self._clock()
                due = []
                while self._pending:
                    key, (at, cancel) = next(iter(self._pending.items()))
                    if at > now:
                        break
                    del self._pending[key]
                    due.append(cancel)
                if not due:
                    self._cond.wait(at - now)
                    continue
                self.dropped += len(due)
            _log.info("cancelled %d call(s) whose reply was not read within %g s",
                      len(due), self.seconds)
            for cancel in due:
                cancel()
