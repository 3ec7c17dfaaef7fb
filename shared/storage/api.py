"""The storage interface the services write through.

Storage keeps named tables of opaque records (bytes) under per-context keys (the
tables are the Mind's catalogue, shared/mind/tables.py). Keys
are tuples of str and int. Storage enforces only physical rules: one commit is one
atomic batch, append-only tables are never overwritten, and a commit names the
context's physical version (`commit_seq`) it was computed from (optimistic control).
A commit may carry its writer's fencing token (`fence`, 0: none): the store keeps the
highest it accepted per context with the commits and refuses a lower one (FENCED), so a
former owner of a context cannot write once a newer owner's commit landed.
Every commit also adds one entry to the store's change feed (`changes`, `watch`):
the keys the batch wrote in the events and frames tables, which is what the recall
index follows. Side tables are the exception: their records are put one at a time,
beside the versioned state, and neither move `commit_seq` nor enter the feed (see
Store.put_record). Implementations: LmdbStore (authoritative), MemoryStore
(replay/audit), and StorageClient (the same interface over gRPC).

Beside this module: the change feed's entries and pages (feed.py), and the rules every
store checks a commit's writes by, with the errors it refuses them with (rules.py).
"""
from __future__ import annotations

import abc
import threading
from typing import Callable, Iterator, NamedTuple, Optional, TypeVar, Union

from morphz.shared.errors import MorphzError
from morphz.shared.storage.feed import FEED_PAGE, FeedPage

Key = tuple[Union[str, int], ...]


class Write(NamedTuple):
    """One row a commit writes. A named tuple, not a frozen dataclass: a commit makes one
    per row (a 10,000-op transaction some 70,000), and a frozen dataclass's __init__ cost
    0.63 µs where this costs 0.23."""
    table: str
    key: Key
    value: Optional[bytes]  # None deletes
    # Move the row aside into `quarantine` instead (its bytes kept, under the commit_seq
    # this commit makes + table + key): how a repair takes out a stray row, even from an
    # append-only table, without losing it.
    quarantine: bool = False
    # An erasure's rewrite of a row whose content it took (docs/privacy.md): the row must
    # exist, and may be one of an append-only table (an event); the change feed names it
    # as erased, so derived data drops what it held of the row.
    erase: bool = False


# The tables whose keys a change names: what recall indexes.
FEED_TABLES = ("events", "frames")


class StaleRead(Exception):
    """A reader can no longer serve the version it started on (the in-memory store after
    a commit; a remote reader whose snapshot lease ran out after the context moved):
    redo the whole read."""


class StaleCommit(Exception):
    """The context's physical version moved since the batch was computed."""

    def __init__(self, expected: int, actual: int) -> None:
        super().__init__(f"expected commit_seq {expected}, store is at {actual}")
        self.expected = expected
        self.actual = actual


