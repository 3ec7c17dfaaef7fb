"""Runs one part of a request beside another: a hybrid search's lexical leg beside its
vector leg. Both spend most of their time outside the interpreter lock (tantivy's search,
numpy's products), so on a server with a core to spare the search takes about as long as
the slower leg instead of the two added. When every helper is busy (many searches at
once, the cores taken anyway) the part runs inline: waiting in a queue behind other
searches would cost more than it saves."""
from __future__ import annotations

import threading
from concurrent import futures
from typing import Callable, TypeVar

A = TypeVar("A")
B = TypeVar("B")


class Beside:
    def __init__(self, helpers: int) -> None:
        """`helpers`: threads for parts run beside (0: everything inline)."""
        self._pool = futures.ThreadPoolExecutor(helpers, thread_name_prefix="recall-beside") \
            if helpers else None
        self._free = threading.Semaphore(helpers)

    def both(self, first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
        """(first(), second()), first on a helper thread when one is free. Neither
        outlives the call: an error of either is raised once both have ended."""
        if self._pool is None or not self._free.acquire(blocking=False):
            return first(), second()

        def on_helper() -> A:
            try:
                return first()
            finally:  # before its result is seen: the next call finds the helper free
                self._free.release()
        try:
            future = self._pool.submit(on_helper)
        except RuntimeError:  # shut down: the server is stopping
            self._free.release()
            return first(), second()
        try:
            b = second()
        except BaseException:
            futures.wait([future])
            raise
        return future.result(), b

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


INLINE = Beside(0)  # stateless: no thread, nothing to close
