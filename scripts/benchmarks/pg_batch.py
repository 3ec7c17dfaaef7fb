"""The PostgreSQL store's commit by size: a batch sent as one pipeline against the same
batch statement by statement, in the same run (run: scripts/bench pg_batch).

PostgresStore in this process over a real PostgreSQL 15 (tests/pg.py: initdb and pg_ctl,
Unix socket, fsync on). One writer commits five frames a commit, each commit's values
totalling SIZE bytes; the pipeline bound (group_commit.PIPELINE_MAX_BYTES) is set above every
size for "pipelined" and to 0 for "statements", and the two alternate round by round.
Reported per size: the median over rounds of wall ms per commit and CPU us per commit
(this process), and statements / pipelined (above 1: the pipeline is faster).

  scripts/bench pg_batch                              # 300 commits a size, 3 rounds
  scripts/bench pg_batch -- --commits 1000 --rounds 5 --sizes 200,20000,200000,1000000
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from common import log, table  # noqa: E402

from morphz.services.storage.postgres import group_commit  # noqa: E402
from morphz.services.storage.postgres.store import PostgresStore  # noqa: E402
from morphz.shared.storage.api import Write  # noqa: E402
from tests.pg import new_schema, require, start_postgres  # noqa: E402

WAYS = {"pipelined": 1 << 40, "statements": 0}  # PIPELINE_MAX_BYTES for each


def measure(store: PostgresStore, context: str, size: int,
            commits: int) -> tuple[float, float]:
    """(wall ms, CPU us) per commit of five frames of size // 5 bytes each."""
    values = [os.urandom(size // 5) for _ in range(5)]
    wall, cpu = time.monotonic(), time.process_time()
    for i in range(commits):
        store.commit(context, i, [Write("frames", (f"f{j}",), v)
                                  for j, v in enumerate(values)])
    return ((time.monotonic() - wall) * 1e3 / commits,
            (time.process_time() - cpu) * 1e6 / commits)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--commits", type=int, default=300)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sizes", default="200,20000,200000,1000000")
    args = p.parse_args()
    require()
    sizes = [int(s) for s in args.sizes.split(",")]
    server = start_postgres()
    bound = group_commit.PIPELINE_MAX_BYTES
    try:
        store = PostgresStore(server.dsn(), schema=new_schema())
        got: dict[tuple[int, str], list[tuple[float, float]]] = {}
        for r in range(args.rounds):
            for size in sizes:
                order = list(WAYS) if r % 2 == 0 else list(reversed(WAYS))
                for way in order:
                    group_commit.PIPELINE_MAX_BYTES = WAYS[way]
                    got.setdefault((size, way), []).append(
                        measure(store, f"{way}-{size}-{r}", size, args.commits))
            log(f"pg_batch: round {r + 1} of {args.rounds} done")
        store.close()
    finally:
        group_commit.PIPELINE_MAX_BYTES = bound
        server.remove()
    rows = []
    for size in sizes:
        med = {way: (statistics.median(w for w, _ in got[(size, way)]),
                     statistics.median(c for _, c in got[(size, way)])) for way in WAYS}
        rows.append({"size": size, "pipe_ms": med["pipelined"][0],
                     "stmt_ms": med["statements"][0], "pipe_cpu": med["pipelined"][1],
                     "stmt_cpu": med["statements"][1],
                     "ratio": med["statements"][0] / med["pipelined"][0]})
    print(table(rows, [("size", "bytes a commit"), ("pipe_ms", "pipelined ms"),
                       ("stmt_ms", "statements ms"), ("pipe_cpu", "pipelined CPU us"),
                       ("stmt_cpu", "statements CPU us"),
                       ("ratio", "statements / pipelined")]))
    print(f"(the store pipelines batches up to {bound} bytes)")


if __name__ == "__main__":
    main()
