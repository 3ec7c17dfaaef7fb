"""scripts/soak: an hour (--minutes) of mixed load with a fault every minute, on real
processes, and what must hold at the end (SOAK-01, issue 58; docs/soak.md).

  scripts/soak                               # 60 minutes on each topology, a new seed
  scripts/soak --minutes 3 --topology lmdb   # CI's soak
  scripts/soak --seed 1234 --minutes 10 --json /tmp/soak.json

The seed (printed first) chooses the load and the faults: the same seed runs the same
choices again (the machine's timing still differs). Progress goes to stderr every 30 s;
the table to stdout, the JSON report to --json. Exit 0 when every check passed.

Where it runs as root with `ip netns`, the soak re-runs itself in a network namespace of
its own, so the loopback it shapes for its network fault (tc tbf: netem is not in this
kernel) carries no one else's traffic."""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))  # tests/ (PostgreSQL, ports, the history checker)
sys.path.insert(0, str(HERE.parent.parent / "tests" / "model"))

from morphz.services.transaction.client import TransactionClient  # noqa: E402
from morphz.shared.errors import MorphzError  # noqa: E402

import report as R  # noqa: E402
from faults import FaultRun, Injector, Machine, Schedule, offered  # noqa: E402
from history import check_events, read_history  # noqa: E402
from load import SHARED_FRAMES, Abuser, Agent, Clients, Ledger  # noqa: E402
from procs import AllInOne, SplitPostgres, Topology  # noqa: E402

NETNS_ENV = "MORPHZ_SOAK_NETNS"
TOPOLOGIES = ("lmdb", "split-pg")
PROGRESS_SECONDS = 30.0
QUIET_SECONDS = 30.0  # a quiet window: the abuser rests and no fault is injected
QUIET_EVERY = 300.0   # one such window at least this often: the baseline follows the data
# (a shorter soak: four of them, a minute apart at least)
SAMPLE_SECONDS = 10.0
SPARE_SHARE = 0.5  # of a run long enough to judge memory: kills no process (Schedule)
RECOVERY_BOUND = 120.0  # seconds a fault's recovery is waited for
SETTLE_BOUND = 180.0    # seconds the end waits for the unsettled writes
# An audit replays a context's whole history: after an hour (~8,000 writes a context) it
# took more than the load's 10 s deadline on a machine at load average 30, and each retry
# started over. The checker's calls get this long each, its audits this long in all.
CHECK_TIMEOUT = 300.0
AUDIT_BOUND = 900.0
DISK_BYTES = 2 << 30


def spared_until(duration: float) -> float:
    """Seconds from the start during which no process is killed (0: none spared)."""
    return duration * SPARE_SHARE if duration >= R.SHORT else 0.0


def say(text: str) -> None:
    print(f"soak: {text}", file=sys.stderr, flush=True)


