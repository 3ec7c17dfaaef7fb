"""The PostgreSQL store: the storage API over PostgreSQL 15 (psycopg 3), for a store
that a replicated database keeps.

The tables and keys are LMDB's (lmdb/store.py): one SQL table per storage table, in a
schema of its own, each row (k bytea primary key, v bytea), k the context's prefix and
the key in keys.encode's order-preserving bytes; bytea compares byte by byte, so a scan
sees LMDB's order. Beside them `_context` holds each context's commit_seq and the highest
fencing token it accepted (LMDB's `_version` and `_fence`), `_feed` the change feed with
its per-context index (`_feed_ctx`), and `_store` the store's identity and feed head.

Commits are group-committed as LMDB's: one leader applies every queued submission in one
SQL transaction (one WAL flush), each in its own savepoint so a refused one changes
nothing and leaves its neighbours be. The transaction first locks the `_store` row, so
writers (of this process or another pointed at the same database) take turns and feed
positions have no gaps; the fencing token and the version are checked in that same
transaction. Nothing is acknowledged before PostgreSQL's COMMIT returned. Append-only
tables take INSERTs only (a key that exists is STORAGE_APPEND_ONLY), and triggers refuse
any UPDATE, TRUNCATE or DELETE of their rows from any client, except the DELETE of a
quarantine, which this store flags in its own transaction.

Faults get named reasons: a lost or refused connection, a read-only (standby) server or
any other database error is STORAGE_UNAVAILABLE (for a commit: it may or may not have
been applied), a full disk STORAGE_FULL.

Bounded waits. A commit carries its caller's deadline (`submit(timeout=)`; without one,
COMMIT_BOUND_SECONDS) and its batch runs under PostgreSQL's statement_timeout of the
latest deadline among its submissions, so a batch stuck on a lock or a slow database is
cancelled there, changing nothing (DEADLINE_EXCEEDED). A database that does not answer
at all (a stopped process over a Unix socket, where no keepalive notices) cannot cancel
anything: a watchdog severs the writer's connection SEVER_GRACE_SECONDS after that
deadline, and the batch ends STORAGE_UNAVAILABLE (its outcome unknown). A commit still
queued behind a writer past its deadline leaves the queue unapplied. close() does not
wait on a writer that hangs.

Other writers of the same store (another storage process on the database) are heard
through LISTEN/NOTIFY (notify.py): wait_changes wakes at their commits too.
"""
from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from contextlib import nullcontext
from datetime import datetime, timezone
from typing import Optional

import psycopg
from psycopg import errors as pg_errors, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from morphz.services.storage.postgres.errors import unavailable
from morphz.services.storage.postgres.lmdb_copy import copy_into_lmdb, load_from_lmdb
from morphz.services.storage.postgres.notify import FeedListener, channel_of
from morphz.services.storage.postgres.plan import (Submission, expected_seq)
from morphz.services.storage.postgres.pool import ConnectionPool
from morphz.services.storage.postgres.reader import PostgresReader
from morphz.services.storage.postgres.schema import Statements, schema_statements
from morphz.services.storage.postgres import writes as pg_writes
from morphz.services.storage.erasure_log import ErasureLog
from morphz.services.storage.space import Space
from morphz.shared.errors import MorphzError
from morphz.shared.process.faults import NO_FAULTS, Faults
from morphz.shared.storage import keys
from morphz.shared.storage.api import ERASABLE_TABLES, SIDE_TABLES, TABLES, Store, Ticket, Write
from morphz.shared.storage.feed import (FEED_PAGE, FILLER, Change, FeedPage, change_of, pack_change,
                                        unpack_change)
from morphz.shared.storage.rules import check_write, context_not_found

DEFAULT_SCHEMA = "morphz"
DEFAULT_POOL = 64  # reader connections at most (snapshots held open count)
# Reader connections open snapshots may not take: reads of the latest rows, the feed's
# pages, contexts() and backups take one each for a moment.
READS_KEPT_FREE = 16
CONNECT_TIMEOUT_SECONDS = 5
# A server that went away without closing its connections (its machine lost) is noticed
# within about 15 s over TCP, not at the kernel's two hours; a DSN may set its own.
CONNECTION_DEFAULTS = {"connect_timeout": str(CONNECT_TIMEOUT_SECONDS),
                       "application_name": "morphz-storage", "keepalives": "1",
                       "keepalives_idle": "5", "keepalives_interval": "2",
                       "keepalives_count": "3", "tcp_user_timeout": "15000"}
