"""Wires the recall service into a server (services/server/app.py, roles.py)."""
from __future__ import annotations

import os

from morphz.api.recall.v1 import recall_pb2, recall_pb2_grpc
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.follower import FeedFollower
from morphz.services.recall.core.indexer import Indexer
from morphz.services.recall.embedding.api import Embedder
from morphz.services.recall.embedding.default import default_embedder
from morphz.services.recall.embedding.hashing import HashingEmbedder
from morphz.services.recall.index.tantivy_index import IndexDirectory, lock_root
from morphz.services.recall.servicer import RecallServicer
from morphz.services.server.wired import Wired
from morphz.shared.errors import MorphzError
from morphz.shared.storage.sharded import ShardedStore
from morphz.shared.telemetry import core_tracer


def register(app) -> Wired:
    """Add the recall servicer to app.server; return what it added.

    `app` offers: server (grpc.Server), store (the authoritative Store), transactions
    (TransactionCore), tracer (TracerProvider), config (ServerConfig: data_dir...).
    """
    tracer = core_tracer(app.tracer, "morphz.recall")
    # Derived data only: deleting this directory loses nothing (rebuild restores it).
    root = os.path.join(app.config.data_dir, "recall")
    release = lock_root(root)
    indexes = IndexDirectory(root)
    indexer = Indexer(app.store, indexes, embedder=embedder_for(app.config.embedder),
                      tracer=tracer)
    # One feed per store: the store's, or each storage shard's (with a position each).
    feeds = app.store.shard_stores() if isinstance(app.store, ShardedStore) \
        else {"": app.store}
    followers = [FeedFollower(store, indexer, indexes, feed=name).start()
                 for name, store in feeds.items()]
    core = RecallCore(app.store, app.transactions, indexer, tracer=tracer,
                      feed_status=lambda: _summed([f.status() for f in followers]))
    recall_pb2_grpc.add_RecallServiceServicer_to_server(RecallServicer(core), app.server)
    return Wired([recall_pb2.DESCRIPTOR.services_by_name["RecallService"].full_name],
                 core, [f.stop for f in followers] + [release])


def embedder_for(spec: str) -> Embedder:
    """`default` (LSA learned from each context's own text), `hashing[:DIMENSION]`
    (nothing learned) or `onnx:PATH` (a model file, loaded only when chosen)."""
    if spec in ("", "default"):
        return default_embedder()
    if spec == "hashing":
        return HashingEmbedder()
    if spec.startswith("hashing:") and spec[len("hashing:"):].isdigit():
        return HashingEmbedder(int(spec[len("hashing:"):]))
    if spec.startswith("onnx:"):
        try:
            from morphz.services.recall.embedding.onnx import OnnxEmbedder  # noqa: PLC0415
        except ImportError as e:
            raise MorphzError("CONTEXT_INPUT_INVALID", f"the ONNX embedder is not "
                              f"available here: {e}", field="embedder") from None
        return OnnxEmbedder(spec[len("onnx:"):])
    raise MorphzError("CONTEXT_INPUT_INVALID", f"unknown embedder {spec[:80]!r}: hashing, "
                      "default or onnx:PATH", field="embedder")


def _summed(statuses: list[dict]) -> dict:
    """Several feeds' places as one: positions and heads add up, and so does the lag."""
    return {k: sum(s[k] for s in statuses) for k in statuses[0]}
