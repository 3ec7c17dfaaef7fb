"""StorageClient: the Store interface over gRPC, so the transaction service can run
against a remote storage service exactly as against an in-process LmdbStore."""
from __future__ import annotations

import threading
import time
from typing import Iterator, Optional

import grpc

from morphz.api.storage.v1 import storage_pb2 as pb
from morphz.api.storage.v1 import storage_pb2_grpc as pb_grpc
from morphz.shared.errors import MorphzError
from morphz.shared.storage import keys
from morphz.shared.storage.api import Key, Reader, StaleCommit, StaleRead, Store, Ticket, Write
from morphz.shared.storage.feed import FEED_PAGE, FeedPage
from morphz.services.storage.backup import Manifest
from morphz.services.storage.convert import (key_from_proto, key_to_proto, manifest_from_proto,
                                             page_from_proto)
from morphz.shared.grpc.client import DEFAULT_TIMEOUT
from morphz.shared.grpc.errors import call, from_rpc_error
from morphz.shared.limits import SCAN_MANY_SCANS

RECLAIM_TIMEOUT = 3600.0  # reclaim(): a whole store copied compacted
PAGE_ROWS = 1000  # rows per Scan RPC (the server caps a page at MAX_SCAN_ROWS)
GET_MANY_KEYS = 500  # keys per GetMany RPC (the server takes up to MAX_GET_MANY_KEYS)
# A following Watch is reopened from where it stood this often, so no stream lives
# without a deadline (a silent peer is noticed within this time, or the idle page's).
WATCH_STREAM_SECONDS = 300.0
_FAR = (1 << 64) - 1  # a position past any head: the page is empty, the head is current


