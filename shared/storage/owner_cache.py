"""The write path's cache of a context's rows, for the writer that owns the context.

Over a remote store every read of a commit is a round trip: a 5-op revise reads a dozen
rows and scans five prefixes, some twenty RPCs where the commit itself is one. The
transaction service is the only writer of the contexts it owns (a fencing token per
ownership; a former owner's commits are refused), so it can keep what it read and what
it wrote. Why that is safe:

- Each commit names the version its reads were made at (`expect_commit_seq`) and the
  store refuses it if the context is elsewhere: a cache gone stale costs one refused
  commit, after which the context's rows are dropped and read again. No commit lands
  on state the store does not hold.
- A request refused by the rules (an error computed from the rows, no commit to check
  it) is computed again from the store before the error is answered (TransactionCore).
- A context's rows are kept per fencing token: owning the context anew starts over
  (another owner may have written in between). The server drops every context when
  its connection to the store leaves READY (the store may have been replaced).

Only the write path reads through it: a reader answering a client must not be served
from a cache that another instance's commits may have outdated.

How a read stays consistent: the write path reads under its context's pipeline lock,
through the pipeline's pending writes (pipeline.py), which cover every row written by
this writer's commits still in flight. A commit becomes durable, and moves the cache on
with the rows it wrote (a durable commit implies every earlier one of the context is:
each expects the version its predecessor made), before the pipeline forgets it. So
while a read goes on, the cache only takes in commits whose rows the read already sees
through the pending writes, and a row the cache lacks can be read from the store at a
later version than the cache's, as long as that version adds only such commits. A row
read so is kept only if none of this writer's commits between the two versions wrote
it (else the cache gets it from that commit). Bounded: ROWS rows per context (the
oldest half go when it is full), CONTEXTS contexts, and BYTES in all, values and ROW_COST
a row (the least recently used contexts go); a row larger than ROW_BYTES (an event's
text, a large frame) is never kept.

Over an in-process store (the all-in-one server) the cache saves no round trips but LMDB
calls: py-lmdb lets go of the interpreter's lock for each get and each step of a scan,
so with many requests in flight every read of a commit is a chance for another thread
to take the lock, and a thread switch to get it back.
"""
from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from typing import Iterator, Optional

from morphz.shared.storage.api import Key, Reader, StaleRead, Store, Ticket, Write

ROWS = 16384      # rows (scanned rows included) a context's cache holds at most
SCAN_ROWS = 256   # a prefix scan longer than this is not kept
CONTEXTS = 1024   # contexts cached at most
BYTES = 64 << 20  # bytes held in all (values, and ROW_COST a row)
ROW_BYTES = 64 << 10  # a larger row is read from the store each time
ROW_COST = 200  # a held row's memory besides its value: its key's tuples, a dict entry
# Rows written once and seldom read by a later commit: the history's events and their
# ids, a frame's past versions. A commit writes them (a 5-op revise: an event, its id,
# five versions) but reads none of them back, so kept as written they filled a context's
# ROWS with rows never read, and the trims that made room dropped the frames and meta
# every commit reads. Written, they are kept only where the cache holds the key already;
# a read of one reads the store and keeps it.
WRITE_ONCE = frozenset({"events", "event_ids", "frame_versions"})

_MISSING = object()


def _cost(value: Optional[bytes]) -> int:
    """What keeping one row counts against BYTES (None: a row known absent)."""
    return ROW_COST + (len(value) if value else 0)


def _scan_cost(rows: list[tuple[Key, bytes]]) -> int:
    """What keeping a scan counts against BYTES: its rows, and one more for the scan."""
    return ROW_COST * (len(rows) + 1) + sum(len(v) for _, v in rows)


