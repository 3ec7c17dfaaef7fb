"""StorageClient: the Store interface over gRPC, so the transaction service can run
against a remote storage service exactly as against an in-process LmdbStore."""
from __future__ import annotations

from typing import Iterator, Optional

import grpc

from morphz.api.storage.v1 import storage_pb2 as pb
from morphz.api.storage.v1 import storage_pb2_grpc as pb_grpc
from morphz.shared.storage.api import Key, Reader, StaleCommit, StaleRead, Store, Write
from morphz.services.storage.servicer import key_from_proto, key_to_proto
from morphz.shared.grpc_client import DEFAULT_TIMEOUT
from morphz.shared.grpc_errors import call

_PAGE = 1000


class StorageClient(Store):
    def __init__(self, channel: grpc.Channel, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._stub = pb_grpc.StorageServiceStub(channel)
        self._timeout = timeout

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


class RemoteReader(Reader):
    """Each read is one RPC; all must see the same commit_seq, else StaleRead, so the
    caller gets snapshot semantics by retrying."""

    def __init__(self, client: StorageClient, context: str) -> None:
        self._c = client
        self._context = context
        self._seq: Optional[int] = None

    @property
    def commit_seq(self) -> int:
        if self._seq is None:  # nothing read yet: learn the version with one cheap read
            self.get("meta", ())
        return self._seq

    def _seen(self, seq: int) -> None:
        if self._seq is None:
            self._seq = seq
        elif seq != self._seq:
            raise StaleRead(self._context)

    def get(self, table: str, key: Key) -> Optional[bytes]:
        r = call(self._c._stub.Get, pb.GetRequest(context=self._context, table=table,
                                                  key=key_to_proto(key)), timeout=self._c._timeout)
        self._seen(r.commit_seq)
        return r.value if r.found else None

    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
        n = 0
        while True:
            page = min(_PAGE, limit - n) if limit else _PAGE
            r = call(self._c._stub.Scan, pb.ScanRequest(
                context=self._context, table=table, prefix=key_to_proto(prefix),
                after=key_to_proto(after) if after is not None else [], limit=page,
                reverse=reverse), timeout=self._c._timeout)
            self._seen(r.commit_seq)
            for row in r.rows:
                after = key_from_proto(row.key)
                yield after, row.value
                n += 1
            if not r.more or (limit and n >= limit):
                return
