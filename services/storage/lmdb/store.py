"""The authoritative store: one LMDB environment, one named database per table.

Every table key starts with the context id. A storage-owned `_version` database
holds each context's physical version (commit_seq); `_feed` holds the change feed
(position -> change) and `_feed_ctx` its per-context index ((context, commit_seq) ->
position), both written in the commit's own transaction, and `_fence` the highest
fencing token each context accepted (checked and raised in that transaction too, so a
token and the commits it let through can never disagree); `_store` holds the store's
identity, which a restored copy renews (a follower's feed position names the store it
was read from). Commits are group-committed:
concurrent submissions are applied by one leader in one LMDB write transaction (one
fsync), each in its own nested transaction so a rejected batch changes nothing and
does not disturb its neighbours. Nothing is acknowledged before the fsync.
`copy_compacted` is the online backup: LMDB's compacting copy of the whole environment
from one read transaction, which commits do not wait for.
"""
from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Optional

import lmdb

from morphz.services.storage.erasure_log import ErasureLog
from morphz.services.storage.lmdb.reader import LmdbReader
from morphz.services.storage.lmdb.writes import (Submission, delete_under, encode, expected,
                                                 put_rows, puts_a_row, u64, written)
from morphz.services.storage.space import DEFAULT_MAX_MAP_SIZE, Space, disk_full
from morphz.shared.lmdb_compact import rewrite_compacted
from morphz.shared.reader_gate import ReaderGate
from morphz.shared.errors import MorphzError
from morphz.shared.process.faults import NO_FAULTS, Faults
from morphz.shared.storage import keys
from morphz.shared.mind.tables import TABLES
from morphz.shared.storage.api import StaleCommit, Store, Ticket, Write
from morphz.shared.storage.feed import (FEED_PAGE, FILLER, Change, FeedPage, change_of, pack_change,
                                        unpack_change)
from morphz.shared.storage.rules import context_not_found, fenced

_VERSION_DB = b"_version"
_FEED_DB, _FEED_CTX_DB = b"_feed", b"_feed_ctx"
_FENCE_DB = b"_fence"
_STORE_DB, _STORE_ID = b"_store", b"id"
_LAST = (1 << 64) - 1
_log = logging.getLogger("morphz.storage")