class _Context:
    """A context's rows as of version `seq`: rows (None: known absent) and whole prefix
    scans, and this writer's commits submitted on top of them, in submission order."""

    def __init__(self, context: str, seq: int, fence: int) -> None:
        self.context, self.seq, self.fence = context, seq, fence
        self.rows: dict[tuple[str, Key], Optional[bytes]] = {}
        self.scans: dict[tuple[str, Key], list[tuple[Key, bytes]]] = {}
        self.scan_lengths: dict[str, set[int]] = {}  # table -> prefix lengths scanned
        self.scanned = 0  # rows held by scans
        self.bytes = 0  # held in rows and scans: values, and ROW_COST a row
        self.pending: list[tuple[int, list[Write], Ticket]] = []  # (expect, writes, ticket)

    def apply(self, writes: list[Write]) -> bool:
        """Move to the next version: these rows written. False: cannot (start over)."""
        rows = self.rows
        for w in writes:
            if w.quarantine:  # a repair moves rows aside: rare, read everything again
                return False
            key, value = (w.table, w.key), w.value
            old = rows.pop(key, _MISSING)
            if old is not _MISSING:
                self.bytes -= _cost(old)
            if (value is None or len(value) <= ROW_BYTES) and \
                    (old is not _MISSING or w.table not in WRITE_ONCE):
                rows[key] = value
                self.bytes += _cost(value)
            # else too large to keep, or written once and not asked for: the store has it
            for n in self.scan_lengths.get(w.table, ()):
                self._drop_scan((w.table, w.key[:n]))
        self.seq += 1
        return True

    def keep_row(self, table: str, key: Key, value: Optional[bytes]) -> None:
        """A row read at this version, unless it is held already or too large."""
        if (value is None or len(value) <= ROW_BYTES) and (table, key) not in self.rows:
            self.rows[(table, key)] = value
            self.bytes += _cost(value)

    def keep_scan(self, table: str, prefix: Key, rows: list[tuple[Key, bytes]]) -> None:
        """A whole prefix scan read at this version, unless one of its rows is too large
        (the scan is read from the store again when asked)."""
        if any(len(v) > ROW_BYTES for _, v in rows):
            return
        self._drop_scan((table, prefix))
        self.scans[(table, prefix)] = rows
        self.scan_lengths.setdefault(table, set()).add(len(prefix))
        self.scanned += len(rows) + 1
        self.bytes += _scan_cost(rows)

    def _drop_scan(self, at: tuple[str, Key]) -> None:
        gone = self.scans.pop(at, None)
        if gone is not None:
            self.scanned -= len(gone) + 1
            self.bytes -= _scan_cost(gone)

    def written_since(self, seq: int, table: str) -> Optional[set[Key]]:
        """The keys of `table` this writer's pending commits wrote between this version
        and `seq`, the rows that may read otherwise at `seq` than here (None: `seq` is
        not this version or later by pending commits only)."""
        ahead = seq - self.seq
        if ahead < 0 or ahead > len(self.pending):
            return None
        return {w.key for _, writes, _ in self.pending[:ahead] for w in writes
                if w.table == table}

    def size(self) -> int:
        return len(self.rows) + self.scanned

    def trim(self, limit: int, limit_bytes: int) -> None:
        """Past `limit` rows or `limit_bytes`: drop every scan, then the oldest half of the
        rows as often as it takes."""
        if self.size() <= limit and self.bytes <= limit_bytes:
            return
        self.scans.clear()
        self.scan_lengths.clear()
        self.scanned = 0
        self.bytes = sum(_cost(v) for v in self.rows.values())
        while self.rows and (len(self.rows) > limit or self.bytes > limit_bytes):
            keep = list(self.rows.items())[(len(self.rows) + 1) // 2:]  # one row: none
            self.rows = dict(keep)
            self.bytes = sum(_cost(v) for _, v in keep)


class OwnerCache:
    """reader/submit/wait over `store` for TransactionCore's write path (see above)."""

    def __init__(self, store: Store, *, rows: int = ROWS, contexts: int = CONTEXTS,
                 max_bytes: int = BYTES) -> None:
        self._store = store
        self._rows, self._max_contexts, self._max_bytes = rows, contexts, max_bytes
        self._contexts: "OrderedDict[str, _Context]" = OrderedDict()
        self._bytes = 0  # held by every context, as each context's `bytes` says
        self._submitted: dict[int, str] = {}  # id(ticket) -> its context, while pending
        self._lock = threading.Lock()

    def reader(self, context: str, fence: int = 0) -> "CachedReader":
        """A read of the context for a commit made with fencing token `fence`."""
        with self._lock:
            entry = self._contexts.get(context)
            if entry is not None and entry.fence != fence:  # owned anew: start over
                self._drop(context)
                entry = None
            if entry is not None:
                self._contexts.move_to_end(context)
            return CachedReader(self, context, fence, entry)

    def submit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0, timeout: Optional[float] = None) -> Ticket:
        ticket = self._store.submit(context, expect_commit_seq, writes, fence=fence,
                                    timeout=timeout)
        with self._lock:
            entry = self._contexts.get(context)
            if entry is not None:
                entry.pending.append((expect_commit_seq, writes, ticket))
                self._submitted[id(ticket)] = context
        return ticket

    def wait(self, ticket: Ticket) -> int:
        try:
            seq = self._store.wait(ticket)
        except BaseException:
            self._settle(ticket, ok=False)
            raise
        self._settle(ticket, ok=True)
        return seq

    def forget(self, context: Optional[str] = None) -> None:
        """Drop a context's cache (None: every context's)."""
        with self._lock:
            for name in list(self._contexts) if context is None else [context]:
                self._drop(name)

    def cached(self, context: str) -> Optional[int]:
        """The version of the context the cache holds (None: nothing cached)."""
        with self._lock:
            entry = self._contexts.get(context)
            return entry.seq if entry else None

    def held(self, context: str) -> int:
        """How many rows (scanned rows included) the context's cache holds."""
        with self._lock:
            entry = self._contexts.get(context)
            return entry.size() if entry else 0

    def held_bytes(self) -> int:
        """The bytes held, every context's: values, and ROW_COST a row."""
        with self._lock:
            return self._bytes

    # -- versions ----------------------------------------------------------------------
    def _settle(self, ticket: Ticket, ok: bool) -> None:
        """A submitted commit finished. Durable: it and every commit submitted before it
        move the cache on, in order. Failed (stale, fenced, refused): the context is
        dropped, what the store holds is not known any more."""
        with self._lock:
            context = self._submitted.pop(id(ticket), None)
            entry = self._contexts.get(context) if context is not None else None
            upto = next((i for i, p in enumerate(entry.pending) if p[2] is ticket), None) \
                if entry else None
            if upto is None:
                return  # not tracked, or its context was dropped meanwhile
            if not ok:
                self._drop(context)
                return
            done, entry.pending = entry.pending[:upto + 1], entry.pending[upto + 1:]
            before = entry.bytes
            for expect, writes, t in done:
                self._submitted.pop(id(t), None)
                if expect != entry.seq or not entry.apply(writes):
                    self._bytes += entry.bytes - before
                    self._drop(context)
                    return
            self._resized(entry, before)

    def _drop(self, context: str) -> None:
        """Forget a context's rows and its pending commits (lock held)."""
        entry = self._contexts.pop(context, None)
        if entry is not None:
            self._bytes -= entry.bytes
        for p in entry.pending if entry else ():
            self._submitted.pop(id(p[2]), None)

    def _resized(self, entry: _Context, before: int) -> None:
        """After `entry` took rows in (it held `before` bytes): trim it to the bounds, then
        let the least recently used other contexts go while all hold more than BYTES
        (lock held). Taking rows in is a use: the entry goes last, never dropped here."""
        entry.trim(self._rows, self._max_bytes)
        self._bytes += entry.bytes - before
        self._contexts.move_to_end(entry.context)
        while self._bytes > self._max_bytes and len(self._contexts) > 1:
            self._drop(next(iter(self._contexts)))

    def _start(self, context: str, fence: int, seq: int) -> _Context:
        """A context's first version: the store's `seq`, read by a reader just now."""
        entry = _Context(context, seq, fence)
        with self._lock:
            self._drop(context)
            self._contexts[context] = entry
            while len(self._contexts) > self._max_contexts:
                self._drop(next(iter(self._contexts)))
        return entry

    def _keep_rows(self, entry: _Context, seq: int, table: str,
                   found: dict[Key, Optional[bytes]]) -> None:
        """Keep rows read from the store at version `seq` that read the same at the
        cache's version, if the cache is still the context's."""
        with self._lock:
            if self._contexts.get(entry.context) is not entry:
                return
            written = entry.written_since(seq, table)
            if written is None:
                return
            before = entry.bytes
            for key, value in found.items():
                if key not in written:
                    entry.keep_row(table, key, value)
            self._resized(entry, before)

    def _keep_scan(self, entry: _Context, seq: int, table: str, prefix: Key,
                   rows: list[tuple[Key, bytes]]) -> None:
        with self._lock:
            if self._contexts.get(entry.context) is not entry:
                return
            written = entry.written_since(seq, table)
            if written is not None and not any(k[:len(prefix)] == prefix for k in written):
                before = entry.bytes
                entry.keep_scan(table, prefix, rows)
                self._resized(entry, before)


