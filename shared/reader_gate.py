"""A gate between an LMDB environment's readers and whoever must have it alone."""
from __future__ import annotations

import threading


class ReaderGate:
    """Lets an LMDB environment be resized or replaced only while no read transaction is
    open in this process (LMDB's rule for mdb_env_set_mapsize; a closed environment's
    transactions are gone): readers enter and leave, `exclusive` waits for them and keeps
    new ones out while its action runs."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._closed = False

    def enter(self) -> None:
        with self._cond:
            while self._closed:
                self._cond.wait()
            self._readers += 1

    def leave(self) -> None:
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()

    def exclusive(self, action) -> None:
        with self._cond:
            self._closed = True
            try:
                while self._readers:
                    self._cond.wait()
                action()
            finally:
                self._closed = False
                self._cond.notify_all()