class Reader(abc.ABC):
    """A consistent read view of one context at `commit_seq`."""

    commit_seq: int
    # Whether a read costs a round trip, so that reading ahead in batches pays (a remote
    # reader); a local one reads when asked, holding nothing it may not need.
    remote = False

    @abc.abstractmethod
    def get(self, table: str, key: Key) -> Optional[bytes]: ...

    @abc.abstractmethod
    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
        """Rows whose key starts with prefix, in key order (or reverse), after `after`."""

    def scan_keys(self, table: str, prefix: Key = (),
                  after: Optional[Key] = None) -> Iterator[Key]:
        """The keys of scan(table, prefix, after), in order, without reading the values
        where the store can (a remote one sends none)."""
        for key, _ in self.scan(table, prefix, after):
            yield key

    def scan_values(self, table: str, prefix: Key = ()) -> Iterator[bytes]:
        """The values of scan(table, prefix), for a reader that has no use for the keys
        (a store may skip decoding them)."""
        for _, value in self.scan(table, prefix):
            yield value

    def scan_tables(self, wanted: list[tuple[str, Key]]) -> list[list[tuple[Key, bytes]]]:
        """Every row of each (table, prefix), in order; a remote reader reads them all in
        one round trip where they fit."""
        return [list(self.scan(table, prefix)) for table, prefix in wanted]

    def get_many(self, table: str, keys: list[Key]) -> list[Optional[bytes]]:
        """get() of each key, in order; a remote reader makes it one round trip."""
        return [self.get(table, k) for k in keys]

    def get_tables(self, wanted: list[tuple[str, list[Key]]], *, release: bool = False,
                   max_bytes: Optional[int] = None) -> list[list[Optional[bytes]]]:
        """get_many() of each (table, keys), in order; a remote reader makes it one round
        trip for all of them. `release`: the caller expects no other read from this
        reader, so a remote one may let its snapshot go with this read (a later read
        still sees the same version, or raises StaleRead if it is gone). `max_bytes`:
        stop once the rows read reach it (one row at least): the rows of a prefix of
        the keys, in the same order and shape (a reader ahead of rows of unknown size
        holds a bounded amount)."""
        if max_bytes is None:
            return [self.get_many(table, keys) for table, keys in wanted]
        out: list[list[Optional[bytes]]] = [[] for _ in wanted]
        read = 0
        for rows, (table, keys) in zip(out, wanted):
            for key in keys:
                rows.append(self.get(table, key))
                read += len(rows[-1] or b"")
                if read >= max_bytes:
                    return out
        return out

    def close(self) -> None:  # noqa: B027 - optional: most readers hold nothing
        pass

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Ticket:
    """A submitted commit: `wait()` gives the new commit_seq once durable, or raises."""

    def __init__(self) -> None:
        self.result: Optional[int] = None
        self.error: Optional[BaseException] = None

    def get(self) -> int:
        if self.error is not None:
            raise self.error
        return self.result


