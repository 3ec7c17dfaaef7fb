"""Durable commit throughput and latency next to its baselines (run: scripts/bench commit).

The commit benchmark (issues 3 and 14). Everything is measured in the same run on the
same machine, and the verdict is given as ratios to the baselines of that run:

  raw LMDB     py-lmdb, sync on, one small put per write transaction, in this process
               (plus, for information, a loop whose transactions are shaped like one
               Morphz commit: 29 puts over 8 named databases in a nested transaction)
  echo         a bare unary gRPC echo (bytes in, same bytes out), server in its own
               process: a grpc.aio server and a threaded grpc.server like Morphz's
               (16 workers), at 1 and 64 calls in flight (information)
  floor        an echo server (grpc.aio and threaded) whose handler makes one
               Morphz-shaped durable LMDB transaction (29 puts over 8 databases, nested),
               group-committed (threaded: leader/follower like Morphz's storage; aio: one
               committer thread): what a Python gRPC commit service costs with no
               transaction logic at all: what the targets are ratios to
  core         (information) the transaction core alone, in this process: CPU time of
               one 5-op revise (parse, rules, records, storage batch) on an LMDB store
               without fsync, plus the reply message; no gRPC, no recall indexing
  morphz       `morphz serve` (durable, the default) in its own process; each client
               revises its own 5 frames in one 5-op context-tx, based on the revision
               of its previous receipt (so with many clients on one context most are
               rebased by the server), at 1 in flight, 64 in flight on ONE context, and
               64 in flight spread over 64 contexts

Load comes from separate (spawned) processes running grpc.aio clients, so no client
shares a GIL with a server. The group commit is checked from outside: the LMDB
environment's last transaction id is read before and after each window, giving the
number of durable LMDB write transactions (fsyncs) per acknowledged commit. Server and
client CPU use over each window come from /proc ("srv CPU ms/op" is the server's CPU
time per operation, all threads; "srv CPU" / "cli CPU" are cores busy on average;
"srv sys" is the kernel's share of the server's CPU: system calls, thread wake-ups,
fsync, page faults; "switches/op" the context switches of the server's threads per
operation: a thread waiting for the GIL, a lock or the disk switches out).
Recall indexes commits in the background, partly after the window: for the morphz rows
the load starts once recall has indexed the set-up, and after the window the benchmark
waits (bounded, --catchup-bound) until InspectIndex reports lag 0 for every context
used; "CPU ms/commit+idx" is the server CPU from the start of the load until then over
the commits made (the contexts' heads before and after, warm-up included; the CPU of
the waiting's own InspectIndex calls, measured after, taken out), and
"idx caught up s" the time from the window's end until then (it includes the time the
load processes take to finish their last calls and report). scripts/benchmarks/split.py measures
the same rows with each service in its own process.

Targets (issue 14), each at its strictest over the rows: server CPU per 5-op commit, its
recall indexing included ("CPU ms/commit+idx", all processes) <= 1.2 ms; 64-in-flight
commits/s (the slower of one context / 64 contexts) >= 0.4 x the faster floor service's
64-in-flight calls/s; single-client commit p50 <= 1.3 x the lower floor p50. (Issue 3's
targets were ratios to the bare echo; the echo rows stay in the table for information.)

  scripts/bench commit                        # 5 s per measurement
  scripts/bench commit -- --quick             # 1.5 s per measurement
  scripts/bench commit -- --seconds 10 --json /tmp/commit.json
  scripts/bench commit -- --quick --recall-idle 0   # recall holds back no context's changes
  scripts/bench commit -- --profile /tmp/commit.pstats   # + a cProfile of the server
  scripts/bench commit -- --profile /tmp/p1.pstats --profile-only --profile-inflight 1 \
      --profile-clock wall                    # only the profile, one client
  scripts/bench commit -- --spy /tmp/spy.txt --profile-only   # py-spy, every thread
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Optional

import grpc
import lmdb

from morphz.services.server.main import wait_for

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (LoadResult, Progress, ServerProcess, closed_loop, log,  # noqa: E402
                    print_spy, run_drivers, split, summarize, table, target, write_json)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MORPHZ = os.path.join(ROOT, ".venv", "bin", "morphz")
ECHO_METHOD = "/bench.Echo/Echo"
ECHO_PAYLOAD = b"x" * 200  # about the size of a 5-op context-tx request
OPS_PER_TX = 5
SHAPED_PUTS = 29  # LMDB puts of one 5-op revise (events, frames, versions, boundaries...)
TARGET_CPU_MS = 1.2      # server CPU per commit, its recall indexing included (all processes)
TARGET_THROUGHPUT = 0.4  # commits/s over the floor service's calls/s, 64 in flight
TARGET_LATENCY = 1.3     # commit p50 over the floor service's p50, 1 in flight


# -- servers run in their own processes (this file, re-invoked) -----------------------------
def _echo_handlers(handler) -> list:
    """`handler` as the unary method /bench.Echo/Echo (what the load drivers call)."""
    return [grpc.method_handlers_generic_handler(
        "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(handler)})]


def wait_for_sigterm() -> None:
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    wait_for(done)  # timed: a signal landing on another thread is still seen


def serve_threaded(label: str, handler) -> None:
    """A threaded grpc.server like Morphz's (16 workers) serving `handler` until SIGTERM."""
    from concurrent import futures
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), maximum_concurrent_rpcs=256,
                         options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers(_echo_handlers(handler))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"{label}: serving on 127.0.0.1:{port}", flush=True)
    wait_for_sigterm()
    server.stop(0)


