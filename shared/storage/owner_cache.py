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

A context's cache is a chain of versions: a reader keeps the one it started on, and
this writer's commits, once durable, make the next one from the rows they wrote (a
commit that is durable implies every earlier one of the context is: each expects the
version its predecessor made). A row the cache lacks is read from the store, whose
version may be ahead of the reader's by this writer's commits still in flight: those
the reader already sees through the pipeline's pending writes (pipeline.py), which
cover every row they wrote, so the other rows read the same at either version; such a
row is not kept, since it was not read at the cached version. Bounded: ROWS rows per
context (a version that outgrows it is dropped and filled again), CONTEXTS contexts
(the least recently used go).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Iterator, Optional

from morphz.shared.storage.api import Key, Reader, StaleRead, Store, Ticket, Write

ROWS = 4096       # rows (scanned rows included) a context's cache holds at most
SCAN_ROWS = 256   # a prefix scan longer than this is not kept
CONTEXTS = 1024   # contexts cached at most

_MISSING = object()


class _Version:
    """A context's rows as of `seq`: `rows` (None: known absent) and whole prefix scans,
    filled by reads made at `seq`; the next version is a new object."""

    def __init__(self, seq: int, rows: Optional[dict] = None,
                 scans: Optional[dict] = None) -> None:
        self.seq = seq
        self.rows: dict[tuple[str, Key], Optional[bytes]] = rows if rows is not None else {}
        self.scans: dict[tuple[str, Key], list[tuple[Key, bytes]]] = \
            scans if scans is not None else {}
        self.size = len(self.rows) + sum(len(s) for s in self.scans.values())

    def after(self, writes: list[Write]) -> Optional["_Version"]:
        """The next version: these writes over this one (None: start again from the
        store)."""
        rows = dict(self.rows)
        for w in writes:
            if w.quarantine:  # a repair moves rows aside: rare, read everything again
                return None
            rows[(w.table, w.key)] = w.value
        # A scan is kept only if no written key falls under its prefix.
        scans = {k: v for k, v in self.scans.items()
                 if not any(w.table == k[0] and w.key[:len(k[1])] == k[1] for w in writes)}
        return _Version(self.seq + 1, rows, scans)


class _Context:
    def __init__(self, version: _Version, fence: int) -> None:
        self.version = version
        self.fence = fence
        # This writer's commits not yet in `version`: [expect_commit_seq, writes, ticket],
        # in submission order.
        self.pending: list[list] = []


class OwnerCache:
    """reader/submit/wait over `store` for TransactionCore's write path (see above)."""

    def __init__(self, store: Store, *, rows: int = ROWS, contexts: int = CONTEXTS) -> None:
        self._store = store
        self._rows, self._max_contexts = rows, contexts
        self._contexts: "OrderedDict[str, _Context]" = OrderedDict()
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
            return CachedReader(self, context, fence, entry.version if entry else None)

    def submit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0) -> Ticket:
        ticket = self._store.submit(context, expect_commit_seq, writes, fence=fence)
        with self._lock:
            entry = self._contexts.get(context)
            if entry is not None:
                entry.pending.append([expect_commit_seq, writes, ticket])
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
            return entry.version.seq if entry else None

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
            version = entry.version
            for expect, writes, t in done:
                self._submitted.pop(id(t), None)
                version = version.after(writes) if version and expect == version.seq else None
            if version is None or version.size > self._rows:
                self._drop(context)
            else:
                entry.version = version

    def _drop(self, context: str) -> None:
        """Forget a context's rows and its pending commits (lock held)."""
        entry = self._contexts.pop(context, None)
        for p in entry.pending if entry else ():
            self._submitted.pop(id(p[2]), None)

    def _start(self, context: str, fence: int, seq: int) -> _Version:
        """A context's first version: the store's `seq`, read by a reader just now."""
        version = _Version(seq)
        with self._lock:
            self._drop(context)
            self._contexts[context] = _Context(version, fence)
            while len(self._contexts) > self._max_contexts:
                self._drop(next(iter(self._contexts)))
        return version

    def _keep(self, version: _Version, n: int) -> bool:
        """Whether `n` more rows fit in the version's cache (counted if they do)."""
        if version.size + n > self._rows:
            return False
        version.size += n
        return True


class CachedReader(Reader):
    """A read of one context at one version: rows the cache holds come from it, others
    from a reader of the store opened on the first miss."""

    def __init__(self, cache: OwnerCache, context: str, fence: int,
                 version: Optional[_Version]) -> None:
        self._cache, self._context, self._fence = cache, context, fence
        self._version = version
        self._remote: Optional[Reader] = None
        self._keeps = False  # the store's reader is at the cached version: keep its rows

    @property
    def commit_seq(self) -> int:
        return self._at().seq

    def _at(self) -> _Version:
        if self._version is None:
            self._open()
        return self._version

    def _open(self) -> Reader:
        if self._remote is None:
            self._remote = self._cache._store.reader(self._context)
            seq = self._remote.commit_seq
            if self._version is None:
                self._version = self._cache._start(self._context, self._fence, seq)
            elif seq < self._version.seq:  # the store went back: not the one cached
                self._cache.forget(self._context)
                raise StaleRead(self._context)
            self._keeps = seq == self._version.seq
        return self._remote

    def get(self, table: str, key: Key) -> Optional[bytes]:
        v = self._at()
        value = v.rows.get((table, key), _MISSING)
        if value is _MISSING:
            value = self._open().get(table, key)
            if self._keeps and self._cache._keep(v, 1):
                v.rows[(table, key)] = value
        return value

    def get_many(self, table: str, keys: list[Key]) -> list[Optional[bytes]]:
        v = self._at()
        out = [v.rows.get((table, k), _MISSING) for k in keys]
        missing = [k for k, x in zip(keys, out) if x is _MISSING]
        if missing:
            found = dict(zip(missing, self._open().get_many(table, missing)))
            if self._keeps and self._cache._keep(v, len(found)):
                v.rows.update(((table, k), x) for k, x in found.items())
            out = [found[k] if x is _MISSING else x for k, x in zip(keys, out)]
        return out

    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
        if after is not None or limit:  # a part of a scan: the store's key order decides
            return self._open().scan(table, prefix, after, limit, reverse)
        v = self._at()
        rows = v.scans.get((table, prefix))
        if rows is None:
            rows = self._scan_whole(v, table, prefix)
            if rows is None:  # too long to keep: read it from the store
                return self._open().scan(table, prefix, reverse=reverse)
        return iter(rows[::-1] if reverse else rows)

    def _scan_whole(self, v: _Version, table: str, prefix: Key
                    ) -> Optional[list[tuple[Key, bytes]]]:
        rows = []
        for row in self._open().scan(table, prefix):
            rows.append(row)
            if len(rows) > SCAN_ROWS:
                return None
        if self._keeps and self._cache._keep(v, len(rows) + 1):
            v.scans[(table, prefix)] = rows
        return rows

    def close(self) -> None:
        if self._remote is not None:
            self._remote.close()
            self._remote = None
