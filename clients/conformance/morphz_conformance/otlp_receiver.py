"""DIST-07: an OTLP/gRPC trace receiver the kit runs, so the target's processes can export
their spans to it (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://HOST:PORT, as any OpenTelemetry
SDK reads it). It keeps every span as the Driver's `Span`, with every string it carried.

The OTLP messages come from the `opentelemetry-proto` package: the protocol's own
definitions, not the server's code."""
from __future__ import annotations

import threading
from concurrent import futures
from typing import Iterable

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from morphz_conformance.driver import Span

KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}  # OTLP's


def _strings(value) -> Iterable[str]:
    """Every string inside an OTLP AnyValue (arrays and key-value lists too)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        yield value.string_value
    elif kind == "bytes_value":
        yield value.bytes_value.decode("utf-8", "replace")
    elif kind == "array_value":
        for v in value.array_value.values:
            yield from _strings(v)
    elif kind == "kvlist_value":
        for kv in value.kvlist_value.values:
            yield kv.key
            yield from _strings(kv.value)
    elif kind:
        yield str(getattr(value, kind))


def _attribute_strings(attributes) -> list[str]:
    return [text for kv in attributes for text in (kv.key, *_strings(kv.value))]


def spans_of(request) -> list[Span]:
    out = []
    for rs in request.resource_spans:
        resource = _attribute_strings(rs.resource.attributes)
        service = next((kv.value.string_value for kv in rs.resource.attributes
                        if kv.key == "service.name"), "")
        for ss in rs.scope_spans:
            for s in ss.spans:
                strings = [s.name, s.status.message, *resource,
                           *_attribute_strings(s.attributes)]
                for e in s.events:
                    strings += [e.name, *_attribute_strings(e.attributes)]
                for link in s.links:
                    strings += _attribute_strings(link.attributes)
                out.append(Span(service, s.trace_id.hex(), s.span_id.hex(),
                                s.parent_span_id.hex(), s.name, tuple(strings),
                                KINDS.get(s.kind, ""), s.start_time_unix_nano))
    return out


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """Listens at `address` (HOST:PORT, port 0: any) from start() to stop()."""

    def __init__(self, address: str) -> None:
        self._lock = threading.Lock()
        self._spans: list[Span] = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                                   options=[("grpc.max_receive_message_length", 64 << 20)])
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)
        host, _, _ = address.rpartition(":")
        self.port = self._server.add_insecure_port(address)
        self.address = f"{host}:{self.port}"

    def Export(self, request, context):
        spans = spans_of(request)
        with self._lock:
            self._spans.extend(spans)
        return trace_service_pb2.ExportTraceServiceResponse()

    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)

    def start(self) -> "Receiver":
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(0)