async def serve_aio(label: str, handler) -> None:
    """A grpc.aio server serving the coroutine `handler` until SIGTERM."""
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers(_echo_handlers(handler))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"{label}: serving on 127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop(0)


def serve_echo(mode: str) -> None:
    """`commit.py --echo-server aio|sync`: a bare echo service until SIGTERM."""
    if mode == "aio":
        async def echo(request, context):
            return request
        asyncio.run(serve_aio("echo", echo))
    else:
        serve_threaded("echo", lambda request, context: request)


def serve_floor(path: str, mode: str) -> None:
    """`commit.py --floor-server DIR aio|sync`: a gRPC server whose every call makes one
    Morphz-shaped LMDB write (SHAPED_PUTS puts over 8 databases in a nested
    transaction), group-committed (one durable transaction for all calls queued).
    No parsing, no rules, no records. "sync": threaded server, leader/follower like
    Morphz's storage; "aio": grpc.aio server, one committer thread resolving futures."""
    env = lmdb.open(path, map_size=4 << 30, max_dbs=8, sync=True, metasync=True)
    dbs = [env.open_db(b"t%d" % i) for i in range(8)]
    value = b"v" * 100
    counter = iter(range(1 << 62))

    def write(numbers) -> None:
        with env.begin(write=True) as txn:
            for n in numbers:
                child = env.begin(write=True, parent=txn)
                for j in range(SHAPED_PUTS):
                    child.put(b"%012d-%02d" % (n, j), value, db=dbs[j % 8])
                child.commit()

    if mode == "aio":
        serve_floor_aio(write, counter)
    else:
        serve_floor_threaded(write, counter)
    env.close()


def serve_floor_threaded(write, counter) -> None:
    queue, queue_lock, leader = [], threading.Lock(), threading.Lock()

    def commit(request, context):
        me = (next(counter), threading.Event())
        with queue_lock:
            queue.append(me)
        while not me[1].is_set():
            with leader:
                if me[1].is_set():
                    break
                with queue_lock:
                    batch = queue[:]
                    del queue[:]
                write([n for n, _ in batch])
                for _, done in batch:
                    done.set()
        return request
    serve_threaded("floor", commit)


def serve_floor_aio(write, counter) -> None:
    import queue as queue_mod

    async def main() -> None:
        loop = asyncio.get_running_loop()
        pending: queue_mod.SimpleQueue = queue_mod.SimpleQueue()

        def committer() -> None:  # drains everything queued into one durable txn
            while True:
                batch = [pending.get()]
                if batch[0] is None:
                    return
                while not pending.empty():
                    batch.append(pending.get())
                stop = None in batch
                batch = [b for b in batch if b is not None]
                write([n for n, _ in batch])
                for _, fut in batch:
                    loop.call_soon_threadsafe(fut.set_result, None)
                if stop:
                    return

        async def commit(request, context):
            fut = loop.create_future()
            pending.put((next(counter), fut))
            await fut
            return request

        thread = threading.Thread(target=committer, daemon=True)
        thread.start()
        await serve_aio("floor", commit)
        pending.put(None)
        thread.join()
    asyncio.run(main())


def serve_profiled(data: str, out: str, clock: str, recall_idle: str) -> None:
    """`commit.py --profiled-server DATA OUT CLOCK IDLE`: the all-in-one server (durable;
    IDLE: its --recall-idle, "" for the default) with
    every gRPC work item (one RPC: decode, handler, encode) under cProfile. CLOCK "cpu"
    times in thread CPU time, so waiting for the GIL or an fsync is not counted (but the
    timer is a system call per event: heavy overhead on small functions); "wall" uses
    cProfile's own cheap clock (fair with 1 client; with many, GIL waits are counted).
    At SIGTERM the stats go to OUT and each thread's CPU time to OUT.threads.json."""
    import cProfile
    import pstats
    from concurrent.futures import thread as cf_thread

    from morphz.services.server.app import AllInOne, ServerConfig

    local, profiles, lock = threading.local(), [], threading.Lock()
    original = cf_thread._WorkItem.run

    def run(self):
        prof = getattr(local, "prof", None)
        if prof is None:
            prof = local.prof = (cProfile.Profile(time.thread_time) if clock == "cpu"
                                 else cProfile.Profile())
            with lock:
                profiles.append(prof)
        prof.enable()
        try:
            original(self)
        finally:
            prof.disable()
    cf_thread._WorkItem.run = run
    idle = {"recall_idle_seconds": float(recall_idle)} if recall_idle else {}
    app = AllInOne(ServerConfig(data_dir=data, listen="127.0.0.1:0", **idle)).start()
    print(f"morphz: serving on 127.0.0.1:{app.port} (profiled)", flush=True)
    wait_for_sigterm()
    with lock:  # every profiler is disabled between work items: safe to read here
        if profiles:
            pstats.Stats(*profiles).dump_stats(out)
    with open(out + ".threads.json", "w") as f:
        json.dump(thread_cpu(), f)
    app.stop(grace=1)


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process, by Python thread name (numbered
    executor workers summed as one) or, for gRPC's C threads, the OS thread name."""
    from common import cpu_seconds
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            cpu = cpu_seconds(f"self/task/{tid}")
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        name = names.get(int(tid), f"[C] {comm}")
        if name.startswith("ThreadPoolExecutor"):
            name = "gRPC handler threads (ThreadPoolExecutor)"
        out[name] = out.get(name, 0.0) + cpu
    return out


