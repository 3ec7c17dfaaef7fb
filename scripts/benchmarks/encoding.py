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
  scripts/bench encoding -- --quick --profile 20   # plus a cProfile top-10 of 20 compiles

In process, each round also times a floor on the encoding just compiled (floor(): one
dict per item, the rows packed, one LMDB put): these machines' speed swings by 2x within
minutes, and compile p50 / floor p50 shows a change of the code apart from the machine's.

The bulk session claims and delivers each batch before it is retired, as a live
agent's would: inputs no activation ever claims stay pending, and the session
directory counts the messages among every session's pending inputs, so --unclaimed
(the history left unclaimed) measures that cost instead of the history's.

Target lines (in process only, where the snapshot write can be timed apart; the
compile times include it, and it is also reported on its own):
  compile of 1,000 active frames p50 <= 10 ms   at the largest history measured
  render speed >= 20 MB/s                       encoding bytes / that p50
  compile p50 at the largest history / at the smallest <= 1.5
      (paired per-round ratios, median; the compile's own work is the same at every
      history size, 1.5 leaves room for deeper B-trees and the machine's noise)
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import os
import shutil
import statistics
import sys
import tempfile
import time

import grpc
import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import log, percentile, target  # noqa: E402

from morphz.shared.auth import IN_PROCESS_CALLER
from morphz.services.encoding.client import EncodingClient
from morphz.services.encoding.core import snapshot_store
from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.encoding.core.row_cache import RowCache
from morphz.services.encoding.core.snapshot import item_rows
from morphz.shared.mind.snapshots import TABLE as SNAPSHOTS
from morphz.services.encoding.core.options import MAX_BUDGET_BYTES
from morphz.services.server.app import AllInOne, ServerConfig
from morphz.services.storage.lmdb import LmdbStore
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
            self.enc = EncodingCore(self.store, self.tx, write_snapshot=self._timed_write,
                                    row_cache=RowCache())
            self.as_caller = {"caller": IN_PROCESS_CALLER}
        self.write_ms = 0.0  # the last compile's snapshot write (in process only)

    def _timed_write(self, store, context: str, record, *rest) -> None:
        t = time.perf_counter()
        snapshot_store.put(store, context, record, *rest)
        self.write_ms = (time.perf_counter() - t) * 1000

    def close(self) -> None:
        if self.app is not None:
            self.channel.close()
            self.app.stop(grace=1)
        else:
            self.store.close()

    def commit(self, ctx: str, ops: str, reason: str = "") -> None:
        rev = self.tx.status(ctx, caller=IN_PROCESS_CALLER).revision
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
        have = self.tx.status(ctx, caller=IN_PROCESS_CALLER).event_count
        batch: list[str] = []
        t0, last = time.perf_counter(), 0.0
        while have < target:
            r = self.tx.append_event(ctx, BULK, "tool-result", f"bulk log {have}: ok",
                                     caller=IN_PROCESS_CALLER)
            batch.append(r.ref)
            have += 1
            if len(batch) == RETIRE_PER_TX or have >= target:
                if not self.args.unclaimed:  # an activation claims them, then delivers
                    act = self.tx.activate(ctx, BULK, caller=IN_PROCESS_CALLER)
                    self.tx.deliver(ctx, act.id, caller=IN_PROCESS_CALLER)
                    have += 2
                self.commit(ctx, f"(retire {' '.join(batch)})", reason="digested")
                have += 1  # the retire transaction is an event too
                batch = []
            if time.perf_counter() - last > 5:
                last = time.perf_counter()
                log(f"  history {have}/{target} events ({have / (last - t0):.0f}/s)")

    def measure(self, ctxs: list[str]) -> dict:
        """Round-robin compiles; per context: wall ms, CPU ms and encoding size; and, in
        process, the floor's wall ms once a round (on the last context's encoding)."""
        out = {c: {"wall": [], "cpu": [], "write": [], "bytes": 0} for c in ctxs}
        out["floor"] = []
        for i in range(self.args.warmup + self.args.samples):
            for c in ctxs:
                w, p = time.perf_counter(), time.process_time()
                e = self.enc.compile(c, SESSION, budget_bytes=MAX_BUDGET_BYTES,
                                     **self.as_caller)
                w, p = time.perf_counter() - w, time.process_time() - p
                if i >= self.args.warmup:
                    out[c]["wall"].append(w * 1000)
                    out[c]["cpu"].append(p * 1000)
                    out[c]["write"].append(self.write_ms)
                out[c]["bytes"] = field(e, "bytes")
            if self.app is None:
                w = time.perf_counter()
                floor(self.store, c, e)
                if i >= self.args.warmup:
                    out["floor"].append((time.perf_counter() - w) * 1000)
            if i and i % 10 == 0:
                log(f"  round {i}/{self.args.warmup + self.args.samples}")
        return out


def field(encoding, name: str):
    """A field of a compile's reply: the core's Encoding, or the gRPC client's dict."""
    return encoding[name] if isinstance(encoding, dict) else getattr(encoding, name)


def floor(store: LmdbStore, context: str, encoding) -> None:
    """Timed beside the compiles as the machine's speed at the time: the least any compile
    of this encoding does in Python, one dict per item as the reply holds them, the items
    packed as the snapshot's rows (snapshot.item_rows) by orjson and stored by one LMDB
    put (beside the compile's own snapshot, under the snapshot's id and a suffix)."""
    items = [dict(it, parts=[dict(p) for p in it["parts"]]) for it in field(encoding, "items")]
    store.put_record(context, SNAPSHOTS, (field(encoding, "snapshot") + "-floor",),
                     orjson.dumps({"text": field(encoding, "text"), "rows": item_rows(items)}))


def profile(bench: "Bench", ctx: str, n: int) -> None:
    """cProfile of `n` compiles of `ctx`: the top 10 by own time and by cumulative time."""
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        bench.enc.compile(ctx, SESSION, budget_bytes=MAX_BUDGET_BYTES, **bench.as_caller)
    pr.disable()
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(pr, stream=out).sort_stats(key).print_stats(10)
        text = out.getvalue()
        print(f"profile of {n} compiles of {ctx}, top 10 by {key}:")
        print(text[text.index("   ncalls"):].rstrip() + "\n")


def paired(a: list[float], b: list[float]) -> float:
    return statistics.median(x / y for x, y in zip(a, b))


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
    ap.add_argument("--unclaimed", action="store_true",
                    help="leave the bulk session's inputs unclaimed (pending) as it grows")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="then profile N compiles at the first frame count, smallest history")
    ap.add_argument("--data", help="data directory (default: a temporary one, removed)")
    args = ap.parse_args()
    if args.quick:
        args.events, args.frames, args.samples = [1000, 10000], [1000], 10
    data = args.data or tempfile.mkdtemp(prefix="morphz-bench-encoding-")
    bench = Bench(args, data)
    ctxs = {n: f"bench-e{n}" for n in args.events}
    rows, floors = [], {}
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
            floors[frames] = got.pop("floor")
            for n, ctx in ctxs.items():
                g = got[ctx]
                rows.append({"frames": frames, "events": n,
                             "history": bench.tx.status(
                                 ctx, caller=IN_PROCESS_CALLER).event_count,
                             "p50": statistics.median(g["wall"]),
                             "p99": percentile(g["wall"], 99),
                             "cpu": statistics.median(g["cpu"]), "bytes": g["bytes"],
                             "write": statistics.median(g["write"]),
                             "bare": statistics.median(w - x for w, x in zip(g["wall"],
                                                                            g["write"])),
                             "wall": g["wall"], "cpus": g["cpu"]})
            if args.profile and frames == args.frames[0]:
                profile(bench, ctxs[args.events[0]], args.profile)
    finally:
        bench.close()
        if not args.data:
            shutil.rmtree(data, ignore_errors=True)
    mode = "gRPC all-in-one" if args.grpc else "in-process core over LMDB"
    print(f"encoding compile latency ({mode}; {args.samples} rounds after {args.warmup} "
          f"warm-up; sizes timed round-robin; bulk inputs "
          f"{'unclaimed' if args.unclaimed else 'claimed'}; "
          f"load average {os.getloadavg()[0]:.1f})")
    print(f"{'frames':>7} {'events':>8} {'p50 ms':>8} {'p99 ms':>8} {'cpu p50':>8} "
          f"{'write p50':>9} {'w/o write':>9} {'bytes':>10} {'vs smallest':>11}")
    for r in rows:
        ref = min((x for x in rows if x["frames"] == r["frames"]), key=lambda x: x["events"])
        write = "-" if args.grpc else f"{r['write']:.1f}"
        bare = "-" if args.grpc else f"{r['bare']:.1f}"
        print(f"{r['frames']:>7} {r['history']:>8} {r['p50']:>8.1f} {r['p99']:>8.1f} "
              f"{r['cpu']:>8.1f} {write:>9} {bare:>9} {r['bytes']:>10} "
              f"{paired(r['wall'], ref['wall']):>10.2f}x")
    for frames in args.frames:
        by = {r["events"]: r for r in rows if r["frames"] == frames}
        lo, hi = by[min(by)], by[max(by)]
        if lo is not hi:
            print(f"growth {lo['history']} -> {hi['history']} events at {frames} frames: wall "
                  f"{paired(hi['wall'], lo['wall']):.2f}x, cpu "
                  f"{paired(hi['cpus'], lo['cpus']):.2f}x")
    if args.grpc or 1000 not in args.frames:
        return 0
    by = {r["events"]: r for r in rows if r["frames"] == 1000}
    lo, hi = by[min(by)], by[max(by)]
    target("compile of 1,000 active frames p50", hi["p50"], "<= 10 ms", hi["p50"] <= 10,
           " ms")
    speed = hi["bytes"] / 1e6 / (hi["p50"] / 1000)
    target("render speed", speed, ">= 20 MB/s", speed >= 20, " MB/s")
    if lo is not hi:
        ratio = paired(hi["wall"], lo["wall"])
        target("compile p50 at the largest history / at the smallest", ratio, "<= 1.5",
               ratio <= 1.5, "x")
    print(f"INFO snapshot write at 1,000 active frames: p50 {hi['write']:.3f} ms (included "
          f"above); compile without it p50 {hi['bare']:.3f} ms, cpu p50 {hi['cpu']:.3f} ms")
    fl = statistics.median(floors[1000])
    print(f"INFO floor at 1,000 active frames (one dict per item, the rows packed by orjson, "
          f"one LMDB put; timed once a round): p50 {fl:.3f} ms; compile p50 / floor p50 "
          f"{hi['p50'] / fl:.2f} (the machine's speed at the time divides out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
