"""Wires the encoding service into a server (built by services/server/node.py)."""
from __future__ import annotations

from morphz.api.encoding.v1 import encoding_pb2, encoding_pb2_grpc
from morphz.shared.process.telemetry import core_tracer
from morphz.shared.wired import Host, Wired
from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.encoding.core.row_cache import RowCache
from morphz.services.encoding.servicer import EncodingServicer


def register(app: Host) -> Wired:
    """Add the encoding servicer to app.server; return what it added (no stoppers).

    The core reads projections and keeps its snapshots in app.store, and claims
    activations through app.transactions, the transaction service's interface; its
    RowCache keeps what compiles made of frames and inbox events between compiles, up to
    the configured bytes (none kept at 0).
    """
    core = EncodingCore(app.store, app.transactions,
                        tracer=core_tracer(app.tracer, "morphz.encoding"),
                        row_cache=RowCache(max_bytes=app.config.row_cache_bytes)
                        if app.config.row_cache_bytes else None)
    encoding_pb2_grpc.add_EncodingServiceServicer_to_server(EncodingServicer(core), app.server)
    return Wired([encoding_pb2.DESCRIPTOR.services_by_name["EncodingService"].full_name], core)
