"""The authoritative store: one LMDB environment, one named database per table.

Every table key starts with the context id. A storage-owned `_version` database
holds each context's physical version (commit_seq); one commit is one LMDB write
transaction, durable on return (sync on by default).
"""
from __future__ import annotations

import os
import threading
from typing import Iterator, Optional

import lmdb

from morphz.shared.storage import keys
from morphz.shared.storage.api import TABLES, Key, Reader, StaleCommit, Store, Write
from morphz.shared.errors import MorphzError

_VERSION_DB = b"_version"


class LmdbStore(Store):
    def __init__(self, path: str, *, map_size: int = 8 << 30, sync: bool = True) -> None:
        os.makedirs(path, exist_ok=True)
        self._env = lmdb.open(path, map_size=map_size, max_dbs=len(TABLES) + 2,
                              max_readers=512, sync=sync, metasync=sync, subdir=True)
        self._dbs = {name: self._env.open_db(name.encode()) for name in TABLES}
        self._version = self._env.open_db(_VERSION_DB)
        # LMDB allows one writer; serialize in-process writers instead of blocking in C.
        self._write_lock = threading.Lock()

    @property
    def path(self) -> str:
        return self._env.path()

    def reader(self, context: str) -> "LmdbReader":
        return LmdbReader(self, context)

    def contexts(self) -> list[str]:
        with self._env.begin(db=self._version) as txn:
            return [keys.decode(k)[0] for k in txn.cursor().iternext(values=False)]

    def _commit_seq(self, txn: lmdb.Transaction, context: str) -> int:
        raw = txn.get(keys.context_prefix(context), db=self._version)
        return int.from_bytes(raw, "big") if raw else 0

    def commit(self, context: str, expect_commit_seq: int, writes: list[Write]) -> int:
        encoded = []
        for w in writes:
            keys.check_table(w.table)
            encoded.append((self._dbs[w.table], TABLES[w.table], w.table,
                            keys.encode((context, *w.key)), w.value))
        with self._write_lock:
            try:
                with self._env.begin(write=True) as txn:
                    current = self._commit_seq(txn, context)
                    if current != expect_commit_seq:
                        raise StaleCommit(expect_commit_seq, current)
                    for db, append_only, table, key, value in encoded:
                        if append_only and (value is None or txn.get(key, db=db) is not None):
                            raise MorphzError("STORAGE_APPEND_ONLY",
                                              f"table {table} is append-only", table=table)
                        if value is None:
                            txn.delete(key, db=db)
                        else:
                            txn.put(key, value, db=db)
                    txn.put(keys.context_prefix(context), (current + 1).to_bytes(8, "big"),
                            db=self._version)
            except lmdb.MapFullError:
                raise MorphzError("STORAGE_FULL", "the storage map is full; nothing was written")
            return current + 1

    def close(self) -> None:
        self._env.close()


class LmdbReader(Reader):
    """One LMDB read transaction: a consistent snapshot until closed."""

    def __init__(self, store: LmdbStore, context: str) -> None:
        self._store = store
        self._context = context
        self._txn = store._env.begin()
        self.commit_seq = store._commit_seq(self._txn, context)

    def get(self, table: str, key: Key) -> Optional[bytes]:
        keys.check_table(table)
        return self._txn.get(keys.encode((self._context, *key)), db=self._store._dbs[table])

    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
        keys.check_table(table)
        pre = keys.encode((self._context, *prefix))
        cur = self._txn.cursor(db=self._store._dbs[table])
        n = 0
        if not reverse:
            start = keys.encode((self._context, *after)) if after is not None else pre
            if not cur.set_range(start):
                return
            if after is not None and cur.key() == start:
                if not cur.next():
                    return
            it = cur.iternext()
        else:
            # Position at the last key <= `after` (exclusive) or at the end of the prefix.
            if after is not None:
                bound = keys.encode((self._context, *after))
                positioned = cur.set_range(bound)
                ok = cur.prev() if positioned else cur.last()
            else:
                positioned = cur.set_range(pre + b"\xff")
                ok = cur.prev() if positioned else cur.last()
            if not ok:
                return
            it = cur.iterprev()
        for k, v in it:
            if not k.startswith(pre):
                return
            yield keys.decode(k)[1:], v
            n += 1
            if limit and n >= limit:
                return

    def close(self) -> None:
        if self._txn is not None:
            self._txn.abort()
            self._txn = None
