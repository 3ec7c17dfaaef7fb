"""Wires the recall service into a server (services/server/app.py, roles.py)."""
from __future__ import annotations

import os

from morphz.api.recall.v1 import recall_pb2, recall_pb2_grpc
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.follower import FeedFollower
from morphz.services.recall.core.indexer import Indexer
from morphz.services.recall.index.tantivy_index import IndexDirectory
from morphz.services.recall.servicer import RecallServicer
from morphz.shared.telemetry import core_tracer


def register(app) -> list[str]:
    """Add the recall servicer to app.server; return the gRPC service names it serves.

    `app` offers: server (grpc.Server), store (the authoritative Store), transactions
    (TransactionCore), tracer (TracerProvider), config (ServerConfig: data_dir...),
    on_stop(callable) for background work to stop with the server.
    """
    tracer = core_tracer(app.tracer, "morphz.recall")
    # Derived data only: deleting this directory loses nothing (rebuild restores it).
    indexes = IndexDirectory(os.path.join(app.config.data_dir, "recall"))
    indexer = Indexer(app.store, indexes, tracer=tracer)
    follower = FeedFollower(app.store, indexer, indexes).start()
    app.on_stop(follower.stop)
    core = RecallCore(app.store, app.transactions, indexer, tracer=tracer,
                      feed_status=follower.status)
    app.recall = core
    recall_pb2_grpc.add_RecallServiceServicer_to_server(RecallServicer(core), app.server)
    return [recall_pb2.DESCRIPTOR.services_by_name["RecallService"].full_name]
