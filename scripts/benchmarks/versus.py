"""This checkout's server against another checkout's, in one run: a before/after check.

    scripts/bench versus -- --other DIR [--this DIR] [--events 20000] [--calls 300]
                            [--embedder hashing] [--rounds 1] [--ops lexical,vector] [--spy OP]
    scripts/bench versus -- --other DIR --in-process [--calls 3000] [--rounds 3] [--profile]

DIR is another checkout of Morphz (a `git worktree add DIR REV`) set up with its own venv
(`bash -c 'source scripts/bootstrap'` inside it), so each `morphz serve` runs its own code.
Both servers get the same corpus through the wire (AppendEvents, so neither needs the other's
store format), then the same calls, interleaved call by call in A B B A order so that load on
a shared machine falls on both alike. For each operation it prints p50 and p99 latency and
the server's CPU per call for both, and the ratio other/this: above 1 the other is slower.
`--this DIR` puts a third checkout in this one's place (two older commits: which step of a
history a difference came from); the clients are always this checkout's.

With --spy OP, each server is then sampled with py-spy (raw stacks in the work folder) while
it answers --calls calls of OP, and the top functions of each are printed: where the time
of a ratio above or below 1 goes.

With --in-process, no servers: each checkout's TransactionCore runs in a process of its own
over a fresh LMDB store (_core_versus.py), CPU per append and per commit, and with --profile
cProfile of both diffed by function: the typed core's cost without gRPC's or the followers'.

Operations: status, append (one event), commit (a 5-op context-tx revising five frames),
search in lexical, vector and hybrid mode over the corpus. Both servers use the same
--embedder (default hashing), so a change of default embedder between the two checkouts is
not counted as a change of speed."""
from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _core_versus  # noqa: E402
from common import ServerProcess, log, percentile, print_spy  # noqa: E402
from recall import corpus_words, event_text, make_queries, zipf_weights  # noqa: E402

import grpc  # noqa: E402

from morphz.services.recall.client import RecallClient  # noqa: E402
from morphz.services.transaction.client import TransactionClient  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS, WRITES = "ab-corpus", "ab-writes"
FRAMES = [f"f{j}" for j in range(5)]
BATCH = 500  # events per AppendEvents call while loading the corpus


class Side:
    """One `morphz serve` from one checkout (common.ServerProcess), with its clients."""

    def __init__(self, name: str, checkout: str, data: str, embedder: str) -> None:
        self.name, self.checkout = name, checkout
        morphz = os.path.join(checkout, ".venv", "bin", "morphz")
        if not os.access(morphz, os.X_OK):
            raise SystemExit(f"{morphz} is missing: set up {checkout} first "
                             "(bash -c 'source scripts/bootstrap' inside it)")
        self.server = ServerProcess(
            [morphz, "serve", "--data", os.path.join(data, "data"), "--listen", "127.0.0.1:0",
             "--embedder", embedder], timeout=120, log_path=os.path.join(data, "server.log"))
        self.channel = grpc.insecure_channel(self.server.address)
        self.tx = TransactionClient(self.channel, timeout=120)
        self.recall = RecallClient(self.channel, timeout=120)
        self.revision = 0

    def cpu(self) -> float:
        """The server's CPU seconds, its worker processes' included."""
        return self.server.cpu_seconds()

    def stop(self) -> None:
        self.channel.close()
        self.server.stop()


def load_corpus(side: Side, texts: list[str]) -> None:
    side.tx.create_context(CORPUS)
    for i in range(0, len(texts), BATCH):
        side.tx.append_events(CORPUS, [
            {"session": f"s{(i + j) % 7}", "kind": "tool-result", "text": t, "actor": "bench"}
            for j, t in enumerate(texts[i:i + BATCH])])
    side.tx.create_context(WRITES)
    side.revision = side.tx.commit(WRITES, tx_text(0, "create", 0))["revision"]
    side.recall.rebuild(CORPUS)


def wait_indexed(side: Side, documents: int, bound: float = 1800) -> None:
    """Until the vector leg holds every document (it follows on its own after a rebuild)."""
    give_up = time.monotonic() + bound
    while time.monotonic() < give_up:
        st = side.recall.inspect(CORPUS)
        if int((st.get("vectors") or {}).get("count", 0)) >= documents:
            return
        time.sleep(0.5)
    raise SystemExit(f"{side.name}: the vector leg did not catch up in {bound:.0f} s")


def tx_text(base: int, op: str, n: int) -> str:
    body = " ".join(f"({op} {f} (v {n}) (from-bench yes))" for f in FRAMES)
    return f"(context-tx (base-version {base}) {body})"


def operations(queries: list[str]) -> dict:
    """name -> call(side, i)."""
    def commit(side: Side, i: int) -> None:
        side.revision = side.tx.commit(WRITES, tx_text(side.revision, "revise",
                                                       i + 1))["revision"]
    return {
        "status": lambda side, i: side.tx.status(CORPUS),
        "append": lambda side, i: side.tx.append_event(WRITES, "s1", "user-message",
                                                       f"note {i} about the release"),
        "commit": commit,
        "lexical": lambda side, i: side.recall.search(CORPUS, queries[i % len(queries)],
                                                      limit=20, mode="lexical"),
        "vector": lambda side, i: side.recall.search(CORPUS, queries[i % len(queries)],
                                                     limit=20, mode="vector"),
        "hybrid": lambda side, i: side.recall.search(CORPUS, queries[i % len(queries)],
                                                     limit=20, mode="hybrid"),
    }


