"""One principal's expensive calls against another's cheap ones (run: scripts/bench abuse).

Issue 40's benchmark (SEC-07). A `morphz serve` process with bearer tokens; alice owns a
large context (EVENTS events of EVENT_MIB MiB), bob a small one.

  idle      bob alone: GetStatus and AppendEvent in turn, one at a time (p50 of each)
  abuse     the same while alice keeps CALLERS Audit calls of her large context in flight,
            each with a 1 s deadline (from a process of their own; a refused one is sent
            again after BACKOFF seconds, as a gRPC client's retry policy would)
  after     once alice stops: the server CPU used after the last audit's deadline, and
            how long until the server went quiet (< 5% of a core over 0.1 s)

Printed: bob's p50 under abuse / idle for status and append (target within 3x), and the
time the passed-deadline audits kept using CPU (target: stops within 1 s). `--budgets
off` raises every budget as far as it goes and turns pacing off (15 expensive calls at
once, the most 16 workers allow), for a ratio next to the default budgets'.

  scripts/bench abuse                          # 8 events of 31 MiB, 5 s phases
  scripts/bench abuse -- --events 4 --seconds 3
  scripts/bench abuse -- --budgets off --json /tmp/abuse.json
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ServerProcess, cpu_times, log, percentile, target, write_json  # noqa: E402

from morphz.api.transaction.v1 import transaction_pb2 as tpb  # noqa: E402
from morphz.api.transaction.v1 import transaction_pb2_grpc as tpb_grpc  # noqa: E402
from morphz.shared.grpc.auth import ClientAuth  # noqa: E402

TOKENS = {"alice": "alice-bench-token-5b0d0c1e", "bob": "bob-bench-token-7c41e0d2b9"}
BIG = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
DEADLINE = 1.0
BACKOFF = 0.1
OFF = ["--max-expensive-rpcs", "15", "--max-principal-rpcs", "15",  # 16 workers
       "--expensive-cpu-seconds", "1000000", "--principal-cpu-seconds", "1000000",
       "--expensive-share", "1"]


def stub(address: str, who: str) -> tpb_grpc.TransactionServiceStub:
    return tpb_grpc.TransactionServiceStub(
        ClientAuth(token=TOKENS[who]).channel(address, options=BIG))


def bob_latencies(address: str, seconds: float) -> dict[str, list[float]]:
    """bob's status and append latencies (s), one call at a time for `seconds`."""
    s = stub(address, "bob")
    out: dict[str, list[float]] = {"status": [], "append": []}
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        t0 = time.monotonic()
        s.GetStatus(tpb.GetStatusRequest(context="b"), timeout=30)
        t1 = time.monotonic()
        s.AppendEvent(tpb.AppendEventRequest(context="b", session="s", kind="user-message",
                                             text=f"note {i}"), timeout=30)
        t2 = time.monotonic()
        out["status"].append(t1 - t0)
        out["append"].append(t2 - t1)
        i += 1
    return out


