"""The PostgreSQL store: the storage API over PostgreSQL 15 (psycopg 3), for a store
that a replicated database keeps.

The tables and keys are LMDB's (lmdb_store.py): one SQL table per storage table, in a
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
"""
from __future__ import annotations

import logging
import os
import secrets
import threading
from contextlib import nullcontext
from datetime import datetime, timezone
from typing import Callable, Iterator, Optional

import lmdb
import msgspec
import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from morphz.services.storage.space import Space
from morphz.shared.errors import MorphzError
from morphz.shared.faults import NO_FAULTS, Faults
from morphz.shared.storage import keys
from morphz.shared.storage.api import (FEED_PAGE, SIDE_TABLES, TABLES, Change, FeedPage, Key,
                                       Reader, StaleCommit, Store, Ticket, Write, change_of,
                                       check_write, fenced, quarantine_missing)

_log = logging.getLogger("morphz.storage")
DEFAULT_SCHEMA = "morphz"
DEFAULT_POOL = 64  # reader connections at most (snapshots held open count)
POOL_WAIT_SECONDS = 30.0
CONNECT_TIMEOUT_SECONDS = 5
# A server that went away without closing its connections (its machine lost) is noticed
# within about 15 s over TCP, not at the kernel's two hours; a DSN may set its own.
CONNECTION_DEFAULTS = {"connect_timeout": str(CONNECT_TIMEOUT_SECONDS),
                       "application_name": "morphz-storage", "keepalives": "1",
                       "keepalives_idle": "5", "keepalives_interval": "2",
                       "keepalives_count": "3", "tcp_user_timeout": "15000"}
_BIGINT_MAX = (1 << 63) - 1
PIPELINE_MAX_BYTES = 1 << 20  # a batch writing more runs statement by statement
_APPEND_ONLY_STATE = "MZ001"  # the SQLSTATE the append-only triggers raise
# A scan reads pages of rows: 16 first (most scans are short), then longer ones.
_FIRST_PAGE, _LONGEST_PAGE = 16, 512

_encode_json = msgspec.json.Encoder().encode
_decode_json = msgspec.json.Decoder().decode


def _pack_change(c: Change) -> bytes:  # lmdb_store's feed record, byte for byte
    return _encode_json({"c": c.context, "s": c.commit_seq, "e": c.events, "f": c.frames})


def _unpack_change(position: int, raw: bytes) -> Change:
    d = _decode_json(raw)
    return Change(position, d["c"], d["s"], tuple(d["e"]), tuple(d["f"]))


def unavailable(e: BaseException, doing: str) -> MorphzError:
    """The named fault for a database error (never INTERNAL)."""
    state = getattr(e, "sqlstate", None)
    return MorphzError("STORAGE_UNAVAILABLE", f"PostgreSQL could not {doing}: "
                       f"{str(e).strip()[:300] or type(e).__name__}",
                       sqlstate=state, error=type(e).__name__)


def _no_context(context: str) -> MorphzError:
    return MorphzError("CONTEXT_NOT_FOUND", f"context {context[:80]} has nothing committed",
                       context=context[:80])


def _successor(prefix: bytes) -> Optional[bytes]:
    """The least byte string above every string starting with `prefix` (None: none)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _schema_sql(schema: str) -> list[sql.Composable]:
    s = sql.Identifier(schema)
    out: list[sql.Composable] = [
        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(s),
        sql.SQL("CREATE TABLE IF NOT EXISTS {}._store (one boolean PRIMARY KEY DEFAULT true "
                "CHECK (one), id text NOT NULL, head bigint NOT NULL)").format(s),
        sql.SQL("CREATE TABLE IF NOT EXISTS {}._context (ctx bytea PRIMARY KEY, "
                "commit_seq bigint NOT NULL, fence bigint NOT NULL)").format(s),
        sql.SQL("CREATE TABLE IF NOT EXISTS {}._feed (position bigint PRIMARY KEY, "
                "ctx bytea NOT NULL, commit_seq bigint NOT NULL, change bytea NOT NULL, "
                "CONSTRAINT _feed_ctx UNIQUE (ctx, commit_seq))").format(s),
        # Refuses rewrites of append-only rows from every client; a quarantine's DELETE
        # is let through when its transaction flags it (morphz.quarantine, local).
        sql.SQL("""CREATE OR REPLACE FUNCTION {}.refuse_rewrite() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND TG_TABLE_NAME <> 'quarantine'
     AND current_setting('morphz.quarantine', true) = 'on' THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'table % is append-only', TG_TABLE_NAME USING ERRCODE = 'MZ001';
