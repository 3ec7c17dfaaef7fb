"""StorageService over gRPC: a thin adapter over any Store and its read snapshots."""
from __future__ import annotations

import itertools
import threading
import time
from contextlib import contextmanager
from typing import Optional

from morphz.api.storage.v1 import storage_pb2 as pb
from morphz.api.storage.v1 import storage_pb2_grpc as pb_grpc
from morphz.services.storage.backup import CHUNK_BYTES, MAX_CHUNK_BYTES, Backups
from morphz.services.storage.convert import (key_from_proto, key_to_proto, manifest_to_proto,
                                             page_to_proto)
from morphz.services.storage.reorder import CommitsInFlight
from morphz.services.storage.snapshots import SnapshotRegistry
from morphz.shared.storage.api import StaleCommit, Store, Write
from morphz.shared.storage.feed import FEED_PAGE, FeedPage
from morphz.shared.storage.keys import check_table
from morphz.shared.errors import MorphzError
from morphz.shared.limits import GET_MANY_KEYS, SCAN_MANY_SCANS, WATCHES
from morphz.shared.grpc.errors import rpc_boundary, rpc_stream_boundary
from morphz.shared.names import check_name

MAX_SCAN_ROWS = 10_000
MAX_GET_MANY_KEYS = GET_MANY_KEYS.max
GET_MANY_BYTES = 8 << 20  # a GetMany, Scan or ScanMany reply stops after the row that passes this
# Each following Watch holds one of the server's worker threads for as long as it runs.
MAX_WATCHES = WATCHES.max
WATCH_IDLE_SECONDS = 1.0  # an idle follower gets an empty page (with the head) this often
MAX_GATHER_MS = 1000  # the longest a follower may ask to wait between pages (gather_ms)
# How long a commit that arrived before its predecessor waits for it (see Commit).
REORDER_WAIT_SECONDS = 2.0
_PREDECESSOR_POLL_SECONDS = 0.05
# A predecessor sent first may not have reached its handler yet (a busy machine, or every
# worker taken by its successors): with none in the servicer, a commit waits this long
# since the context last moved before it is refused.
_PREDECESSOR_GRACE_SECONDS = 0.1


def _reached_head(page: FeedPage, context: str) -> bool:
    """Whether the page ends at the head it was read at (a follower is not behind)."""
    last = page.changes[-1]
    return (last.commit_seq if context else last.position) >= page.head


