"""The PostgreSQL store: the storage API over PostgreSQL 15 (psycopg 3), for a store
that a replicated database keeps.

The tables and keys are LMDB's (lmdb/store.py): one SQL table per storage table, in a
schema of its own, each row (k bytea primary key, v bytea), k the context's prefix and
the key in keys.encode's order-preserving bytes; bytea compares byte by byte, so a scan
sees LMDB's order. Beside them `_context` holds each context's commit_seq and the highest
fencing token it accepted (LMDB's `_version` and `_fence`), `_feed` the change feed with
its per-context index (`_feed_ctx`), and `_store` the store's identity and feed head.

Commits are group-committed as LMDB's, one SQL transaction a batch, acknowledged only
once PostgreSQL's COMMIT returned (group_commit.py; a batch's statements: writes.py; the
writer's connection and its watchdog: writer_conn.py). Append-only
tables take INSERTs only (a key that exists is STORAGE_APPEND_ONLY), and triggers refuse
any UPDATE, TRUNCATE or DELETE of their rows from any client, except the DELETE of a
quarantine, which this store flags in its own transaction.

Faults get named reasons: a lost or refused connection, a read-only (standby) server or
any other database error is STORAGE_UNAVAILABLE (for a commit: it may or may not have
been applied), a full disk STORAGE_FULL.

Bounded waits: a commit's batch runs under its deadline (PostgreSQL's statement_timeout),
and a database that does not answer at all has the writer's connection severed
(group_commit.py, writer_conn.py). close() does not wait on a writer that hangs.

Other writers of the same store (another storage process on the database) are heard
through LISTEN/NOTIFY (notify.py): wait_changes wakes at their commits too.
"""
from __future__ import annotations

import os
import secrets
import threading
import time
from datetime import datetime, timezone
from typing import Optional

import psycopg
from psycopg import errors as pg_errors, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from morphz.services.storage.postgres.errors import unavailable
from morphz.services.storage.postgres.group_commit import GroupCommit
from morphz.services.storage.postgres.lmdb_copy import copy_into_lmdb, load_from_lmdb
from morphz.services.storage.postgres.notify import FeedListener, channel_of
from morphz.services.storage.postgres.pool import ConnectionPool
from morphz.services.storage.postgres.reader import PostgresReader
from morphz.services.storage.postgres.schema import Statements, schema_statements
from morphz.services.storage.erasure_log import ErasureLog
from morphz.services.storage.space import Space
from morphz.shared.errors import MorphzError
from morphz.shared.process.faults import NO_FAULTS, Faults
from morphz.shared.storage import keys
from morphz.shared.mind.tables import ERASABLE_TABLES, TABLES
from morphz.shared.storage.api import Store
from morphz.shared.storage.feed import FEED_PAGE, FILLER, Change, FeedPage, pack_change, unpack_change
from morphz.shared.storage.rules import context_not_found

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
CLOSE_WAIT_SECONDS = 5.0  # what close() waits for a writer before severing it


class PostgresStore(GroupCommit, Store):
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
        self._q = Statements(schema)
        self._init_writer()
        self._init_group_commit(faults)
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
        self._closing = threading.Event()
        self._start_watchdog()

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

    # -- a context deleted, the store rewritten, closed (its commits: group_commit.py) ----
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
