"""SEC-08 between services (issue 58): a storage process keeps each calling service's
bytes in flight in a budget of its own, so recall's replies held for it do not get the
transaction service's commit of a caller's large write refused BYTES_IN_FLIGHT_LIMIT
for traffic that is not its own; within one service's budget the limit holds as before.
A real `morphz serve storage` process with a budget of 24 MiB, a reply of 15 MiB held by
a client marked as recall that never reads it (raw HTTP/2, window 0)."""
from __future__ import annotations

import grpc
import pytest

from morphz.api.storage.v1 import storage_pb2 as pb
from morphz.services.server.serving import _From
from morphz.services.storage.client import StorageClient
from morphz.services.storage.convert import key_to_proto
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.guard import FROM_HEADER
from morphz.shared.storage.api import Write
from morphz_conformance.h2_stall import StalledCall

from tests import wire
from tests.polling import until
from tests.topology import ServerProcess

pytestmark = pytest.mark.split_processes  # it starts the process it needs

MiB = 1 << 20
BIG = b"x" * (15 * MiB)


def _client(address: str, caller: str) -> tuple[grpc.Channel, StorageClient]:
    channel = grpc.intercept_channel(
        grpc.insecure_channel(address, options=wire.BIG_MESSAGES), _From(caller))
    return channel, StorageClient(channel, timeout=60)


def test_sec_08_one_services_replies_held_do_not_refuse_anothers_write(tmp_path):
    server = ServerProcess(tmp_path / "data", args=[
        "storage", "--max-bytes-in-flight", str(24 * MiB),
        "--reply-stall-seconds", "120"]).start()
    stalled = None
    channels = []
    try:
        ch, tx = _client(server.address, "transaction")
        channels.append(ch)
        assert tx.commit("c", 0, [Write("frames", ("big",), BIG)]) == 1
        get = pb.GetRequest(context="c", table="frames", key=key_to_proto(("big",)))
        stalled = StalledCall(server.address, "/morphz.api.storage.v1.StorageService/Get",
                              get.SerializeToString(), metadata=((FROM_HEADER, "recall"),))

        def held() -> bool:
            stalled.poll()
            return stalled.answered
        until(held, 60, "the stalled read was never answered")
        # Recall's budget holds 15 of its 24 MiB: a second big read of recall's is refused
        ch2, recall = _client(server.address, "recall")
        channels.append(ch2)
        with pytest.raises(MorphzError) as info:
            recall.commit("c", 1, [Write("frames", ("other",), BIG)])
        assert info.value.reason == "BYTES_IN_FLIGHT_LIMIT"
        # ... and the transaction service's write of 15 MiB is taken (before: refused).
        assert tx.commit("c", 1, [Write("frames", ("next",), BIG)]) == 2
    finally:
        if stalled is not None:
            stalled.close()
        for ch in channels:
            ch.close()
        server.kill()