class Run:
    """One soak of one topology."""

    def __init__(self, topo: Topology, machine: Machine, args, seed: int, root: Path) -> None:
        self.topo, self.machine, self.args, self.seed, self.root = topo, machine, args, seed, root
        self.rng = random.Random(seed)
        self.ledger = Ledger()
        self.stop, self.stop_abuse = threading.Event(), threading.Event()
        self.contexts = [f"soak-{k}" for k in range(args.contexts)]
        self.series: dict[str, list] = defaultdict(list)
        self.births: dict[str, float] = {}  # NAME#N -> when it started (s from t0)
        self.faults: list[FaultRun] = []
        self.quiet: list[tuple[float, float]] = []  # quiet windows (s from t0)
        self.t0 = time.monotonic()
        self.said = 0.0  # when progress was last told

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def setup(self) -> None:
        c, abuser = Clients(self.topo, "agent"), Clients(self.topo, "abuser")
        try:
            abuser.tx.create_context("abuse")
            for ctx in [*self.contexts, "abuse"]:
                if ctx != "abuse":
                    c.tx.create_context(ctx)
                self.ledger.acked[ctx], self.ledger.rejected[ctx] = [], []
            for ctx in self.contexts:
                creates = " ".join(f"(create shared-{k} (n 0))" for k in range(SHARED_FRAMES))
                c.tx.commit(ctx, f"(context-tx (base-version 0) {creates})")
                for s in range(3):  # every session exists before messages name it
                    c.tx.append_event(ctx, f"s{s}", "user-message", "start")
        finally:
            c.close()
            abuser.close()

    def run(self) -> dict:
        self.setup()
        duration = self.args.minutes * 60
        quiet = min(60.0, max(15.0, duration * 0.1))
        agents = []
        for n in range(self.args.agents):
            ctx = self.contexts[n % len(self.contexts)]
            session = f"s{(n // len(self.contexts)) % 3}"
            others = [f"s{s}" for s in range(3) if f"s{s}" != session]
            agents.append(Agent(n, ctx, session, others, self.topo, self.ledger,
                                random.Random(self.rng.random()), self.stop))
        abuser = Abuser(self.topo, self.ledger, random.Random(self.rng.random()),
                        self.stop_abuse)
        self.resting = abuser.resting
        threads = [threading.Thread(target=a.run, daemon=True) for a in agents]
        sampler = threading.Thread(target=self.sample, daemon=True)
        self.t0 = time.monotonic()
        for t in [*threads, sampler]:
            t.start()
        say(f"{self.topo.name}: {len(agents)} agents over {len(self.contexts)} contexts; "
            f"quiet baseline for {quiet:.0f} s, then the abuser and a fault every "
            f"{self.args.fault_every:g} s until {duration / 60:g} min")
        self.wait_until(quiet)
        self.quiet.append((0.0, quiet))
        abuse = threading.Thread(target=abuser.run, daemon=True)
        abuse.start()
        self.spared = spared_until(duration)
        schedule = Schedule(offered(self.topo, self.machine), self.rng, self.spared)
        injector = Injector(self.topo, self.rng, self.ledger.wrote_since, say)
        next_fault = quiet + self.args.fault_every / 2
        while self.elapsed() < duration:
            if self.elapsed() >= next_fault and self.elapsed() < duration - 20:
                self.fault(injector, schedule.next(self.elapsed()))
                next_fault += self.args.fault_every
                if self.elapsed() - self.quiet[-1][1] >= min(QUIET_EVERY,
                                                             max(60.0, duration / 4)):
                    self.rest(min(QUIET_SECONDS, next_fault - self.elapsed() - 5,
                                  duration - self.elapsed()))
            self.wait_until(min(duration, next_fault))
        self.stop_abuse.set()
        self.stop.set()
        for t in [*threads, abuse]:
            t.join(60)
        say(f"{self.topo.name}: load stopped at {self.elapsed():.0f} s; settling and checking")
        try:
            return self.finish(duration, quiet, abuser)
        finally:
            for a in agents:  # after the settling, which sends through their clients
                a.c.close()

    def rest(self, seconds: float) -> None:
        """A quiet window: the normal load alone (its p50 is the baseline of the load
        around it)."""
        if seconds < 10:
            return
        self.resting.set()
        start = self.elapsed()
        try:
            self.wait_until(start + seconds)
        finally:
            self.resting.clear()
        self.quiet.append((start, self.elapsed()))

    def wait_until(self, at: float) -> None:
        while self.elapsed() < at:
            time.sleep(min(1.0, at - self.elapsed()))
            if self.elapsed() - self.said >= PROGRESS_SECONDS:
                self.said = self.elapsed()
                self.progress()

    def progress(self) -> None:
        with self.ledger.lock:
            writes, errors = len(self.ledger.writes), self.ledger.errors.most_common(4)
        rss = sum((p.sample() or (0, 0))[0] for p in self.topo.procs.values()) >> 20
        done = [f for f in self.faults if f.recovered_at]
        say(f"{self.topo.name} {self.elapsed() / 60:5.1f} min: {writes} writes acknowledged, "
            f"{len(self.faults)} faults ({len(done)} recovered), servers' RSS {rss} MiB, "
            f"errors {dict(errors)}")

    def fault(self, injector: Injector, kind: str) -> None:
        say(f"{self.topo.name} {self.elapsed() / 60:5.1f} min: fault {kind}")
        run = injector.run(kind)
        self.faults.append(run)
        deadline = time.monotonic() + RECOVERY_BOUND
        while not injector.recovered(run) and time.monotonic() < deadline:
            time.sleep(0.2)
        say(f"  {kind}: " + (f"first write {run.recovery():.2f} s after it was healed"
                             if run.recovered_at else "no write within "
                             f"{RECOVERY_BOUND:g} s") + (f" ({run.error})" if run.error else ""))

    def sample(self) -> None:
        while not self.stop.wait(SAMPLE_SECONDS):
            for p in self.topo.procs.values():
                got = p.sample()
                if got is not None:
                    name = f"{p.name}#{p.starts}"
                    self.births.setdefault(name, p.started - self.t0)
                    self.series[name].append((self.elapsed(), *got))

    # -- the end --------------------------------------------------------------------------
    def settle(self) -> int:
        """Send each write given up on again until its outcome is known; how many never
        were."""
        left = 0
        with self.ledger.lock:
            pending, self.ledger.unsettled = self.ledger.unsettled, []
        for _, send, record, refused in pending:
            deadline = time.monotonic() + SETTLE_BOUND
            while True:
                try:
                    record(send())
                    break
                except MorphzError as e:
                    if e.reason not in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED",
                                        "STORAGE_UNAVAILABLE", "OWNERSHIP_LOST", "NOT_OWNER",
                                        "STORAGE_FULL", "BYTES_IN_FLIGHT_LIMIT"):
                        refused(e)
                        break
                    if time.monotonic() > deadline:
                        left += 1
                        break
                    time.sleep(0.5)
        return left

    def finish(self, duration: float, quiet: float, abuser: Abuser) -> dict:
        for p in self.topo.procs.values():
            p.resume()
            if not p.pid:
                p.start()
        unsettled = self.settle()
        c = Clients(self.topo, "checker", timeout=CHECK_TIMEOUT)
        audits, history = {}, {"acknowledged": 0, "lost": 0, "duplicated": 0, "refused": 0,
                               "problems": [], "unsettled": unsettled}
        try:
            for ctx in [*self.contexts, "abuse"]:
                audits[ctx] = self.audit(c.tx, ctx)
                events, revision = read_history(c.tx, ctx)
                acked, rejected = self.ledger.acked[ctx], self.ledger.rejected[ctx]
                lost, doubled = R.exactly_once(events, acked)
                history["acknowledged"] += len({a["request_id"] for a in acked})
                history["refused"] += len(rejected)
                history["lost"] += lost
                history["duplicated"] += doubled
                history["problems"] += [f"{ctx}: {p}" for p in
                                        check_events(events, revision, acked, rejected)][:20]
        finally:
            c.close()
        windows = [(f.started - self.t0 - 1, (f.recovered_at or f.healed_at + 60) - self.t0 + 5)
                   for f in self.faults]
        report = {
            "topology": self.topo.name, "seed": self.seed, "minutes": self.args.minutes,
            "fault_every_s": self.args.fault_every, "agents": self.args.agents,
            "kills_spared_until_s": round(self.spared),
            "embedder": "hashing", "history": history, "audits": audits,
            "ledger_audits": dict(self.ledger.audits),
            "internal": {"count": self.ledger.errors["INTERNAL"] + self.ledger.errors["UNKNOWN"]
                         + self.tracebacks(), "seen": self.ledger.internal[:20]},
            "read_your_writes": dict(self.ledger.ryw), "ryw_missed": self.ledger.ryw_missed,
            "errors": dict(self.ledger.errors), "resends": self.ledger.resends,
            "abuser": dict(abuser.calls),
            "recovery": R.recoveries(self.faults),
            "faults": [{"kind": f.kind, "at_s": round(f.started - self.t0, 1),
                        "recovery_s": None if f.recovery() is None else round(f.recovery(), 2),
                        "error": f.error} for f in self.faults],
            "latency": R.latencies(self.ledger.ops, self.quiet, windows, self.t0,
                                   judged=duration >= R.SHORT),
            "resources": R.flatness(dict(self.series), self.births, duration),
            "not_injected": dict(self.machine.missing),
        }
        report["failed"] = R.verdict(report)
        return report

    def audit(self, tx: TransactionClient, ctx: str) -> bool:
        say(f"{self.topo.name}: auditing {ctx}")
        deadline = time.monotonic() + AUDIT_BOUND
        while True:
            try:
                return bool(tx.audit(ctx)["match"])
            except MorphzError as e:
                if time.monotonic() > deadline:
                    say(f"audit of {ctx} not answered: {e.reason}")
                    return False
                time.sleep(1)

    def tracebacks(self) -> int:
        """Calls answered INTERNAL (logged with their stacks) and threads that died, in
        the servers' logs: an error no caller saw is still a fault."""
        count = 0
        for p in self.topo.procs.values():
            try:
                text = p.log.read_text(errors="replace")
            except OSError:
                continue
            count += text.count("unhandled error in ") + text.count("Exception in thread")
        return count


