"""Compile latency of the Context Encoding as the history grows (run: scripts/bench encoding).

One context per history size (1k, 10k, 100k events) holds the same active set: the
same active observations and, in turn, 1k then 10k active frames. The history is
tool results in another session, digested and retired in batches of 1000, as a
long-lived agent's would be. Each timed compile is the whole thing: claim an
activation, read the inbox index and the frames, render, record the snapshot.

The sizes are timed round-robin (one compile of each per round), so load on the
machine hits every size alike, and growth is the median of per-round ratios. Wall
and process CPU time are both reported. The claim: compile time follows what is
rendered, not the history (100k events within 1.5x of 10k at the same active set).

  scripts/bench encoding                      # 1k/10k/100k events x 1k/10k frames
  scripts/bench encoding -- --quick           # 1k/10k events x 1k frames, 10 samples
  scripts/bench encoding -- --events 1000,100000 --frames 1000 --samples 50
  scripts/bench encoding -- --grpc            # through the all-in-one server over gRPC
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import log, percentile  # noqa: E402

from morphz.shared.auth import IN_PROCESS_CALLER
from morphz.services.encoding.client import EncodingClient
from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.encoding.core.options import MAX_BUDGET_BYTES
from morphz.services.server.app import AllInOne, ServerConfig
from morphz.services.storage.lmdb_store import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore

SESSION, BULK = "s1", "bulk"
FRAMES_PER_TX = 250
RETIRE_PER_TX = 1000


def ints(text: str) -> list[int]:
    return sorted({int(x) for x in text.split(",") if x})


class Bench:
    def __init__(self, args: argparse.Namespace, data: str) -> None:
        self.args = args
        if args.grpc:
            self.app = AllInOne(ServerConfig(data_dir=data, listen="127.0.0.1:0", sync=False,
                                             map_size=1 << 32)).start()
            self.tx = self.app.transactions
            self.channel = grpc.insecure_channel(
                f"127.0.0.1:{self.app.port}",
                options=[("grpc.max_receive_message_length", 64 << 20)])
            self.enc = EncodingClient(self.channel, timeout=120)
            self.as_caller = {}  # the channel's credentials speak for the client
        else:
            self.app = None
            self.store = LmdbStore(os.path.join(data, "store"), map_size=1 << 32, sync=False)
            self.tx = TransactionCore(self.store)
            self.enc = EncodingCore(self.store, self.tx)
            self.as_caller = {"caller": IN_PROCESS_CALLER}

    def close(self) -> None:
        if self.app is not None:
            self.channel.close()
            self.app.stop(grace=1)
        else:
            self.store.close()

    def commit(self, ctx: str, ops: str, reason: str = "") -> None:
        rev = self.tx.status(ctx, caller=IN_PROCESS_CALLER)["revision"]
        r = f' (reason "{reason}")' if reason else ""
        self.tx.commit(ctx, f"(context-tx (base-version {rev}){r} {ops})",
                       caller=IN_PROCESS_CALLER)

    def setup(self, ctx: str) -> None:
        self.tx.create_context(ctx, caller=IN_PROCESS_CALLER)
        for i in range(self.args.active):
            self.tx.append_event(ctx, SESSION, "tool-result" if i else "user-message",
                                 f"active observation {i}: " + "result line " * 12,
                                 caller=IN_PROCESS_CALLER)
        self.tx.activate(ctx, SESSION, caller=IN_PROCESS_CALLER)

    def add_frames(self, ctx: str, have: int, frames: int) -> None:
        for start in range(have, frames, FRAMES_PER_TX):
            ops = " ".join(f'(create f{i} (goal "keep {i}") (stage s{i % 7}) (from-bench yes))'
                           for i in range(start, min(frames, start + FRAMES_PER_TX)))
            self.commit(ctx, ops)
        log(f"  {ctx}: {frames} frames")

    def grow(self, ctx: str, target: int) -> None:
        """Append digested tool results until the history holds `target` events."""
        have = self.tx.status(ctx, caller=IN_PROCESS_CALLER)["event_count"]
        batch: list[str] = []
        t0, last = time.perf_counter(), 0.0
        while have < target:
            r = self.tx.append_event(ctx, BULK, "tool-result", f"bulk log {have}: ok",
                                     caller=IN_PROCESS_CALLER)
            batch.append(r["ref"])
            have += 1
            if len(batch) == RETIRE_PER_TX or have >= target:
                self.commit(ctx, f"(retire {' '.join(batch)})", reason="digested")
                have += 1  # the retire transaction is an event too
                batch = []
            if time.perf_counter() - last > 5:
                last = time.perf_counter()
                log(f"  history {have}/{target} events ({have / (last - t0):.0f}/s)")

    def measure(self, ctxs: list[str]) -> dict:
        """Round-robin compiles; per context: wall ms, CPU ms and encoding size."""
        out = {c: {"wall": [], "cpu": [], "bytes": 0} for c in ctxs}
        for i in range(self.args.warmup + self.args.samples):
            for c in ctxs:
                w, p = time.perf_counter(), time.process_time()
                e = self.enc.compile(c, SESSION, budget_bytes=MAX_BUDGET_BYTES,
                                     **self.as_caller)
                w, p = time.perf_counter() - w, time.process_time() - p
                if i >= self.args.warmup:
                    out[c]["wall"].append(w * 1000)
                    out[c]["cpu"].append(p * 1000)
                out[c]["bytes"] = e["bytes"]
            if i and i % 10 == 0:
                log(f"  round {i}/{self.args.warmup + self.args.samples}")
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=ints, default=[1000, 10000, 100000],
                    help="history sizes, comma separated (default: 1000,10000,100000)")
    ap.add_argument("--frames", type=ints, default=[1000, 10000],
                    help="active frame counts, comma separated (default: 1000,10000)")
    ap.add_argument("--active", type=int, default=100, help="active observations (default 100)")
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--quick", action="store_true",
                    help="1k and 10k events, 1k frames, 10 samples")
    ap.add_argument("--grpc", action="store_true", help="compile over gRPC (all-in-one)")
    ap.add_argument("--data", help="data directory (default: a temporary one, removed)")
    args = ap.parse_args()
    if args.quick:
        args.events, args.frames, args.samples = [1000, 10000], [1000], 10
    data = args.data or tempfile.mkdtemp(prefix="morphz-bench-encoding-")
    bench = Bench(args, data)
    ctxs = {n: f"bench-e{n}" for n in args.events}
    rows = []
    try:
        for n, ctx in ctxs.items():
            log(f"== history of {n} events in {ctx}")
            bench.setup(ctx)
            bench.grow(ctx, n)
        have = 0
        for frames in args.frames:
            for ctx in ctxs.values():
                bench.add_frames(ctx, have, frames)
            have = frames
            log(f"== timing {frames} frames, {args.active} active observations")
            got = bench.measure(list(ctxs.values()))
            for n, ctx in ctxs.items():
                g = got[ctx]
                rows.append({"frames": frames, "events": n,
                             "history": bench.tx.status(ctx)["event_count"],
                             "p50": statistics.median(g["wall"]),
                             "p99": percentile(g["wall"], 99),
                             "cpu": statistics.median(g["cpu"]), "bytes": g["bytes"],
                             "wall": g["wall"], "cpus": g["cpu"]})
    finally:
        bench.close()
        if not args.data:
            shutil.rmtree(data, ignore_errors=True)
    mode = "gRPC all-in-one" if args.grpc else "in-process core over LMDB"
    print(f"encoding compile latency ({mode}; {args.samples} rounds after {args.warmup} "
          f"warm-up; sizes timed round-robin; load average {os.getloadavg()[0]:.1f})")
    print(f"{'frames':>7} {'events':>8} {'p50 ms':>8} {'p99 ms':>8} {'cpu p50':>8} "
          f"{'bytes':>10} {'vs 10k (paired)':>16}")
    for r in rows:
        ref = next((x for x in rows if x["frames"] == r["frames"] and x["events"] == 10000),
                   None)
        ratio = "-"
        if ref is not None:
            ratio = f"{statistics.median(a / b for a, b in zip(r['wall'], ref['wall'])):.2f}x"
        print(f"{r['frames']:>7} {r['history']:>8} {r['p50']:>8.1f} {r['p99']:>8.1f} "
              f"{r['cpu']:>8.1f} {r['bytes']:>10} {ratio:>16}")
    for frames in args.frames:
        by = {r["events"]: r for r in rows if r["frames"] == frames}
        if 10000 in by and 100000 in by:
            wall = statistics.median(a / b for a, b in zip(by[100000]["wall"], by[10000]["wall"]))
            cpu = statistics.median(a / b for a, b in zip(by[100000]["cpus"], by[10000]["cpus"]))
            print(f"growth 10k -> 100k events at {frames} frames: wall {wall:.2f}x, cpu "
                  f"{cpu:.2f}x (target <= 1.5x: {'ok' if wall <= 1.5 else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