class CachedReader(Reader):
    """A read of one context at the cache's version when it began: rows the cache holds
    come from it, others from a reader of the store opened on the first miss (whose
    first read opens its snapshot, so a miss costs no extra round trip)."""

    def __init__(self, cache: OwnerCache, context: str, fence: int,
                 entry: Optional[_Context]) -> None:
        self._cache, self._context, self._fence = cache, context, fence
        self._entry = entry
        self._seq = entry.seq if entry is not None else None
        self._remote: Optional[Reader] = None
        self._remote_seq = -1  # the store reader's version, once known

    @property
    def commit_seq(self) -> int:
        if self._seq is None:
            self._store_reader()
        return self._seq

    def _store_reader(self) -> Reader:
        if self._remote is None:
            self._remote = self._cache._store.reader(self._context)
            if self._entry is None:  # nothing cached: the version is the store's
                self._learn()
        return self._remote

    def _learn(self) -> None:
        """Take in the store reader's version (known once it has read): the first
        version of an uncached context, or a check that the store did not go back."""
        if self._remote_seq >= 0:
            return
        self._remote_seq = seq = self._remote.commit_seq
        if self._entry is None:
            self._entry = self._cache._start(self._context, self._fence, seq)
            self._seq = seq
        elif seq < self._seq:  # the store went back: not the one cached
            self._cache.forget(self._context)
            raise StaleRead(self._context)

    def _rows(self) -> dict:
        if self._entry is None:
            self._store_reader()
        return self._entry.rows

    def get(self, table: str, key: Key) -> Optional[bytes]:
        value = self._rows().get((table, key), _MISSING)
        if value is _MISSING:
            value = self._store_reader().get(table, key)
            self._learn()
            self._cache._keep_rows(self._entry, self._remote_seq, table, {key: value})
        return value

    def get_many(self, table: str, keys: list[Key]) -> list[Optional[bytes]]:
        rows = self._rows()
        out = [rows.get((table, k), _MISSING) for k in keys]
        missing = [k for k, x in zip(keys, out) if x is _MISSING]
        if missing:
            found = dict(zip(missing, self._store_reader().get_many(table, missing)))
            self._learn()
            self._cache._keep_rows(self._entry, self._remote_seq, table, found)
            out = [found[k] if x is _MISSING else x for k, x in zip(keys, out)]
        return out

    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
        self._rows()
        rows = self._entry.scans.get((table, prefix))
        if rows is not None and after is None and not limit:
            return iter(rows[::-1] if reverse else rows)
        found = self._store_reader().scan(table, prefix, after, limit, reverse)
        rows = list(itertools.islice(found, SCAN_ROWS + 1))  # the first page is read
        self._learn()
        if after is not None or limit or reverse or len(rows) > SCAN_ROWS:
            return itertools.chain(rows, found)  # a part, or too long: not kept
        self._cache._keep_scan(self._entry, self._remote_seq, table, prefix, rows)
        return iter(rows)

    def close(self) -> None:
        if self._remote is not None:
            self._remote.close()
            self._remote = None
