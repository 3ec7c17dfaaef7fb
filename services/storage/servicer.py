"""StorageService over gRPC: a thin adapter over any Store and its read snapshots."""
from __future__ import annotations

from contextlib import contextmanager

from morphz.api.common.v1 import common_pb2
from morphz.api.storage.v1 import storage_pb2 as pb
from morphz.api.storage.v1 import storage_pb2_grpc as pb_grpc
from morphz.services.storage.snapshots import SnapshotRegistry
from morphz.shared.storage.api import Key, StaleCommit, Store, Write
from morphz.shared.errors import MorphzError
from morphz.shared.grpc_errors import rpc_boundary

MAX_SCAN_ROWS = 10_000


def key_from_proto(parts) -> Key:
    out = []
    for p in parts:
        which = p.WhichOneof("part")
        if which is None:
            raise MorphzError("STORAGE_KEY_INVALID", "empty key part")
        out.append(getattr(p, which))
    return tuple(out)


def key_to_proto(key: Key) -> list[common_pb2.KeyPart]:
    return [common_pb2.KeyPart(number=k) if isinstance(k, int) else common_pb2.KeyPart(text=k)
            for k in key]


class StorageServicer(pb_grpc.StorageServiceServicer):
    def __init__(self, store: Store, snapshots: SnapshotRegistry) -> None:
        self._store = store
        self._snapshots = snapshots

    @contextmanager
    def _reader(self, request):
        """The request's snapshot, or a reader of the latest version for this read only."""
        if request.snapshot:
            with self._snapshots.use(request.snapshot, request.context) as r:
                yield r
        else:
            with self._store.reader(request.context) as r:
                yield r

    @rpc_boundary
    def Get(self, request, context):
        with self._reader(request) as r:
            value = r.get(request.table, key_from_proto(request.key))
            return pb.GetResponse(found=value is not None, value=value or b"",
                                  commit_seq=r.commit_seq)

    @rpc_boundary
    def Scan(self, request, context):
        limit = min(request.limit or MAX_SCAN_ROWS, MAX_SCAN_ROWS)
        after = key_from_proto(request.after) if request.after else None
        with self._reader(request) as r:
            rows = list(r.scan(request.table, key_from_proto(request.prefix), after, limit + 1,
                               request.reverse))
            return pb.ScanResponse(
                rows=[pb.Row(key=key_to_proto(k), value=v) for k, v in rows[:limit]],
                more=len(rows) > limit, commit_seq=r.commit_seq)

    @rpc_boundary
    def Commit(self, request, context):
        writes = [Write(w.table, key_from_proto(w.key), w.value if w.HasField("value") else None)
                  for w in request.writes]
        try:  # submit/wait: concurrent Commit RPCs share one write transaction
            seq = self._store.wait(self._store.submit(request.context,
                                                      request.expect_commit_seq, writes))
        except StaleCommit as e:
            raise MorphzError("CONCURRENT_UPDATE", str(e), expected=e.expected,
                              actual=e.actual) from None
        return pb.CommitResponse(commit_seq=seq)

    @rpc_boundary
    def PutRecord(self, request, context):
        self._store.put_record(request.context, request.table, key_from_proto(request.key),
                               request.value)
        return pb.PutRecordResponse()

    @rpc_boundary
    def ListContexts(self, request, context):
        return pb.ListContextsResponse(contexts=self._store.contexts())

    @rpc_boundary
    def OpenSnapshot(self, request, context):
        snap_id, seq = self._snapshots.open(request.context)
        return pb.OpenSnapshotResponse(snapshot=snap_id, commit_seq=seq,
                                       lease_ms=int(self._snapshots.lease * 1000))

    @rpc_boundary
    def CloseSnapshot(self, request, context):
        self._snapshots.close_snapshot(request.snapshot)
        return pb.CloseSnapshotResponse()