END $$""").format(s),
    ]
    for table, append_only in TABLES.items():
        t = sql.Identifier(schema, table)
        out.append(sql.SQL("CREATE TABLE IF NOT EXISTS {} (k bytea PRIMARY KEY, "
                           "v bytea NOT NULL)").format(t))
        if append_only:
            out.append(sql.SQL("CREATE OR REPLACE TRIGGER append_only BEFORE UPDATE OR "
                               "DELETE ON {} FOR EACH ROW EXECUTE FUNCTION "
                               "{}.refuse_rewrite()").format(t, s))
            out.append(sql.SQL("CREATE OR REPLACE TRIGGER append_only_truncate BEFORE "
                               "TRUNCATE ON {} FOR EACH STATEMENT EXECUTE FUNCTION "
                               "{}.refuse_rewrite()").format(t, s))
    return out


def _text(statement: sql.Composable) -> str:
    """A composed statement as its text, once: psycopg would render a Composed (quote its
    identifiers) at every execution, some 100 us each."""
    return statement.as_string(None)


class _Sql:
    """Every statement the store runs, composed once for its schema."""

    def __init__(self, schema: str) -> None:
        s = sql.Identifier(schema)

        def each(template: str) -> dict[str, str]:
            return {table: _text(sql.SQL(template).format(t=sql.Identifier(schema, table),
                                                          s=s))
                    for table in TABLES}

        self.get = each("SELECT v FROM {t} WHERE k = %s")
        self.get_many = each("SELECT k, v FROM {t} WHERE k = ANY(%s)")
        self.upsert = each("INSERT INTO {t} (k, v) SELECT * FROM unnest(%s::bytea[], "
                           "%s::bytea[]) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v")
        self.insert = each("INSERT INTO {t} (k, v) SELECT * FROM unnest(%s::bytea[], "
                           "%s::bytea[])")
        self.existing = each("SELECT k FROM {t} WHERE k = ANY(%s)")
        self.delete = each("DELETE FROM {t} WHERE k = ANY(%s)")
        # Moves rows aside: quarantine key = its prefix (context, commit_seq, table) and
        # the row's key past the context's prefix.
        self.move_aside = each(
            "WITH moved AS (DELETE FROM {t} WHERE k = ANY(%s) RETURNING k, v) "
            "INSERT INTO {s}.quarantine (k, v) SELECT %s || substring(k from %s), v "
            "FROM moved")
        self.scans: dict[tuple, str] = {}
        self._schema = schema
        one = lambda template: _text(sql.SQL(template).format(s))  # noqa: E731
        self.lock_head = one("SELECT head, id FROM {}._store FOR UPDATE")
        self.read_head = one("SELECT head, id FROM {}._store")
        self.init_store = one("INSERT INTO {}._store (id, head) VALUES (%s, 0) "
                              "ON CONFLICT DO NOTHING")
        self.set_head = one("UPDATE {}._store SET head = %s")
        self.set_id = one("UPDATE {}._store SET id = %s")
        self.contexts_of = one("SELECT ctx, commit_seq, fence FROM {}._context "
                               "WHERE ctx = ANY(%s)")
        self.commit_seq = one("SELECT commit_seq FROM {}._context WHERE ctx = %s")
        self.all_contexts = one("SELECT ctx FROM {}._context ORDER BY ctx")
        self.count_contexts = one("SELECT count(*) FROM {}._context")
        self.put_contexts = one(
            "INSERT INTO {}._context (ctx, commit_seq, fence) SELECT * FROM "
            "unnest(%s::bytea[], %s::bigint[], %s::bigint[]) ON CONFLICT (ctx) DO UPDATE "
            "SET commit_seq = EXCLUDED.commit_seq, fence = EXCLUDED.fence")
        self.put_feed = one(
            "INSERT INTO {}._feed (position, ctx, commit_seq, change) SELECT * FROM "
            "unnest(%s::bigint[], %s::bytea[], %s::bigint[], %s::bytea[])")
        self.feed_after = one("SELECT position, change FROM {}._feed WHERE position > %s "
                              "ORDER BY position LIMIT %s")
        self.feed_of = one("SELECT position, change FROM {}._feed WHERE ctx = %s AND "
                           "commit_seq > %s ORDER BY commit_seq LIMIT %s")
        self.all_rows = each("SELECT k, v FROM {t} ORDER BY k")
        self.all_feed = one("SELECT position, ctx, commit_seq, change FROM {}._feed "
                            "ORDER BY position")
        self.all_context_rows = one("SELECT ctx, commit_seq, fence FROM {}._context "
                                    "ORDER BY ctx")

    def scan(self, table: str, *, values: bool, keys_: bool, after: bool, upper: bool,
             reverse: bool) -> str:
        """A page of a scan: rows of `table` in [low, high) past the last one read."""
        shape = (table, values, keys_, after, upper, reverse)
        found = self.scans.get(shape)
        if found is None:
            cols = ", ".join(c for c, on in (("k", keys_ or True), ("v", values)) if on)
            cond = ["k >= %s"]
            if upper:
                cond.append("k < %s")
            if after:
                cond.append("k < %s" if reverse else "k > %s")
            found = self.scans[shape] = _text(sql.SQL(
                "SELECT " + cols + " FROM {t} WHERE " + " AND ".join(cond) +
                " ORDER BY k" + (" DESC" if reverse else "") + " LIMIT %s").format(
                t=sql.Identifier(self._schema, table)))
        return found


class _Submission(Ticket):
    def __init__(self, context: str, expect: Optional[int], writes: list[Write],
                 change: Optional[Change] = None, fence: int = 0) -> None:
        super().__init__()
        self.context, self.expect, self.writes, self.fence = context, expect, writes, fence
        self.change = change
        self.done = False


def _expected(sub: _Submission) -> int:
    return -1 if sub.expect is None else sub.expect


class _Refused(Exception):
    """A submission's own refusal found inside its savepoint (roll it back)."""

    def __init__(self, error: MorphzError) -> None:
        super().__init__(error.message)
        self.error = error


