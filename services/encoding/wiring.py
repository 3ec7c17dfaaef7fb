"""Wires the encoding service into the all-in-one server (services/server/app.py)."""
from __future__ import annotations


def register(app) -> list[str]:
    """Add the encoding servicer to app.server; return the gRPC service names it serves.

    `app` offers: server (grpc.Server), store (the authoritative Store), transactions
    (TransactionCore), tracer (TracerProvider), config (ServerConfig: data_dir...),
    on_stop(callable) for background work to stop with the server.
    """
    return []
