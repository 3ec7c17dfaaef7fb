"""Cost against the size of the work (run: scripts/bench scale), in process, no fsync.

  transaction size   one transaction of 1,000 and of 10,000 `create` ops, each on a fresh
                     context; the claim: cost linear in the ops (10k / 1k <= 12x)
  audit, rebuild     audit and rebuild-projections of a context holding 10,000 frames and
                     of one holding N events (100k; --quick 20k), as events/s and as a
                     ratio to a bare read of the same event rows through the store
  reads (info)       status, and ListFrames in pages of 64 KiB, of contexts holding 10,000
                     and 40,000 frames: per 1,000 frames, and the larger over the smaller
                     (1.0: cost linear in the frames)

  scripts/bench scale                  # 100k events, 3 samples of each
  scripts/bench scale -- --quick       # 20k events, 1 sample
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Progress, log, target  # noqa: E402

from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as CALLER

LINEAR_GOAL = 12.0         # 10,000-op transaction / 1,000-op one
AUDIT_EVENTS_PER_S = 50_000


def creates(n: int, tag: str, base: int = 0) -> str:
    body = " ".join(f"(create {tag}-{i} (note {i}) (from-bench yes))" for i in range(n))
    return f"(context-tx (base-version {base}) {body})"


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure_tx_size(core: TransactionCore, samples: int) -> dict:
    out = {}
    for n in (1_000, 10_000):
        walls, cpus = [], []
        for s in range(samples):
            context = f"tx{n}-{s}"
            core.create_context(context, caller=CALLER)
            text = creates(n, "f")
            w, c = timed(lambda c=context, t=text: core.commit(c, t, caller=CALLER))
            walls.append(w)
            cpus.append(c)
            log(f"    {n:,}-op transaction: {w:.3f} s wall, {c:.3f} s CPU")
        out[n] = {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus)}
    return out


def fill_events(core: TransactionCore, context: str, events: int) -> None:
    """`events` inputs, digested into frames in batches (as an agent's history grows).
    Counts come from the replies: status() reads every pending input of the session,
    which would make the fill quadratic in the history."""
    core.create_context(context, caller=CALLER)
    status = core.status(context, caller=CALLER)
    count, revision = status.event_count, status.revision
    with Progress(f"writing {events:,} events", events / 2000):
        while count < events:
            batch = count
            for i in range(99):
                count = core.append_event(context, "s1", "user-message",
                                          f"input {i} about release {i % 7}",
                                          caller=CALLER).seq + 1
            revision = core.commit(context, f"(context-tx (base-version {revision}) "
                                   f"(create n{batch} (note digest)))",
                                   caller=CALLER).revision
            count += 1


def bare_read(store: LmdbStore, context: str) -> int:
    with store.reader(context) as reader:
        return sum(len(raw) for _, raw in reader.scan("events"))


def measure_replays(core: TransactionCore, store: LmdbStore, context: str,
                    samples: int) -> dict:
    events = core.status(context, caller=CALLER).event_count
    row = {"events": events}
    for name, fn in (("bare read", lambda: bare_read(store, context)),
                     ("audit", lambda: core.audit(context, caller=CALLER)),
                     ("rebuild", lambda: core.rebuild_projections(context, caller=CALLER))):
        runs = [timed(fn) for _ in range(samples)]
        row[name] = statistics.median(w for w, _ in runs)
        row[name + " cpu"] = statistics.median(c for _, c in runs)
        log(f"    {name} of {events:,} events: {row[name]:.3f} s wall, "
            f"{row[name + ' cpu']:.3f} s CPU")
    return row


def fill_frames(core: TransactionCore, context: str, frames: int) -> None:
    """`frames` frames, 10,000 a transaction (the largest the text form takes)."""
    core.create_context(context, caller=CALLER)
    revision = 0
    for start in range(0, frames, 10_000):
        text = creates(min(10_000, frames - start), f"g{start}", revision)
        revision = core.commit(context, text, caller=CALLER).revision


def list_in_pages(core: TransactionCore, context: str) -> None:
    cursor = ""
    while True:
        cursor = core.list_frames(context, max_bytes=64 << 10, cursor=cursor,
                                  caller=CALLER).next_cursor
        if not cursor:
            return


def measure_reads(core: TransactionCore, contexts: dict[int, str], samples: int) -> dict:
    """Seconds per 1,000 frames of status and of a listing in pages, by frame count."""
    out: dict = {}
    for n, context in contexts.items():
        for name, fn in (("status", lambda c=context: core.status(c, caller=CALLER)),
                         ("listing", lambda c=context: list_in_pages(core, c))):
            wall = statistics.median(timed(fn)[0] for _ in range(samples))
            out[(name, n)] = wall / n * 1000
            log(f"    {name} of {n:,} frames: {wall:.3f} s wall")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--events", type=int, default=0)
    ap.add_argument("--samples", type=int, default=0)
    args = ap.parse_args()
    events = args.events or (20_000 if args.quick else 100_000)
    samples = args.samples or (1 if args.quick else 3)
    tmp = tempfile.mkdtemp(prefix="morphz-bench-scale-")
    store = LmdbStore(os.path.join(tmp, "lmdb"), sync=False, map_size=8 << 30)
    try:
        core = TransactionCore(store)
        log(f"== scale benchmark: data in {tmp}")
        log("  transaction size")
        tx = measure_tx_size(core, samples)
        log("  audit and rebuild, 10,000 frames (the 10,000-op context)")
        frames = measure_replays(core, store, "tx10000-0", samples)
        log(f"  audit and rebuild, {events:,} events")
        fill_events(core, "history", events)
        history = measure_replays(core, store, "history", samples)
        log("  status and a listing in pages, 10,000 and 40,000 frames")
        fill_frames(core, "frames40000", 40_000)
        reads = measure_reads(core, {10_000: "tx10000-0", 40_000: "frames40000"}, samples)
    finally:
        store.close()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\n{'':34}{'wall s':>10}{'CPU s':>10}")
    for n, row in tx.items():
        print(f"{n:>7,}-op transaction{'':14}{row['wall_s']:>10.3f}{row['cpu_s']:>10.3f}")
    for label, row, n, unit in (("10,000 frames", frames, 10_000, "ops"),
                                (f"{history['events']:,} events", history, history["events"],
                                 "events")):
        for name in ("bare read", "audit", "rebuild"):
            print(f"{name + ' of ' + label:34}{row[name]:>10.3f}{row[name + ' cpu']:>10.3f}"
                  f"   {n / row[name]:>12,.0f} {unit}/s ({n / row[name + ' cpu']:,.0f}/s of CPU)")
    for name in ("status", "listing"):
        small, large = reads[(name, 10_000)], reads[(name, 40_000)]
        print(f"{name + ' (info), per 1,000 frames':34}{1e3 * small:>9.2f}ms (10,000)"
              f"{1e3 * large:>9.2f}ms (40,000)   x{large / small:.2f} per frame")
    print()
    ratio = tx[10_000]["cpu_s"] / tx[1_000]["cpu_s"]
    target("10,000-op / 1,000-op transaction CPU", ratio, f"<= {LINEAR_GOAL:g}",
           ratio <= LINEAR_GOAL)
    for name in ("audit", "rebuild"):
        rate = history["events"] / history[name]
        ratio = history[name] / history["bare read"]
        cpu_rate = history["events"] / history[name + " cpu"]
        # Wall time is the target's measure; CPU time says what a busy machine hides.
        target(f"{name} events/s at {history['events']:,} events (x{ratio:.1f} the bare read;"
               f" {cpu_rate:,.0f}/s of CPU)", rate, f">= {AUDIT_EVENTS_PER_S:,}",
               rate >= AUDIT_EVENTS_PER_S)
    # Its history is one 10,000-op transaction: each op counts as an event would.
    rate = 10_000 / frames["audit"]
    target(f"audit ops/s of the context holding one 10,000-op transaction "
           f"({10_000 / frames['audit cpu']:,.0f}/s of CPU)", rate,
           f">= {AUDIT_EVENTS_PER_S:,}", rate >= AUDIT_EVENTS_PER_S)


if __name__ == "__main__":
    main()