class StorageServicer(pb_grpc.StorageServiceServicer):
    def __init__(self, store: Store, snapshots: SnapshotRegistry, *,
                 backups: Optional[Backups] = None,
                 max_watches: int = MAX_WATCHES,
                 watch_idle: float = WATCH_IDLE_SECONDS,
                 reorder_wait: float = REORDER_WAIT_SECONDS) -> None:
        self._store = store
        self._snapshots = snapshots
        self._backups = backups
        self._watch_slots = threading.BoundedSemaphore(max_watches)
        self._max_watches = max_watches
        self._watch_idle = watch_idle
        self._reorder_wait = reorder_wait
        self._in_flight = CommitsInFlight()
        self._watchers: set[threading.Event] = set()  # the stop flag of each following Watch
        self._closed = False
        self._guard = threading.Lock()

    def close(self) -> None:
        """End the following Watch streams, so a draining server need not wait them out."""
        with self._guard:
            self._closed = True
            for stop in self._watchers:
                stop.set()

    @contextmanager
    def _reader(self, request):
        """(reader, the snapshot opened for this request or ""): the request's snapshot, a
        new one (open_snapshot), or a reader of the latest version for this read only."""
        check_name(request.context, "context")
        if request.snapshot:
            with self._snapshots.use(request.snapshot, request.context) as r:
                yield r, ""
        elif request.open_snapshot:
            snap_id, _ = self._snapshots.open(request.context)
            try:
                with self._snapshots.use(snap_id, request.context) as r:
                    yield r, snap_id
            except BaseException:  # the read failed: nobody will use or close it
                self._snapshots.close_snapshot(snap_id)
                raise
        else:
            with self._store.reader(request.context) as r:
                yield r, ""

    @rpc_boundary
    def Get(self, request, context):
        with self._reader(request) as (r, opened):
            value = r.get(request.table, key_from_proto(request.key))
            return pb.GetResponse(found=value is not None, value=value or b"",
                                  commit_seq=r.commit_seq, snapshot=opened)

    @rpc_boundary
    def GetMany(self, request, context):
        asked = len(request.keys) + sum(len(t.keys) for t in request.also)
        if asked > MAX_GET_MANY_KEYS:
            raise MorphzError("STORAGE_REQUEST_TOO_LARGE", f"at most {MAX_GET_MANY_KEYS} keys "
                              "per GetMany", field="keys", **GET_MANY_KEYS.details(size=asked))
        wanted = [(t.table, [key_from_proto(k.parts) for k in t.keys])
                  for t in [request, *request.also]]
        with self._reader(request) as (r, opened):
            rows, size = [], 0
            for value in itertools.chain.from_iterable(r.get_tables(wanted)):
                rows.append(pb.Found(found=value is not None, value=value or b""))
                size += len(value or b"")
                if size >= GET_MANY_BYTES:  # the rest in the next call
                    break
            commit_seq = r.commit_seq
        if request.release_snapshot and len(rows) == asked:  # the reader's last read
            self._snapshots.close_snapshot(request.snapshot or opened)
            opened = ""
        return pb.GetManyResponse(rows=rows, commit_seq=commit_seq, snapshot=opened)

    @rpc_boundary
    def Scan(self, request, context):
        limit = min(request.limit or MAX_SCAN_ROWS, MAX_SCAN_ROWS)
        after = key_from_proto(request.after) if request.after else None
        with self._reader(request) as (r, opened):
            rows, size, more = [], 0, False
            prefix = key_from_proto(request.prefix)
            if request.keys_only and not request.reverse:
                found = ((k, b"") for k in r.scan_keys(request.table, prefix, after))
            else:
                found = r.scan(request.table, prefix, after, limit + 1, request.reverse)
            for k, v in found:
                if len(rows) == limit or size >= GET_MANY_BYTES:
                    more = True  # the rest with another Scan, after the last row
                    break
                rows.append(pb.Row(key=key_to_proto(k),
                                   value=b"" if request.keys_only else v))
                size += len(v)
            return pb.ScanResponse(rows=rows, more=more, commit_seq=r.commit_seq,
                                   snapshot=opened)

    @rpc_boundary
    def ScanMany(self, request, context):
        if len(request.scans) > SCAN_MANY_SCANS.max:
            raise MorphzError("STORAGE_REQUEST_TOO_LARGE", f"at most {SCAN_MANY_SCANS.max} "
                              "scans per ScanMany", field="scans",
                              **SCAN_MANY_SCANS.details(size=len(request.scans)))
        scans = [(s.table, key_from_proto(s.prefix)) for s in request.scans]
        for table, _ in scans:  # every table checked, also those the budget leaves unread
            check_table(table)
        with self._reader(request) as (r, opened):
            results, rows_left, size = [], MAX_SCAN_ROWS, 0
            for table, prefix in scans:
                rows, more = [], False
                for k, v in r.scan(table, prefix, None, rows_left + 1):
                    if len(rows) == rows_left or size >= GET_MANY_BYTES:
                        more = True  # the rest with Scan, after the last row
                        break
                    rows.append(pb.Row(key=key_to_proto(k), value=v))
                    size += len(v)
                rows_left -= len(rows)
                results.append(pb.ScanResponse(rows=rows, more=more))
            return pb.ScanManyResponse(results=results, commit_seq=r.commit_seq,
                                       snapshot=opened)

    @rpc_boundary
    def Commit(self, request, context):
        check_name(request.context, "context")
        writes = [Write(w.table, key_from_proto(w.key), w.value if w.HasField("value") else None,
                        w.quarantine, w.erase)
                  for w in request.writes]
        # A remote writer pipelines a context's commits (each built on the one before and
        # sent without waiting for it), so one may arrive before its predecessor: a batch
        # expecting a version the store has not reached yet waits for it, briefly: while a
        # predecessor is being handled (reorder.py) or the context keeps moving toward it;
        # else it answers within _PREDECESSOR_GRACE_SECONDS.
        expect = request.expect_commit_seq
        remaining = context.time_remaining()  # the caller's deadline reaches the store
        until = None if remaining is None or remaining > 10 ** 8 else time.monotonic() + remaining
        with self._in_flight.entered(request.context, expect):
            start = time.monotonic()
            deadline = start + self._reorder_wait
            moved_at, reached = start, None  # when the context last moved, and to where
            while True:
                head = self._store.feed_head()
                try:  # submit/wait: concurrent Commit RPCs share one write transaction
                    seq = self._store.wait(self._store.submit(
                        request.context, expect, writes, fence=request.fence,
                        timeout=None if until is None else until - time.monotonic()))
                    return pb.CommitResponse(commit_seq=seq)
                except StaleCommit as e:
                    now = time.monotonic()
                    left = deadline - now
                    if reached is not None and e.actual > reached:
                        moved_at = now  # predecessors are landing: more may be on the way
                    reached = e.actual
                    pending = self._in_flight.predecessor_pending(request.context, expect)
                    grace = moved_at + _PREDECESSOR_GRACE_SECONDS - now
                    if e.expected <= e.actual or left <= 0 or (not pending and grace <= 0):
                        raise MorphzError("CONCURRENT_UPDATE", str(e), expected=e.expected,
                                          actual=e.actual) from None
                    # A predecessor rejected moves no feed: look again at least this often.
                    self._store.wait_changes(
                        head, min(left, _PREDECESSOR_POLL_SECONDS if pending else grace))

    @rpc_boundary
    def PutRecord(self, request, context):
        check_name(request.context, "context")
        self._store.put_record(request.context, request.table, key_from_proto(request.key),
                               request.value)
        return pb.PutRecordResponse()

    @rpc_boundary
    def PutRecords(self, request, context):
        check_name(request.context, "context")
        self._store.put_records(request.context, [
            Write(r.table, key_from_proto(r.key), r.value) for r in request.records])
        return pb.PutRecordResponse()

    @rpc_boundary
    def ListContexts(self, request, context):
        return pb.ListContextsResponse(contexts=self._store.contexts())

    @rpc_boundary
    def OpenSnapshot(self, request, context):
        check_name(request.context, "context")
        snap_id, seq = self._snapshots.open(request.context)
        return pb.OpenSnapshotResponse(snapshot=snap_id, commit_seq=seq,
                                       lease_ms=int(self._snapshots.lease * 1000))

    @rpc_boundary
    def CloseSnapshot(self, request, context):
        self._snapshots.close_snapshot(request.snapshot)
        return pb.CloseSnapshotResponse()

    @rpc_stream_boundary
    def Watch(self, request, context):
        if request.context:
            check_name(request.context, "context")
        size = min(request.page_size or FEED_PAGE, FEED_PAGE)
        if not request.follow:
            yield page_to_proto(self._store.changes(request.after, size, request.context))
            return
        if not self._watch_slots.acquire(blocking=False):
            raise MorphzError("STORAGE_WATCH_LIMIT", f"at most {self._max_watches} following "
                              "watches at once", **WATCHES.details(self._max_watches))
        stop = threading.Event()
        context.add_callback(stop.set)  # the caller cancelled or went away
        with self._guard:
            self._watchers.add(stop)
            if self._closed:
                stop.set()
        try:
            gather = min(request.gather_ms, MAX_GATHER_MS) / 1000
            for page in self._store.watch(request.after, context=request.context, stop=stop,
                                          idle=self._watch_idle, limit=size):
                if stop.is_set():
                    return
                yield page_to_proto(page)
                if gather and page.changes and _reached_head(page, request.context):
                    stop.wait(gather)  # the next page is read after: it gathers the commits
        finally:
            with self._guard:
                self._watchers.discard(stop)
            self._watch_slots.release()

    @rpc_boundary
    def DeleteContext(self, request, context):
        check_name(request.context, "context")
        return pb.DeleteContextResponse(position=self._store.delete_context(request.context))

    @rpc_boundary
    def Reclaim(self, request, context):
        if request.context:
            check_name(request.context, "context")
        done = self._store.reclaim(request.context)
        return pb.ReclaimResponse(**done)

    @rpc_stream_boundary
    def Backup(self, request, context):
        if self._backups is None:
            raise MorphzError("BACKUP_FAILED", "this server's store cannot be backed up")
        size = min(request.chunk_bytes or CHUNK_BYTES, MAX_CHUNK_BYTES)
        # A caller that goes away ends the stream at its next chunk; leaving the `with`
        # deletes the copy and frees the slot.
        with self._backups.take() as copy:
            yield pb.BackupChunk(manifest=manifest_to_proto(copy.manifest))
            for chunk in copy.chunks(size):
                if not context.is_active():
                    return
                yield pb.BackupChunk(data=chunk)
