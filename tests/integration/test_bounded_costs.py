"""Rejections that cost in proportion to a limit, not to what the caller sent (issue 40
item 7): a storage Commit that can never apply answers at once."""
from __future__ import annotations

from concurrent import futures

import grpc
import pytest

from morphz.api.storage.v1 import storage_pb2 as pb
from morphz.api.storage.v1 import storage_pb2_grpc
from morphz.services.storage.client import StorageClient
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.storage.servicer import StorageServicer, key_to_proto
from morphz.services.storage.snapshots import SnapshotRegistry
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.errors import call
from morphz.shared.storage.api import Write

# Far longer than the call's deadline: a commit that waited it out would answer
# DEADLINE_EXCEEDED, whatever the machine's load.
REORDER_WAIT = 600.0


@pytest.fixture
def storage(tmp_path):
    store = LmdbStore(str(tmp_path / "store"))
    registry = SnapshotRegistry(store)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    storage_pb2_grpc.add_StorageServiceServicer_to_server(
        StorageServicer(store, registry, reorder_wait=REORDER_WAIT), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield channel
    channel.close()
    server.stop(None)
    registry.close()
    store.close()


def test_sec_06_a_commit_expecting_a_version_no_commit_in_flight_can_make_answers_at_once(
        storage):
    client = StorageClient(storage, timeout=30)
    assert client.commit("c", 0, [Write("frames", ("a",), b"A")]) == 1
    stub = storage_pb2_grpc.StorageServiceStub(storage)
    request = pb.CommitRequest(context="c", expect_commit_seq=999, writes=[
        pb.Write(table="frames", key=key_to_proto(("b",)), value=b"B")])
    with pytest.raises(MorphzError) as info:
        call(stub.Commit, request, timeout=30)  # it used to hold on for the reorder wait
    assert info.value.reason == "CONCURRENT_UPDATE", info.value
    assert info.value.details["expected"] == 999 and info.value.details["actual"] == 1
    # The pipelined case still works: commits sent before their predecessors are answered.
    tickets = [client.submit("c", seq, [Write("frames", (f"p{seq}",), b"P")])
               for seq in range(1, 21)]
    assert [client.wait(t) for t in tickets] == list(range(2, 22))
