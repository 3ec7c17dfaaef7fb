"""Reads of the LMDB store (store.py): one read transaction a Reader, a consistent
snapshot until closed; scans read keys ahead in runs, decoded together."""
from __future__ import annotations

from itertools import islice, takewhile
from typing import TYPE_CHECKING, Iterator, Optional

import lmdb

from morphz.shared.storage import keys
from morphz.shared.storage.api import Key, Reader

if TYPE_CHECKING:
    from morphz.services.storage.lmdb.store import LmdbStore

# A whole-prefix scan reads its first 16 rows one at a time, then runs of 64, 256 and
# 1,024 keys (_scan_runs).
_FIRST_RUN, _LONGEST_RUN = 16, 1024


class LmdbReader(Reader):
    """One LMDB read transaction: a consistent snapshot until closed."""

    def __init__(self, store: "LmdbStore", context: str) -> None:
        self._store = store
        self._context = context
        self._prefix = keys.context_prefix(context)
        store._gate.enter()
        try:
            self._txn = store._env.begin()
        except BaseException:
            store._gate.leave()
            raise
        self.commit_seq = store._commit_seq(self._txn, context)

    def get(self, table: str, key: Key) -> Optional[bytes]:
        db = self._store._dbs.get(table)
        if db is None:
            keys.check_table(table)
        return self._txn.get(keys.encode_in(self._prefix, key), db=db)

    def get_many(self, table: str, wanted: list[Key]) -> list[Optional[bytes]]:
        db = self._store._dbs.get(table)
        if db is None and wanted:  # as get() of each: nothing asked, nothing checked
            keys.check_table(table)
        get, encode, prefix = self._txn.get, keys.encode_in, self._prefix
        return [get(encode(prefix, k), db=db) for k in wanted]

    def _cursor_at(self, table: str, prefix: Key, after: Optional[Key],
                   reverse: bool) -> tuple[Optional[lmdb.Cursor], bytes]:
        """A cursor on the scan's first row (None: no row), and the prefix's encoding."""
        keys.check_table(table)
        pre = keys.encode_in(self._prefix, prefix)
        cur = self._txn.cursor(db=self._store._dbs[table])
        if not reverse:
            start = keys.encode_in(self._prefix, after) if after is not None else pre
            if not cur.set_range(start):
                return None, pre
            if after is not None and cur.key() == start:
                if not cur.next():
                    return None, pre
        else:
            # Position at the last key below `after` (exclusive) or the end of the prefix.
            bound = keys.encode_in(self._prefix, after) if after is not None else pre + b"\xff"
            ok = cur.prev() if cur.set_range(bound) else cur.last()
            if not ok:
                return None, pre
        return cur, pre

    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
        if not (limit or reverse):  # the common whole-prefix scan
            return self._scan_runs(table, prefix, after)
        return self._scan_rows(table, prefix, after, limit, reverse)

    def _scan_rows(self, table: str, prefix: Key, after: Optional[Key], limit: int,
                   reverse: bool) -> Iterator[tuple[Key, bytes]]:
        cur, pre = self._cursor_at(table, prefix, after, reverse)
        if cur is None:
            return
        skip, decode = len(self._prefix), keys.decode
        n = 0
        for k, v in cur.iterprev() if reverse else cur.iternext():
            if not k.startswith(pre):
                return
            yield decode(k, skip), v
            n += 1
            if n == limit:  # never, with no limit (0)
                return

    def scan_tables(self, wanted: list[tuple[str, Key]]) -> list[list[tuple[Key, bytes]]]:
        out: list[list[tuple[Key, bytes]]] = []
        for table, prefix in wanted:
            cur, pre = self._cursor_at(table, prefix, None, False)
            out.append([] if cur is None else self._rows_from(table, cur, pre))
        return out

    def _rows_from(self, table: str, cur: lmdb.Cursor,
                   pre: bytes) -> list[tuple[Key, bytes]]:
        """Every row under the prefix from the cursor's, its keys decoded as one run."""
        ahead, walk = self._walks(table, cur, pre)
        rows = list(zip(keys.decode_run(list(ahead), len(self._prefix)), walk))
        rows += self._past_the_bound(cur, pre)
        return rows

    def _walks(self, table: str, cur: lmdb.Cursor,
               pre: bytes) -> tuple[Iterator[bytes], Iterator[bytes]]:
        """From the cursor's row: the keys under the prefix, read by the cursor (keys
        only), and the values of the same rows, read by a second cursor as they are
        taken. The keys under the prefix are those below prefix + 0xff (a tag byte
        follows the prefix); see _past_the_bound for a key past it."""
        values = self._txn.cursor(db=self._store._dbs[table])
        values.set_key(cur.key())
        return (takewhile((pre + b"\xff").__gt__, cur.iternext(keys=True, values=False)),
                values.iternext(keys=False, values=True))

    def _scan_runs(self, table: str, prefix: Key,
                   after: Optional[Key]) -> Iterator[tuple[Key, bytes]]:
        """The common whole-prefix scan (after `after`). Its first rows are read one at a
        time (most scans are short: a frame's relations, a session's pending), then
        keys are read ahead in runs, each run decoded together (keys.decode_run) with no
        Python step per row where it can, while the values are read a row at a time, so
        a scan never holds more than one value ahead (events may be 32 MiB each)."""
        cur, pre = self._cursor_at(table, prefix, after, False)
        if cur is None:
            return
        read = 0
        for row in self._one_by_one(cur, pre):
            yield row
            read += 1
            if read == _FIRST_RUN:
                break
        else:
            return  # the prefix's or the table's end
        if not cur.next():
            return
        ahead, walk = self._walks(table, cur, pre)
        skip, size = len(self._prefix), _FIRST_RUN * 4
        while True:
            run = list(islice(ahead, size))
            if run:
                yield from zip(keys.decode_run(run, skip), walk)
            if len(run) < size:
                break
            size = min(size * 4, _LONGEST_RUN)
        yield from self._past_the_bound(cur, pre)

    def _past_the_bound(self, cur: lmdb.Cursor, pre: bytes) -> Iterator[tuple[Key, bytes]]:
        """The rows from the cursor's that still start with the prefix: none, unless a key
        with a 0xff tag byte is there, past the bound _walks reads to (never written by
        keys.encode: a damaged store), which is read as any other, one at a time."""
        if not cur.key().startswith(pre):  # also past the last row: iternext would restart
            return
        yield from self._one_by_one(cur, pre)

    def _one_by_one(self, cur: lmdb.Cursor, pre: bytes) -> Iterator[tuple[Key, bytes]]:
        """The rows from the cursor's on while their keys start with the prefix."""
        skip = len(self._prefix)
        for k, v in cur.iternext():
            if not k.startswith(pre):
                return
            yield keys.decode(k, skip), v

    def scan_keys(self, table: str, prefix: Key = (),
                  after: Optional[Key] = None) -> Iterator[Key]:
        cur, pre = self._cursor_at(table, prefix, after, False)
        if cur is None:
            return
        skip, decode = len(self._prefix), keys.decode
        for k in cur.iternext(keys=True, values=False):
            if not k.startswith(pre):
                return
            yield decode(k, skip)

    def scan_values(self, table: str, prefix: Key = ()) -> Iterator[bytes]:
        keys.check_table(table)
        pre = keys.encode_in(self._prefix, prefix)
        cur = self._txn.cursor(db=self._store._dbs[table])
        if not cur.set_range(pre):
            return
        for k, v in cur.iternext():
            if not k.startswith(pre):
                return
            yield v

    def close(self) -> None:
        if self._txn is not None:
            self._txn.abort()
            self._txn = None
            self._store._gate.leave()