# -- load drivers (each runs in its own spawned process) ------------------------------------
def echo_driver(spec: dict, ready, go) -> LoadResult:
    async def main() -> LoadResult:
        async with grpc.aio.insecure_channel(spec["address"]) as channel:
            echo = channel.unary_unary(ECHO_METHOD)
            await echo(ECHO_PAYLOAD)  # connect before the clock starts
            ready.set()
            await asyncio.get_running_loop().run_in_executor(None, go.wait)

            async def op(caller: int, i: int) -> None:
                await echo(ECHO_PAYLOAD)
            return await closed_loop(op, spec["inflight"], spec["seconds"], spec["warmup"])
    return asyncio.run(main())


def tx_text(base: int, frames: list[str], op: str, n: int) -> str:
    body = " ".join(f"({op} {f} (v {n}) (from-bench yes))" for f in frames)
    return f"(context-tx (base-version {base}) {body})"


def commit_driver(spec: dict, ready, go) -> LoadResult:
    """Callers `first..first+inflight-1`; caller k commits to contexts[k % len] and owns
    frames w{k}-f0..f4: it creates them (untimed), then revises all five per transaction,
    based on the revision of its own previous receipt."""
    from morphz.api.transaction.v1 import transaction_pb2 as pb
    from morphz.api.transaction.v1 import transaction_pb2_grpc as pb_grpc

    async def main() -> LoadResult:
        async with grpc.aio.insecure_channel(spec["address"]) as channel:
            stub = pb_grpc.TransactionServiceStub(channel)
            callers = range(spec["first"], spec["first"] + spec["inflight"])
            ctx = {k: spec["contexts"][k % len(spec["contexts"])] for k in callers}
            frames = {k: [f"w{k}-f{j}" for j in range(OPS_PER_TX)] for k in callers}
            base: dict[int, int] = {}

            async def create(k: int) -> None:
                r = await stub.Commit(pb.CommitRequest(
                    context=ctx[k], text=tx_text(0, frames[k], "create", 0)), timeout=60)
                base[k] = r.revision
            await asyncio.gather(*(create(k) for k in callers))
            ready.set()
            await asyncio.get_running_loop().run_in_executor(None, go.wait)

            async def op(caller: int, i: int) -> str:
                k = spec["first"] + caller
                r = await stub.Commit(pb.CommitRequest(
                    context=ctx[k], text=tx_text(base[k], frames[k], "revise", i + 1)),
                    timeout=60)
                base[k] = r.revision
                return "rebased" if r.rebased else "exact"
            return await closed_loop(op, spec["inflight"], spec["seconds"], spec["warmup"])
    return asyncio.run(main())


# -- measurements -----------------------------------------------------------------------------
def measure_lmdb(args, tmp: str, shaped: bool = False) -> dict:
    """Baseline (a): one durable LMDB write transaction with one small put, back to back.

    `shaped` (for information, not a target): each transaction instead makes what one
    Morphz 5-op revise makes, 29 puts over 8 named databases inside a nested transaction,
    a floor for a single client's commit latency with the current storage layout."""
    env = lmdb.open(os.path.join(tmp, "raw-lmdb-shaped" if shaped else "raw-lmdb"),
                    map_size=1 << 30, max_dbs=8, sync=True, metasync=True)
    dbs = [env.open_db(b"t%d" % i) for i in range(8)] if shaped else [None]
    puts = SHAPED_PUTS if shaped else 1
    value = b"v" * (100 if shaped else 64)

    def one(prefix: bytes, i: int) -> None:
        with env.begin(write=True) as txn:
            child = env.begin(write=True, parent=txn) if shaped else txn
            for j in range(puts):
                child.put(b"%s%012d-%02d" % (prefix, i, j), value, db=dbs[j % len(dbs)])
            if shaped:
                child.commit()

    lat, i = [], 0
    what = "raw LMDB, Morphz-shaped txn" if shaped else "raw LMDB"
    try:
        t_end = time.perf_counter() + args.warmup
        while time.perf_counter() < t_end:  # warm-up: file growth, page cache
            one(b"warm", i)
            i += 1
        with Progress(what, args.seconds):
            t_end = time.perf_counter() + args.seconds
            while True:
                s = time.perf_counter()
                if s >= t_end:
                    break
                one(b"key", i)
                lat.append(time.perf_counter() - s)
                i += 1
        name = ("raw LMDB 29 puts/8 DBs (info)" if shaped else "raw LMDB durable commit")
        return summarize(lat, args.seconds, name=name, inflight=1, txns_per_op=1.0)
    finally:
        env.close()


