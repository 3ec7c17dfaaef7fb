"""The PostgreSQL store's bounded waits and pushed feed (issue 58), on a real PostgreSQL 15
(tests/pg.py): a commit's deadline reaches PostgreSQL as its statement timeout (a commit
stuck on a lock changes nothing once its caller gave up); a database that stops
answering (SIGSTOP, over a Unix socket where no keepalive notices) turns the hung
group-commit leader and the commits queued behind it into STORAGE_UNAVAILABLE within a
bound, and close() is not blocked by it; and a second store on the same database hears
the first one's commits at once (LISTEN/NOTIFY), not at its next poll."""
from __future__ import annotations

import os
import signal
import threading
import time

import psycopg
import pytest

from morphz.services.storage.postgres import PostgresStore
from morphz.services.storage.postgres import store as pg_store, writer_conn
from morphz.shared.errors import MorphzError
from morphz.shared.storage.api import Write

from tests.pg import _children, new_schema, start_postgres

pytestmark = pytest.mark.split_processes  # no servers of the session's topology

BOUND = 60.0


class Outcome:
    """A commit run on a thread of its own: its result or error, and how long it took."""

    def __init__(self, store: PostgresStore, context: str, expect: int, key: str,
                 timeout=None) -> None:
        self.result = self.error = None
        self.seconds = None
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       args=(store, context, expect, key, timeout))
        self.thread.start()

    def _run(self, store, context, expect, key, timeout) -> None:
        started = time.monotonic()
        try:
            self.result = store.wait(store.submit(context, expect, [
                Write("frames", (key,), b"v")], timeout=timeout))
        except MorphzError as e:
            self.error = e
        self.seconds = time.monotonic() - started

    def join(self, seconds: float) -> "Outcome":
        self.thread.join(seconds)
        return self


def test_pg_a_commits_deadline_is_its_statement_timeout_and_it_changes_nothing_after(
        postgres_server):
    """A commit waiting on a lock another session holds (here: the store's head row)
    is cancelled by PostgreSQL once its caller's deadline passed: DEADLINE_EXCEEDED, and
    when the lock goes, nothing of it lands (before, it waited for the lock and was
    applied long after its caller had been told it failed)."""
    schema = new_schema()
    store = PostgresStore(postgres_server.dsn(), schema=schema)
    try:
        assert store.commit("c", 0, [Write("frames", ("a",), b"1")]) == 1
        with psycopg.connect(postgres_server.dsn()) as holder:
            holder.execute(f'SELECT 1 FROM "{schema}"._store FOR UPDATE')  # the writers' turn
            late = Outcome(store, "c", 1, "b", timeout=1.0).join(BOUND)
            assert not late.thread.is_alive(), "the commit waited for the lock"
            holder.rollback()
        assert late.error is not None and late.error.reason == "DEADLINE_EXCEEDED", \
            (late.result, late.error)
        assert late.seconds < 10, late.seconds
        with store.latest("c") as r:
            assert r.commit_seq == 1 and r.get("frames", ("b",)) is None
        assert store.commit("c", 1, [Write("frames", ("b",), b"2")]) == 2  # the writer is fine
    finally:
        store.close()


def _signal_all(server, sig: signal.Signals) -> None:
    pid = server.pid()
    for p in [pid, *_children(pid)]:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def test_pg_a_stopped_database_ends_the_leader_and_its_queue_unavailable_and_close_returns():
    """SIGSTOP every PostgreSQL process (the store talks to it over its Unix socket):
    the leader's commit and one queued behind it end STORAGE_UNAVAILABLE within their
    deadline and the watchdog's grace, and close() returns within its own bound, all
    while the database is still stopped."""
    server = start_postgres()
    store = PostgresStore(server.dsn(), schema=new_schema())  # host= the socket's folder
    stopped = False
    try:
        assert store.commit("c", 0, [Write("frames", ("a",), b"1")]) == 1
        _signal_all(server, signal.SIGSTOP)
        stopped = True
        leader = Outcome(store, "c", 1, "b", timeout=2.0)
        time.sleep(0.3)  # the leader is in PostgreSQL now; this one waits behind it
        queued = Outcome(store, "d", 0, "x", timeout=2.0)
        bound = 2.0 + writer_conn.SEVER_GRACE_SECONDS + pg_store.CONNECT_TIMEOUT_SECONDS + 10
        for commit in (leader, queued):
            commit.join(bound)
            assert not commit.thread.is_alive(), "a commit hung on the stopped database"
            assert commit.error is not None, commit.result
            assert commit.error.reason in ("STORAGE_UNAVAILABLE", "DEADLINE_EXCEEDED"), \
                commit.error
        assert leader.error.reason == "STORAGE_UNAVAILABLE"  # its outcome is unknown
        # A commit without a deadline of its own hangs now; close() still returns.
        Outcome(store, "e", 0, "y")
        time.sleep(0.3)
        started = time.monotonic()
        closer = threading.Thread(target=store.close, daemon=True)
        closer.start()
        closer.join(pg_store.CLOSE_WAIT_SECONDS * 2 + 10)
        assert not closer.is_alive(), "close() waited for the hung writer"
        assert time.monotonic() - started < pg_store.CLOSE_WAIT_SECONDS * 2 + 10
    finally:
        if stopped:
            _signal_all(server, signal.SIGCONT)
        store.close()
        server.remove()


def test_pg_a_second_store_on_the_database_hears_commits_at_once(postgres_server):
    """Two stores (two storage processes' worth) on one schema: one waits for the feed
    to move while the other commits; it wakes with the other's head within a moment
    (LISTEN/NOTIFY), not when its wait's timeout ends."""
    schema = new_schema()
    a = PostgresStore(postgres_server.dsn(), schema=schema)
    b = PostgresStore(postgres_server.dsn(), schema=schema)
    try:
        assert a.commit("c", 0, [Write("frames", ("a",), b"1")]) == 1
        after = a.feed_head()
        a.wait_changes(after, 0.01)  # starts listening
        woke: dict = {}

        def wait() -> None:
            started = time.monotonic()
            woke["head"] = a.wait_changes(after, 30)
            woke["seconds"] = time.monotonic() - started
        t = threading.Thread(target=wait, daemon=True)
        t.start()
        time.sleep(0.5)
        assert b.commit("c", 1, [Write("frames", ("b",), b"2")]) == 2
        t.join(BOUND)
        assert woke["head"] == b.feed_head() == after + 1, woke
        assert woke["seconds"] < 10, woke  # its timeout was 30 s
        assert a.changes(after).changes[0].commit_seq == 2
    finally:
        a.close()
        b.close()
