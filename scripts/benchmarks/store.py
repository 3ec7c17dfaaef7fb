"""The stores side by side: commit throughput and CPU per commit on LMDB and on PostgreSQL
(alone, and with a synchronous standby) in the same run, and the time from a primary's
death to the first commit on the promoted standby (run: scripts/bench store).

Issue 44's benchmark. `morphz serve` (all-in-one, in its own process) takes 5-op commits
from load processes (commit.py's driver: each client revises its own 5 frames) at 1 in
flight on one context and at 16 in flight over 16 contexts, on:

  lmdb          the default store (<data>/store, fsync on)
  postgres      --store postgres on one PostgreSQL 15 server (tests/pg.py: initdb and
                pg_ctl on loopback, fsync on, synchronous_commit on)
  postgres+sync --store postgres on a primary with one synchronous standby
                (tests/pg_replication.py: synchronous_commit = on, the standby's flush awaited)

"CPU ms/commit" is all the CPU the commits cost, read from /proc over the window: the Morphz
server's, plus every PostgreSQL process's (postmaster and backends, the standby's too);
the table also splits it. Recall indexing is left out (no wait for it), the same for every
store. Then `failover` (--failovers times): one client commits back to back through the
multi-host DSN (target_session_attrs=read-write); the primary is SIGKILLed, the standby
promoted (pg_ctl promote) and the lost member rebuilt as its standby (pg_basebackup), since
the promoted primary acknowledges nothing until a synchronous standby has it. Reported:
promotion, rebuild, and the time from the kill to the first acknowledgement of a commit
sent after it.

  scripts/bench store                        # 5 s per measurement, 3 failovers
  scripts/bench store -- --quick             # 1.5 s per measurement
  scripts/bench store -- --failovers 5 --json /tmp/store.json
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from commit import MORPHZ, Topology, load_options, measure_commit, quick  # noqa: E402
from common import (ServerProcess, log, percentile, table, tree_usage,  # noqa: E402
                    write_json)

from morphz.services.transaction.client import TransactionClient  # noqa: E402
from morphz.shared.errors import MorphzError  # noqa: E402
from tests.pg import PostgresServer, require  # noqa: E402
from tests.pg_replication import ReplicatedPostgres  # noqa: E402

ROWS = ((1, 1), (16, 16))  # (in flight, contexts)
COLUMNS = [("name", "row"), ("inflight", "in flight"), ("ops_per_s", "commits/s"),
           ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("cpu_ms", "CPU ms/commit"),
           ("morphz_cpu_ms", "morphz ms"), ("postgres_cpu_ms", "postgres ms"),
           ("vs_lmdb", "commits/s vs lmdb"), ("cpu_vs_lmdb", "CPU vs lmdb")]


class PostgresTree:
    """A PostgreSQL server's processes (the postmaster and every backend), for drive()'s
    CPU readings: the same calls as common.ServerProcess."""

    def __init__(self, server: PostgresServer) -> None:
        self.pid = server.pid()

    def cpu_seconds(self) -> float:
        return tree_usage(self.pid)[0]

    def usage(self) -> tuple[float, float, int]:
        return tree_usage(self.pid, switches=True)


def serve(tmp: str, name: str, store_flags: list[str]) -> ServerProcess:
    data = os.path.join(tmp, name)
    return ServerProcess([MORPHZ, "serve", "--listen", "127.0.0.1:0", "--data", data,
                          *store_flags], log_path=os.path.join(tmp, f"{name}.log"))


def measure_rows(args, name: str, srv: ServerProcess, postgres: dict, store_path: str) -> list:
    out = []
    for inflight, contexts in ROWS:
        log(f"  {name}, {inflight} in flight, {contexts} context(s)")
        topo = Topology(name, srv.address, "", {"morphz": srv, **postgres}, store_path)
        r = measure_commit(args, topo, inflight, contexts, f"{name}-{inflight}")
        n, per_process = r["ops"], r.get("process_cpu_util", {"morphz": r["server_cpu_util"]})
        ms = {k: v * args.seconds / n * 1e3 if n else float("nan") for k, v in per_process.items()}
        out.append({**r, "store": name, "cpu_ms": r["server_cpu_ms_per_op"],
                    "morphz_cpu_ms": ms["morphz"],
                    "postgres_cpu_ms": sum(v for k, v in ms.items() if k != "morphz")})
    return out


def failover(args, tmp: str) -> list[dict]:
    """Kill the primary under one committing client, promote, rebuild; time each step."""
    pg = ReplicatedPostgres().start()
    srv = serve(tmp, "failover", ["--store", "postgres", "--dsn", pg.dsn()])
    out = []
    try:
        client = TransactionClient(grpc.insecure_channel(srv.address), timeout=5)
        client.create_context("failover")
        acks: list[tuple[float, float]] = []  # (sent, acknowledged)
        stop = threading.Event()

        def commit_loop() -> None:
            base: int | None = 0  # the revision of the last receipt; None: read it again
            while not stop.is_set():
                sent = time.monotonic()
                try:
                    if base is None:
                        base = client.status("failover")["revision"]
                    base = client.commit("failover", f"(context-tx (base-version {base}) "
                                         f"(create f{base + 1} (n {base + 1})))")["revision"]
                except MorphzError:
                    base = None  # failing over; a commit of unknown outcome may have landed
                    time.sleep(0.01)
                    continue
                acks.append((sent, time.monotonic()))
        writer = threading.Thread(target=commit_loop, daemon=True)
        writer.start()
        for i in range(args.failovers):
            before = len(acks)
            wait_for(lambda b=before: len(acks) >= b + 20, "commits before the kill")
            killed = time.monotonic()
            pg.kill_primary()
            pg.promote()
            promoted = time.monotonic()
            pg.rebuild_standby()
            rebuilt = time.monotonic()
            wait_for(lambda k=killed: acks[-1][0] > k, "a commit after the failover")
            first = min(a for s, a in acks if s > killed)
            out.append({"promote_s": promoted - killed, "rebuild_s": rebuilt - promoted,
                        "to_first_commit_s": first - killed})
            log(f"  failover {i + 1}: promoted in {promoted - killed:.2f} s, standby rebuilt "
                f"in {rebuilt - promoted:.2f} s, first commit {first - killed:.2f} s after "
                "the kill")
        stop.set()
        writer.join(30)
    finally:
        srv.stop()
        pg.remove()
    return out


def wait_for(check, what: str, bound: float = 300.0) -> None:
    deadline = time.monotonic() + bound
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"store benchmark: no {what} within {bound:.0f} s")
        time.sleep(0.01)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    load_options(ap)
    ap.add_argument("--failovers", type=int, default=3, help="primary kills timed (default 3)")
    args = ap.parse_args()
    quick(args)
    require()
    tmp = tempfile.mkdtemp(prefix="morphz-bench-store-", dir=args.data)
    rows: list[dict] = []
    try:
        log(f"== store benchmark: {args.seconds:g} s per measurement, {os.cpu_count()} CPUs")
        with serve(tmp, "lmdb", []) as srv:
            rows += measure_rows(args, "lmdb", srv, {}, os.path.join(tmp, "lmdb", "store"))
        single = PostgresServer(conf=("synchronous_commit = on",)).init().start()
        try:
            with serve(tmp, "postgres", ["--store", "postgres", "--dsn", single.tcp_dsn()]) as srv:
                rows += measure_rows(args, "postgres", srv, {"postgres": PostgresTree(single)}, "")
        finally:
            single.remove()
        pair = ReplicatedPostgres().start()
        try:
            with serve(tmp, "postgres+sync", ["--store", "postgres", "--dsn", pair.dsn()]) as srv:
                rows += measure_rows(args, "postgres+sync", srv,
                                     {"primary": PostgresTree(pair.primary),
                                      "standby": PostgresTree(pair.standby)}, "")
        finally:
            pair.remove()
        lmdb = {r["inflight"]: r for r in rows if r["store"] == "lmdb"}
        for r in rows:
            base = lmdb[r["inflight"]]
            r["vs_lmdb"] = r["ops_per_s"] / base["ops_per_s"] if base["ops_per_s"] else 0.0
            r["cpu_vs_lmdb"] = r["cpu_ms"] / base["cpu_ms"] if base["cpu_ms"] else 0.0
        log("  failover: primary SIGKILLed under one committing client")
        failovers = failover(args, tmp) if args.failovers else []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(table(rows, COLUMNS))
    for r in rows:
        if r.get("errors"):
            print(f"{r['name']} x{r['inflight']}: ERRORS {r['errors']}")
    if failovers:
        first = [f["to_first_commit_s"] for f in failovers]
        print(f"\nfailover ({len(failovers)} primary kills): kill to first commit on the "
              f"promoted standby p50 {percentile(first, 50):.2f} s, max {max(first):.2f} s; "
              f"promotion p50 {percentile([f['promote_s'] for f in failovers], 50):.2f} s, "
              f"standby rebuild p50 {percentile([f['rebuild_s'] for f in failovers], 50):.2f} s")
    if args.json:
        write_json(args.json, {"seconds": args.seconds, "cpus": os.cpu_count(),
                               "results": rows, "failovers": failovers})
    return 0


if __name__ == "__main__":
    sys.exit(main())
