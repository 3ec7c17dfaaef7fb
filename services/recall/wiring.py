"""Wires the recall service into the all-in-one server (services/server/app.py)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional

from morphz.api.recall.v1 import recall_pb2, recall_pb2_grpc
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.indexer import Indexer
from morphz.services.recall.core.worker import OutboxWorker
from morphz.services.recall.index.tantivy_index import IndexDirectory
from morphz.services.recall.servicer import RecallServicer
from morphz.services.server.wired import Wired
from morphz.shared.telemetry import core_tracer


@dataclass(frozen=True)
class RecallWired(Wired):
    # Where the index stands in a context's outbox (status' outbox lag in-process).
    index_position: Optional[Callable[[str], int]] = None


def register(app) -> RecallWired:
    """Add the recall servicer to app.server; return what it added.

    `app` offers: server (grpc.Server), store (the authoritative Store), transactions
    (TransactionCore), tracer (TracerProvider), config (ServerConfig: data_dir...).
    """
    tracer = core_tracer(app.tracer, "morphz.recall")
    # Derived data only: deleting this directory loses nothing (rebuild restores it).
    indexes = IndexDirectory(os.path.join(app.config.data_dir, "recall"))
    indexer = Indexer(app.store, indexes, tracer=tracer)
    core = RecallCore(app.store, app.transactions, indexer, tracer=tracer)
    worker = OutboxWorker(indexer, app.store.contexts).start()
    recall_pb2_grpc.add_RecallServiceServicer_to_server(RecallServicer(core), app.server)
    return RecallWired([recall_pb2.DESCRIPTOR.services_by_name["RecallService"].full_name],
                       core, [worker.stop], index_position=indexer.position)
