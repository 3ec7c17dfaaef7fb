"""Ownership and sharding through etcd (run: scripts/bench cluster).

Issue 12's benchmark, with a real etcd (Debian's `etcd`) and `morphz serve` processes:

  takeover    two transaction instances (--lease-ttl, default 2 s) over one storage
              process: instance A owns a context (it committed to it), A is SIGKILLed,
              and B commits to the context again and again until one succeeds. The time
              from the kill to that first commit on the new owner, over --kills kills
              (A restarted each time): p50 and max, next to the TTL (the lease must
              expire first: the floor is about the TTL).
  shards      commit throughput with one storage shard vs two (placement through etcd),
              one transaction instance routing each context to its shard, next to one
              store given by --storage without etcd (the baseline): 64 in flight
              over 64 contexts (commit.py's driver, 5-op transactions), commits/s, p50,
              p99 and the processes' CPU. With one instance its CPU may bound both.

  scripts/bench cluster                        # 20 kills; 5 s per throughput window
  scripts/bench cluster -- --quick             # 5 kills; 1.5 s windows
  scripts/bench cluster -- --kills 20 --ttl 2 --json /tmp/cluster.json
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commit import MORPHZ, Topology, load_options, measure_commit, quick  # noqa: E402
from common import ServerProcess, free_port, log, percentile, table, write_json  # noqa: E402
from split import wait_serving  # noqa: E402

from morphz.services.transaction.client import TransactionClient  # noqa: E402
from morphz.shared.coord.etcd_member import etcd_binary, health, member_argv  # noqa: E402
from morphz.shared.errors import MorphzError  # noqa: E402

BOUND = 60.0


class Etcd:
    """A one-member etcd on loopback with its data in `data`."""

    def __init__(self, data: str, log_path: str) -> None:
        try:
            binary = etcd_binary()
        except RuntimeError as e:
            raise SystemExit(str(e)) from None
        self.address = f"127.0.0.1:{free_port()}"
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            member_argv(binary, "bench", data, self.address, f"127.0.0.1:{free_port()}"),
            stdout=subprocess.DEVNULL, stderr=self._log, start_new_session=True)
        deadline = time.monotonic() + BOUND
        while not self._healthy():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("etcd did not start")
            time.sleep(0.1)

    def _healthy(self) -> bool:
        return health(self.address) == "SERVING"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def serve(tmp: str, name: str, *args: str) -> ServerProcess:
    proc = ServerProcess([MORPHZ, "serve", *args, "--listen", "127.0.0.1:0",
                          "--data", os.path.join(tmp, name)],
                         log_path=os.path.join(tmp, f"{name}.log"))
    wait_serving(proc)
    return proc


# -- takeover -----------------------------------------------------------------------------
def measure_takeover(args, tmp: str) -> dict:
    etcd = Etcd(os.path.join(tmp, "etcd-takeover"), os.path.join(tmp, "etcd-takeover.log"))
    procs: dict[str, ServerProcess] = {}
    try:
        procs["storage"] = serve(tmp, "takeover-storage", "storage")
        owner_args = ["transaction", "--storage", procs["storage"].address, "--etcd",
                      etcd.address, "--lease-ttl", str(args.ttl)]
        procs["b"] = serve(tmp, "takeover-b", *owner_args)
        times = []
        with grpc.insecure_channel(procs["b"].address) as ch_b:
            b = TransactionClient(ch_b, timeout=10)
            for k in range(args.kills):
                a_proc = serve(tmp, "takeover-a", *owner_args)
                with grpc.insecure_channel(a_proc.address) as ch_a:
                    a = TransactionClient(ch_a, timeout=10)
                    context = f"takeover-{k}"
                    a.create_context(context)
                    a.commit(context, "(context-tx (base-version 0) (create f (x 0)))")
                killed = time.monotonic()
                a_proc.stop(signal.SIGKILL)
                while True:
                    try:
                        b.commit(context, "(context-tx (base-version 1) (create g (x 1)))")
                        break
                    except MorphzError as e:
                        if e.reason not in ("NOT_OWNER", "OWNERSHIP_LOST"):
                            raise
                        if time.monotonic() - killed > BOUND:
                            raise RuntimeError(f"no takeover of {context}") from None
                        time.sleep(0.02)
                times.append(time.monotonic() - killed)
                log(f"  kill {k + 1}/{args.kills}: first commit on the new owner after "
                    f"{times[-1]:.2f} s")
        return {"name": f"takeover (TTL {args.ttl} s)", "kills": len(times),
                "p50_s": percentile(times, 50), "max_s": max(times), "min_s": min(times),
                "ttl_s": args.ttl}
    finally:
        for p in reversed(list(procs.values())):
            p.stop()
        etcd.stop()


# -- one shard vs two ---------------------------------------------------------------------
def measure_shards(args, tmp: str, shards: int) -> dict:
    """`shards` storage shards through etcd; 0: the baseline, one storage process given
    to the transaction instance by --storage, no etcd."""
    etcd = Etcd(os.path.join(tmp, f"etcd-{shards}"), os.path.join(tmp, f"etcd-{shards}.log"))
    procs: dict[str, ServerProcess] = {}
    try:
        if not shards:
            procs["storage"] = serve(tmp, "s0-storage", "storage")
            procs["transaction"] = serve(tmp, "s0-transaction", "transaction", "--storage",
                                         procs["storage"].address)
            topo = Topology("no etcd, one store", procs["transaction"].address, "", procs, "")
            return measure_commit(args, topo, 64, 64, "shards0")
        for n in range(1, shards + 1):
            procs[f"storage-{n}"] = serve(tmp, f"s{shards}-storage-{n}", "storage", "--etcd",
                                          etcd.address, "--shard", f"shard-{n}")
        procs["transaction"] = serve(tmp, f"s{shards}-transaction", "transaction", "--etcd",
                                     etcd.address, "--lease-ttl", str(max(args.ttl, 5)))
        topo = Topology(f"{shards} shard{'s' if shards > 1 else ''}",
                        procs["transaction"].address, "", procs, "")
        return measure_commit(args, topo, 64, 64, f"shards{shards}")
    finally:
        for p in reversed(list(procs.values())):
            p.stop()
        etcd.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    load_options(ap)
    ap.add_argument("--kills", type=int, default=20, help="takeovers measured (default 20)")
    ap.add_argument("--ttl", type=int, default=2, help="the instances' lease TTL (default 2)")
    ap.add_argument("--skip", choices=("takeover", "shards"), action="append", default=[],
                    help="leave a part out")
    args = ap.parse_args()
    quick(args)
    if args.quick:
        args.kills = min(args.kills, 5)
    tmp = tempfile.mkdtemp(prefix="morphz-bench-cluster-", dir=args.data)
    out: dict = {}
    try:
        if "takeover" not in args.skip:
            log(f"== takeover: SIGKILL the owner, {args.kills} times")
            out["takeover"] = measure_takeover(args, tmp)
        if "shards" not in args.skip:
            for shards in (0, 1, 2):
                log(f"== commit throughput, {shards or 'no etcd, one store:'} shard(s)")
                out[f"shards-{shards}"] = measure_shards(args, tmp, shards)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if "takeover" in out:
        print(table([out["takeover"]], [("name", "what"), ("kills", "kills"),
                                        ("p50_s", "p50 s"), ("max_s", "max s"),
                                        ("min_s", "min s"), ("ttl_s", "TTL s")]))
    rows = [out[k] for k in ("shards-0", "shards-1", "shards-2") if k in out]
    if rows:
        print(table(rows, [("name", "commit, 64 in flight over 64 contexts"),
                           ("ops_per_s", "commits/s"), ("p50_ms", "p50 ms"),
                           ("p99_ms", "p99 ms"), ("server_cpu_util", "srv CPU")]))
        one, two = out.get("shards-1"), out.get("shards-2")
        if one and two and one["ops_per_s"]:
            print(f"two shards / one: {two['ops_per_s'] / one['ops_per_s']:.2f}x commits/s")
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
