"""The PostgreSQL store to and from an LMDB environment in LmdbStore's layout: a backup
of it is what `morphz backup` makes of an LMDB store, and `morphz restore --store
postgres` fills an empty one from such a copy."""
from __future__ import annotations

import os
import secrets
from typing import Iterator

import lmdb
import psycopg
from psycopg import sql

from morphz.services.storage.postgres.reader import PostgresReader
from morphz.services.storage.postgres.schema import Statements
from morphz.shared.errors import MorphzError
from morphz.shared.mind.tables import TABLES


COPY_TXN_BYTES = 8 << 20  # rows a table's copy writes before it commits


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


def copy_into_lmdb(r: PostgresReader, q: Statements, store_id: str,
                   directory: str) -> tuple[int, int]:
    """Write what `r` (a snapshot) sees as an LMDB environment in `directory`/data.mdb.
    (feed head, contexts) of the copy."""
    head, _ = r.execute(q.read_head, ()).fetchone()
    contexts = r.execute(q.count_contexts, ()).fetchone()[0]
    env = lmdb.open(directory, map_size=1 << 40, max_dbs=len(TABLES) + 8,
                    subdir=True, sync=True)
    try:
        _copy_into(env, r, q, store_id)
        env.sync(True)
    finally:
        env.close()
    try:
        os.unlink(os.path.join(directory, "lock.mdb"))
    except FileNotFoundError:
        pass
    return head, contexts


def _copy_into(env: lmdb.Environment, r: PostgresReader, q: Statements,
               store_id: str) -> None:
    """Each table's rows come in key order (ORDER BY), so they are appended; the feed's
    per-context index (_feed_ctx) comes in feed order, so it is put."""
    for table in TABLES:
        db = env.open_db(table.encode())
        _write_all(env, ([(db, k, v, True)] for k, v in r.stream(q.all_rows[table])))
    version, fence = env.open_db(b"_version"), env.open_db(b"_fence")
    _write_all(env, ([(version, ctx, _u64(seq), True)]
                     + ([(fence, ctx, _u64(highest), True)] if highest else [])
                     for ctx, seq, highest in r.stream(q.all_context_rows)))
    feed, feed_ctx = env.open_db(b"_feed"), env.open_db(b"_feed_ctx")
    # A deleted context's filler (ctx empty, commit_seq -position) has no index entry.
    _write_all(env, ([(feed, _u64(position), change, True)]
                     + ([(feed_ctx, ctx + _u64(seq), _u64(position), False)] if ctx else [])
                     for position, ctx, seq, change in r.stream(q.all_feed)))
    store = env.open_db(b"_store")
    with env.begin(write=True) as txn:
        txn.put(b"id", store_id.encode(), db=store)


def _write_all(env: lmdb.Environment, rows: Iterator[list[tuple]]) -> None:
    """Every put of `rows` (per source row: (db, key, value, append)), committed every
    COPY_TXN_BYTES: a write transaction keeps its dirty pages in memory until it
    commits, and nothing reads the copy before it is whole."""
    txn, held = env.begin(write=True), 0
    try:
        for puts in rows:
            for db, k, v, append in puts:
                txn.put(k, v, db=db, append=append)
                held += len(k) + len(v)
            if held >= COPY_TXN_BYTES:
                txn.commit()
                txn, held = env.begin(write=True), 0
        txn.commit()
    except BaseException:
        txn.abort()
        raise


def load_from_lmdb(conn: psycopg.Connection, q: Statements, schema: str,
                   directory: str) -> tuple[int, int, str]:
    """Fill the store in `schema`, which must be empty (RESTORE_TARGET_NOT_EMPTY), from
    the LMDB environment in `directory`, in one transaction on `conn` (committed here).
    (feed head, contexts, store identity) loaded."""
    env = lmdb.open(directory, readonly=True, lock=False, max_dbs=len(TABLES) + 8,
                    subdir=True)
    try:
        with env.begin() as txn:
            head, _ = conn.execute(q.lock_head).fetchone()
            if head or conn.execute(q.count_contexts).fetchone()[0]:
                raise MorphzError("RESTORE_TARGET_NOT_EMPTY", "the PostgreSQL store "
                                  f"(schema {schema}) is not empty; restore only "
                                  "into an empty one", schema=schema)
            loaded = _load_from(conn, env, txn, schema)
        conn.commit()
        return loaded
    finally:
        env.close()


def _load_from(conn: psycopg.Connection, env: lmdb.Environment, txn: lmdb.Transaction,
               schema: str) -> tuple[int, int, str]:
    s = sql.Identifier(schema)
    with conn.cursor() as cur:
        for table in TABLES:
            try:
                db = env.open_db(table.encode(), txn=txn, create=False)
            except lmdb.NotFoundError:
                continue  # a copy made before the table existed holds no row of it
            with cur.copy(sql.SQL("COPY {} (k, v) FROM STDIN").format(
                    sql.Identifier(schema, table))) as copy:
                for k, v in txn.cursor(db=db):
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
    return head, n, identity
