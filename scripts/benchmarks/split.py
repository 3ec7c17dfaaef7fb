"""The split topology next to the all-in-one server (run: scripts/bench split).

Issue 10's benchmark. `morphz serve storage|transaction|recall|encoding` as four processes
(durable storage, one recall replica following the change feed) against `morphz serve`
(all-in-one, durable), in the same run and next to the baselines of the commit
benchmark (commit.py: raw LMDB, bare gRPC echo servers, the floor servers):

  commit    the commit benchmark's morphz rows against each topology's transaction
            service: 1 in flight, 64 in flight on one context, 64 over 64 contexts
            (load from spawned grpc.aio client processes). Besides commits/s and
            p50/p99, the server CPU summed over all processes: in the window
            ("srv CPU ms/op") and from the start of the load until recall reports lag 0
            for every context used ("CPU ms/commit+idx": the indexing the commits cause
            included, the waiting's own InspectIndex calls taken out; "idx caught up s":
            from the window's end), and per process (commit.py's drive and IndexWait)
  search    1-word OR queries (limit 20) over a generated corpus of a few thousand
            events (recall.py's generator, same seed in both), each query against the
            split recall process and the all-in-one server in turn, with a bare gRPC
            round trip and tantivy in-process on the same terms (recall.py's baseline)

  scripts/bench split                          # 5 s per measurement, 5,000 events
  scripts/bench split -- --quick               # 1.5 s per measurement, 3,000 events
  scripts/bench split -- --seconds 10 --json /tmp/split.json
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commit import (COLUMNS, MORPHZ, IndexWait, Topology, all_in_one, load_options,  # noqa: E402
                    measure_baselines, measure_morphz, MORPHZ_ROWS, print_notes,
                    print_verdicts, quick, verdict)
from common import ServerProcess, log, table, write_json  # noqa: E402
from recall import (CONTEXT, build_tantivy, corpus_terms, generate, make_queries,  # noqa: E402
                    ms, tantivy_search)

from morphz.services.recall.client import RecallClient  # noqa: E402
from morphz.services.storage.lmdb import LmdbStore  # noqa: E402

ROLES = ("storage", "transaction", "recall", "encoding")
SPLIT = "split-"  # key prefix of the split topology's rows


# -- the two topologies -------------------------------------------------------------------
def wait_serving(proc: ServerProcess, bound: float = 60.0) -> None:
    """Until the process's gRPC health reports SERVING (a role is ready once the
    services it calls answer)."""
    deadline = time.monotonic() + bound
    with grpc.insecure_channel(proc.address) as ch:
        health = health_pb2_grpc.HealthStub(ch)
        while True:
            try:
                if health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
                        health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            if proc.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{proc.first_line}: not SERVING (exit code "
                                   f"{proc.proc.poll()})")
            time.sleep(0.1)


def start_split(tmp: str) -> dict[str, ServerProcess]:
    """storage, transaction, recall and encoding, each its own `morphz serve ROLE`, SERVING."""
    procs: dict[str, ServerProcess] = {}
    try:
        for role in ROLES:
            deps = [] if role == "storage" else ["--storage", procs["storage"].address]
            if role in ("recall", "encoding"):
                deps += ["--transaction", procs["transaction"].address]
            procs[role] = ServerProcess(
                [MORPHZ, "serve", role, "--listen", "127.0.0.1:0",
                 "--data", os.path.join(tmp, "split", role), *deps],
                log_path=os.path.join(tmp, f"split-{role}.log"))
            log(f"  {procs[role].first_line}")
        for proc in procs.values():
            wait_serving(proc)
    except BaseException:
        stop_all(procs)
        raise
    return procs


def stop_all(procs: dict[str, ServerProcess]) -> None:
    for proc in reversed(list(procs.values())):  # storage last: the others drain first
        proc.stop()


def split_topology(procs: dict[str, ServerProcess], tmp: str) -> Topology:
    return Topology("morphz split", procs["transaction"].address, procs["recall"].address,
                    procs, os.path.join(tmp, "split", "storage", "store"))


def wait_corpus(args, name: str, address: str) -> None:
    """Until recall at `address` has indexed the corpus (it follows the feed from 0)."""
    t = time.perf_counter()
    waiting = IndexWait(address, [CONTEXT], args.catchup_bound)
    try:
        if not waiting.wait()["caught_up"]:
            raise RuntimeError(f"{name}: the corpus was not indexed within "
                               f"{args.catchup_bound:g} s")
    finally:
        waiting.close()
    log(f"    {name}: corpus indexed {time.perf_counter() - t:.1f} s after start")


# -- search -------------------------------------------------------------------------------
def measure_search(args, aio: str, split_recall: str, tantivy_run, queries: list[str]) -> dict:
    """Each query against every runner in turn (so load on the machine hits all alike)."""
    channels = [grpc.insecure_channel(a) for a in (split_recall, aio)]
    try:
        health = health_pb2_grpc.HealthStub(channels[0])
        split_c, aio_c = (RecallClient(ch, timeout=60) for ch in channels)
        runners = {"rtt": lambda _: health.Check(health_pb2.HealthCheckRequest(), timeout=10),
                   "split": lambda q: split_c.search(CONTEXT, q, limit=20),
                   "all-in-one": lambda q: aio_c.search(CONTEXT, q, limit=20),
                   "tantivy": tantivy_run}
        for q in queries[:10]:
            for fn in runners.values():
                fn(q)
        lat: dict[str, list[float]] = {name: [] for name in runners}
        for q in queries:
            for name, fn in runners.items():
                t = time.perf_counter()
                fn(q)
                lat[name].append(time.perf_counter() - t)
    finally:
        for ch in channels:
            ch.close()
    out = {name: {"p50_ms": ms(xs, 50), "p99_ms": ms(xs, 99)} for name, xs in lat.items()}
    rtt, tan, aio_r = out["rtt"], out["tantivy"], out["all-in-one"]
    for name in ("split", "all-in-one"):
        r = out[name]
        r["p50_vs_all_in_one"] = r["p50_ms"] / aio_r["p50_ms"]
        r["p99_vs_all_in_one"] = r["p99_ms"] / aio_r["p99_ms"]
        r["p50_vs_tantivy_rtt"] = r["p50_ms"] / (tan["p50_ms"] + rtt["p50_ms"])
        r["p99_vs_tantivy_rtt"] = r["p99_ms"] / (tan["p99_ms"] + rtt["p99_ms"])
    return out


SEARCH_COLUMNS = [("name", "1-word search"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"),
                  ("p50_vs_all_in_one", "p50/all-in-one"), ("p99_vs_all_in_one", "p99/all-in-one"),
                  ("p50_vs_tantivy_rtt", "p50/(tantivy+rtt)"),
                  ("p99_vs_tantivy_rtt", "p99/(tantivy+rtt)")]
SEARCH_NAMES = {"split": "RecallService, split recall process",
                "all-in-one": "RecallService, all-in-one server",
                "tantivy": "tantivy in-process (same terms)",
                "rtt": "bare gRPC round trip (health)"}


# -- report -------------------------------------------------------------------------------
def process_rows(rows: dict) -> list[dict]:
    """Server CPU per commit (to caught up) by process, and cores busy in the window."""
    out = []
    for key, _, _ in MORPHZ_ROWS:
        for k in (key, SPLIT + key):
            r = rows[k]
            per = dict(r.get("process_cpu_ms_per_commit", {}))
            busy = r.get("process_cpu_util")
            out.append({"name": r["name"], "inflight": r["inflight"], **per,
                        "total": r.get("cpu_ms_per_commit_indexed", float("nan")),
                        "busy": "/".join(f"{busy[p]:.2f}" for p in ROLES) if busy else
                        f"{r['server_cpu_util']:.2f}"})
    return out


PROCESS_COLUMNS = [("name", "CPU ms/commit+idx by process"), ("inflight", "in flight"),
                   ("all-in-one", "all-in-one"), *((r, r) for r in ROLES), ("total", "total"),
                   ("busy", "cores busy in window (st/tx/rc/en)")]


def comparisons(rows: dict) -> list[dict]:
    out = []
    for key, _, _ in MORPHZ_ROWS:
        a, s = rows[key], rows[SPLIT + key]
        out.append({"row": key, "inflight": a["inflight"],
                    "ops_per_s": s["ops_per_s"] / a["ops_per_s"],
                    "p50_ms": s["p50_ms"] / a["p50_ms"], "p99_ms": s["p99_ms"] / a["p99_ms"],
                    "cpu_ms_per_commit_indexed": s["cpu_ms_per_commit_indexed"]
                    / a["cpu_ms_per_commit_indexed"]})
    return out


def report(args, rows: dict, search: dict, verdicts: list[dict], ratios: list[dict]) -> None:
    print(f"\nsplit benchmark: {args.seconds:g} s per measurement, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(table(list(rows.values()), COLUMNS))
    print()
    print(table(process_rows(rows), PROCESS_COLUMNS))
    print()
    print_verdicts(verdicts)
    for r in ratios:
        print(f"split / all-in-one, {r['row']}: commits/s {r['ops_per_s']:.2f}, "
              f"p50 {r['p50_ms']:.2f}, p99 {r['p99_ms']:.2f}, "
              f"CPU/commit+idx {r['cpu_ms_per_commit_indexed']:.2f}")
    print_notes([rows[p + k] for p in ("", SPLIT) for k, _, _ in MORPHZ_ROWS])
    print('"CPU ms/commit+idx": server CPU (all processes) from the start of the load until '
          'recall had indexed it all, per commit; "idx caught up s": from the window\'s end')
    print()
    print(table([{"name": SEARCH_NAMES[k], **v} for k, v in search.items()], SEARCH_COLUMNS))
    print(f"search: {args.queries} 1-word OR queries, limit 20, over {args.events:,} events; "
          "recall.py's targets: p50/(tantivy+rtt) <= 1.5, p99 <= 2.0")


def measure_all(args, tmp: str) -> None:
    rows: dict[str, dict] = {}
    log(f"== split benchmark: {args.seconds:g} s per measurement, {args.events:,} events, "
        f"data in {tmp}, {os.cpu_count()} CPUs")
    measure_baselines(args, tmp, rows, info=False)

    log(f"  corpus: {args.events:,} events (seed {args.seed}) into both stores")
    store = os.path.join(tmp, "split", "storage")
    words = generate(store, args.events, args.seed)
    shutil.copytree(os.path.join(store, "store"), os.path.join(tmp, "aio", "store"))
    corpus = LmdbStore(os.path.join(store, "store"), map_size=64 << 30, sync=False)
    try:
        docs = list(corpus_terms(corpus))
    finally:
        corpus.close()
    os.makedirs(os.path.join(tmp, "tantivy"))
    index, schema, _ = build_tantivy(os.path.join(tmp, "tantivy"), docs)
    queries = make_queries(words, args.seed, args.queries)[1]

    aio = ServerProcess([MORPHZ, "serve", "--listen", "127.0.0.1:0",
                         "--data", os.path.join(tmp, "aio")],
                        log_path=os.path.join(tmp, "aio-server.log"))
    procs: dict[str, ServerProcess] = {}
    try:
        log(f"  {aio.first_line}")
        procs = start_split(tmp)
        wait_corpus(args, "all-in-one", aio.address)
        wait_corpus(args, "split", procs["recall"].address)
        log(f"  search: {args.queries} 1-word queries, split / all-in-one / tantivy")
        search = measure_search(args, aio.address, procs["recall"].address,
                                tantivy_search(index, schema), queries)
        measure_morphz(args, all_in_one(aio, os.path.join(tmp, "aio"), "morphz all-in-one"),
                       rows)
        aio.stop()
        measure_morphz(args, split_topology(procs, tmp), rows, SPLIT)
    finally:
        aio.stop()
        stop_all(procs)
    verdicts = (verdict(rows, "", "all-in-one: ")
                + verdict(rows, SPLIT, "split: ", info=False))
    ratios = comparisons(rows)
    report(args, rows, search, verdicts, ratios)
    if args.json:
        write_json(args.json, {"seconds": args.seconds, "cpus": os.cpu_count(),
                               "events": args.events, "queries": args.queries,
                               "results": rows, "search": search, "targets": verdicts,
                               "split_vs_all_in_one": ratios})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    load_options(ap)
    ap.add_argument("--events", type=int, default=0,
                    help="search corpus size (default 5,000; 3,000 with --quick)")
    ap.add_argument("--queries", type=int, default=0,
                    help="1-word search queries (default 300; 150 with --quick)")
    ap.add_argument("--seed", type=int, default=20260804)
    args = ap.parse_args()
    quick(args)
    args.events = args.events or (3000 if args.quick else 5000)
    args.queries = args.queries or (150 if args.quick else 300)
    tmp = tempfile.mkdtemp(prefix="morphz-bench-split-", dir=args.data)
    try:
        measure_all(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
