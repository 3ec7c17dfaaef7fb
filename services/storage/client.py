"""StorageClient: the Store interface over gRPC, so the transaction service can run
against a remote storage service exactly as against an in-process LmdbStore."""
from __future__ import annotations

from typing import Iterator, Optional

import grpc

from morphz.api.storage.v1 import storage_pb2 as pb
from morphz.api.storage.v1 import storage_pb2_grpc as pb_grpc
from morphz.shared.errors import MorphzError
from morphz.shared.storage import keys
from morphz.shared.storage.api import Key, Reader, StaleCommit, StaleRead, Store, Write
from morphz.services.storage.servicer import key_from_proto, key_to_proto
from morphz.shared.grpc_client import DEFAULT_TIMEOUT
from morphz.shared.grpc_errors import call

PAGE_ROWS = 1000  # rows per Scan RPC (the server caps a page at MAX_SCAN_ROWS)


class StorageClient(Store):
    def __init__(self, channel: grpc.Channel, *, timeout: float = DEFAULT_TIMEOUT,
                 page_rows: int = PAGE_ROWS) -> None:
        self._stub = pb_grpc.StorageServiceStub(channel)
        self._timeout = timeout
        self._page = page_rows

    def reader(self, context: str) -> "RemoteReader":
        return RemoteReader(self, context)

    def contexts(self) -> list[str]:
        return list(call(self._stub.ListContexts, pb.ListContextsRequest(),
                         timeout=self._timeout).contexts)

    def commit(self, context: str, expect_commit_seq: int, writes: list[Write]) -> int:
        req = pb.CommitRequest(context=context, expect_commit_seq=expect_commit_seq, writes=[
            pb.Write(table=w.table, key=key_to_proto(w.key), value=w.value) for w in writes])
        try:
            return call(self._stub.Commit, req, timeout=self._timeout).commit_seq
        except Exception as e:  # the server reports a stale batch as CONCURRENT_UPDATE
            if getattr(e, "reason", None) == "CONCURRENT_UPDATE":
                d = getattr(e, "details", {})
                raise StaleCommit(int(d.get("expected", expect_commit_seq)),
                                  int(d.get("actual", -1))) from None
            raise

    def put_record(self, context: str, table: str, key: Key, value: bytes) -> None:
        keys.check_side_record(table, value)  # as the stores do: None is no empty record
        call(self._stub.PutRecord, pb.PutRecordRequest(
            context=context, table=table, key=key_to_proto(key), value=value),
            timeout=self._timeout)


class RemoteReader(Reader):
    """One read snapshot in the storage service, opened on the first read and released
    by close(): every get and scan page sees the snapshot's commit_seq. If its lease ran
    out (idle past it, or reclaimed), a new snapshot at the same commit_seq continues
    the read unchanged; a context that moved meanwhile is StaleRead: redo the read."""

    def __init__(self, client: StorageClient, context: str) -> None:
        self._c = client
        self._context = context
        self._seq: Optional[int] = None
        self._snapshot = ""

    @property
    def commit_seq(self) -> int:
        if self._seq is None:
            self._open()
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
        """One RPC in the snapshot (opened or renewed as needed)."""
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

    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
        n = 0
        while True:
            page = min(self._c._page, limit - n) if limit else self._c._page
            r = self._read(self._c._stub.Scan, pb.ScanRequest(
                context=self._context, table=table, prefix=key_to_proto(prefix),
                after=key_to_proto(after) if after is not None else [], limit=page,
                reverse=reverse))
            for row in r.rows:
                after = key_from_proto(row.key)
                yield after, row.value
                n += 1
            if not r.more or (limit and n >= limit):
                return

    def close(self) -> None:
        snapshot, self._snapshot = self._snapshot, ""
        if snapshot:
            try:
                call(self._c._stub.CloseSnapshot, pb.CloseSnapshotRequest(snapshot=snapshot),
                     timeout=self._c._timeout)
            except MorphzError:  # unreachable or gone: its lease releases it
                pass