class _Pool:
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
        self._q = _Sql(schema)
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
        self._pool = _Pool(lambda: self._connect(autocommit=True), pool)
        self.space = Space(data_dir or os.getcwd())
        self._queue: list[_Submission] = []
        self._queue_lock = threading.Lock()
        self._leader = threading.Lock()
        self.stats = {"write_transactions": 0, "commits": 0}

    def _create(self, conn: psycopg.Connection) -> None:
        with conn.transaction():  # a savepoint: committed with the caller's transaction
            # One creator at a time (several storage processes may start at once).
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._schema,))
            for statement in _schema_sql(self._schema):
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
    def reader(self, context: str) -> "PostgresReader":
        return PostgresReader(self, context, snapshot=True)

    def latest(self, context: str) -> "PostgresReader":
        return PostgresReader(self, context, snapshot=False)

    def contexts(self) -> list[str]:
        with self.reader("") as r:
            return [keys.decode(bytes(ctx))[0]
                    for ctx, in r._run(self._q.all_contexts, ()).fetchall()]

    def feed_head(self) -> int:
        return self._head

    def changes(self, after: int, limit: int = FEED_PAGE, context: str = "") -> FeedPage:
        limit = max(1, min(limit, FEED_PAGE))
        after = min(max(after, 0), _BIGINT_MAX)
        with self.reader(context) as r:
            if context:
                rows = r._run(self._q.feed_of, (keys.context_prefix(context), after,
                                                limit)).fetchall()
                return FeedPage([_unpack_change(p, bytes(c)) for p, c in rows],
                                r.commit_seq, self._id)
            head, _ = r._run(self._q.read_head, ()).fetchone()
            rows = r._run(self._q.feed_after, (after, limit)).fetchall()
            return FeedPage([_unpack_change(p, bytes(c)) for p, c in rows], head, self._id)

    def wait_changes(self, after: int, timeout: float) -> int:
        with self._feed_moved:
            self._feed_moved.wait_for(lambda: self._head > after, timeout)
            return self._head

    # -- writes -------------------------------------------------------------------------
    def commit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0) -> int:
        return self.wait(self.submit(context, expect_commit_seq, writes, fence=fence))

    def submit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0) -> Ticket:
        prefix = keys.context_prefix(context)
        for w in writes:  # bad tables and keys fail here, before anything is queued
            if w.table not in TABLES or w.table in SIDE_TABLES:
                keys.check_commit_table(w.table)
            check_write(w)
            keys.encode_in(prefix, w.key)
        sub = _Submission(context, expect_commit_seq, writes,
                          change_of(0, context, 0, writes), fence)
        with self._queue_lock:
            self._queue.append(sub)
        return sub

    def put_record(self, context: str, table: str, key: Key, value: bytes) -> None:
        keys.check_side_record(table, value)
        keys.encode_in(keys.context_prefix(context), key)
        sub = _Submission(context, None, [Write(table, key, value)])
        with self._queue_lock:
            self._queue.append(sub)
        self.wait(sub)

    def wait(self, ticket: Ticket) -> int:
        sub: _Submission = ticket  # type: ignore[assignment]
        while not sub.done:  # leader/follower, as LmdbStore.wait
            with self._leader:
                if sub.done:
                    break
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._apply(batch)
        return sub.get()

    def _apply(self, batch: list[_Submission]) -> None:
        try:
            self._write_batch(batch)
        except pg_errors.DiskFull:
            self._drop_writer()
            self._refuse_all(batch, self.space.refuse("disk", 0, 0))
        except MorphzError as e:  # no connection: nothing was written
            self._refuse_all(batch, e)
        except psycopg.Error as e:  # lost, or refused: it may or may not have committed
            self._drop_writer()
            self._refuse_all(batch, unavailable(e, "commit"))
        except BaseException as e:  # noqa: BLE001 - every waiter must wake up
            self._drop_writer()
            self._refuse_all(batch, e)
        finally:
            for sub in batch:
                sub.done = True

    @staticmethod
    def _refuse_all(batch: list[_Submission], err: BaseException) -> None:
        """The batch's transaction did not commit: every submission the store would have
        applied gets `err`; those refused for their own reason keep theirs."""
        for sub in batch:
            if sub.error is None or sub.result is not None:
                sub.result, sub.error = None, err

    def _drop_writer(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            finally:
                self._writer = None

    def _writer_conn(self) -> psycopg.Connection:
        if self._writer is None or self._writer.closed:
            self._writer = self._connect(autocommit=False)
            self._writer.add_notice_handler(self._writer_notice)
        return self._writer

    def _writer_notice(self, diag: psycopg.errors.Diagnostic) -> None:
        if diag.severity_nonlocalized == "WARNING":  # not translated, unlike the text
            self._writer_warnings.append(diag.message_primary or "")

    def _begin(self, prefixes: list[bytes], appends: dict[str, set[bytes]]) -> tuple:
        """Open the batch's transaction in one round trip: lock the feed head (writers take
        turns), then, read after it, the contexts' versions and tokens and which of the
        rows the batch appends exist already. (connection, head, {context: (commit_seq,
        fence)}, {(table, key) that exists}). A connection that died while idle (a
        restarted server) is replaced once: nothing had been applied on it."""
        reused = self._writer is not None and not self._writer.closed
        try:
            return self._read_state(self._writer_conn(), prefixes, appends)
        except psycopg.OperationalError:
            self._drop_writer()
            if not reused:
                raise
        return self._read_state(self._writer_conn(), prefixes, appends)

    def _read_state(self, conn: psycopg.Connection, prefixes: list[bytes],
                    appends: dict[str, set[bytes]]) -> tuple:
        q = self._q
        with conn.pipeline():
            lock = conn.cursor(binary=True).execute(q.lock_head)
            contexts = conn.cursor(binary=True).execute(q.contexts_of, (prefixes,))
            found = [(table, conn.cursor(binary=True).execute(q.existing[table], (list(ks),)))
                     for table, ks in appends.items()]
        head = lock.fetchone()[0]
        state = {keys.decode(bytes(ctx))[0]: (seq, fence)
                 for ctx, seq, fence in contexts.fetchall()}
        existing = {(table, bytes(k)) for table, cur in found for k, in cur.fetchall()}
        return conn, head, state, existing

    def _write_batch(self, batch: list[_Submission]) -> None:
        """One SQL transaction for the batch. Where no submission quarantines a row (the
        rule), every refusal is decided here from what _begin read, and the statements go
        in one pipeline (up to PIPELINE_MAX_BYTES): the batch costs about three round
        trips and one WAL flush.
        A quarantine's rows must exist when it runs, which only the database knows: such
        a batch runs statement by statement, each submission in a savepoint."""
        self._faults.hit("before-lmdb-txn")
        q = self._q
        prefixes = {sub.context: keys.context_prefix(sub.context) for sub in batch}
        plans: dict[int, list] = {}
        appends: dict[str, set[bytes]] = {}
        for sub in batch:
            try:
                plan = plans[id(sub)] = _plan(sub.writes, prefixes[sub.context], side=(
                    sub.expect is None))
            except _Refused as refused:  # a delete from an append-only table
                sub.error = refused.error
                continue
            for kind, table, rows in plan:
                if kind == "insert":
                    appends.setdefault(table, set()).update(k for k, _ in rows)
        careful = any(kind == "aside" for plan in plans.values() for kind, _, _ in plan)
        # psycopg's pipeline stalled (seen: a batch of 18 MiB, waiting at COMMIT for
        # ever); large batches gain nothing from it anyway.
        pipelined = not careful and sum(len(w.value or b"") for sub in batch
                                        for w in sub.writes) <= PIPELINE_MAX_BYTES
        conn, head, state, existing = self._begin(list(prefixes.values()), appends)
        seqs = {c: seq for c, (seq, _) in state.items()}
        fences = {c: fence for c, (_, fence) in state.items()}
        inserted: set[tuple[str, bytes]] = set()  # appended by this batch so far
        changed: set[str] = set()
        feed: list[tuple[int, bytes, int, bytes]] = []
        try:
            with conn.pipeline() if pipelined else nullcontext(), \
                    conn.cursor(binary=True) as cur:
                for sub in sorted(batch, key=_expected):  # see LmdbStore._write_batch
                    plan = plans.get(id(sub))
                    if plan is None:
                        continue
                    if sub.expect is None:
                        if not seqs.get(sub.context):
                            sub.error = _no_context(sub.context)
                            continue
                        try:
                            self._append(cur, plan, existing, inserted, 0, b"")
                        except _Refused as refused:
                            sub.error = refused.error
                        continue
                    highest = fences.get(sub.context, 0)
                    if sub.fence < highest:  # before the version: retrying cannot help it
                        sub.error = fenced(sub.context, sub.fence, highest)
                        continue
                    current = seqs.get(sub.context, 0)
                    if current != sub.expect:
                        sub.error = StaleCommit(sub.expect, current)
                        continue
                    try:
                        if careful:
                            self._write_one(cur, plan, prefixes[sub.context], current + 1)
                        else:
                            self._append(cur, plan, existing, inserted, current + 1,
                                         prefixes[sub.context])
                    except _Refused as refused:
                        sub.error = refused.error
                        continue
                    seqs[sub.context] = sub.result = current + 1
                    fences[sub.context] = max(highest, sub.fence)
                    changed.add(sub.context)
                    head += 1
                    c = sub.change
                    change = Change(head, c.context, current + 1, c.events, c.frames)
                    feed.append((head, prefixes[sub.context], current + 1,
                                 _pack_change(change)))
                if changed:
                    ordered = sorted(changed)
                    cur.execute(q.put_contexts, ([prefixes[c] for c in ordered],
                                                 [seqs[c] for c in ordered],
                                                 [fences[c] for c in ordered]))
                    cur.execute(q.put_feed, tuple(map(list, zip(*feed))))
                    cur.execute(q.set_head, (head,))
                self._faults.hit("after-puts-before-commit")
                self._writer_warnings.clear()
                conn.commit()  # acknowledged only once this returned
        except BaseException:
            if not conn.closed:
                try:
                    conn.rollback()
                except psycopg.Error:
                    self._drop_writer()
            raise
        if self._writer_warnings:
            # A COMMIT whose wait for the synchronous standby was cancelled (an operator's
            # pg_cancel_backend, a timeout) returns with a WARNING: committed here, maybe
            # not on the standby, so a promotion could lose it. Not acknowledged: its
            # outcome is unknown, as with a lost connection (a retry finds it or not).
            raise MorphzError("STORAGE_UNAVAILABLE", "PostgreSQL committed without confirming "
                              "replication: " + self._writer_warnings[0][:200])
        self.space.committed(True)
        with self._feed_moved:  # durable now: followers may read it
            self._head = head
            self._feed_moved.notify_all()
        self.stats["write_transactions"] += 1
        self.stats["commits"] += sum(1 for sub in batch if sub.result is not None)

    def _append(self, cur: psycopg.Cursor, plan: list, existing: set, inserted: set,
                commit_seq: int, prefix: bytes) -> None:
        """Queue a submission's statements, or refuse it (_Refused) if it appends a row
        that exists (in the database, or appended by this batch or by itself)."""
        mine: set[tuple[str, bytes]] = set()
        for kind, table, rows in plan:
            if kind != "insert":
                continue
            for k, _ in rows:
                row = (table, k)
                if row in existing or row in inserted or row in mine:
                    raise _Refused(MorphzError("STORAGE_APPEND_ONLY",
                                               f"table {table} is append-only", table=table))
                mine.add(row)
        inserted |= mine
        for step in plan:
            self._run_step(cur, step, prefix, commit_seq)

    def _write_one(self, cur: psycopg.Cursor, plan: list, prefix: bytes,
                   commit_seq: int) -> None:
        """One submission's writes, statement by statement, in a savepoint where any of
        them may be refused by the database (a row an append-only table has, a row to
        quarantine missing)."""
        risky = any(kind in ("insert", "aside") for kind, _, _ in plan)
        if not risky:
            for step in plan:
                self._run_step(cur, step, prefix, commit_seq)
            return
        cur.execute("SAVEPOINT sub")
        try:
            for step in plan:
                self._run_step(cur, step, prefix, commit_seq)
        except _Refused:
            cur.execute("ROLLBACK TO SAVEPOINT sub")
            raise
        except pg_errors.UniqueViolation as e:
            cur.execute("ROLLBACK TO SAVEPOINT sub")
            table = getattr(e.diag, "table_name", None) or "?"
            raise _Refused(MorphzError("STORAGE_APPEND_ONLY", f"table {table} is append-only",
                                       table=table)) from None
        cur.execute("RELEASE SAVEPOINT sub")

    def _run_step(self, cur: psycopg.Cursor, step: tuple, prefix: bytes,
                  commit_seq: int) -> None:
        kind, table, rows = step
        q = self._q
        if kind == "upsert":
            cur.execute(q.upsert[table], ([k for k, _ in rows], [v for _, v in rows]))
        elif kind == "insert":
            cur.execute(q.insert[table], ([k for k, _ in rows], [v for _, v in rows]))
        elif kind == "delete":
            cur.execute(q.delete[table], ([k for k, _ in rows],))
        else:  # aside: the quarantine's DELETE is let through the append-only trigger
            ks = [k for k, _ in rows]
            cur.execute("SELECT set_config('morphz.quarantine', 'on', true)")
            aside = keys.encode_in(prefix, (commit_seq, table))
            cur.execute(q.move_aside[table], (ks, aside, len(prefix) + 1))
            moved = cur.rowcount
            cur.execute("SELECT set_config('morphz.quarantine', 'off', true)")
            if moved != len(ks):
                raise _Refused(quarantine_missing(rows[0][1]))

    def close(self) -> None:
        self._pool.close()
        with self._leader:
            self._drop_writer()

    # -- backups ------------------------------------------------------------------------
    def copy_compacted(self, directory: str) -> dict:
        """Write the whole store, as of one snapshot, as an LMDB environment in
        `directory`/data.mdb: what LmdbStore.copy_compacted writes, so `morphz backup`
        and `morphz restore` work unchanged (a restore gives an LMDB store). Every commit
        acknowledged before `taken_at` is in it (the snapshot is taken after)."""
        taken_at = datetime.now(timezone.utc)
        with self.reader("") as r:
            head, _ = r._run(self._q.read_head, ()).fetchone()
            contexts = r._run(self._q.count_contexts, ()).fetchone()[0]
            env = lmdb.open(directory, map_size=1 << 40, max_dbs=len(TABLES) + 8,
                            subdir=True, sync=True)
            try:
                self._copy_into(env, r)
                env.sync(True)
            finally:
                env.close()
        try:
            os.unlink(os.path.join(directory, "lock.mdb"))
        except FileNotFoundError:
            pass
        return {"feed_head": head, "contexts": contexts, "store": self._id,
                "taken_at": taken_at.isoformat(timespec="microseconds")}

    def _copy_into(self, env: lmdb.Environment, r: "PostgresReader") -> None:
        u64 = lambda n: n.to_bytes(8, "big")  # noqa: E731
        for table in TABLES:
            db = env.open_db(table.encode())
            with env.begin(write=True) as txn:
                for k, v in r._stream(self._q.all_rows[table]):
                    txn.put(k, v, db=db, append=True)
        version, fence = env.open_db(b"_version"), env.open_db(b"_fence")
        with env.begin(write=True) as txn:
            for ctx, seq, highest in r._stream(self._q.all_context_rows):
                txn.put(ctx, u64(seq), db=version)
                if highest:
                    txn.put(ctx, u64(highest), db=fence)
        feed, feed_ctx = env.open_db(b"_feed"), env.open_db(b"_feed_ctx")
        with env.begin(write=True) as txn:
            for position, ctx, seq, change in r._stream(self._q.all_feed):
                txn.put(u64(position), change, db=feed)
                txn.put(ctx + u64(seq), u64(position), db=feed_ctx)
        store = env.open_db(b"_store")
        with env.begin(write=True) as txn:
            txn.put(b"id", self._id.encode(), db=store)

    def load(self, directory: str) -> dict:
        """Fill this store, which must be empty (RESTORE_TARGET_NOT_EMPTY), from the LMDB
        environment in `directory` (a restored backup's copy): every table, versions,
        tokens, the feed and the identity, in one transaction. What `morphz restore
        --store postgres` does."""
        env = lmdb.open(directory, readonly=True, lock=False, max_dbs=len(TABLES) + 8,
                        subdir=True)
        try:
            with self._connect(autocommit=False) as conn, env.begin() as txn:
                head, _ = conn.execute(self._q.lock_head).fetchone()
                if head or conn.execute(self._q.count_contexts).fetchone()[0]:
                    raise MorphzError("RESTORE_TARGET_NOT_EMPTY", "the PostgreSQL store "
                                      f"(schema {self._schema}) is not empty; restore only "
                                      "into an empty one", schema=self._schema)
                return self._load_from(conn, env, txn)
        except psycopg.Error as e:
            raise unavailable(e, "load the backup") from None
        finally:
            env.close()

    def _load_from(self, conn: psycopg.Connection, env: lmdb.Environment,
                   txn: lmdb.Transaction) -> dict:
        s = sql.Identifier(self._schema)
        with conn.cursor() as cur:
            for table in TABLES:
                with cur.copy(sql.SQL("COPY {} (k, v) FROM STDIN").format(
                        sql.Identifier(self._schema, table))) as copy:
                    for k, v in txn.cursor(db=env.open_db(table.encode(), txn=txn)):
                        copy.write_row((k, v))
            fences = dict(txn.cursor(db=env.open_db(b"_fence", txn=txn)))
            with cur.copy(sql.SQL("COPY {}._context (ctx, commit_seq, fence) FROM STDIN"
                                  ).format(s)) as copy:
                n = 0
                for ctx, seq in txn.cursor(db=env.open_db(b"_version", txn=txn)):
                    fence = fences.get(ctx)
                    copy.write_row((ctx, int.from_bytes(seq, "big"),
                                    int.from_bytes(fence, "big") if fence else 0))
                    n += 1
            feed = txn.cursor(db=env.open_db(b"_feed", txn=txn))
            head = 0
            with cur.copy(sql.SQL("COPY {}._feed (position, ctx, commit_seq, change) "
                                  "FROM STDIN").format(s)) as copy:
                for k, ctx_seq in txn.cursor(db=env.open_db(b"_feed_ctx", txn=txn)):
                    position = int.from_bytes(ctx_seq, "big")
                    copy.write_row((position, k[:-8], int.from_bytes(k[-8:], "big"),
                                    feed.get(ctx_seq)))
                    head = max(head, position)
            store_id = txn.get(b"id", db=env.open_db(b"_store", txn=txn))
            identity = store_id.decode() if store_id else secrets.token_hex(16)
            cur.execute(sql.SQL("UPDATE {}._store SET head = %s, id = %s").format(s),
                        (head, identity))
        conn.commit()
        self._id = identity
        with self._feed_moved:
            self._head = head
            self._feed_moved.notify_all()
        return {"feed_head": head, "contexts": n, "store": identity}


def _plan(writes: list[Write], prefix: bytes, *, side: bool = False) -> list[tuple[str, str, list]]:
    """A submission's writes as statements: the rows of one table and kind (upsert,
    insert into an append-only table, delete, aside) in one statement each. A key
    written more than once in the submission keeps its writes' order, one statement
    each, after the others (no other key's write depends on it). Raises _Refused for
    a delete from an append-only table. `side`: a side record (put_record), an insert."""
    if side:
        (w,) = writes
        return [("insert", w.table, [(keys.encode_in(prefix, w.key), w.value)])]
    seen: dict[tuple[str, bytes], int] = {}
    encoded = []
    for w in writes:
        k = keys.encode_in(prefix, w.key)
        seen[(w.table, k)] = seen.get((w.table, k), 0) + 1
        encoded.append((w, k))
    groups: dict[tuple[str, str], list] = {}
    repeated: list[tuple[str, str, list]] = []
    for w, k in encoded:
        if w.quarantine:
            kind, row = "aside", (k, w)
        elif TABLES[w.table]:
            if w.value is None:
                raise _Refused(MorphzError("STORAGE_APPEND_ONLY",
                                           f"table {w.table} is append-only", table=w.table))
            kind, row = "insert", (k, w.value)
        else:
            kind, row = ("delete", (k, None)) if w.value is None else ("upsert", (k, w.value))
        if seen[(w.table, k)] > 1:
            repeated.append((kind, w.table, [row]))
        else:
            groups.setdefault((kind, w.table), []).append(row)
    return [(kind, table, rows) for (kind, table), rows in groups.items()] + repeated


class PostgresReader(Reader):
    """One REPEATABLE READ, READ ONLY transaction: a consistent snapshot until closed
    (`snapshot` False: each read sees the rows as they are then, Store.latest)."""

    def __init__(self, store: PostgresStore, context: str, *, snapshot: bool) -> None:
        self._store = store
        self._q = store._q
        self._prefix = keys.context_prefix(context)
        self._conn: Optional[psycopg.Connection] = None
        conn, reused = store._pool.take()
        try:
            row = self._open(conn, snapshot)
        except psycopg.OperationalError as e:
            if not reused:
                store._pool.give(conn, False)
                raise unavailable(e, "read") from None
            conn = store._pool.fresh(conn)  # it died while idle: once more on a new one
            try:
                row = self._open(conn, snapshot)
            except psycopg.Error as e:
                store._pool.give(conn, False)
                raise unavailable(e, "read") from None
        except psycopg.Error as e:
            store._pool.give(conn, False)
            raise unavailable(e, "read") from None
        except BaseException:
            store._pool.give(conn, False)
            raise
        self._conn, self._healthy = conn, True
        self.commit_seq = row[0] if row else 0

    def _open(self, conn: psycopg.Connection, snapshot: bool) -> Optional[tuple]:
        """Begin the snapshot (the first read takes it) and read the commit_seq."""
        if not snapshot:
            return conn.cursor(binary=True).execute(self._q.commit_seq,
                                                    (self._prefix,)).fetchone()
        with conn.pipeline():  # one round trip
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            cur = conn.cursor(binary=True).execute(self._q.commit_seq, (self._prefix,))
        return cur.fetchone()

    def _run(self, statement, params) -> psycopg.Cursor:
        if self._conn is None:
            raise MorphzError("STORAGE_UNAVAILABLE", "the reader is closed")
        try:
            return self._conn.cursor(binary=True).execute(statement, params)
        except psycopg.Error as e:
            self._healthy = False
            raise unavailable(e, "read") from None

    def _stream(self, statement) -> Iterator[tuple]:
        """Every row of a statement, fetched in batches (a backup's whole tables)."""
        try:
            with self._conn.cursor(binary=True) as cur:
                cur.execute(statement)
                while rows := cur.fetchmany(1000):
                    for row in rows:
                        yield tuple(bytes(x) if isinstance(x, memoryview) else x
                                    for x in row)
        except psycopg.Error as e:
            self._healthy = False
            raise unavailable(e, "read") from None

    def get(self, table: str, key: Key) -> Optional[bytes]:
        statement = self._q.get.get(table)
        if statement is None:
            keys.check_table(table)
        row = self._run(statement, (keys.encode_in(self._prefix, key),)).fetchone()
        return None if row is None else bytes(row[0])

    def get_many(self, table: str, wanted: list[Key]) -> list[Optional[bytes]]:
        statement = self._q.get_many.get(table)
        if statement is None and wanted:
            keys.check_table(table)
        if not wanted:
            return []
        encoded = [keys.encode_in(self._prefix, k) for k in wanted]
        found = {bytes(k): bytes(v) for k, v in
                 self._run(statement, (list(set(encoded)),)).fetchall()}
        return [found.get(k) for k in encoded]

    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
        keys.check_table(table)
        return self._pages(table, prefix, after, limit, reverse, values=True)

    def scan_keys(self, table: str, prefix: Key = (),
                  after: Optional[Key] = None) -> Iterator[Key]:
        keys.check_table(table)
        return (k for k, _ in self._pages(table, prefix, after, 0, False, values=False))

    def scan_values(self, table: str, prefix: Key = ()) -> Iterator[bytes]:
        keys.check_table(table)
        return (v for _, v in self._pages(table, prefix, None, 0, False, values=True))

    def _pages(self, table: str, prefix: Key, after: Optional[Key], limit: int,
               reverse: bool, *, values: bool) -> Iterator[tuple[Key, Optional[bytes]]]:
        """The rows under the prefix in key order (or reverse), past `after`, read a page
        at a time, each page past the last key the one before gave."""
        low = keys.encode_in(self._prefix, prefix)
        high = _successor(low)
        mark = None if after is None else keys.encode_in(self._prefix, after)
        statement_of = lambda past: self._q.scan(  # noqa: E731
            table, values=values, keys_=True, after=past, upper=high is not None,
            reverse=reverse)
        skip, left, size = len(self._prefix), limit or -1, _FIRST_PAGE
        while left:
            n = size if left < 0 else min(size, left)
            params = [low] + ([high] if high is not None else []) + \
                ([mark] if mark is not None else []) + [n]
            rows = self._run(statement_of(mark is not None), params).fetchall()
            if not rows:
                return
            raw = [bytes(row[0]) for row in rows]
            for k, row in zip(keys.decode_run(raw, skip), rows):
                yield k, (bytes(row[1]) if values else None)
            if len(rows) < n:
                return
            mark = raw[-1]
            if left > 0:
                left -= len(rows)
            size = min(size * 4, _LONGEST_PAGE)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        healthy = self._healthy
        if healthy and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error:
                healthy = False
        self._store._pool.give(conn, healthy)