def drive(args, what: str, driver, specs: list[dict], server,
          store_path: str = "", indexing: Optional["IndexWait"] = None) -> dict:
    """Run `driver` over `specs`; sample the server's CPU (and LMDB txn id) over the window.

    `server` is a ServerProcess or {name: ServerProcess} (a split cluster): CPU is summed
    over the processes, and also given per process. With `indexing` (an IndexWait on the
    contexts the load uses), CPU is also counted from `go` (recall caught up with the
    untimed set-up) until recall has indexed every commit of the load, and divided by
    those commits (the contexts' heads before and after, warm-up included), less the CPU
    of the waiting's own InspectIndex calls: all the server CPU a commit causes, its
    indexing included."""
    procs = server if isinstance(server, dict) else {"server": server}

    def cpu() -> dict[str, float]:
        return {k: p.cpu_seconds() for k, p in procs.items()}

    def usage() -> dict[str, tuple[float, float, int]]:  # (all, system, switches)
        return {k: p.usage() for k, p in procs.items()}  # one /proc walk a process
    start: dict = {}

    def before() -> None:
        if indexing is not None:
            start["settled"] = indexing.wait()
            indexing.calls = 0
        start["cpu"] = cpu()

    def during() -> dict:
        time.sleep(args.warmup)
        t0, x0 = usage(), last_txnid(store_path)
        with Progress(what, args.seconds):
            time.sleep(args.seconds)
        t1, x1 = usage(), last_txnid(store_path)
        return {"cpu": {k: t1[k][0] - t0[k][0] for k in t1},
                "kernel": sum(t1[k][1] - t0[k][1] for k in t1),
                "switches": sum(t1[k][2] - t0[k][2] for k in t1),
                "txns": x1 - x0, "end": time.monotonic()}
    res, seen = run_drivers(driver, specs, during=during, before=before)
    n = len(res.latencies_s)
    window_cpu = sum(seen["cpu"].values())
    extra = {"server_cpu_ms_per_op": window_cpu / n * 1e3 if n else float("nan"),
             "server_cpu_util": window_cpu / args.seconds,
             "server_kernel_share": seen["kernel"] / window_cpu if window_cpu else float("nan"),
             "server_switches_per_op": seen["switches"] / n if n else float("nan"),
             "client_cpu_util": res.cpu_s / args.seconds}
    if len(procs) > 1:
        extra["process_cpu_util"] = {k: v / args.seconds for k, v in seen["cpu"].items()}
    if store_path:
        # Read over the same window as the CPU; commits in it ~ n (windows match to a few ms).
        extra["lmdb_txns"] = seen["txns"]
        extra["txns_per_op"] = seen["txns"] / n if n else float("nan")
    if indexing is not None:
        with Progress(f"{what}: recall catching up", indexing.bound):
            done = indexing.wait()
        calls = indexing.calls
        spent = {k: v - start["cpu"][k] for k, v in cpu().items()}
        # The waiting's own InspectIndex calls are not the commits' cost: take them out.
        polls = {k: calls * v for k, v in indexing.call_cost(cpu).items()}
        spent = {k: v - polls[k] for k, v in spent.items()}
        commits = done["head"] - start["settled"]["head"]
        per = (lambda v: v / commits * 1e3) if commits else (lambda v: float("nan"))
        extra.update(indexed_commits=commits,
                     caught_up=done["caught_up"] and start["settled"]["caught_up"],
                     catch_up_s=done["at"] - seen["end"],
                     cpu_ms_per_commit_indexed=per(sum(spent.values())),
                     process_cpu_ms_per_commit={k: per(v) for k, v in spent.items()},
                     inspect_calls=calls,
                     inspect_cpu_ms_per_commit_removed=per(sum(polls.values())))
    if res.errors:
        extra["errors"] = res.errors
    if res.tags:
        extra["receipts"] = res.tags
    return summarize(res.latencies_s, args.seconds, **extra)


