"""A reader of the PostgreSQL store: a snapshot (one REPEATABLE READ, READ ONLY
transaction) or reads of the latest rows, on a connection of the pool."""
from __future__ import annotations

from typing import Iterator, Optional

import psycopg

from morphz.services.storage.postgres.errors import unavailable
from morphz.services.storage.postgres.pool import ConnectionPool
from morphz.services.storage.postgres.schema import Statements
from morphz.shared.errors import MorphzError
from morphz.shared.storage import keys
from morphz.shared.storage.api import Key, Reader

# A scan reads pages of rows: 16 first (most scans are short), then longer ones.
FIRST_PAGE, LONGEST_PAGE = 16, 512
# What a stream (a backup) fetches at once: about this many bytes, at most this many rows.
STREAM_FETCH_BYTES, STREAM_MAX_ROWS = 4 << 20, 1000


def successor(prefix: bytes) -> Optional[bytes]:
    """The least byte string above every string starting with `prefix` (None: none)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


class PostgresReader(Reader):
    """One REPEATABLE READ, READ ONLY transaction: a consistent snapshot until closed
    (`snapshot` False: each read sees the rows as they are then, Store.latest)."""

    def __init__(self, pool: ConnectionPool, statements: Statements, context: str, *,
                 snapshot: bool) -> None:
        self._pool = pool
        self._q = statements
        self._prefix = keys.context_prefix(context)
        self._conn: Optional[psycopg.Connection] = None
        conn, reused = pool.take()
        try:
            row = self._open(conn, snapshot)
        except psycopg.OperationalError as e:
            if not reused:
                pool.give(conn, False)
                raise unavailable(e, "read") from None
            conn = pool.fresh(conn)  # it died while idle: once more on a new one
            try:
                row = self._open(conn, snapshot)
            except psycopg.Error as e:
                pool.give(conn, False)
                raise unavailable(e, "read") from None
        except psycopg.Error as e:
            pool.give(conn, False)
            raise unavailable(e, "read") from None
        except BaseException:
            pool.give(conn, False)
            raise
        self._conn, self._healthy = conn, True
        self._streams = 0  # server-side cursors opened (each a name of its own)
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

    def execute(self, statement, params) -> psycopg.Cursor:
        if self._conn is None:
            raise MorphzError("STORAGE_UNAVAILABLE", "the reader is closed")
        try:
            return self._conn.cursor(binary=True).execute(statement, params)
        except psycopg.Error as e:
            self._healthy = False
            raise unavailable(e, "read") from None

    def stream(self, statement) -> Iterator[tuple]:
        """Every row of a statement (a backup's whole tables), in this snapshot, fetched
        through a server-side cursor about STREAM_FETCH_BYTES at a time: a client-side
        cursor would hold the whole result in the process."""
        self._streams += 1
        n = 16
        try:
            with self._conn.cursor(f"morphz_stream_{self._streams}", binary=True) as cur:
                cur.execute(statement)
                while rows := cur.fetchmany(n):
                    size = 0
                    for row in rows:
                        out = tuple(bytes(x) if isinstance(x, memoryview) else x
                                    for x in row)
                        size += sum(len(x) for x in out if isinstance(x, bytes))
                        yield out
                    # As many rows as the last ones' sizes say fit the budget next time.
                    n = max(1, min(STREAM_MAX_ROWS, STREAM_FETCH_BYTES * len(rows)
                                   // max(size, 1)))
        except psycopg.Error as e:
            self._healthy = False
            raise unavailable(e, "read") from None

    def get(self, table: str, key: Key) -> Optional[bytes]:
        statement = self._q.get.get(table)
        if statement is None:
            keys.check_table(table)
        row = self.execute(statement, (keys.encode_in(self._prefix, key),)).fetchone()
        return None if row is None else bytes(row[0])

    def get_many(self, table: str, wanted: list[Key]) -> list[Optional[bytes]]:
        statement = self._q.get_many.get(table)
        if statement is None and wanted:
            keys.check_table(table)
        if not wanted:
            return []
        encoded = [keys.encode_in(self._prefix, k) for k in wanted]
        found = {bytes(k): bytes(v) for k, v in
                 self.execute(statement, (list(set(encoded)),)).fetchall()}
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
        high = successor(low)
        mark = None if after is None else keys.encode_in(self._prefix, after)
        statement_of = lambda past: self._q.scan(  # noqa: E731
            table, values=values, keys_=True, after=past, upper=high is not None,
            reverse=reverse)
        skip, left, size = len(self._prefix), limit or -1, FIRST_PAGE
        while left:
            n = size if left < 0 else min(size, left)
            params = [low] + ([high] if high is not None else []) + \
                ([mark] if mark is not None else []) + [n]
            rows = self.execute(statement_of(mark is not None), params).fetchall()
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
            size = min(size * 4, LONGEST_PAGE)

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
        self._pool.give(conn, healthy)
