"""Wires the encoding service into the all-in-one server (services/server/app.py)."""
from __future__ import annotations

from morphz.api.encoding.v1 import encoding_pb2, encoding_pb2_grpc
from morphz.shared.telemetry import core_tracer
from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.encoding.servicer import EncodingServicer


def register(app) -> list[str]:
    """Add the encoding servicer to app.server; return the gRPC service names it serves.

    The core reads projections and keeps its snapshots in app.store, and claims
    activations through app.transactions, the transaction service's interface.
    """
    core = EncodingCore(app.store, app.transactions,
                        tracer=core_tracer(app.tracer, "morphz.encoding"))
    app.encoding = core
    encoding_pb2_grpc.add_EncodingServiceServicer_to_server(EncodingServicer(core), app.server)
    return [encoding_pb2.DESCRIPTOR.services_by_name["EncodingService"].full_name]
