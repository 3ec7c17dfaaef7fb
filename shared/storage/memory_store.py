"""An in-memory Store with the same semantics as LmdbStore (no durability).

Used to replay event history for audit and projection rebuilds, and run through
the same storage conformance suite as the LMDB store.
"""
from __future__ import annotations

import threading
from dataclasses import replace
from typing import Iterator, Optional

from morphz.shared.mind.tables import SIDE_TABLES, TABLES
from morphz.shared.storage import keys
from morphz.shared.storage.api import (Key, Reader, StaleCommit, StaleRead, Store, Write)
from morphz.shared.storage.feed import FEED_PAGE, FILLER, Change, FeedPage, change_of
from morphz.shared.storage.rules import (check_write, context_not_found, erase_missing, fenced,
                                         quarantine_key, quarantine_missing)
from morphz.shared.errors import MorphzError


class MemoryStore(Store):
    def __init__(self) -> None:
        self._tables: dict[str, dict[bytes, bytes]] = {t: {} for t in TABLES}
        self._versions: dict[str, int] = {}
        self._fences: dict[str, int] = {}  # context -> highest fencing token accepted
        self._feed: list[Change] = []  # position p is self._feed[p - 1]
        self._lock = threading.Lock()
        self._feed_moved = threading.Condition(self._lock)
        # Side records are numbered as put, so a reader hides those put after it was
        # taken, as an LMDB read transaction would (they do not move a version).
        self._side_puts = 0
        self._born: dict[tuple[str, bytes], int] = {}
        self._deleted_at: dict[str, int] = {}  # context -> its last deletion's position

    def reader(self, context: str) -> "MemoryReader":
        return MemoryReader(self, context)

    def contexts(self) -> list[str]:
        return sorted(self._versions)

    def commit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0) -> int:
        with self._lock:
            highest = self._fences.get(context, 0)
            if fence < highest:
                raise fenced(context, fence, highest)
            current = self._versions.get(context, 0)
            if current != expect_commit_seq:
                raise StaleCommit(expect_commit_seq, current)
            staged: dict[tuple[str, bytes], Optional[bytes]] = {}
            for w in writes:
                keys.check_commit_table(w.table)
                check_write(w)
                k = keys.encode((context, *w.key))
                row = staged[(w.table, k)] if (w.table, k) in staged \
                    else self._tables[w.table].get(k)
                if w.quarantine:
                    if row is None:
                        raise quarantine_missing(w)
                    staged[("quarantine", keys.encode((context,
                                                       *quarantine_key(w, current + 1))))] = row
                    staged[(w.table, k)] = None
                    continue
                if w.erase:  # an existing row rewritten, even of an append-only table
                    if row is None:
                        raise erase_missing(w)
                elif TABLES[w.table] and (w.value is None or row is not None):
                    raise MorphzError("STORAGE_APPEND_ONLY", f"table {w.table} is append-only",
                                      table=w.table)
                staged[(w.table, k)] = w.value
            for (table, k), v in staged.items():
                if v is None:
                    self._tables[table].pop(k, None)
                else:
                    self._tables[table][k] = v
            self._versions[context] = current + 1
            if fence > highest:
                self._fences[context] = fence
            self._feed.append(change_of(len(self._feed) + 1, context, current + 1, writes))
            self._feed_moved.notify_all()
            return current + 1

    def delete_context(self, context: str) -> int:
        """Store.delete_context: the context's feed entries become FILLER (a list:
        positions are indexes)."""
        with self._lock:
            if context not in self._versions:
                raise context_not_found(context)
            prefix = keys.encode((context,))
            for rows in self._tables.values():
                for k in [k for k in rows if k.startswith(prefix)]:
                    del rows[k]
            self._feed[:] = [replace(FILLER, position=c.position) if c.context == context
                             else c for c in self._feed]
            del self._versions[context]
            self._feed.append(Change(len(self._feed) + 1, context, 0, deleted=True))
            self._deleted_at[context] = len(self._feed)
            self._feed_moved.notify_all()
            return len(self._feed)

    def feed_head(self) -> int:
        return len(self._feed)

    def changes(self, after: int, limit: int = FEED_PAGE, context: str = "") -> FeedPage:
        limit = max(1, min(limit, FEED_PAGE))
        with self._lock:
            if not context:
                return FeedPage(self._feed[after:after + limit], len(self._feed))
            since = self._deleted_at.get(context, 0)
            mine = [c for c in self._feed[since:] if c.context == context and
                    c.commit_seq > after]
            return FeedPage(mine[:limit], self._versions.get(context, 0))

    def wait_changes(self, after: int, timeout: float) -> int:
        with self._feed_moved:
            self._feed_moved.wait_for(lambda: len(self._feed) > after, timeout)
            return len(self._feed)
    def put_records(self, context: str, records: list[Write]) -> None:
        keys.check_side_records(records)
        encoded = [(w.table, keys.encode((context, *w.key)), w.value) for w in records]
        with self._lock:
            if not self._versions.get(context):
                raise MorphzError("CONTEXT_NOT_FOUND", f"context {context[:80]} has nothing "
                                  "committed", context=context[:80])
            for table, k, _ in encoded:  # all or none: checked before any is written
                if k in self._tables[table]:
                    raise MorphzError("STORAGE_APPEND_ONLY", f"table {table} is append-only",
                                      table=table)
            self._side_puts += 1
            for table, k, value in encoded:
                self._born[(table, k)] = self._side_puts
                self._tables[table][k] = value


class MemoryReader(Reader):
    """Reads the live dicts; a commit in between makes further reads fail (StaleRead),
    which gives callers the same snapshot guarantee as an LMDB read transaction."""

    def __init__(self, store: MemoryStore, context: str) -> None:
        self._store = store
        self._context = context
        self.commit_seq = store._versions.get(context, 0)
        self._side_mark = store._side_puts

    def _visible(self, table: str, k: bytes) -> bool:
        return table not in SIDE_TABLES or \
            self._store._born.get((table, k), 0) <= self._side_mark

    def _check(self) -> None:
        if self._store._versions.get(self._context, 0) != self.commit_seq:
            raise StaleRead(self._context)

    def get(self, table: str, key: Key) -> Optional[bytes]:
        keys.check_table(table)
        self._check()
        k = keys.encode((self._context, *key))
        return self._store._tables[table].get(k) if self._visible(table, k) else None

    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
        keys.check_table(table)
        self._check()
        pre = keys.encode((self._context, *prefix))
        rows = sorted((k, v) for k, v in self._store._tables[table].items()
                      if k.startswith(pre) and self._visible(table, k))
        if reverse:
            rows.reverse()
        if after is not None:
            bound = keys.encode((self._context, *after))
            rows = [(k, v) for k, v in rows if (k < bound if reverse else k > bound)]
        if limit:
            rows = rows[:limit]
        for k, v in rows:
            yield keys.decode(k)[1:], v