def run_topology(name: str, args, seed: int, machine: Machine) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"morphz-soak-{name}-", dir=args.dir or None))
    disk = root / "disk"
    disk.mkdir()
    mounted = False
    if name == "lmdb" and os.geteuid() == 0:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs",
                                  str(disk)], capture_output=True).returncode == 0
    topo = None
    try:
        topo = AllInOne(root, disk) if name == "lmdb" else SplitPostgres(root)
        report = Run(topo, machine, args, seed, root).run()
        report["logs"] = str(root)
        return report
    finally:
        if topo is not None:
            topo.close()
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def in_namespace(argv: list[str]) -> int | None:
    """Run this soak again inside a network namespace of its own; its exit code, or None
    where the machine does not allow one (then the network fault is not offered)."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        return None
    ns = f"morphz-soak-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode:
        return None
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"],
                       check=True, capture_output=True)
        child = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, __file__, *argv],
                                 env=dict(os.environ, **{NETNS_ENV: ns}))
        try:
            return child.wait()
        except KeyboardInterrupt:  # stopped: the soak in the namespace stops its processes
            child.send_signal(signal.SIGINT)
            return child.wait()
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="scripts/soak", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0, help="0: a new one (printed)")
    ap.add_argument("--topology", choices=(*TOPOLOGIES, "both"), default="both")
    ap.add_argument("--fault-every", type=float, default=60.0, metavar="SECONDS")
    ap.add_argument("--agents", type=int, default=6)
    ap.add_argument("--contexts", type=int, default=3)
    ap.add_argument("--json", default="", help="write the report(s) here")
    ap.add_argument("--dir", default="", help="where the processes' data and logs go")
    ap.add_argument("--keep", action="store_true", help="keep data and logs")
    ap.add_argument("--no-netns", action="store_true", help="run in this network namespace")
    args = ap.parse_args(argv)
    if not args.seed:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
        argv += ["--seed", str(args.seed)]
    machine = Machine(netns=os.environ.get(NETNS_ENV, ""))
    if not machine.netns and not args.no_netns:
        say(f"seed {args.seed}")
        code = in_namespace(argv)
        if code is not None:
            return code
    if not machine.netns:
        machine.missing["net-slow"] = ("no network namespace of its own (needs root and "
                                       "`ip netns`); netem delay and loss are not in this "
                                       "kernel either, only tbf")
    else:
        machine.missing["net-drop"] = ("packet loss needs netem or iptables: netem is not "
                                       "in this kernel; only tbf shaping (delay under load)")
    say(f"seed {args.seed} (replay: scripts/soak --seed {args.seed} --minutes "
        f"{args.minutes:g} --topology {args.topology})")
    reports = []
    for name in (TOPOLOGIES if args.topology == "both" else (args.topology,)):
        reports.append(run_topology(name, args, args.seed, machine))
        print(R.table(reports[-1]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(reports if len(reports) > 1 else reports[0],
                                              indent=1))
    return 0 if all(not r["failed"] for r in reports) else 1


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM as Ctrl-C: every process the soak started is stopped


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # not waiting for gRPC's threads: the report is out, the processes gone