def measure(sides: list[Side], call, calls: int, warmup: int = 10) -> dict:
    """Interleaved A B B A ...: per side its latencies and server CPU seconds per call."""
    for i in range(warmup):
        for s in sides:
            call(s, i)
    lat: dict[str, list[float]] = {s.name: [] for s in sides}
    cpu0 = {s.name: s.cpu() for s in sides}
    for i in range(calls):
        for s in (sides if i % 2 == 0 else sides[::-1]):
            t = time.perf_counter()
            call(s, warmup + i)
            lat[s.name].append(time.perf_counter() - t)
    return {s.name: {"p50": percentile(lat[s.name], 50) * 1000,
                     "p99": percentile(lat[s.name], 99) * 1000,
                     "cpu": (s.cpu() - cpu0[s.name]) / calls * 1000} for s in sides}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--other", required=True, help="the other checkout (set up)")
    ap.add_argument("--this", default=ROOT,
                    help="the checkout measured against it (default: this one)")
    ap.add_argument("--events", type=int, default=20_000, help="corpus events")
    ap.add_argument("--calls", type=int, default=300, help="timed calls per operation and side")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat the timed calls; each round printed, then their medians")
    ap.add_argument("--embedder", default="hashing", help="both servers' --embedder")
    ap.add_argument("--seed", type=int, default=20260804)
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--ops", default="",
                    help="comma-separated operations to time (default: all)")
    ap.add_argument("--spy", metavar="OP", default="",
                    help="then sample each server with py-spy while it answers OP")
    ap.add_argument("--spy-top", type=int, default=25, help="functions listed per server")
    ap.add_argument("--in-process", action="store_true",
                    help="the transaction cores in process, no servers (_core_versus.py)")
    ap.add_argument("--profile", action="store_true",
                    help="with --in-process: cProfile both, diffed by function")
    args = ap.parse_args()
    this, other = os.path.abspath(args.this), os.path.abspath(args.other)
    if args.in_process:
        _core_versus.run(this, other, args.calls, args.rounds, args.profile, args.spy_top)
        return 0
    work = tempfile.mkdtemp(prefix="morphz-bench-versus-")
    rev = {}
    for name, path in (("this", this), ("other", other)):
        rev[name] = subprocess.run(["git", "-C", path, "describe", "--always", "--dirty"],
                                   capture_output=True, text=True).stdout.strip() or "?"
    log(f"== versus: this {rev['this']} against other {rev['other']} ({other}); "
        f"{args.events:,} events, {args.calls} calls per operation and side, in {work}")
    words = corpus_words(args.seed)
    rng = random.Random(args.seed)
    cum, acc = [], 0.0
    for w in zipf_weights(len(words)):
        acc += w
        cum.append(acc)
    texts = [event_text(rng, words, cum) for _ in range(args.events)]
    queries = [q for qs in make_queries(words, args.seed, args.calls).values() for q in qs]
    random.Random(args.seed + 2).shuffle(queries)
    sides: list[Side] = []
    try:
        for name, path in (("this", this), ("other", other)):
            os.makedirs(os.path.join(work, name))
            sides.append(Side(name, path, os.path.join(work, name), args.embedder))
        for s in sides:
            t = time.perf_counter()
            load_corpus(s, texts)
            wait_indexed(s, args.events)
            log(f"    {s.name}: corpus loaded and indexed in {time.perf_counter() - t:.1f} s")
        every = operations(queries)
        wanted = args.ops.split(",") if args.ops else list(every)
        unknown = {op for op in wanted + ([args.spy] if args.spy else []) if op not in every}
        if unknown:
            raise SystemExit(f"unknown operation {', '.join(sorted(unknown))}; "
                             f"known: {', '.join(every)}")
        ops = {name: every[name] for name in wanted}
        rounds: list[dict] = []
        for r in range(args.rounds):
            row = {}
            for name, call in ops.items():
                row[name] = measure(sides, call, args.calls)
            rounds.append(row)
            log(f"    round {r + 1}/{args.rounds} done (load {os.getloadavg()[0]:.1f})")
            print_table(f"round {r + 1}", row)
        if args.rounds > 1:
            print_table(f"median of {args.rounds} rounds", {
                name: {side: {k: sorted(rd[name][side][k] for rd in rounds)[len(rounds) // 2]
                              for k in ("p50", "p99", "cpu")} for side in ("this", "other")}
                for name in ops})
        if args.spy:
            for s in sides:
                spy(s, every[args.spy], args.calls, os.path.join(work, f"{s.name}.spy"),
                    args.spy_top)
    finally:
        for s in sides:
            s.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"this: {rev['this']} ({this}); other: {rev['other']} ({other}); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


def spy(side: Side, call, calls: int, path: str, top: int) -> None:
    exe = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    rec = subprocess.Popen([exe, "record", "--pid", str(side.server.pid), "--rate", "500",
                            "--format", "raw", "--output", path, "--gil", "--nonblocking"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)  # py-spy attaches
    for i in range(calls):
        call(side, i)
    rec.send_signal(signal.SIGINT)
    rec.wait(30)
    print(f"\n{side.name} ({side.checkout}), {calls} calls:")
    print_spy(path, top)


def print_table(title: str, row: dict) -> None:
    print(f"\n{title}: ms per call; ratio = other / this (above 1: other slower)")
    print(f"{'operation':<10}{'this p50':>10}{'other p50':>11}{'ratio':>7}"
          f"{'this p99':>10}{'other p99':>11}{'this cpu':>10}{'other cpu':>11}{'ratio':>7}")
    for name, r in row.items():
        a, b = r["this"], r["other"]
        print(f"{name:<10}{a['p50']:>10.2f}{b['p50']:>11.2f}{b['p50'] / a['p50']:>7.2f}"
              f"{a['p99']:>10.2f}{b['p99']:>11.2f}{a['cpu']:>10.2f}{b['cpu']:>11.2f}"
              f"{(b['cpu'] / a['cpu'] if a['cpu'] else float('nan')):>7.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