class LmdbStore(Store):
    def __init__(self, path: str, *, map_size: int = 1 << 30,
                 max_map_size: int = DEFAULT_MAX_MAP_SIZE, quota: int = 0,
                 sync: bool = True, faults: Faults = NO_FAULTS) -> None:
        os.makedirs(path, exist_ok=True)
        self._path = os.path.abspath(path)
        self._sync = sync
        self._open_env(path, min(map_size, max_map_size))  # the first size, doubled up to the max
        # Reader slots of processes that died (SIGKILL) would pin old pages forever.
        stale = self._env.reader_check()
        if stale:
            _log.warning("cleared %d stale LMDB reader slot(s) left by dead processes", stale)
        with self._env.begin() as txn:
            last = txn.cursor(db=self._feed)
            self._head = int.from_bytes(last.key(), "big") if last.last() else 0
            store_id = txn.get(_STORE_ID, db=self._store)
        self._id = store_id.decode() if store_id else self.renew_identity()
        self.erasure_log = ErasureLog(path)
        self._feed_moved = threading.Condition()
        self._max_map_size = max_map_size
        # The quota and the disk's free bytes bound the live pages (space.py).
        self.space = Space(path, quota=quota)
        with self._env.begin() as txn:
            self._live, self._unmeasured = self._live_bytes(txn), 0
        self._faults = faults
        self._gate = ReaderGate()
        self._queue: list[Submission] = []
        self._queue_lock = threading.Lock()
        self._leader = threading.Lock()  # one group-commit leader at a time
        self.stats = {"write_transactions": 0, "commits": 0}  # group-commit effectiveness

    def _open_env(self, path: str, map_size: int) -> None:
        self._env = lmdb.open(path, map_size=map_size, max_dbs=len(TABLES) + 8,
                              max_readers=512, sync=self._sync, metasync=self._sync,
                              subdir=True)
        self._dbs = {name: self._env.open_db(name.encode()) for name in TABLES}
        self._version = self._env.open_db(_VERSION_DB)
        self._feed = self._env.open_db(_FEED_DB)
        self._feed_ctx = self._env.open_db(_FEED_CTX_DB)
        self._fence = self._env.open_db(_FENCE_DB)
        self._store = self._env.open_db(_STORE_DB)
        self._all_dbs = [*self._dbs.values(), self._version, self._feed, self._feed_ctx,
                         self._fence, self._store]
        self._psize = self._env.stat()["psize"]

    @property
    def path(self) -> str:
        return self._path  # (not the environment's: reclaim() closes it a moment)

    @property
    def map_size(self) -> int:
        return self._env.info()["map_size"]

    @property
    def store_id(self) -> str:
        return self._id

    def renew_identity(self) -> str:
        """Give the store a new identity (a new store, or a restored copy: its feed
        positions past the backup will name other commits than the original's)."""
        new = secrets.token_hex(16)
        with self._env.begin(write=True) as txn:
            txn.put(_STORE_ID, new.encode(), db=self._store)
        self._id = new
        return new

    def copy_compacted(self, directory: str) -> dict:
        """Write a compacted copy of the whole environment (every table and the storage-
        owned databases) as `directory`/data.mdb, from one read transaction while
        commits go on; returns what the copy holds. Every commit acknowledged before
        `taken_at` is in it (its fsync came before this read transaction began)."""
        taken_at = datetime.now(timezone.utc)
        self._gate.enter()  # a map resize must wait for the copy's read transaction
        try:
            txn = self._env.begin()
            try:
                cur = txn.cursor(db=self._feed)
                head = int.from_bytes(cur.key(), "big") if cur.last() else 0
                contexts = txn.stat(self._version)["entries"]
                self._env.copy(directory, compact=True, txn=txn)
            finally:
                txn.abort()
        finally:
            self._gate.leave()
        return {"feed_head": head, "contexts": contexts, "store": self._id,
                "taken_at": taken_at.isoformat(timespec="microseconds")}

    def reclaim(self, context: str = "") -> dict:
        """Store.reclaim (of the whole environment, whichever context): its compacting
        copy replaces the data file (shared/lmdb_compact.py). Commits wait (the
        group-commit leader lock is held) and so do reads (no read transaction may be open
        in this process when the environment is closed): for the copy's time, about that
        of a backup."""
        started = time.monotonic()
        path, done = self._path, []

        def swap() -> None:
            map_size, closed = self.map_size, []
            try:
                done.append(rewrite_compacted(self._env, lambda: closed.append(True)))
            finally:  # once closed, opened again whatever happened: the old file or the copy
                if closed:
                    self._open_env(path, map_size)
            with self._env.begin() as txn:
                self._live, self._unmeasured = self._live_bytes(txn), 0
        with self._leader:
            self._gate.exclusive(swap)
        (before, after), = done
        return {"engine": "lmdb", "bytes_before": before, "bytes_after": after,
                "duration_ms": int((time.monotonic() - started) * 1000)}

    def reader(self, context: str) -> LmdbReader:
        return LmdbReader(self, context)

    def contexts(self) -> list[str]:
        with self.reader("") as r:
            return [keys.decode(k)[0] for k in r._txn.cursor(db=self._version).iternext(
                values=False)]

    def _commit_seq(self, txn: lmdb.Transaction, context: str) -> int:
        raw = txn.get(keys.context_prefix(context), db=self._version)
        return int.from_bytes(raw, "big") if raw else 0

    def delete_context(self, context: str) -> int:
        """Store.delete_context, in one write transaction (commits wait for it)."""
        prefix = keys.context_prefix(context)
        with self._leader:
            with self._env.begin(write=True) as txn:
                if txn.get(prefix, db=self._version) is None:
                    raise context_not_found(context)
                for db in self._dbs.values():
                    delete_under(txn, db, prefix)
                cur = txn.cursor(db=self._feed_ctx)
                filler = pack_change(FILLER)
                if cur.set_range(prefix):
                    for k, pos in list(cur):
                        if not k.startswith(prefix):
                            break
                        txn.put(pos, filler, db=self._feed)  # positions stay consecutive
                        txn.delete(k, db=self._feed_ctx)
                txn.delete(prefix, db=self._version)
                head = self._head + 1
                txn.put(u64(head), pack_change(Change(head, context, 0, deleted=True)),
                        db=self._feed)
                self._live, self._unmeasured = self._live_bytes(txn), 0
            with self._feed_moved:
                self._head = head
                self._feed_moved.notify_all()
        return head

    # -- the change feed --------------------------------------------------------------
    def feed_head(self) -> int:
        return self._head

    def changes(self, after: int, limit: int = FEED_PAGE, context: str = "") -> FeedPage:
        limit = max(1, min(limit, FEED_PAGE))
        first = u64(min(after + 1, _LAST))
        with self.reader(context) as r:
            txn, out = r._txn, []
            if context:
                prefix = keys.context_prefix(context)
                cur = txn.cursor(db=self._feed_ctx)
                if cur.set_range(prefix + first):
                    for k, pos in cur:
                        if not k.startswith(prefix) or len(out) >= limit:
                            break
                        position = int.from_bytes(pos, "big")
                        out.append(unpack_change(position, txn.get(pos, db=self._feed)))
                return FeedPage(out, r.commit_seq, self._id)
            cur = txn.cursor(db=self._feed)
            head = int.from_bytes(cur.key(), "big") if cur.last() else 0
            if cur.set_range(first):
                for k, raw in cur:
                    out.append(unpack_change(int.from_bytes(k, "big"), raw))
                    if len(out) >= limit:
                        break
            return FeedPage(out, head, self._id)

    def wait_changes(self, after: int, timeout: float) -> int:
        with self._feed_moved:
            self._feed_moved.wait_for(lambda: self._head > after, timeout)
            return self._head

    # -- writes -----------------------------------------------------------------------
    def commit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0) -> int:
        return self.wait(self.submit(context, expect_commit_seq, writes, fence=fence))

    def submit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0, timeout: Optional[float] = None) -> Ticket:
        encoded = encode(self._dbs, context, writes)  # bad tables/keys fail here
        sub = Submission(context, expect_commit_seq, encoded,
                         change_of(0, context, 0, writes), fence)
        with self._queue_lock:
            self._queue.append(sub)
        return sub

    def put_records(self, context: str, records: list[Write]) -> None:
        keys.check_side_records(records)
        prefix = keys.context_prefix(context)
        encoded = [(self._dbs[w.table], True, w.table, keys.encode_in(prefix, w.key), w.value)
                   for w in records]
        sub = Submission(context, None, encoded)  # no expected version: see _put_side
        with self._queue_lock:
            self._queue.append(sub)
        self.wait(sub)

    def wait(self, ticket: Ticket) -> int:
        sub: Submission = ticket  # type: ignore[assignment]
        # Leader/follower: whoever holds the leader lock commits everything queued so
        # far; a follower whose submission was in that batch finds it done and leaves.
        while not sub.done:
            with self._leader:
                if sub.done:
                    break
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._apply(batch)
        return sub.get()

    def _apply(self, batch: list[Submission]) -> None:
        try:
            self._faults.hit("before-lmdb-txn")
            while True:
                try:
                    self._write_batch(batch)
                    break
                except lmdb.MapFullError:
                    if not self._grow():
                        raise
                    for sub in batch:  # the aborted attempt left nothing: try again
                        sub.result = sub.error = None
                        sub.erased = []
        except lmdb.MapFullError:
            self._refuse_all(batch, self.space.refuse("map", 0, self._estimate()))
        except lmdb.Error as e:
            if not disk_full(e):
                self._fail_all(batch, e)
                return
            free = max(self.space.disk_free() - self.space.reserve, 0)
            self._refuse_all(batch, self.space.refuse("disk", free, self._estimate()))
        except MorphzError as e:  # STORAGE_FULL before the commit: nothing was written
            self._refuse_all(batch, e)
        except BaseException as e:  # noqa: BLE001 - every waiter must wake up
            self._fail_all(batch, e)
        finally:
            for sub in batch:
                sub.done = True

    @staticmethod
    def _refuse_all(batch: list[Submission], err: MorphzError) -> None:
        """The batch's transaction did not commit: every submission the store would
        have applied gets `err`; those it refused for their own reason keep it."""
        for sub in batch:
            if sub.error is None or sub.result is not None:
                sub.result, sub.error = None, err

    @staticmethod
    def _fail_all(batch: list[Submission], err: BaseException) -> None:
        """The batch failed for a reason that is no refusal: every waiter wakes to it."""
        for sub in batch:
            if sub.error is None:
                sub.result, sub.error = None, err

    def _live_after(self, txn: lmdb.Transaction, before: Optional[int],
                    batch: list[Submission], adds: bool) -> tuple[int, int]:
        """(live bytes measured, bytes written unmeasured) once `txn` commits, checked
        against the quota and the disk (space.py) if `before` was measured (the limits
        are near); else the bytes it wrote are added to the unmeasured (a measure is 30
        page counts, 60 us)."""
        if before is None:
            return self._live, self._unmeasured + sum(
                written(sub) for sub in batch if sub.error is None)
        live = self._live_bytes(txn)
        self.space.check(before, live, adds)
        return live, 0

    def _estimate(self) -> int:
        """At most the live bytes: what a page holds of a row may be as little as a
        quarter (half-full pages, a value just past a page in an overflow run)."""
        return self._live + 4 * self._unmeasured

    def _live_bytes(self, txn: lmdb.Transaction) -> int:
        """The bytes of the pages the tables hold, as `txn` sees them (the file may be
        larger: LMDB reuses freed pages but never shrinks it)."""
        pages = 0
        for db in self._all_dbs:
            st = txn.stat(db)
            pages += st["branch_pages"] + st["leaf_pages"] + st["overflow_pages"]
        return pages * self._psize

    def _write_batch(self, batch: list[Submission]) -> None:
        head = self._head
        with self._env.begin(write=True) as txn:
            # Near the quota or a full disk, the live bytes are measured before and after.
            near = self.space.near(self._estimate(), sum(written(sub) for sub in batch))
            before = self._live_bytes(txn) if near else None
            seqs: dict[str, int] = {}
            fences: dict[str, int] = {}  # highest token per context, as this batch left it
            # In the order of the versions they expect: a remote writer pipelines a
            # context's commits over concurrent RPCs, which may arrive out of order.
            # (Stable, and only commits of one context depend on each other's order.)
            for sub in sorted(batch, key=expected):
                if sub.expect is None:  # a side record: shares the fsync, not the version
                    self._put_side(txn, sub)
                    continue
                highest = fences.get(sub.context)
                if highest is None:
                    raw = txn.get(keys.context_prefix(sub.context), db=self._fence)
                    highest = int.from_bytes(raw, "big") if raw else 0
                if sub.fence < highest:  # before the version: retrying cannot help it
                    sub.error = fenced(sub.context, sub.fence, highest)
                    continue
                current = seqs.get(sub.context)
                if current is None:
                    current = self._commit_seq(txn, sub.context)
                if current != sub.expect:
                    sub.error = StaleCommit(sub.expect, current)
                    continue
                child = self._env.begin(write=True, parent=txn)
                try:
                    put_rows(child, self._dbs, sub, current + 1)
                    prefix = keys.context_prefix(sub.context)
                    child.put(prefix, u64(current + 1), db=self._version)
                    if sub.fence > highest:
                        child.put(prefix, u64(sub.fence), db=self._fence)
                    change = replace(sub.change, position=head + 1, commit_seq=current + 1)
                    child.put(u64(change.position), pack_change(change), db=self._feed)
                    child.put(prefix + u64(current + 1), u64(change.position),
                              db=self._feed_ctx)
                except MorphzError as e:
                    child.abort()
                    sub.error = e
                    sub.erased = []
                    continue
                except BaseException:
                    child.abort()
                    raise
                child.commit()
                seqs[sub.context] = sub.result = current + 1
                fences[sub.context] = max(highest, sub.fence)
                head += 1
            adds = any(puts_a_row(sub) for sub in batch if sub.error is None)
            live, unmeasured = self._live_after(txn, before, batch, adds)  # or STORAGE_FULL
            logged = [(sub.context, sub.result, sub.erased) for sub in batch
                      if sub.erased and sub.result is not None]
            if logged:  # before the commit: never an erasure the log lacks
                self.erasure_log.append(self._id, logged)
            self._faults.hit("after-puts-before-commit")
        self._live, self._unmeasured = live, unmeasured
        self.space.committed(adds)
        with self._feed_moved:  # durable now: followers may read it
            self._head = head
            self._feed_moved.notify_all()
        self.stats["write_transactions"] += 1
        self.stats["commits"] += sum(1 for sub in batch if sub.result is not None)

    def _put_side(self, txn: lmdb.Transaction, sub: Submission) -> None:
        """put_records' writes, in the group's write transaction, all or none (a child
        transaction): the context's commit_seq is read (it must exist) but never moved."""
        if not self._commit_seq(txn, sub.context):
            sub.error = MorphzError("CONTEXT_NOT_FOUND", f"context {sub.context[:80]} has "
                                    "nothing committed", context=sub.context[:80])
            return
        child = self._env.begin(write=True, parent=txn)
        try:
            for _, _, table, key, value in sub.encoded:  # this environment's handles
                if not child.put(key, value, db=self._dbs[table], overwrite=False):
                    child.abort()
                    sub.error = MorphzError("STORAGE_APPEND_ONLY",
                                            f"table {table} is append-only", table=table)
                    return
        except BaseException:
            child.abort()
            raise
        child.commit()

    def _grow(self) -> bool:
        """Double the map (up to max_map_size) once no reader is open; False at the max."""
        size = self.map_size
        if size >= self._max_map_size:
            return False
        new = min(size * 2, self._max_map_size)
        self._gate.exclusive(lambda: self._env.set_mapsize(new))
        _log.warning("storage map grown from %d to %d bytes", size, new)
        return True

    def close(self) -> None:
        self._env.close()