class Store(abc.ABC):
    @abc.abstractmethod
    def reader(self, context: str) -> Reader: ...

    def latest(self, context: str) -> Reader:
        """A reader whose every read sees the context's rows as they are then, holding no
        snapshot, so its reads need not agree on one version: for a reader that wants each
        row as it is now (recall indexing a change). By default the consistent reader."""
        return self.reader(context)

    @abc.abstractmethod
    def commit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0) -> int:
        """Apply all writes atomically or none; returns the new commit_seq. `fence` is
        the writer's fencing token (0: none); it is checked before the version.
        Raises MorphzError FENCED (a higher token was accepted for this context), then
        StaleCommit, or MorphzError (STORAGE_APPEND_ONLY, STORAGE_FULL,
        STORAGE_TABLE_INVALID for a side table, ...)."""

    def submit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0, timeout: Optional[float] = None) -> Ticket:
        """Queue a commit; commits of one context apply in submission order (a store that
        batches concurrent commits, group commit, applies a context's commits in one
        batch by the versions they expect). Such stores override this and `wait`; the
        default commits at once. `timeout`: seconds its caller waits at most (None: the
        store's own bound), for stores that can stop a commit midway (a remote one's
        call, PostgreSQL's statement timeout): past it the commit is refused
        DEADLINE_EXCEEDED having changed nothing, or its outcome is unknown
        (STORAGE_UNAVAILABLE, UNAVAILABLE)."""
        ticket = Ticket()
        try:
            ticket.result = self.commit(context, expect_commit_seq, writes, fence=fence)
        except Exception as e:  # noqa: BLE001 - handed to the waiter
            ticket.error = e
        return ticket

    def wait(self, ticket: Ticket) -> int:
        return ticket.get()

    def put_record(self, context: str, table: str, key: Key, value: bytes) -> None:
        """Write one record of a side table (SIDE_TABLES): put_records of one."""
        self.put_records(context, [Write(table, key, value)])

    @abc.abstractmethod
    def put_records(self, context: str, records: list[Write]) -> None:
        """Write records of side tables (SIDE_TABLES), each once, all or none, durably
        (a snapshot and its index entries). The context must exist (CONTEXT_NOT_FOUND);
        its commit_seq does not move, so no reader or commit computed on it goes stale. A
        reader sees the records put before its version was taken (a remote reader
        renewing its snapshot may see later ones). Raises MorphzError:
        STORAGE_APPEND_ONLY (a key exists, or is given twice), STORAGE_TABLE_INVALID (not
        a side table), STORAGE_KEY_INVALID, STORAGE_FULL."""

    @abc.abstractmethod
    def contexts(self) -> list[str]: ...

    def delete_context(self, context: str) -> int:
        """Remove every row of the context (every table and its version; its entries in
        the change feed become FILLER, naming nothing, so feed positions stay
        consecutive) and add one feed entry saying it went (Change.deleted): what
        `morphz context delete` does (docs/privacy.md, PRIV-05). The highest fencing token
        it accepted stays, so a former owner cannot write into a context made again under
        the name. CONTEXT_NOT_FOUND when there is none. The deletion's feed position."""
        raise MorphzError("INTERNAL", f"{type(self).__name__} cannot delete a context")

    def reclaim(self, context: str = "") -> dict:
        """Rewrite the store so that the bytes of rows it deleted or rewrote (an
        erasure's, in `context`) are in none of its files, as an erasure does before it
        reports done (PRIV-03); commits and reads wait meanwhile where the engine needs
        them to (LMDB: its compacting copy replaces the data file). What it did
        ({"engine", "bytes_before", "bytes_after", "duration_ms"}); an in-memory store
        has no files."""
        return {}

    # -- the change feed -------------------------------------------------------------------
    @abc.abstractmethod
    def changes(self, after: int, limit: int = FEED_PAGE, context: str = "") -> FeedPage:
        """Up to `limit` changes after `after` in order. All contexts: `after` is a feed
        position. One context: `after` is that context's commit_seq, and the page's
        head is the context's latest commit_seq."""

    @abc.abstractmethod
    def wait_changes(self, after: int, timeout: float) -> int:
        """Block until the feed's head passes `after` or `timeout` ends; the head."""

    def watch(self, after: int, *, context: str = "", stop: Optional[threading.Event] = None,
              idle: float = 1.0, limit: int = FEED_PAGE,
              gather: float = 0.0) -> Iterator[FeedPage]:
        """Follow the feed from `after`: each page of changes as they commit, and an empty
        page after `idle` seconds without any (its head tells a follower how far behind
        it is). Ends when `stop` is set. `gather`: how long a pushed feed may wait after a
        page that reached the head, so the commits meanwhile come as one page; this one
        reads a page only when asked for it, which gathers them already."""
        stop = stop or threading.Event()
        while not stop.is_set():
            mark = self.feed_head()  # read before the page: a commit after it wakes the wait
            page = self.changes(after, limit, context)
            yield page
            if page.changes:
                last = page.changes[-1]
                after = last.commit_seq if context else last.position
                if after < page.head:
                    continue  # behind the head: the next page at once
                # At the head: wait for a commit, rather than read (and send, from a
                # storage service) an empty page at once after every commit's page.
                if not context:
                    mark = page.head
            self.wait_changes(mark, idle)

    # Whether watch() reads each page only when asked for it (as the loop above does), so
    # a follower that asks later gets the commits made meanwhile in one page; a remote
    # store's pages are pushed to it as they commit (StorageClient: False).
    watch_is_lazy = True

    # How many readers may stay open at once with room left for the reads of the latest
    # rows (None: no bound below the storage service's own): a storage service opens at
    # most this many snapshots, so the next is refused at once (STORAGE_SNAPSHOT_LIMIT)
    # rather than waiting for a reader the open ones hold (PostgresStore: connections).
    snapshot_capacity: Optional[int] = None

    @abc.abstractmethod
    def feed_head(self) -> int:
        """The position of the latest change (0: none yet)."""

    def close(self) -> None:  # noqa: B027 - optional: most stores hold nothing
        pass


_T = TypeVar("_T")


def read_at_one_version(store: Store, context: str, read: Callable[[Reader], _T]) -> _T:
    """read(reader) at one version of the context; once more, from the start, if that
    version went while it read (StaleRead: a remote reader whose snapshot was let go early
    or outlived its lease while the context moved on; the in-memory store after a
    commit). A request's reads stay at one version either way."""
    try:
        with store.reader(context) as reader:
            return read(reader)
    except StaleRead:
        with store.reader(context) as reader:
            return read(reader)
