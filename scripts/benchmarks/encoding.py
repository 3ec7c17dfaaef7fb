"""Compile latency of the Context Encoding as the history grows (run: scripts/bench encoding).

For each frame count F, one context gets F active frames and a fixed active set of
observations; its history then grows through 1k, 10k, 100k events (tool results in
another session, digested and retired in batches, as a long-lived agent's would be).
At each size the benchmark times full compiles: claim an activation, read the inbox
index and the frames, render, record the snapshot. The claim: compile time follows
what is rendered, not the history, so the 100k row should stay within 1.5x of 10k.

  scripts/bench encoding                      # 1k/10k/100k events x 1k/10k frames
  scripts/bench encoding -- --quick           # 1k/10k events x 1k frames, fewer samples
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

from morphz.services.encoding.client import EncodingClient
from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.encoding.core.options import MAX_BUDGET_BYTES
from morphz.services.server.app import AllInOne, ServerConfig
from morphz.services.storage.lmdb_store import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore

SESSION, BULK = "s1", "bulk"
FRAMES_PER_TX = 250
RETIRE_PER_TX = 1000


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ints(text: str) -> list[int]:
    return sorted({int(x) for x in text.split(",") if x})


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))]


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
        else:
            self.app = None
            self.store = LmdbStore(os.path.join(data, "store"), map_size=1 << 32, sync=False)
            self.tx = TransactionCore(self.store)
            self.enc = EncodingCore(self.store, self.tx)

    def close(self) -> None:
        if self.app is not None:
            self.channel.close()
            self.app.stop(grace=1)
        else:
            self.store.close()

    def commit(self, ctx: str, ops: str, reason: str = "") -> None:
        rev = self.tx.status(ctx)["revision"]
        r = f' (reason "{reason}")' if reason else ""
        self.tx.commit(ctx, f"(context-tx (base-version {rev}){r} {ops})")

    def setup(self, ctx: str, frames: int) -> None:
        self.tx.create_context(ctx)
        for i in range(self.args.active):
            self.tx.append_event(ctx, SESSION, "tool-result" if i else "user-message",
                                 f"active observation {i}: " + "result line " * 12)
        self.tx.activate(ctx, SESSION)
        for start in range(0, frames, FRAMES_PER_TX):
            ops = " ".join(f'(create f{i} (goal "keep {i}") (stage s{i % 7}) (from-bench yes))'
                           for i in range(start, min(frames, start + FRAMES_PER_TX)))
            self.commit(ctx, ops)
            log(f"  frames {min(frames, start + FRAMES_PER_TX)}/{frames}")

    def grow(self, ctx: str, target: int) -> None:
        """Append digested tool results until the history holds `target` events."""
        have = self.tx.status(ctx)["event_count"]
        batch: list[str] = []
        t0, last = time.perf_counter(), 0.0
        while have < target:
            r = self.tx.append_event(ctx, BULK, "tool-result", f"bulk log {have}: ok")
            batch.append(r["ref"])
            have += 1
            if len(batch) == RETIRE_PER_TX or have >= target:
                self.commit(ctx, f"(retire {' '.join(batch)})", reason="digested")
                have += 1  # the retire transaction is an event too
                batch = []
            if time.perf_counter() - last > 5:
                last = time.perf_counter()
                log(f"  history {have}/{target} events ({have / (last - t0):.0f}/s)")

    def measure(self, ctx: str) -> tuple[list[float], int]:
        times, size = [], 0
        for i in range(self.args.warmup + self.args.samples):
            t = time.perf_counter()
            e = self.enc.compile(ctx, SESSION, budget_bytes=MAX_BUDGET_BYTES)
            dt = time.perf_counter() - t
            if i >= self.args.warmup:
                times.append(dt * 1000)
            size = e["bytes"]
        return times, size


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
    rows = []
    try:
        for frames in args.frames:
            ctx = f"bench-f{frames}"
            log(f"== {frames} frames, {args.active} active observations")
            bench.setup(ctx, frames)
            for events in args.events:
                bench.grow(ctx, events)
                have = bench.tx.status(ctx)["event_count"]
                log(f"  timing compile at {have} events ...")
                times, size = bench.measure(ctx)
                rows.append((frames, events, have, statistics.median(times),
                             percentile(times, 99), size))
                log(f"  p50 {rows[-1][3]:.1f} ms  p99 {rows[-1][4]:.1f} ms")
    finally:
        bench.close()
        if not args.data:
            shutil.rmtree(data, ignore_errors=True)
    mode = "gRPC all-in-one" if args.grpc else "in-process core, LMDB"
    print(f"encoding compile latency ({mode}; {args.samples} samples after {args.warmup} "
          f"warm-up; active set fixed per frame count)")
    print(f"{'frames':>7} {'events':>8} {'p50 ms':>8} {'p99 ms':>8} {'bytes':>10} "
          f"{'p50 vs 10k':>11}")
    for frames, events, have, p50, p99, size in rows:
        ref = next((r[3] for r in rows if r[0] == frames and r[1] == 10000), None)
        ratio = f"{p50 / ref:.2f}x" if ref else "-"
        print(f"{frames:>7} {have:>8} {p50:>8.1f} {p99:>8.1f} {size:>10} {ratio:>11}")
    for frames in args.frames:
        by = {r[1]: r[3] for r in rows if r[0] == frames}
        if 10000 in by and 100000 in by:
            g = by[100000] / by[10000]
            print(f"growth 10k -> 100k events at {frames} frames: {g:.2f}x "
                  f"(target <= 1.5x: {'ok' if g <= 1.5 else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
