"""The servers and credentials of the authentication and authorization tests
(test_security.py, test_authorization.py): one `morphz serve` process per mode (mutual
TLS; bearer tokens over TLS) for the whole session, real certificates of a CA made by
scripts/dev-certs, and helpers calling every RPC of the public service descriptors.
Registered as a plugin by tests/conftest.py, so both modules share the servers."""
from __future__ import annotations

import json

import grpc
import pytest
from google.protobuf import message_factory
from grpc_reflection.v1alpha import reflection_pb2

from morphz.api.encoding.v1 import encoding_pb2
from morphz.api.recall.v1 import recall_pb2
from morphz.api.storage.v1 import storage_pb2
from morphz.api.transaction.v1 import transaction_pb2
from morphz.shared.grpc.auth import ClientAuth
from morphz.shared.grpc.errors import from_rpc_error

from tests.certs import Certs, dev_certs
from tests.topology import ServerProcess

PUBLIC = [transaction_pb2.DESCRIPTOR.services_by_name["TransactionService"],
          recall_pb2.DESCRIPTOR.services_by_name["RecallService"],
          encoding_pb2.DESCRIPTOR.services_by_name["EncodingService"],
          # not a Morphz service, but every RPC but health checking needs a principal
          reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"]]
STORAGE = storage_pb2.DESCRIPTOR.services_by_name["StorageService"]
ALICE_TOKEN = "alice-5b0d0c1e9a7f4c2e8d31"
# Principals of the authorization tests (test_authorization.py): a context's creator, the
# creator of another context, one with no grant, one bound to a session, a server admin.
PRINCIPALS = ("alice", "bob", "carol", "erin", "root")
TOKENS = {name: f"{name}-token-7c41e0d2b9a85f63" for name in PRINCIPALS if name != "alice"}
TOKENS["alice"] = ALICE_TOKEN
SERVER_ADMIN = "root"
SERVICE_TOKEN = "service-2f6e41a9c07b4d5d9e88"
UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
HANDSHAKE_REFUSED = grpc.StatusCode.UNAVAILABLE
OK = grpc.StatusCode.OK
in_process_too = pytest.mark.all_in_one(
    reason="serves `morphz serve` processes with authentication of their own")


def rpcs(*services) -> list[tuple[str, object]]:
    return [(f"/{s.full_name}/{m.name}", m) for s in services for m in s.methods]


def invoke(channel: grpc.Channel, path: str, method) -> tuple[grpc.StatusCode, str]:
    """Call `method` with an empty request: its status code and ErrorInfo reason."""
    request = message_factory.GetMessageClass(method.input_type)()
    kind = f"{'stream' if method.client_streaming else 'unary'}_" \
           f"{'stream' if method.server_streaming else 'unary'}"
    stub = getattr(channel, kind)(path, request_serializer=lambda m: m.SerializeToString(),
                                  response_deserializer=lambda b: b)
    try:
        reply = stub(iter([request]) if method.client_streaming else request, timeout=10)
        if method.server_streaming:
            next(reply, None)  # the first message (or the status) tells
            reply.cancel()
        return OK, ""
    except grpc.RpcError as e:
        return e.code(), from_rpc_error(e).reason


def answers(auth: ClientAuth, address: str, calls) -> dict[str, tuple]:
    with auth.channel(address) as channel:
        return {path: invoke(channel, path, m) for path, m in calls}


@pytest.fixture(scope="session")
def certs(tmp_path_factory) -> Certs:
    return dev_certs(tmp_path_factory.mktemp("ca"), *PRINCIPALS)


@pytest.fixture(scope="session")
def other_ca(tmp_path_factory) -> Certs:
    return dev_certs(tmp_path_factory.mktemp("other-ca"))


@pytest.fixture(scope="session")
def tokens(tmp_path_factory) -> dict[str, str]:
    """The token file (JSON) and the services' token file."""
    d = tmp_path_factory.mktemp("tokens")
    (d / "tokens.json").write_text(json.dumps({
        SERVICE_TOKEN: "morphz-service", **{t: name for name, t in TOKENS.items()}}))
    (d / "service.token").write_text(SERVICE_TOKEN + "\n")
    return {"file": str(d / "tokens.json"), "service": str(d / "service.token")}


@pytest.fixture(scope="session")
def mtls_server(certs, tmp_path_factory):
    """`morphz serve` with mutual TLS and the storage API on a listener of its own."""
    proc = ServerProcess(tmp_path_factory.mktemp("mtls") / "data",
                         args=[*certs.server_flags(), "--storage-listen", "127.0.0.1:0",
                               "--admin", SERVER_ADMIN],
                         auth=certs.client("alice")).start()
    yield proc
    proc.kill()


@pytest.fixture(scope="session")
def token_server(certs, tokens, tmp_path_factory):
    """`morphz serve` over TLS taking bearer tokens."""
    proc = ServerProcess(tmp_path_factory.mktemp("tokens") / "data",
                         args=[*certs.server_flags(mutual=False), "--tokens", tokens["file"],
                               "--admin", SERVER_ADMIN],
                         auth=certs.anonymous(token=ALICE_TOKEN)).start()
    yield proc
    proc.kill()


