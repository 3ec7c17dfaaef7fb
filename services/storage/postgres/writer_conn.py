"""The PostgreSQL store's writer connection and its watchdog (group_commit.py writes
through it).

A database that does not answer at all (a stopped process over a Unix socket, where no
keepalive notices) cannot cancel anything, not even by statement_timeout: the watchdog
severs the writer's connection SEVER_GRACE_SECONDS after its batch's deadline, and the
batch ends STORAGE_UNAVAILABLE (its outcome unknown). close() does not wait on a writer
that hangs: it severs it too (store.py).
"""
from __future__ import annotations

import os
import socket
import threading
import time
from typing import Optional

import psycopg

# How long past a batch's deadline its connection is severed if PostgreSQL does not
# answer, and how often the watchdog looks.
SEVER_GRACE_SECONDS = 2.0
WATCH_SECONDS = 0.25


class WriterConnection:
    """The writer's connection of PostgresStore (store.py, whose `_connect` opens it and
    whose `_closing` stops the watchdog)."""

    def _init_writer(self) -> None:
        self._writer: Optional[psycopg.Connection] = None
        self._writer_warnings: list[str] = []  # WARNINGs the writer's server sent
        # The watchdog's view of the writer: a duplicate of its socket (shutdown() on it
        # ends any wait on the connection) and when its batch must be done (None: idle).
        self._writer_sock: Optional[socket.socket] = None
        self._writer_until: Optional[float] = None
        self._sock_lock = threading.Lock()
        self._severed = 0  # connections severed so far

    def _start_watchdog(self) -> None:
        threading.Thread(target=self._watch, name="pg-writer-watchdog", daemon=True).start()

    def _roll_back_writer(self) -> None:
        try:
            if self._writer is not None and not self._writer.closed:
                self._writer.rollback()
        except psycopg.Error:
            self._drop_writer()

    def _drop_writer(self) -> None:
        with self._sock_lock:
            sock, self._writer_sock = self._writer_sock, None
        if sock is not None:
            sock.close()
        if self._writer is not None:
            try:
                self._writer.close()
            finally:
                self._writer = None

    def _writer_conn(self) -> psycopg.Connection:
        if self._writer is None or self._writer.closed:
            self._drop_writer()
            self._writer = self._connect(autocommit=False)
            self._writer.add_notice_handler(self._writer_notice)
            with self._sock_lock:
                self._writer_sock = socket.socket(fileno=os.dup(self._writer.pgconn.socket))
        return self._writer

    # -- the watchdog -------------------------------------------------------------------
    def _watch(self) -> None:
        """Sever the writer's connection once its batch is SEVER_GRACE_SECONDS past its
        deadline: PostgreSQL's own statement_timeout had its chance, so the server does
        not answer at all (a socket shut down ends libpq's wait on it)."""
        while not self._closing.wait(WATCH_SECONDS):
            until = self._writer_until
            if until is not None and time.monotonic() > until:
                self._sever()

    def _sever(self) -> None:
        with self._sock_lock:
            if self._writer_sock is None:
                return
            try:
                self._writer_sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # not connected any more: nothing waits on it
            self._severed += 1
            self._writer_until = None

    def _writer_notice(self, diag: psycopg.errors.Diagnostic) -> None:
        if diag.severity_nonlocalized == "WARNING":  # not translated, unlike the text
            self._writer_warnings.append(diag.message_primary or "")
