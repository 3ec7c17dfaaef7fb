"""Requests as bytes on a real channel (tests/integration/test_limits.py, test_fuzz.py):
every RPC of every Morphz service and of health checking, taken from the service
descriptors, called with whatever bytes a test makes; and random messages of any
request type, built from its descriptor."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional

import grpc
from google.protobuf import symbol_database
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from grpc_health.v1 import health_pb2

from morphz.api.encoding.v1 import encoding_pb2
from morphz.api.recall.v1 import recall_pb2
from morphz.api.storage.v1 import storage_pb2
from morphz.api.transaction.v1 import transaction_pb2
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.errors import from_rpc_error

# role (tests/topology.py's Endpoints field) -> the service it serves
SERVICES = {
    "storage": storage_pb2.DESCRIPTOR.services_by_name["StorageService"],
    "transaction": transaction_pb2.DESCRIPTOR.services_by_name["TransactionService"],
    "recall": recall_pb2.DESCRIPTOR.services_by_name["RecallService"],
    "encoding": encoding_pb2.DESCRIPTOR.services_by_name["EncodingService"],
}
HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"]
BIG_MESSAGES = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


@dataclass(frozen=True)
class Rpc:
    role: str  # where it is served (health: on every process; here, with `role`)
    path: str
    input: Descriptor
    server_streaming: bool

    @property
    def request_class(self):
        return symbol_database.Default().GetSymbol(self.input.full_name)


def rpcs(with_health: bool = True) -> list[Rpc]:
    """Every RPC of every Morphz service (each with a unary request), and health's."""
    out = [Rpc(role, f"/{svc.full_name}/{m.name}", m.input_type, m.server_streaming)
           for role, svc in SERVICES.items() for m in svc.methods]
    if with_health:
        out += [Rpc(role, f"/{HEALTH.full_name}/{m.name}", m.input_type, m.server_streaming)
                for role in SERVICES for m in HEALTH.methods]
    assert not any(m.client_streaming for svc in SERVICES.values() for m in svc.methods)
    return out


def start(channel: grpc.Channel, rpc: Rpc, payload: bytes, timeout: float = 30):
    """Send `payload` as the request: a call whose .code() waits for the outcome (a
    stream is cancelled once it answers anything)."""
    if rpc.server_streaming:
        return channel.unary_stream(rpc.path)(payload, timeout=timeout)
    return channel.unary_unary(rpc.path).future(payload, timeout=timeout)


def outcome(rpc: Rpc, call) -> tuple[grpc.StatusCode, Optional[MorphzError]]:
    """(status code, the structured error if any) of a call `start` made."""
    if not rpc.server_streaming:
        try:
            call.result()
            return grpc.StatusCode.OK, None
        except grpc.RpcError as e:
            return e.code(), from_rpc_error(e)
    try:
        next(call)  # a stream that answers: good enough, and done with
        call.cancel()
        return grpc.StatusCode.OK, None
    except StopIteration:
        return grpc.StatusCode.OK, None
    except grpc.RpcError as e:
        return e.code(), from_rpc_error(e)


def call_raw(channel: grpc.Channel, rpc: Rpc, payload: bytes, timeout: float = 30):
    return outcome(rpc, start(channel, rpc, payload, timeout))


def undecodable(rng: random.Random, size: int) -> bytes:
    """Bytes no request message decodes from: a first tag of wire type 6 or 7 (there
    are none), then anything."""
    first = (rng.randrange(1, 16) << 3) | rng.choice((6, 7))
    return bytes([first]) + rng.randbytes(max(0, size - 1))


# -- random messages -------------------------------------------------------------------------
_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-2**31, 2**31 - 1), FieldDescriptor.TYPE_SINT32: (-2**31, 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-2**31, 2**31 - 1), FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1), FieldDescriptor.TYPE_INT64: (-2**63, 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-2**63, 2**63 - 1), FieldDescriptor.TYPE_SFIXED64: (-2**63, 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1), FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}


class Messages:
    """Random request messages: field values from `words` (names the test created, so
    that some requests reach real state), small and edge-case numbers, odd text."""

    def __init__(self, rng: random.Random, words: list[str]) -> None:
        self.rng, self.words = rng, words

    def text(self) -> str:
        r = self.rng
        pick = r.random()
        if pick < 0.5:
            return r.choice(self.words)
        if pick < 0.6:
            return ""
        if pick < 0.8:
            return "".join(r.choice("ab@e0123 ()\"\\;\n\t\u00e9\u4e2d\U0001f600") for _ in
                           range(r.randrange(1, 40)))
        if pick < 0.9:
            return f"@e{r.randrange(0, 50)}"
        return r.choice(self.words) * r.randrange(1, 300)

    def number(self, field: FieldDescriptor) -> int:
        r = self.rng
        if field.type == FieldDescriptor.TYPE_BOOL:
            return r.random() < 0.5
        if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
            return r.choice((0.0, 1.5, -1.0, 1e30))
        if field.type == FieldDescriptor.TYPE_ENUM:
            return r.choice(field.enum_type.values).number
        low, high = _INT_RANGES[field.type]
        return r.choice((0, 1, 2, 3, 7, 100, low, high, r.randint(low, high)))

    def scalar(self, field: FieldDescriptor):
        if field.type == FieldDescriptor.TYPE_STRING:
            return self.text()
        if field.type == FieldDescriptor.TYPE_BYTES:
            return self.text().encode()
        return self.number(field)

    def message(self, cls, depth: int = 0):
        msg = cls()
        self.fill(msg, depth)
        return msg

    def fill(self, msg, depth: int = 0) -> None:
        r = self.rng
        oneofs_set: set[str] = set()
        for field in msg.DESCRIPTOR.fields:
            if r.random() < 0.35:
                continue
            if field.containing_oneof is not None:
                if field.containing_oneof.name in oneofs_set:
                    continue
                oneofs_set.add(field.containing_oneof.name)
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                if depth > 3:
                    continue
                if field.message_type.GetOptions().map_entry:
                    target = getattr(msg, field.name)
                    value_field = field.message_type.fields_by_name["value"]
                    for _ in range(r.randrange(0, 3)):
                        key = self.text()
                        if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                            self.fill(target[key], depth + 1)
                        else:
                            target[key] = self.scalar(value_field)
                elif field.is_repeated:
                    for _ in range(r.randrange(0, 4)):
                        self.fill(getattr(msg, field.name).add(), depth + 1)
                else:
                    self.fill(getattr(msg, field.name), depth + 1)
                    getattr(msg, field.name).SetInParent()
            elif field.is_repeated:
                getattr(msg, field.name).extend(self.scalar(field)
                                                for _ in range(r.randrange(0, 4)))
            else:
                setattr(msg, field.name, self.scalar(field))

    def mutate(self, data: bytes) -> bytes:
        """`data` with a few random edits: bit flips, cuts, insertions, repeats."""
        r, out = self.rng, bytearray(data)
        for _ in range(r.randrange(1, 4)):
            pick = r.random()
            if out and pick < 0.35:
                i = r.randrange(len(out))
                out[i] ^= 1 << r.randrange(8)
            elif out and pick < 0.55:
                del out[r.randrange(len(out)):]
            elif pick < 0.8:
                i = r.randrange(len(out) + 1)
                out[i:i] = r.randbytes(r.randrange(1, 6))
            elif out:
                i = r.randrange(len(out))
                out[i:i] = out[i:i + r.randrange(1, 16)]
        return bytes(out)
