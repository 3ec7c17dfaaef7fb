"""What refusing costs (issue 40 items 4 and 7), each next to a baseline of the same run
(run: scripts/bench rejection [-- --rounds N]).

- parse: refusing a transaction of 300k nodes (600 KB; the node limit is 200k) with the
  reader as it is, against the same refusal by the exact reader alone (the second pass
  the reader made before), and against parsing an accepted transaction of 100k nodes.
- stale commit: a storage Commit expecting a version no commit in flight can make, over
  loopback gRPC, against an ordinary Commit (before: the whole 2 s reorder wait).
- quota: commits (sync off) on a store with --storage-quota far from full, and near it
  (every batch measured), against a store with none.

Medians of interleaved rounds; ratios are what to compare across machines."""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent import futures

import grpc

from morphz.api.storage.v1 import storage_pb2 as pb
from morphz.api.storage.v1 import storage_pb2_grpc
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.storage.servicer import StorageServicer, key_to_proto
from morphz.services.storage.snapshots import SnapshotRegistry
from morphz.services.transaction.core.txlang import TX_LIMITS
from morphz.shared import sexpr
from morphz.shared.sexpr import reader as sexpr_reader
from morphz.shared.storage.api import Write


def _time(fn, *args) -> float:
    start = time.perf_counter()
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - the refusals are what is timed
        pass
    return time.perf_counter() - start


def parse(rounds: int) -> None:
    refused = "(context-tx (base-version 0) (create a (x " + "a " * 300_000 + ")))"
    accepted = "(context-tx (base-version 0) (create a (x " + "a " * 100_000 + ")))"
    now, exact, ok = [], [], []
    for _ in range(rounds):
        now.append(_time(lambda: sexpr.parse_one(refused, TX_LIMITS)))
        exact.append(_time(lambda: sexpr_reader._parse(refused, TX_LIMITS)))
        ok.append(_time(lambda: sexpr.parse_one(accepted, TX_LIMITS)))
    m = statistics.median
    print(f"parse: refuse 300k nodes {m(now) * 1e3:.0f} ms; exact reader alone "
          f"{m(exact) * 1e3:.0f} ms (the pass no longer made: before, refusing cost about "
          f"{(m(now) + m(exact)) * 1e3:.0f} ms); accept 100k nodes {m(ok) * 1e3:.0f} ms; "
          f"refuse / accept-100k = {m(now) / m(ok):.2f}")


def stale_commit(rounds: int) -> None:
    store = LmdbStore(tempfile.mkdtemp(prefix="bench-stale-"), sync=False)
    registry = SnapshotRegistry(store)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    storage_pb2_grpc.add_StorageServiceServicer_to_server(
        StorageServicer(store, registry), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    stub = storage_pb2_grpc.StorageServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    seq, ok, stale = 0, [], []
    def commit(expect: int, i: int) -> None:
        stub.Commit(pb.CommitRequest(context="c", expect_commit_seq=expect, writes=[
            pb.Write(table="frames", key=key_to_proto((f"k{i}",)), value=b"v")]), timeout=30)
    for i in range(rounds):
        ok.append(_time(commit, seq, i))
        seq += 1
        stale.append(_time(commit, seq + 1000, i))
    server.stop(None)
    registry.close()
    store.close()
    m = statistics.median
    print(f"stale commit: refused in {m(stale) * 1e3:.1f} ms; an ordinary commit "
          f"{m(ok) * 1e3:.1f} ms; ratio {m(stale) / m(ok):.1f} (before: 2,000 ms)")


def quota(rounds: int) -> None:
    m = statistics.median
    per = {}
    for name, kw in (("none", {}), ("far", {"quota": 64 << 30}), ("near", {"quota": 1})):
        store = LmdbStore(tempfile.mkdtemp(prefix="bench-quota-"), sync=False, **kw)
        if name == "near":
            store.space.quota = 0  # measured at every batch, yet never refused
            store.space.near = lambda used, written: True
        times = []
        for i in range(rounds * 50):
            times.append(_time(store.commit, "c", i, [Write("frames", (f"k{i}",), b"v" * 200)]))
        per[name] = m(times)
        store.close()
    print(f"quota: commit (sync off) {per['none'] * 1e6:.0f} us with none; far from the "
          f"quota {per['far'] / per['none']:.2f}x; measured at every batch "
          f"{per['near'] / per['none']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    parse(args.rounds)
    stale_commit(args.rounds)
    quota(args.rounds)


if __name__ == "__main__":
    main()
