"""The reader connections a store keeps."""
from __future__ import annotations

import threading
from typing import Callable

import psycopg

from morphz.shared.errors import MorphzError

POOL_WAIT_SECONDS = 30.0


class ConnectionPool:
    """Reader connections (autocommit; a reader issues its own BEGIN): at most `size`
    taken at once, idle ones kept for the next reader."""

    def __init__(self, connect: Callable[[], psycopg.Connection], size: int) -> None:
        self._connect = connect
        self._idle: list[psycopg.Connection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)
        self._closed = False

    def take(self) -> tuple[psycopg.Connection, bool]:
        """A connection, and whether it was idle here (it may have died meanwhile: a
        restarted server)."""
        if not self._slots.acquire(timeout=POOL_WAIT_SECONDS):
            raise MorphzError("STORAGE_UNAVAILABLE", "every PostgreSQL reader connection "
                              f"stayed taken for {POOL_WAIT_SECONDS:.0f} s")
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is not None and not conn.closed:
            return conn, True
        try:
            return self._connect(), False
        except BaseException:
            self._slots.release()
            raise

    def fresh(self, dead: psycopg.Connection) -> psycopg.Connection:
        """A new connection in the place (slot) of a dead one."""
        dead.close()
        try:
            return self._connect()
        except BaseException:
            self._slots.release()
            raise

    def give(self, conn: psycopg.Connection, healthy: bool) -> None:
        keep = (healthy and not conn.closed and not self._closed
                and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE)
        if keep:
            with self._lock:
                self._idle.append(conn)
        else:
            conn.close()
        self._slots.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