_BIGINT_MAX = (1 << 63) - 1
# The most a batch may send in one pipeline (its rows' keys and values); a larger one
# runs statement by statement: its round trips are small beside sending its data.
# (Pipelines of 1 MiB commit 5-7% faster than statement by statement at 200 KB a commit;
# what made large ones hang is writes.py send_all's.)
PIPELINE_MAX_BYTES = 1 << 20
# How long a commit without a deadline of its own may take (statement_timeout), how long
# past a batch's deadline its connection is severed if PostgreSQL does not answer, and how
# often the watchdog looks.
COMMIT_BOUND_SECONDS = 30.0
SEVER_GRACE_SECONDS = 2.0
WATCH_SECONDS = 0.25
CLOSE_WAIT_SECONDS = 5.0  # what close() waits for a writer before severing it


class PostgresStore(Store):
    """`dsn`: a libpq connection string or URI (a multi-host one with
    target_session_attrs=read-write follows a promoted standby); `schema`: where its
    tables live (created if missing); `pool`: reader connections at most; `data_dir`:
    a local folder for the space alarm's disk checks (default: the working directory);
    `faults`: the crash tests' kill points (before-lmdb-txn: before the batch's SQL
    transaction; after-puts-before-commit: before its COMMIT)."""

    def __init__(self, dsn: str, *, schema: str = DEFAULT_SCHEMA, pool: int = DEFAULT_POOL,
                 data_dir: str = "", faults: Faults = NO_FAULTS) -> None:
        try:
            self._dsn = make_conninfo(**{**CONNECTION_DEFAULTS, **conninfo_to_dict(dsn)})
        except psycopg.ProgrammingError as e:
            raise MorphzError("CONTEXT_INPUT_INVALID", f"--dsn is not a PostgreSQL "
                              f"connection string: {e}", field="dsn") from None
        self._schema = schema
        self._faults = faults
        self._q = Statements(schema)
        self._writer: Optional[psycopg.Connection] = None
        self._writer_warnings: list[str] = []  # WARNINGs the writer's server sent
        try:
            with self._connect(autocommit=False) as conn:
                # Made once: a store that exists is opened without DDL (which would lock
                # its tables, and which a read-only standby refuses).
                if conn.execute("SELECT to_regclass(%s)", (f'"{schema}"._store',)
                                ).fetchone()[0] is None:
                    self._create(conn)
                head, self._id = conn.execute(self._q.read_head).fetchone()
                conn.commit()
        except psycopg.Error as e:
            raise unavailable(e, "open the store") from None
        self._head = head
        self._feed_moved = threading.Condition()
        self._listener: Optional[FeedListener] = None  # started by the first wait_changes
        self._listener_lock = threading.Lock()
        self._channel = channel_of(schema)
        self._pool = ConnectionPool(lambda: self._connect(autocommit=True), pool)
        self.snapshot_capacity = max(1, pool - READS_KEPT_FREE)
        self.space = Space(data_dir or os.getcwd())
        # In the server's data folder (a store opened without one, a tool's or a test's,
        # keeps none: its erasures cannot be applied again to a restored backup).
        self.erasure_log = ErasureLog(data_dir) if data_dir else None
        self._queue: list[Submission] = []
        self._queue_lock = threading.Lock()
        self._leader = threading.Lock()
        self.stats = {"write_transactions": 0, "commits": 0}
        # The watchdog's view of the writer: a duplicate of its socket (shutdown() on it
        # ends any wait on the connection) and when its batch must be done (None: idle).
        self._writer_sock: Optional[socket.socket] = None
        self._writer_until: Optional[float] = None
        self._sock_lock = threading.Lock()
        self._severed = 0  # connections severed so far
        self._closing = threading.Event()
        threading.Thread(target=self._watch, name="pg-writer-watchdog", daemon=True).start()

    def _create(self, conn: psycopg.Connection) -> None:
        with conn.transaction():  # a savepoint: committed with the caller's transaction
            # One creator at a time (several storage processes may start at once).
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._schema,))
            for statement in schema_statements(self._schema):
                conn.execute(statement)
            conn.execute(self._q.init_store, (secrets.token_hex(16),))

    def _connect(self, *, autocommit: bool) -> psycopg.Connection:
        try:
            return psycopg.connect(self._dsn, autocommit=autocommit)
        except psycopg.Error as e:
            raise unavailable(e, "connect") from None

    @property
    def store_id(self) -> str:
        return self._id

    @property
    def schema(self) -> str:
        return self._schema

    def renew_identity(self) -> str:
        new = secrets.token_hex(16)
        try:
            with self._connect(autocommit=True) as conn:
                conn.execute(self._q.set_id, (new,))
        except psycopg.Error as e:
            raise unavailable(e, "renew the store's identity") from None
        self._id = new
        return new

    # -- reads --------------------------------------------------------------------------
    def reader(self, context: str) -> PostgresReader:
        return PostgresReader(self._pool, self._q, context, snapshot=True)

    def latest(self, context: str) -> PostgresReader:
        return PostgresReader(self._pool, self._q, context, snapshot=False)

    def contexts(self) -> list[str]:
        with self.reader("") as r:
            return [keys.decode(bytes(ctx))[0]
                    for ctx, in r.execute(self._q.all_contexts, ()).fetchall()]

    def feed_head(self) -> int:
        return self._head

    def changes(self, after: int, limit: int = FEED_PAGE, context: str = "") -> FeedPage:
        limit = max(1, min(limit, FEED_PAGE))
        after = min(max(after, 0), _BIGINT_MAX)
        with self.reader(context) as r:
            if context:
                rows = r.execute(self._q.feed_of, (keys.context_prefix(context), after,
                                                limit)).fetchall()
                return FeedPage([unpack_change(p, bytes(c)) for p, c in rows],
                                r.commit_seq, self._id)
            head, _ = r.execute(self._q.read_head, ()).fetchone()
            rows = r.execute(self._q.feed_after, (after, limit)).fetchall()
            return FeedPage([unpack_change(p, bytes(c)) for p, c in rows], head, self._id)

    def wait_changes(self, after: int, timeout: float) -> int:
        self._listen()
        with self._feed_moved:
            self._feed_moved.wait_for(lambda: self._head > after, timeout)
            return self._head

    def _listen(self) -> None:
        """Hear other writers' commits from now on (once: the feed's first follower)."""
        if self._listener is not None:
            return
        with self._listener_lock:
            if self._listener is None and not self._closing.is_set():
                self._listener = FeedListener(
                    lambda: self._connect(autocommit=True), self._channel,
                    lambda conn: conn.execute(self._q.read_head).fetchone()[0], self._heard)
                self._listener.start()

    def _heard(self, head: int) -> None:
        with self._feed_moved:
            if head > self._head:
                self._head = head
                self._feed_moved.notify_all()

    # -- writes -------------------------------------------------------------------------
    def commit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0) -> int:
        return self.wait(self.submit(context, expect_commit_seq, writes, fence=fence))

    def submit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0, timeout: Optional[float] = None) -> Ticket:
        prefix = keys.context_prefix(context)
        for w in writes:  # bad tables and keys fail here, before anything is queued
            if w.table not in TABLES or w.table in SIDE_TABLES:
                keys.check_commit_table(w.table)
            check_write(w)
            keys.encode_in(prefix, w.key)
        bound = COMMIT_BOUND_SECONDS if timeout is None else max(0.0, timeout)
        sub = Submission(context, expect_commit_seq, writes,
                         change_of(0, context, 0, writes), fence,
                         until=time.monotonic() + bound, bounded=timeout is not None)
        with self._queue_lock:
            self._queue.append(sub)
        return sub

    def put_records(self, context: str, records: list[Write]) -> None:
        keys.check_side_records(records)
        prefix = keys.context_prefix(context)
        for w in records:
            keys.encode_in(prefix, w.key)
        sub = Submission(context, None, list(records),
                         until=time.monotonic() + COMMIT_BOUND_SECONDS)
        with self._queue_lock:
            self._queue.append(sub)
        self.wait(sub)

    def wait(self, ticket: Ticket) -> int:
        sub: Submission = ticket  # type: ignore[assignment]
        while not sub.done:  # leader/follower, as LmdbStore.wait
            left = sub.until - time.monotonic()
            if self._leader.acquire(timeout=min(1.0, left) if left > 0.01 else 0.5):
                try:
                    if sub.done:
                        break
                    with self._queue_lock:
                        batch, self._queue = self._queue, []
                    self._apply(batch)
                finally:
                    self._leader.release()
            elif time.monotonic() >= sub.until and self._withdraw(sub):
                break  # still queued behind a writer that outlived this one's bound
        return sub.get()

    def _withdraw(self, sub: Submission) -> bool:
        """Take `sub` out of the queue, unapplied, if no batch took it yet."""
        with self._queue_lock:
            if not any(queued is sub for queued in self._queue):
                return False  # in the batch being written: its writer reports how it ended
            self._queue = [queued for queued in self._queue if queued is not sub]
        sub.error = _bound_passed(sub, "waited for the store's writer")
        sub.done = True
        return True

    def _apply(self, batch: list[Submission]) -> None:
        severed = self._severed
        try:
            self._write_batch(batch)
        except pg_errors.QueryCanceled:  # statement_timeout: rolled back, nothing changed
            self._roll_back_writer()
            for sub in batch:
                if sub.error is None or sub.result is not None:
                    sub.result, sub.error = None, _bound_passed(sub, "ran in PostgreSQL")
        except pg_errors.DiskFull:
            self._drop_writer()
            self._refuse_all(batch, self.space.refuse("disk", 0, 0))
        except MorphzError as e:  # no connection: nothing was written
            self._refuse_all(batch, e)
        except psycopg.Error as e:  # lost, or refused: it may or may not have committed
            self._drop_writer()
            cause: BaseException = e
            if self._severed != severed:
                cause = psycopg.OperationalError(
                    f"no answer within {SEVER_GRACE_SECONDS:g} s past the commit's deadline "
                    "(stopped or unreachable): the connection was closed; the commit may "
                    "or may not have been applied")
            self._refuse_all(batch, unavailable(cause, "commit"))
        except BaseException as e:  # noqa: BLE001 - every waiter must wake up
            self._drop_writer()
            self._refuse_all(batch, e)
        finally:
            self._writer_until = None  # idle: nothing for the watchdog to sever
            for sub in batch:
                sub.done = True

    @staticmethod
    def _refuse_all(batch: list[Submission], err: BaseException) -> None:
        """The batch's transaction did not commit: every submission the store would have
        applied gets `err`; those refused for their own reason keep theirs."""
        for sub in batch:
            if sub.error is None or sub.result is not None:
                sub.result, sub.error = None, err

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

    def _begin(self, prefixes: list[bytes], appends: dict[str, set[bytes]],
               until: float) -> tuple:
        """Open the batch's transaction in one round trip: lock the feed head (writers take
        turns), then, read after it, the contexts' versions and tokens and which of the
        rows the batch appends exist already. (connection, head, {context: (commit_seq,
        fence)}, {(table, key) that exists}). A connection that died while idle (a
        restarted server) is replaced once: nothing had been applied on it. `until`: the
        batch's latest deadline (its statement_timeout; the watchdog's, a little later)."""
        reused = self._writer is not None and not self._writer.closed
        severed = self._severed
        try:
            return self._read_state(self._writer_conn(), prefixes, appends, until)
        except psycopg.OperationalError:
            self._drop_writer()
            if not reused or self._severed != severed:
                raise
        return self._read_state(self._writer_conn(), prefixes, appends, until)

    def _read_state(self, conn: psycopg.Connection, prefixes: list[bytes],
                    appends: dict[str, set[bytes]], until: float) -> tuple:
        q = self._q
        keyed = sum(map(len, prefixes)) + sum(len(k) for ks in appends.values() for k in ks)
        self._writer_until = until + SEVER_GRACE_SECONDS
        with conn.pipeline() if keyed <= PIPELINE_MAX_BYTES else nullcontext():
            # The batch's statements may take until its latest deadline (ms, local to it).
            conn.execute(q.statement_timeout,
                         (str(max(1, int((until - time.monotonic()) * 1000))),))
            lock = conn.cursor(binary=True).execute(q.lock_head)
            contexts = conn.cursor(binary=True).execute(q.contexts_of, (prefixes,))
            found = [(table, conn.cursor(binary=True).execute(q.existing[table], (list(ks),)))
                     for table, ks in appends.items()]
            pg_writes.send_all(conn)
        head = lock.fetchone()[0]
        state = {keys.decode(bytes(ctx))[0]: (seq, fence)
                 for ctx, seq, fence in contexts.fetchall()}
        existing = {(table, bytes(k)) for table, cur in found for k, in cur.fetchall()}
        return conn, head, state, existing

    def _write_batch(self, batch: list[Submission]) -> None:
        """One SQL transaction for the batch. Where no submission quarantines a row (the
        rule), every refusal is decided here from what _begin read, and the statements go
        in one pipeline (up to PIPELINE_MAX_BYTES): the batch costs about three round
        trips and one WAL flush.
        A quarantine's rows must exist when it runs, which only the database knows: such
        a batch runs statement by statement, each submission in a savepoint (writes.py)."""
        self._faults.hit("before-lmdb-txn")
        q = self._q
        prefixes = {sub.context: keys.context_prefix(sub.context) for sub in batch}
        plans, appends = pg_writes.plan_batch(batch, prefixes)
        careful = any(kind in ("aside", "erase") for plan in plans.values()
                      for kind, _, _ in plan)
        pipelined = not careful and \
            pg_writes.sent_bytes(plans.values()) <= PIPELINE_MAX_BYTES
        conn, head, read, existing = self._begin(list(prefixes.values()), appends,
                                                 max(sub.until for sub in batch))
        state = pg_writes.BatchState(head, {c: seq for c, (seq, _) in read.items()},
                                     {c: fence for c, (_, fence) in read.items()}, existing)
        try:
            with conn.pipeline() if pipelined else nullcontext(), \
                    conn.cursor(binary=True) as cur:
                for sub in sorted(batch, key=expected_seq):  # see LmdbStore._write_batch
                    plan = plans.get(id(sub))
                    if plan is not None:
                        pg_writes.write_submission(cur, q, sub, plan,
                                                   prefixes[sub.context], state, careful)
                pg_writes.record_changes(cur, q, state, prefixes, self._channel)
                logged = [(sub.context, sub.result, sub.erased) for sub in batch
                          if sub.erased and sub.result is not None]
                if logged and self.erasure_log is not None:  # before the commit: never an
                    self.erasure_log.append(self._id, logged)  # erasure the log lacks
                self._faults.hit("after-puts-before-commit")
                # COMMIT may wait for the synchronous standby: that wait is not cancelled
                # by the timeout (a cancelled one commits here alone, visible at once).
                cur.execute(q.statement_timeout, ("0",))
                if pipelined:
                    pg_writes.send_all(conn)
                self._writer_warnings.clear()
                conn.commit()  # acknowledged only once this returned
        except BaseException:
            if not conn.closed:
                try:
                    conn.rollback()
                except psycopg.Error:
                    self._drop_writer()
            raise
        self._committed(batch, state.head)

    def _committed(self, batch: list[Submission], head: int) -> None:
        """After the batch's COMMIT returned: acknowledged, unless PostgreSQL warned."""
        if self._writer_warnings:
            # A COMMIT whose wait for the synchronous standby was cancelled (an operator's
            # pg_cancel_backend, a timeout) returns with a WARNING: committed here, maybe
            # not on the standby, so a promotion could lose it. Not acknowledged: its
            # outcome is unknown, as with a lost connection (a retry finds it or not).
            raise MorphzError("STORAGE_UNAVAILABLE", "PostgreSQL committed without confirming "
                              "replication: " + self._writer_warnings[0][:200])
        self.space.committed(True)
        self._heard(head)  # durable now: followers may read it
        self.stats["write_transactions"] += 1
        self.stats["commits"] += sum(1 for sub in batch if sub.result is not None)

    def delete_context(self, context: str) -> int:
        """Store.delete_context, in one SQL transaction under the store's head lock."""
        prefix = keys.context_prefix(context)
        q = self._q
        with self._leader:
            conn = self._writer_conn()
            try:
                with conn.cursor(binary=True) as cur:
                    head, _ = cur.execute(q.lock_head).fetchone()  # writers take turns
                    cur.execute(q.forget_context, (prefix,))
                    if cur.rowcount != 1:
                        raise context_not_found(context)
                    cur.execute("SELECT set_config('morphz.quarantine', 'on', true)")
                    for table in TABLES:  # the append-only trigger lets these through
                        cur.execute(q.delete_under[table], (prefix, prefix + b"\xff"))
                    cur.execute("SELECT set_config('morphz.quarantine', 'off', true)")
                    cur.execute(q.fill_feed_of, (pack_change(FILLER), prefix))
                    cur.execute(q.put_feed, ([head + 1], [prefix], [0], [pack_change(
                        Change(head + 1, context, 0, deleted=True))]))
                    cur.execute(q.set_head, (head + 1,))
                conn.commit()
            except BaseException as e:
                if not conn.closed:
                    conn.rollback()
                if isinstance(e, psycopg.Error):
                    raise unavailable(e, "delete a context") from None
                raise
        with self._feed_moved:
            self._head = head + 1
            self._feed_moved.notify_all()
        return head + 1

    def reclaim(self, context: str = "") -> dict:
        """Store.reclaim: the tables an erasure rewrites are rewritten by VACUUM FULL
        (new files, TOAST included; the old ones are unlinked), which locks each table
        for its time (reads and writes of every context wait). Then a CHECKPOINT where
        the store's role may (so WAL written before can be recycled: docs/privacy.md)."""
        started = time.monotonic()
        tables = [sql.Identifier(self._schema, t) for t in sorted(ERASABLE_TABLES)]
        size = sql.SQL("SELECT {}").format(sql.SQL(" + ").join(
            sql.SQL("pg_total_relation_size({})").format(sql.Literal(f'"{self._schema}".{t}'))
            for t in sorted(ERASABLE_TABLES)))
        try:
            with self._connect(autocommit=True) as conn:
                before = conn.execute(size).fetchone()[0]
                conn.execute(sql.SQL("VACUUM (FULL) {}").format(sql.SQL(", ").join(tables)))
                after = conn.execute(size).fetchone()[0]
                try:
                    conn.execute("CHECKPOINT")
                except pg_errors.InsufficientPrivilege:
                    pass  # a role without pg_checkpoint: the server's own checkpoints come
        except psycopg.Error as e:
            raise unavailable(e, "rewrite the store after an erasure") from None
        return {"engine": "postgres", "bytes_before": int(before), "bytes_after": int(after),
                "duration_ms": int((time.monotonic() - started) * 1000)}

    def close(self) -> None:
        """Stop; a writer waiting on a database that does not answer is not waited for
        past CLOSE_WAIT_SECONDS (its connection is severed: its batch ends
        STORAGE_UNAVAILABLE)."""
        self._closing.set()
        with self._listener_lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        self._pool.close()
        if not self._leader.acquire(timeout=CLOSE_WAIT_SECONDS):
            self._sever()
            if not self._leader.acquire(timeout=CLOSE_WAIT_SECONDS):
                return  # the writer's thread is stuck beyond libpq: leave it to exit
        try:
            self._drop_writer()
        finally:
            self._leader.release()

    # -- backups ------------------------------------------------------------------------
    def copy_compacted(self, directory: str) -> dict:
        """Write the whole store, as of one snapshot, as an LMDB environment in
        `directory`/data.mdb: what LmdbStore.copy_compacted writes, so `morphz backup`
        and `morphz restore` work unchanged (a restore gives an LMDB store). Every commit
        acknowledged before `taken_at` is in it (the snapshot is taken after)."""
        taken_at = datetime.now(timezone.utc)
        with self.reader("") as r:
            head, contexts = copy_into_lmdb(r, self._q, self._id, directory)
        return {"feed_head": head, "contexts": contexts, "store": self._id,
                "taken_at": taken_at.isoformat(timespec="microseconds")}

    def load(self, directory: str) -> dict:
        """Fill this store, which must be empty (RESTORE_TARGET_NOT_EMPTY), from the LMDB
        environment in `directory` (a restored backup's copy): every table, versions,
        tokens, the feed and the identity, in one transaction. What `morphz restore
        --store postgres` does."""
        try:
            with self._connect(autocommit=False) as conn:
                head, contexts, identity = load_from_lmdb(conn, self._q, self._schema,
                                                          directory)
        except psycopg.Error as e:
            raise unavailable(e, "load the backup") from None
        self._id = identity
        self._heard(head)
        return {"feed_head": head, "contexts": contexts, "store": identity}


def _bound_passed(sub: Submission, doing: str) -> MorphzError:
    """The error of a submission refused unapplied because its bound passed while it
    `doing`: its caller's deadline (DEADLINE_EXCEEDED), or the store's own bound."""
    if sub.bounded:
        return MorphzError("DEADLINE_EXCEEDED", f"the commit {doing} past the call's "
                           "deadline; nothing was changed")
    return MorphzError("STORAGE_UNAVAILABLE", f"the commit {doing} for more than "
                       f"{COMMIT_BOUND_SECONDS:g} s; nothing was changed")
