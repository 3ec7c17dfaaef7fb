"""A read that outlives the store's snapshot under it (StaleRead: a remote store restarted
or failed over, or a snapshot's lease ran out during a long read such as an audit) is
answered STORAGE_SNAPSHOT_EXPIRED ("make the call again"), not INTERNAL: the soak found
an audit over a failed-over PostgreSQL store answered INTERNAL (issue 58). A real gRPC
server on loopback, its methods behind the servicers' boundaries."""
from __future__ import annotations

from concurrent import futures

import grpc
import pytest

from morphz.shared.errors import MorphzError
from morphz.shared.grpc.errors import call, rpc_boundary, rpc_stream_boundary
from morphz.shared.storage.api import StaleRead


class _Servicer:
    @rpc_boundary
    def Unary(self, request, context):
        raise StaleRead("c")

    @rpc_stream_boundary
    def Stream(self, request, context):
        yield b"first"
        raise StaleRead("c")


@pytest.fixture
def channel():
    s = _Servicer()
    server = grpc.server(futures.ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.T", {
        "Unary": grpc.unary_unary_rpc_method_handler(s.Unary),
        "Stream": grpc.unary_stream_rpc_method_handler(s.Stream)})])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield ch
    ch.close()
    server.stop(0)


def test_a_stale_read_is_answered_snapshot_expired_not_internal(channel):
    with pytest.raises(MorphzError) as info:
        call(channel.unary_unary("/t.T/Unary"), b"", timeout=10)
    assert info.value.reason == "STORAGE_SNAPSHOT_EXPIRED"
    assert info.value.status.name == "ABORTED"

    def streamed():
        for _ in channel.unary_stream("/t.T/Stream")(b"", timeout=10):
            pass
    with pytest.raises(grpc.RpcError) as err:
        streamed()
    assert err.value.code() == grpc.StatusCode.ABORTED