class IndexWait:
    """Waits (at most `bound` seconds) until the recall service at `address` has indexed
    every commit of `contexts` (InspectIndex: lag 0 for each). While the replica has
    not yet taken every change of the feed (feed_lag past feed_held), only one context is
    asked, at growing intervals (0.02 s up to `poll` s); then each context not yet seen at
    lag 0. An inspection applies the changes the replica holds back for its context (as
    a search would), which is indexing work and counted so. `calls` counts the
    InspectIndex calls, whose server CPU `call_cost` measures (to take it out)."""

    def __init__(self, address: str, contexts: list[str], bound: float = 120.0,
                 poll: float = 0.2) -> None:
        from morphz.services.recall.client import RecallClient
        self.contexts, self.bound, self.poll = list(contexts), bound, poll
        self.calls = 0
        self._channel = grpc.insecure_channel(address)
        self._recall = RecallClient(self._channel, timeout=30)

    def _inspect(self, context: str) -> dict:
        self.calls += 1
        return self._recall.inspect(context)

    def wait(self) -> dict:
        """{"caught_up", "at" (time.monotonic() when seen), "head" (the contexts' heads
        summed: commits so far)}."""
        deadline = time.monotonic() + self.bound
        heads: dict[str, int] = {}
        pending, pause = list(self.contexts), 0.02
        while True:
            st = self._inspect(pending[0])
            if st["feed_lag"] <= st.get("feed_held", 0) and not st["lag"]:
                still = []
                for c in pending:
                    st = self._inspect(c)
                    heads[c] = st["head"]
                    if st["lag"]:
                        still.append(c)
                pending = still
                if not pending:
                    return {"caught_up": True, "at": time.monotonic(),
                            "head": sum(heads.values())}
            if time.monotonic() > deadline:
                at = time.monotonic()
                for c in pending:
                    heads[c] = self._inspect(c)["head"]
                log(f"    recall not caught up after {self.bound:g} s: {len(pending)} "
                    "context(s) behind")
                return {"caught_up": False, "at": at, "head": sum(heads.values())}
            time.sleep(pause)
            pause = min(self.poll, pause * 1.5)

    def call_cost(self, cpu, n: int = 20) -> dict[str, float]:
        """Server CPU seconds of one InspectIndex, by process (`cpu()` reads them), from
        `n` calls made while idle."""
        c0 = cpu()
        for _ in range(n):
            self._recall.inspect(self.contexts[0])
        return {k: (v - c0[k]) / n for k, v in cpu().items()}

    def close(self) -> None:
        self._channel.close()


def last_txnid(store_path: str) -> int:
    """Id of the last committed LMDB write transaction (nested ones share their parent's),
    read from another process without disturbing the server."""
    if not store_path:
        return 0
    env = lmdb.open(store_path, readonly=True, lock=True, max_dbs=0, subdir=True)
    try:
        return env.info()["last_txnid"]
    finally:
        env.close()


def specs_for(args, address: str, inflight: int, **extra) -> list[dict]:
    specs, first = [], 0
    for n in split(inflight, args.driver_procs):
        specs.append({"address": address, "inflight": n, "first": first,
                      "seconds": args.seconds, "warmup": args.warmup, **extra})
        first += n
    return specs


def measure_echo(args, mode: str, inflight: int) -> dict:
    """Baseline (b): a bare echo service in its own process, `inflight` calls at once."""
    with ServerProcess([sys.executable, os.path.abspath(__file__), "--echo-server", mode]) as srv:
        name = f"echo ({'grpc.aio' if mode == 'aio' else 'threaded'} server)"
        r = drive(args, f"{name} x{inflight}", echo_driver,
                  specs_for(args, srv.address, inflight), srv)
        return {"name": name, "inflight": inflight, **r}


def measure_floor(args, tmp: str, mode: str, inflight: int) -> dict:
    """Information: the floor of a Python gRPC commit service (see serve_floor)."""
    path = os.path.join(tmp, f"floor-lmdb-{mode}-{inflight}")
    with ServerProcess([sys.executable, os.path.abspath(__file__), "--floor-server", path,
                        mode]) as srv:
        name = f"floor: {'grpc.aio' if mode == 'aio' else 'threaded'} + shaped LMDB txn (info)"
        r = drive(args, f"floor x{inflight}", echo_driver, specs_for(args, srv.address, inflight),
                  srv, path)
        return {"name": name, "inflight": inflight, **r}


def measure_core(args, tmp: str) -> dict:
    """Information: CPU per commit of the transaction core (the logic the floor lacks)."""
    from morphz.services.storage.lmdb import LmdbStore
    from morphz.services.transaction.convert import commit_to_proto
    from morphz.services.transaction.core.engine import TransactionCore
    from morphz.shared.auth import IN_PROCESS_CALLER
    store = LmdbStore(os.path.join(tmp, "core-lmdb"), sync=False)
    try:
        core = TransactionCore(store)
        core.create_context("core", caller=IN_PROCESS_CALLER)
        frames = [f"w0-f{j}" for j in range(OPS_PER_TX)]
        base = core.commit("core", tx_text(0, frames, "create", 0),
                           caller=IN_PROCESS_CALLER).revision
        lat, cpu, i = [], 0.0, 0
        t_end = time.perf_counter() + args.warmup + args.seconds
        with Progress("transaction core in-process", args.warmup + args.seconds):
            while time.perf_counter() < t_end:
                i += 1
                s, c = time.perf_counter(), time.process_time()
                receipt = core.commit("core", tx_text(base, frames, "revise", i),
                                      caller=IN_PROCESS_CALLER)
                commit_to_proto(receipt)  # the reply message, as the servicer makes it
                if i > 50:  # the first ones warm caches
                    lat.append(time.perf_counter() - s)
                    cpu += time.process_time() - c
                base = receipt.revision
        n = len(lat)
        return {"name": "core: in-process, no fsync (info)", "inflight": 1,
                **summarize(lat, sum(lat), server_cpu_ms_per_op=cpu / n * 1e3 if n else 0.0)}
    finally:
        store.close()