def alice_abuse(address: str, callers: int, stop, results) -> None:
    """CALLERS threads, each sending Audit calls with a 1 s deadline until `stop`; puts
    (answered by code, the last deadline, as time.time()) on `results`."""
    s = stub(address, "alice")
    codes: dict[str, int] = {}
    last = [0.0]
    lock = threading.Lock()

    def run() -> None:
        while not stop.is_set():
            with lock:
                last[0] = max(last[0], time.time() + DEADLINE)
            try:
                s.Audit(tpb.AuditRequest(context="a"), timeout=DEADLINE)
                code = "OK"
            except grpc.RpcError as e:
                code = e.code().name
            with lock:
                codes[code] = codes.get(code, 0) + 1
            if code == "RESOURCE_EXHAUSTED":
                stop.wait(BACKOFF)
    threads = [threading.Thread(target=run) for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.put((codes, last[0]))


def quiet_after(pid: int, since: float, bound: float = 120.0) -> tuple[float, float]:
    """(CPU-seconds the server used from wall time `since`, seconds from `since` until it
    used less than 5% of a core over 0.1 s)."""
    while time.time() < since:
        time.sleep(0.01)
    start_cpu = cpu_times(pid)[0]
    end = time.monotonic() + bound
    while time.monotonic() < end:
        before, t0 = cpu_times(pid)[0], time.time()
        time.sleep(0.1)
        after = cpu_times(pid)[0]
        if after - before < 0.005:
            return after - start_cpu, t0 - since
    return cpu_times(pid)[0] - start_cpu, bound


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=8, help="events in alice's context")
    p.add_argument("--event-mib", type=int, default=31, help="MiB of each event's text")
    p.add_argument("--callers", type=int, default=32, help="alice's audits in flight")
    p.add_argument("--seconds", type=float, default=5.0, help="each phase's length")
    p.add_argument("--budgets", choices=("on", "off"), default="on")
    p.add_argument("--json", default="")
    args = p.parse_args()

    root = tempfile.mkdtemp(prefix="morphz-abuse-")
    tokens = os.path.join(root, "tokens.json")
    with open(tokens, "w") as f:
        json.dump({token: name for name, token in TOKENS.items()}, f)
    server = ServerProcess([sys.executable, "-m", "morphz.services.cli.main", "serve",
                            "--listen", "127.0.0.1:0", "--data", os.path.join(root, "data"),
                            "--tokens", tokens, *(OFF if args.budgets == "off" else [])],
                           log_path=os.path.join(root, "server.log"))
    try:
        alice, bob = stub(server.address, "alice"), stub(server.address, "bob")
        alice.CreateContext(tpb.CreateContextRequest(context="a"), timeout=30)
        bob.CreateContext(tpb.CreateContextRequest(context="b"), timeout=30)
        text = "x" * (args.event_mib << 20)
        log(f"  alice's context: {args.events} events of {args.event_mib} MiB")
        for _ in range(args.events):
            alice.AppendEvent(tpb.AppendEventRequest(context="a", session="s",
                                                     kind="user-message", text=text),
                              timeout=120)
        del text
        t0 = time.monotonic()
        alice.Audit(tpb.AuditRequest(context="a"), timeout=300)
        log(f"  one audit of it alone: {time.monotonic() - t0:.2f} s")

        log(f"  idle: bob alone for {args.seconds:g} s")
        idle = bob_latencies(server.address, args.seconds)

        ctx = multiprocessing.get_context("spawn")
        stop, results = ctx.Event(), ctx.Queue()
        abuser = ctx.Process(target=alice_abuse, args=(server.address, args.callers, stop,
                                                       results))
        abuser.start()
        time.sleep(1.0)  # the audits fill the server first
        log(f"  abuse: bob beside {args.callers} audits in flight for {args.seconds:g} s")
        cpu0 = cpu_times(server.pid)[0]
        abused = bob_latencies(server.address, args.seconds)
        cpu_abuse = cpu_times(server.pid)[0] - cpu0
        stop.set()
        codes, last_deadline = results.get(timeout=120)
        abuser.join(60)
        after_cpu, quiet_s = quiet_after(server.pid, last_deadline)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)

    rows = {}
    for kind in ("status", "append"):
        p_idle, p_abuse = percentile(idle[kind], 50), percentile(abused[kind], 50)
        rows[kind] = {"idle_p50_ms": p_idle * 1e3, "abuse_p50_ms": p_abuse * 1e3,
                      "abuse_p99_ms": percentile(abused[kind], 99) * 1e3,
                      "calls_abuse": len(abused[kind]), "ratio": p_abuse / p_idle}
        print(f"{kind:7s} idle p50 {p_idle * 1e3:7.2f} ms ({len(idle[kind])} calls)  under "
              f"abuse p50 {p_abuse * 1e3:7.2f} ms (p99 {rows[kind]['abuse_p99_ms']:.1f} ms, "
              f"{len(abused[kind])} calls)  ratio {rows[kind]['ratio']:.2f}x")
    print(f"alice's audits answered: {codes}; server CPU during abuse "
          f"{cpu_abuse / args.seconds:.2f} cores")
    print(f"after the last audit's deadline: {after_cpu:.2f} CPU-s used, quiet after "
          f"{quiet_s:.2f} s")
    targets = [target(f"{k} p50 under abuse / idle (budgets {args.budgets})",
                      rows[k]["ratio"], "<= 3", rows[k]["ratio"] <= 3, "x")
               for k in ("status", "append")]
    targets.append(target("CPU after the audits' deadline stops within", quiet_s, "<= 1 s",
                          quiet_s <= 1.0, " s"))
    if args.json:
        write_json(args.json, {"args": vars(args), "rows": rows, "codes": codes,
                               "cpu_after_deadline_s": after_cpu, "quiet_after_s": quiet_s,
                               "targets": targets})
    return 0


if __name__ == "__main__":
    sys.exit(main())
