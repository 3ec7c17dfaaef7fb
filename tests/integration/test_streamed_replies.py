"""SEC-08: streamed replies count in bytes in flight (shared/grpc/guard.py) as unary ones
do: each from when the handler hands it to gRPC until gRPC has sent it, so a client that
does not read a stream holds the budget (and the others are refused, structured) instead
of the server's memory growing; what a stream held is given back when it is read, ends
or is cancelled. A real gRPC server over loopback with the Guard and a stream handler
of its own (the services' streams, storage Watch and Backup, are not large or not public)."""
from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest
from google.protobuf import wrappers_pb2

from morphz.shared import limits
from morphz.shared.grpc.errors import from_rpc_error
from morphz.shared.grpc.guard import Guard
from tests.polling import until

MiB = 1 << 20
PIECE = 8 * MiB  # far over any flow-control window: sent only as the client reads
BUDGET = 12 * MiB
SERVICE = "test.Streams"


@pytest.fixture
def served():
    guard = Guard(max_bytes_in_flight=BUDGET, max_message_bytes=BUDGET,
                  max_reply_bytes=2 * BUDGET, reply_stall_seconds=600)
    ended = threading.Event()

    def pieces(request, context):
        try:
            for _ in range(request.value):
                yield wrappers_pb2.BytesValue(value=b"x" * PIECE)
        finally:
            ended.set()

    def echo(request, context):
        return wrappers_pb2.BytesValue(value=request.value[:16])

    handlers = {
        "Pieces": grpc.unary_stream_rpc_method_handler(
            pieces, request_deserializer=wrappers_pb2.UInt32Value.FromString,
            response_serializer=wrappers_pb2.BytesValue.SerializeToString),
        "Echo": grpc.unary_unary_rpc_method_handler(
            echo, request_deserializer=wrappers_pb2.BytesValue.FromString,
            response_serializer=wrappers_pb2.BytesValue.SerializeToString)}
    server = grpc.server(futures.ThreadPoolExecutor(8), interceptors=[guard],
                         options=[("grpc.max_send_message_length", -1),
                                  ("grpc.max_receive_message_length", -1)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[
        ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)])
    stream = channel.unary_stream(
        f"/{SERVICE}/Pieces", request_serializer=wrappers_pb2.UInt32Value.SerializeToString,
        response_deserializer=wrappers_pb2.BytesValue.FromString)
    echo_call = channel.unary_unary(
        f"/{SERVICE}/Echo", request_serializer=wrappers_pb2.BytesValue.SerializeToString,
        response_deserializer=wrappers_pb2.BytesValue.FromString)
    yield guard, stream, echo_call, ended
    channel.close()
    server.stop(None)


def refused(echo_call, size: int):
    with pytest.raises(grpc.RpcError) as e:
        echo_call(wrappers_pb2.BytesValue(value=b"y" * size), timeout=30)
    return e.value


def test_sec_08_a_stream_not_read_holds_its_reply_bytes_and_others_are_refused(served):
    guard, stream, echo_call, ended = served
    replies = stream(wrappers_pb2.UInt32Value(value=3), timeout=60)
    # The client reads nothing: the first piece waits in gRPC, counted.
    until(lambda: guard.bytes_in_flight >= PIECE, 30, "the streamed piece is not counted")
    err = refused(echo_call, BUDGET - PIECE + 1)
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    info = from_rpc_error(err)
    assert info.reason == limits.BYTES_IN_FLIGHT.reason
    assert info.details["limit"] == limits.BYTES_IN_FLIGHT.name
    # Read as it comes: each piece is given back once sent (one at most is held).
    got = 0
    for reply in replies:
        got += 1
        assert len(reply.value) == PIECE
        assert guard.bytes_in_flight < 2 * PIECE  # never two pieces held at once
    assert got == 3
    until(lambda: ended.is_set() and guard.bytes_in_flight == 0, 30,
          lambda: f"{guard.bytes_in_flight} bytes still counted after the stream ended")
    assert echo_call(wrappers_pb2.BytesValue(value=b"z" * (BUDGET - MiB)),
                     timeout=30).value == b"z" * 16


def test_sec_08_a_cancelled_stream_gives_its_bytes_back(served):
    guard, stream, echo_call, ended = served
    replies = stream(wrappers_pb2.UInt32Value(value=5), timeout=60)
    until(lambda: guard.bytes_in_flight >= PIECE, 30)
    replies.cancel()
    until(lambda: ended.is_set() and guard.bytes_in_flight == 0, 30,
          lambda: f"{guard.bytes_in_flight} bytes still counted after the cancel")


def test_sec_08_a_streamed_reply_over_the_budget_is_refused_with_its_reason(served):
    guard, stream, echo_call, ended = served
    first = stream(wrappers_pb2.UInt32Value(value=1), timeout=60)
    until(lambda: guard.bytes_in_flight >= PIECE, 30)
    # A second stream's piece does not fit beside the first: its stream ends refused.
    second = stream(wrappers_pb2.UInt32Value(value=1), timeout=60)
    with pytest.raises(grpc.RpcError) as e:
        next(second)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert from_rpc_error(e.value).reason == limits.BYTES_IN_FLIGHT.reason
    assert len(next(first).value) == PIECE
