"""Other writers' commits, pushed: LISTEN/NOTIFY for the PostgreSQL store's change feed.

Several storage processes may write one store (one database schema): each commit's
transaction sends NOTIFY on the store's channel with the feed head it made, which
PostgreSQL delivers only once that transaction committed (after its synchronous standby
confirmed it, where there is one). A FeedListener holds one connection that LISTENs
and hands every head it hears to the store, so a feed follower of one process sees the
commits of another at once instead of at its next idle poll. A lost connection is
replaced (once a second at most), and after each (re)connection the head is read once,
so a notification missed meanwhile costs nothing.
"""
from __future__ import annotations

import hashlib
import logging
import threading
from typing import Callable

import psycopg
from psycopg import sql

RETRY_SECONDS = 1.0
_log = logging.getLogger("morphz.storage.postgres")


def channel_of(schema: str) -> str:
    """The store's NOTIFY channel: short (an identifier holds 63 bytes), its own per
    schema (stores of other schemas on the database do not wake it)."""
    return "morphz_feed_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


class FeedListener:
    """`connect()`: a new autocommit connection; `read_head(conn)`: the store's feed
    head read on it; `heard(head)`: called with every head seen (in any order: the store
    keeps the highest)."""

    def __init__(self, connect: Callable[[], psycopg.Connection], channel: str,
                 read_head: Callable[[psycopg.Connection], int],
                 heard: Callable[[int], None]) -> None:
        self._connect, self._channel = connect, channel
        self._read_head, self._heard = read_head, heard
        self._stop = threading.Event()
        self._conn: psycopg.Connection | None = None
        self._thread = threading.Thread(target=self._run, name="pg-feed-listener",
                                        daemon=True)
        self.listening = threading.Event()  # set while LISTEN is in effect

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=RETRY_SECONDS * 3)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except Exception as e:  # noqa: BLE001 - a lost database: try again soon
                if not self._stop.is_set():
                    _log.info("feed listener: %s; again in %.0f s", str(e)[:200],
                              RETRY_SECONDS)
            finally:
                self.listening.clear()
                conn, self._conn = self._conn, None
                if conn is not None:
                    conn.close()
            self._stop.wait(RETRY_SECONDS)

    def _listen(self) -> None:
        self._conn = conn = self._connect()
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        self._heard(self._read_head(conn))  # what was committed before LISTEN took effect
        self.listening.set()
        while not self._stop.is_set():
            for note in conn.notifies(timeout=RETRY_SECONDS):
                try:
                    self._heard(int(note.payload))
                except ValueError:
                    continue  # not ours: someone else NOTIFYing on the channel