def create_contexts(address: str, names: list[str]) -> None:
    from morphz.services.transaction.client import TransactionClient
    with grpc.insecure_channel(address) as channel:
        client = TransactionClient(channel)
        for name in names:
            client.create_context(name)


@dataclass
class Topology:
    """Where commit load goes: the transaction service's address, the recall service's
    that reports indexing ("" = do not wait for it), the server processes whose CPU is
    summed, and the LMDB store whose write transactions are counted."""
    name: str
    transaction: str
    recall: str
    processes: dict
    store: str


def all_in_one(srv: ServerProcess, data: str, name: str = "morphz") -> Topology:
    return Topology(name, srv.address, srv.address, {"all-in-one": srv},
                    os.path.join(data, "store"))


def measure_commit(args, topo: Topology, inflight: int, contexts: int, label: str) -> dict:
    """`inflight` clients committing 5-op transactions to `contexts` contexts; with
    topo.recall, CPU counted until recall has indexed them too (see drive)."""
    names = [f"bench-{label}-{i}" for i in range(contexts)]
    create_contexts(topo.transaction, names)
    where = "1 context" if contexts == 1 else f"{contexts} contexts"
    name = f"{topo.name} commit, {where}"
    indexing = IndexWait(topo.recall, names, args.catchup_bound) if topo.recall else None
    try:
        r = drive(args, f"{name} x{inflight}", commit_driver,
                  specs_for(args, topo.transaction, inflight, contexts=names),
                  topo.processes, topo.store, indexing)
    finally:
        if indexing is not None:
            indexing.close()
    return {"name": name, "inflight": inflight, **r}


MORPHZ_ROWS = (("commit-1", 1, 1), ("commit-64x1", 64, 1), ("commit-64x64", 64, 64))


def measure_morphz(args, topo: Topology, rows: dict, prefix: str = "") -> None:
    """The three commit rows (1 in flight, 64 on one context, 64 over 64 contexts) into
    rows[prefix + key]."""
    for key, n, contexts in MORPHZ_ROWS:
        log(f"  {topo.name}, {n} in flight, {contexts} context(s)")
        rows[prefix + key] = measure_commit(args, topo, n, contexts, prefix + key)


def profile_server(args, tmp: str) -> None:
    """cProfile the server under N in flight on one context; print the
    top functions and each thread's CPU, and save the stats to args.profile."""
    import pstats
    data = os.path.join(tmp, "morphz-profiled")
    n = args.profile_inflight
    log(f"== profiling the server: {n} in flight, one context (cProfile, {args.profile_clock} "
        "clock)")
    idle = "" if args.recall_idle is None else str(args.recall_idle)
    srv = ServerProcess([sys.executable, os.path.abspath(__file__), "--profiled-server", data,
                         args.profile, args.profile_clock, idle],
                        log_path=os.path.join(tmp, "profiled-server.log"))
    try:
        topo = all_in_one(srv, data, "morphz (profiled)")
        topo.recall = ""  # the profile is of the commit path: no waiting for the index
        r = measure_commit(args, topo, n, 1, "profile")
    finally:
        srv.stop()
    log(f"  profiled run: {r['ops_per_s']:.0f} commits/s, server CPU "
        f"{r['server_cpu_ms_per_op']:.2f} ms/commit (profiler overhead included)")
    stats = pstats.Stats(args.profile, stream=sys.stderr)
    log(f"  CPU inside RPC work items (whole server life): {stats.total_tt:.2f} s; "
        f"stats in {args.profile}")
    with open(args.profile + ".threads.json") as f:
        threads = json.load(f)
    total = sum(threads.values())
    log("  server CPU by thread (whole life, profiler overhead inflates the handlers):")
    for name, cpu in sorted(threads.items(), key=lambda kv: -kv[1]):
        if cpu >= 0.01:
            log(f"    {cpu:7.2f} s  {100 * cpu / total:5.1f}%  {name}")
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)