class StorageClient(Store):
    watch_is_lazy = False  # a following Watch streams each page as it commits

    def __init__(self, channel: grpc.Channel, *, timeout: float = DEFAULT_TIMEOUT,
                 page_rows: int = PAGE_ROWS) -> None:
        self._stub = pb_grpc.StorageServiceStub(channel)
        self._timeout = timeout
        self._page = page_rows

    def reader(self, context: str) -> "RemoteReader":
        return RemoteReader(self, context)

    def latest(self, context: str) -> "RemoteReader":
        return RemoteReader(self, context, snapshot=False)

    def contexts(self) -> list[str]:
        return list(call(self._stub.ListContexts, pb.ListContextsRequest(),
                         timeout=self._timeout).contexts)

    def commit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0) -> int:
        return self.wait(self.submit(context, expect_commit_seq, writes, fence=fence))

    def submit(self, context: str, expect_commit_seq: int, writes: list[Write], *,
               fence: int = 0, timeout: Optional[float] = None) -> "_CommitCall":
        """Send the Commit without waiting for it: the transaction core builds the next
        commit of the context on this one meanwhile (its pipeline), and the storage
        service group-commits those that arrive together. `timeout`: the caller's
        deadline, carried by the call (at most this client's own)."""
        req = pb.CommitRequest(context=context, expect_commit_seq=expect_commit_seq, writes=[
            pb.Write(table=w.table, key=key_to_proto(w.key), value=w.value,
                     quarantine=w.quarantine, erase=w.erase) for w in writes],
            fence=fence)
        if timeout is not None:
            timeout = max(0.001, min(timeout, self._timeout)) if self._timeout else timeout
        return _CommitCall(self._stub.Commit.future(
            req, timeout=self._timeout if timeout is None else timeout), expect_commit_seq)

    def wait(self, ticket: Ticket) -> int:
        return ticket.get()

    def put_record(self, context: str, table: str, key: Key, value: bytes) -> None:
        keys.check_side_record(table, value)  # as the stores do: None is no empty record
        call(self._stub.PutRecord, pb.PutRecordRequest(
            context=context, table=table, key=key_to_proto(key), value=value),
            timeout=self._timeout)

    def put_records(self, context: str, records: list[Write]) -> None:
        keys.check_side_records(records)
        call(self._stub.PutRecords, pb.PutRecordsRequest(context=context, records=[
            pb.SideRecord(table=w.table, key=key_to_proto(w.key), value=w.value)
            for w in records]), timeout=self._timeout)
    def delete_context(self, context: str) -> int:
        return call(self._stub.DeleteContext, pb.DeleteContextRequest(context=context),
                    timeout=max(self._timeout, RECLAIM_TIMEOUT)).position

    def reclaim(self, context: str = "") -> dict:
        """Store.reclaim on the storage service: a compacting rewrite of the store takes
        about a backup's time, so its deadline is the longer of this client's and
        RECLAIM_TIMEOUT."""
        r = call(self._stub.Reclaim, pb.ReclaimRequest(context=context),
                 timeout=max(self._timeout, RECLAIM_TIMEOUT))
        return {"engine": r.engine, "bytes_before": r.bytes_before,
                "bytes_after": r.bytes_after, "duration_ms": r.duration_ms} if r.engine else {}

    # -- admin -----------------------------------------------------------------------------
    def backup(self, chunk_bytes: int = 0) -> tuple[Manifest, Iterator[bytes]]:
        """An online backup of the store (StorageService.Backup): its manifest, and an
        iterator of its bytes. The whole stream has this client's deadline."""
        stream = self._stub.Backup(pb.BackupRequest(chunk_bytes=chunk_bytes),
                                   timeout=self._timeout)
        first = call(next, stream, None)
        if first is None or first.WhichOneof("part") != "manifest":
            stream.cancel()
            raise MorphzError("BACKUP_CORRUPT", "the server's backup stream does not begin "
                              "with its manifest")
        m = first.manifest
        manifest = manifest_from_proto(m)

        def chunks() -> Iterator[bytes]:
            try:
                for r in stream:
                    if r.WhichOneof("part") != "data":
                        raise MorphzError("BACKUP_CORRUPT", "a second manifest in the "
                                          "server's backup stream")
                    yield r.data
            except grpc.RpcError as e:
                raise from_rpc_error(e) from None
            finally:
                stream.cancel()  # the caller stopped early: the server deletes its copy
        return manifest, chunks()

    # -- the change feed (StorageService.Watch) -----------------------------------------
    def changes(self, after: int, limit: int = FEED_PAGE, context: str = "") -> FeedPage:
        stream = self._stub.Watch(pb.WatchRequest(context=context, after=after,
                                                  page_size=limit), timeout=self._timeout)
        return page_from_proto(call(next, stream))

    def feed_head(self) -> int:
        return self.changes(_FAR, 1).head

    def wait_changes(self, after: int, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        for page in self.watch(after):  # an idle stream still pages once a second
            if page.head > after or time.monotonic() >= deadline:
                return page.head
        return after

    def watch(self, after: int, *, context: str = "", stop: Optional[threading.Event] = None,
              idle: float = 1.0, limit: int = FEED_PAGE,
              gather: float = 0.0) -> Iterator[FeedPage]:
        """Follow the feed over one Watch stream at a time (the server sends an empty page
        when idle, so `stop` is noticed within its idle time; `gather`: WatchRequest's
        gather_ms)."""
        stop = stop or threading.Event()
        while not stop.is_set():
            stream = self._stub.Watch(pb.WatchRequest(context=context, after=after,
                                                      follow=True, page_size=limit,
                                                      gather_ms=round(gather * 1000)),
                                      timeout=WATCH_STREAM_SECONDS)
            try:
                for r in stream:
                    page = page_from_proto(r)
                    if page.changes:
                        last = page.changes[-1]
                        after = last.commit_seq if context else last.position
                    yield page
                    if stop.is_set():
                        break
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise from_rpc_error(e) from None
            finally:
                stream.cancel()


class _CommitCall(Ticket):
    """A Commit RPC in flight; `get` waits for its answer."""

    def __init__(self, future, expect: int) -> None:
        super().__init__()
        self._future, self._expect = future, expect

    def get(self) -> int:
        if self.result is None and self.error is None:
            try:
                self.result = self._future.result().commit_seq
            except grpc.RpcError as e:
                err = from_rpc_error(e)
                if err.reason == "CONCURRENT_UPDATE":  # a stale batch
                    d = err.details
                    err = StaleCommit(int(d.get("expected", self._expect)),
                                      int(d.get("actual", -1)))
                self.error = err
        return super().get()


class RemoteReader(Reader):
    """One read snapshot in the storage service, opened by the first read (or by asking
    commit_seq first) and released by close(), or by the read the caller marks its last
    (get_tables(release=True), no round trip of its own): every get and scan page sees the
    snapshot's commit_seq. If its lease ran out (idle past it, or reclaimed), a new
    snapshot at the same commit_seq continues the read unchanged; a context that moved
    meanwhile is StaleRead: redo the read. With snapshot=False (Store.latest) it holds
    none: each read sees the rows as they are then."""

    remote = True

    def __init__(self, client: StorageClient, context: str, *, snapshot: bool = True) -> None:
        self._c = client
        self._context = context
        self._seq: Optional[int] = None
        self._snapshot = ""
        self._holds = snapshot  # False (Store.latest): each read sees the latest rows

    @property
    def commit_seq(self) -> int:
        """The snapshot's version (a reader of the latest rows: the last read's)."""
        if self._seq is None:
            if self._holds:
                self._open()
            else:
                self.get("meta", ())
        return self._seq

    def _open(self) -> None:
        r = call(self._c._stub.OpenSnapshot, pb.OpenSnapshotRequest(context=self._context),
                 timeout=self._c._timeout)
        self._snapshot = r.snapshot
        if self._seq is None:
            self._seq = r.commit_seq
        elif r.commit_seq != self._seq:
            self.close()
            raise StaleRead(self._context)

    def _read(self, method, request):
        """One RPC in the snapshot (opened with the first read, renewed as needed)."""
        if not self._holds:
            r = call(method, request, timeout=self._c._timeout)
            self._seq = r.commit_seq  # the version this read saw
            return r
        if self._seq is None:  # the first read opens the snapshot: one round trip
            request.open_snapshot = True
            r = call(method, request, timeout=self._c._timeout)
            self._snapshot, self._seq = r.snapshot, r.commit_seq
            return r
        if not self._snapshot:
            self._open()
        request.snapshot = self._snapshot
        try:
            return call(method, request, timeout=self._c._timeout)
        except MorphzError as e:
            if e.reason != "STORAGE_SNAPSHOT_EXPIRED":
                raise
        self._snapshot = ""
        self._open()
        request.snapshot = self._snapshot
        return call(method, request, timeout=self._c._timeout)

    def get(self, table: str, key: Key) -> Optional[bytes]:
        r = self._read(self._c._stub.Get, pb.GetRequest(
            context=self._context, table=table, key=key_to_proto(key)))
        return r.value if r.found else None

    def get_many(self, table: str, keys: list[Key]) -> list[Optional[bytes]]:
        return self.get_tables([(table, keys)])[0]

    def get_tables(self, wanted: list[tuple[str, list[Key]]], *, release: bool = False,
                   max_bytes: Optional[int] = None) -> list[list[Optional[bytes]]]:
        """GetMany RPCs of at most GET_MANY_KEYS keys, each over as many tables as they
        reach (`also`); a reply cut short by its byte budget is asked again from there.
        `release`: the snapshot goes with the reply that completes the read (no
        CloseSnapshot round trip); a later read reopens one at the same version.
        `max_bytes`: no further RPC once the rows read reach it (Reader.get_tables)."""
        flat = [(table, key) for table, asked in wanted for key in asked]
        found: list[Optional[bytes]] = []
        read = 0
        while len(found) < len(flat) and (max_bytes is None or read < max_bytes
                                          or not found):
            groups: list[tuple[str, list]] = []
            batch = flat[len(found):len(found) + GET_MANY_KEYS]
            for table, key in batch:
                if not groups or groups[-1][0] != table:
                    groups.append((table, []))
                groups[-1][1].append(pb.Key(parts=key_to_proto(key)))
            last = release and self._holds and len(found) + len(batch) == len(flat)
            r = self._read(self._c._stub.GetMany, pb.GetManyRequest(
                context=self._context, table=groups[0][0], keys=groups[0][1],
                also=[pb.TableKeys(table=t, keys=k) for t, k in groups[1:]],
                release_snapshot=last))
            if last and len(r.rows) == len(batch):  # released with this reply
                self._snapshot = ""
            found += [row.value if row.found else None for row in r.rows]
            read += sum(len(row.value) for row in r.rows)
        out, at = [], 0
        for _, asked in wanted:
            out.append(found[at:at + len(asked)])
            at += len(asked)
        return out

    def scan_tables(self, wanted: list[tuple[str, Key]]) -> list[list[tuple[Key, bytes]]]:
        """ScanMany RPCs of at most SCAN_MANY_SCANS scans; a scan its reply cut short
        goes on with Scan after its last row (same snapshot)."""
        out: list[list[tuple[Key, bytes]]] = []
        for start in range(0, len(wanted), SCAN_MANY_SCANS.max):
            part = wanted[start:start + SCAN_MANY_SCANS.max]
            r = self._read(self._c._stub.ScanMany, pb.ScanManyRequest(
                context=self._context, scans=[pb.TablePrefix(table=t, prefix=key_to_proto(p))
                                              for t, p in part]))
            for (table, prefix), result in zip(part, r.results):
                rows = [(key_from_proto(row.key), row.value) for row in result.rows]
                if result.more:
                    rows += self.scan(table, prefix, rows[-1][0] if rows else None)
                out.append(rows)
        return out

    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False,
             keys_only: bool = False) -> Iterator[tuple[Key, bytes]]:
        n = 0
        while True:
            page = min(self._c._page, limit - n) if limit else self._c._page
            r = self._read(self._c._stub.Scan, pb.ScanRequest(
                context=self._context, table=table, prefix=key_to_proto(prefix),
                after=key_to_proto(after) if after is not None else [], limit=page,
                reverse=reverse, keys_only=keys_only))
            for row in r.rows:
                after = key_from_proto(row.key)
                yield after, row.value
                n += 1
            if not r.more or (limit and n >= limit):
                return

    def scan_keys(self, table: str, prefix: Key = (),
                  after: Optional[Key] = None) -> Iterator[Key]:
        for key, _ in self.scan(table, prefix, after, keys_only=True):
            yield key

    def close(self) -> None:
        snapshot, self._snapshot = self._snapshot, ""
        if snapshot:
            try:
                call(self._c._stub.CloseSnapshot, pb.CloseSnapshotRequest(snapshot=snapshot),
                     timeout=self._c._timeout)
            except MorphzError:  # unreachable or gone: its lease releases it
                pass