def spy_server(args, tmp: str) -> None:
    """Sample the whole server (every thread: gRPC handlers, group commit, recall's feed
    follower) with py-spy while N clients commit (on --profile-contexts contexts) and
    recall catches up, counting the thread that holds the GIL (C work done without the
    GIL, an fsync say, is not seen);
    print the top functions by own samples and by samples under them (on-CPU only)."""
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(spy):
        raise SystemExit("--spy needs py-spy (python -m pip install py-spy)")
    data = os.path.join(tmp, "morphz-spied")
    n, contexts = args.profile_inflight, args.profile_contexts
    log(f"== sampling the server with py-spy: {n} in flight, {contexts} context(s), recall "
        "included")
    with ServerProcess([MORPHZ, "serve", "--listen", "127.0.0.1:0", "--data", data,
                        *serve_flags(args)],
                       log_path=os.path.join(tmp, "spied-server.log")) as srv:
        import subprocess
        rec = subprocess.Popen([spy, "record", "--pid", str(srv.pid), "--rate",
                                str(args.spy_rate), "--format", "raw", "--output", args.spy,
                                # the thread holding the GIL only (a blocked one is not
                                # work), sampled without pausing the server
                                "--gil", "--nonblocking"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            r = measure_commit(args, all_in_one(srv, data, "morphz (sampled)"), n, contexts,
                               "spy")
        finally:
            rec.send_signal(signal.SIGINT)
            rec.wait(30)
    log(f"  sampled run: {r['ops_per_s']:.0f} commits/s, "
        f"{r['cpu_ms_per_commit_indexed']:.2f} ms CPU/commit+idx (sampler overhead included)")
    print_spy(args.spy, args.spy_top)


# -- report -----------------------------------------------------------------------------------
COLUMNS = [("name", "measurement"), ("inflight", "in flight"), ("ops_per_s", "ops/s"),
           ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("server_cpu_ms_per_op", "srv CPU ms/op"),
           ("server_cpu_util", "srv CPU"), ("server_kernel_share", "srv sys"),
           ("server_switches_per_op", "switches/op"), ("client_cpu_util", "cli CPU"),
           ("txns_per_op", "LMDB txns/op"), ("cpu_ms_per_commit_indexed", "CPU ms/commit+idx"),
           ("catch_up_s", "idx caught up s")]


def verdict(rows: dict, prefix: str = "", label: str = "", info: bool = True) -> list[dict]:
    """Issue 14's three targets for the rows prefix + commit-*, each taken at its strictest:
    the most CPU per commit (indexing included) of the three rows, the slower of the two
    64-in-flight rows against the faster floor service, the 1-client p50 against the floor
    service with the lower p50. `info`: each row's own figures too, not targets."""
    floor64 = max((rows["floor-aio-64"], rows["floor-sync-64"]), key=lambda r: r["ops_per_s"])
    floor1 = min((rows["floor-aio-1"], rows["floor-sync-1"]), key=lambda r: r["p50_ms"])
    mine = {key: rows[prefix + key] for key, _, _ in MORPHZ_ROWS}
    cpu = max(r["cpu_ms_per_commit_indexed"] for r in mine.values())
    slow64 = min((mine["commit-64x1"], mine["commit-64x64"]), key=lambda r: r["ops_per_s"])
    out = [{"target": f"{label}server CPU per 5-op commit incl. recall indexing "
            "(all processes)", "value": cpu, "goal": f"<= {TARGET_CPU_MS} ms",
            "met": cpu <= TARGET_CPU_MS, "unit": " ms"}]
    ratio = slow64["ops_per_s"] / floor64["ops_per_s"]
    out.append({"target": f"{label}64-in-flight commits/s / floor 64-in-flight calls/s",
                "value": ratio, "goal": f">= {TARGET_THROUGHPUT}",
                "met": ratio >= TARGET_THROUGHPUT})
    ratio = mine["commit-1"]["p50_ms"] / floor1["p50_ms"]
    out.append({"target": f"{label}1-client commit p50 / floor p50", "value": ratio,
                "goal": f"<= {TARGET_LATENCY}", "met": ratio <= TARGET_LATENCY})
    if info:
        for r in mine.values():
            out.append({"info": f"{label}{r['name']} x{r['inflight']}: "
                        f"{r['cpu_ms_per_commit_indexed']:.2f} ms CPU/commit+idx, "
                        f"{r['ops_per_s'] / floor64['ops_per_s']:.2f} x floor x64 calls/s, "
                        f"p50 {r['p50_ms'] / floor1['p50_ms']:.2f} x floor x1 p50"})
    return out


def print_verdicts(verdicts: list[dict]) -> None:
    for v in verdicts:
        if "info" in v:
            print(f"(info) {v['info']}")
        else:
            target(v["target"], v["value"], v["goal"], v["met"], v.get("unit", ""))


def print_notes(rows: list[dict]) -> None:
    """Per commit row: receipts, errors, group commit, and whether recall caught up."""
    for r in rows:
        notes = []
        if r.get("receipts"):
            notes.append("receipts " + ", ".join(f"{k} {v}" for k, v in r["receipts"].items()))
        if r.get("errors"):
            notes.append("ERRORS " + ", ".join(f"{k} {v}" for k, v in r["errors"].items()))
        if r.get("txns_per_op"):
            notes.append(f"{1 / r['txns_per_op']:.1f} commits per LMDB write txn (fsync)")
        if "indexed_commits" in r:
            notes.append(f"{r['indexed_commits']} commits indexed"
                         + ("" if r["caught_up"] else " (recall NOT caught up: bound reached)"))
        print(f"{r['name']} x{r['inflight']}: " + "; ".join(notes))


def report(rows: dict, verdicts: list[dict]) -> None:
    print(table(list(rows.values()), COLUMNS))
    print()
    print_verdicts(verdicts)
    print_notes([rows[key] for key, _, _ in MORPHZ_ROWS])
    print('"CPU ms/commit+idx": server CPU from the start of the load until recall had '
          'indexed it all, per commit; "idx caught up s": from the window\'s end')


def measure_baselines(args, tmp: str, rows: dict, info: bool = True) -> None:
    """raw LMDB, the echo and the floor servers (and, `info`, the shaped raw LMDB loop
    and the transaction core alone), into `rows`."""
    log("  raw LMDB durable commit loop")
    rows["lmdb"] = measure_lmdb(args, tmp)
    if info:
        log("  raw LMDB loop shaped like a Morphz commit (information)")
        rows["lmdb-shaped"] = measure_lmdb(args, tmp, shaped=True)
    for mode in ("aio", "sync"):
        for n in (1, 64):
            log(f"  echo, {mode} server, {n} in flight")
            rows[f"echo-{mode}-{n}"] = measure_echo(args, mode, n)
    if info:
        log("  transaction core alone, in this process (no gRPC, no fsync)")
        rows["core"] = measure_core(args, tmp)
    for mode in ("aio", "sync"):
        for n in (1, 64):
            log(f"  floor: {mode} echo server making a Morphz-shaped durable LMDB txn, "
                f"{n} in flight")
            rows[f"floor-{mode}-{n}"] = measure_floor(args, tmp, mode, n)


def measure_all(args, tmp: str) -> None:
    """Every measurement, then the table, the verdict and the JSON."""
    rows: dict[str, dict] = {}
    log(f"== commit benchmark: {args.seconds:g} s per measurement, data in {tmp}, "
        f"{os.cpu_count()} CPUs")
    measure_baselines(args, tmp, rows)
    data = os.path.join(tmp, "morphz")
    with ServerProcess([MORPHZ, "serve", "--listen", "127.0.0.1:0", "--data", data,
                        *serve_flags(args)],
                       log_path=os.path.join(tmp, "morphz-server.log")) as srv:
        log(f"  {srv.first_line}")
        measure_morphz(args, all_in_one(srv, data), rows)
    verdicts = verdict(rows)
    report(rows, verdicts)
    if args.json:
        write_json(args.json, {"seconds": args.seconds, "cpus": os.cpu_count(),
                               "results": rows, "targets": verdicts})


def load_options(ap: argparse.ArgumentParser) -> None:
    """The options of a commit-load benchmark (this one and split.py)."""
    ap.add_argument("--seconds", type=float, default=5.0, help="per measurement (default 5)")
    ap.add_argument("--warmup", type=float, default=1.0, help="untimed seconds before each")
    ap.add_argument("--quick", action="store_true", help="1.5 s per measurement, 0.5 s warm-up")
    ap.add_argument("--driver-procs", type=int, default=1,
                    help="client processes sharing the in-flight calls (default 1)")
    ap.add_argument("--catchup-bound", type=float, default=120.0, metavar="S",
                    help="longest wait for recall to index a window's commits (default 120)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ap.add_argument("--recall-idle", type=float, metavar="S",
                    help="morphz serve --recall-idle (default: the server's; 0 indexes every "
                    "commit as it comes, as before recall held unread contexts' changes)")
    ap.add_argument("--data", help="parent directory for the LMDB files (default: $TMPDIR)")


def serve_flags(args) -> list[str]:
    """`morphz serve` flags the benchmark was asked to pass (else the server's defaults)."""
    return [] if args.recall_idle is None else ["--recall-idle", str(args.recall_idle)]


def quick(args) -> None:
    if args.quick:
        args.seconds, args.warmup = min(args.seconds, 1.5), min(args.warmup, 0.5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    load_options(ap)
    ap.add_argument("--profile", metavar="PATH",
                    help="then cProfile the server under load; pstats to PATH")
    ap.add_argument("--profile-inflight", type=int, default=64, metavar="N",
                    help="clients in flight while profiling (default 64)")
    ap.add_argument("--profile-contexts", type=int, default=1, metavar="N",
                    help="with --spy: contexts the clients commit to (default 1)")
    ap.add_argument("--profile-only", action="store_true",
                    help="with --profile/--spy: skip the measurements, only profile")
    ap.add_argument("--spy", metavar="PATH",
                    help="then sample the whole server with py-spy (raw stacks to PATH)")
    ap.add_argument("--spy-rate", type=int, default=200, help="py-spy samples/s (default 200)")
    ap.add_argument("--spy-top", type=int, default=10, help="functions listed (default 10)")
    ap.add_argument("--echo-server", choices=("aio", "sync"), help=argparse.SUPPRESS)
    ap.add_argument("--profile-clock", choices=("cpu", "wall"), default="cpu",
                    help="cProfile timer: thread CPU time (default) or wall clock")
    ap.add_argument("--profiled-server", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--floor-server", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.echo_server:
        serve_echo(args.echo_server)
        return 0
    if args.floor_server:
        serve_floor(*args.floor_server)
        return 0
    if args.profiled_server:
        serve_profiled(*args.profiled_server)
        return 0
    quick(args)
    tmp = tempfile.mkdtemp(prefix="morphz-bench-commit-", dir=args.data)
    try:
        if not ((args.profile or args.spy) and args.profile_only):
            measure_all(args, tmp)
        if args.profile:
            profile_server(args, tmp)
        if args.spy:
            spy_server(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
