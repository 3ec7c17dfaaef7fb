"""The soak's faults, one at a time, chosen by the seed from what the topology and the
machine offer. Each is injected, held, then healed; `healed_at` is when the system was
given back what it lost (a killed process started again, a paused one resumed, the
disk freed, the network restored, a standby promoted): recovery is timed from there to
the first acknowledged write sent after it.

  kill:NAME     SIGKILL the process, start it again on its data at once
  pause:NAME    SIGSTOP it for PAUSE_SECONDS, then SIGCONT
  pg-failover   SIGKILL the PostgreSQL primary, promote the standby, rebuild the lost
                member as the new standby (commits wait for it: synchronous)
  pg-pause      SIGSTOP every process of the PostgreSQL primary, then SIGCONT
  disk-full     fill the data's file system (a tmpfs) to the last MiB, then free it
  net-slow      shape loopback to 1 Mbit/s with 300 ms of queue (tc tbf) for
                NET_SECONDS: the network namespace's only link (main.py runs the soak
                in one of its own where the machine allows it)
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from tests.pg import _children

from procs import Topology

PAUSE_SECONDS = 10.0
DISK_SECONDS = 15.0
NET_SECONDS = 15.0
FILL_CHUNK = 4 << 20


@dataclass
class FaultRun:
    kind: str            # e.g. "kill:storage" (the kind reports group by)
    started: float       # time.monotonic() of the injection
    healed_at: float = 0.0
    recovered_at: float = 0.0  # the first acknowledged write sent after healed_at
    error: str = ""      # the fault could not be injected or healed

    @property
    def group(self) -> str:
        return self.kind

    def recovery(self) -> Optional[float]:
        return self.recovered_at - self.healed_at if self.recovered_at else None


@dataclass
class Machine:
    """What this machine allows, found out once: why a fault kind is not offered."""
    netns: str = ""           # the soak's network namespace ("" if it runs in none)
    missing: dict[str, str] = field(default_factory=dict)


def offered(topo: Topology, machine: Machine) -> list[str]:
    kinds = [f"kill:{n}" for n in topo.procs] + [f"pause:{n}" for n in topo.procs]
    if topo.pg is not None:
        kinds += ["pg-failover", "pg-pause"]
    if topo.data_dir is not None and _is_tmpfs(topo.data_dir):
        kinds.append("disk-full")
    elif topo.data_dir is not None:
        machine.missing["disk-full"] = "the data is not on a file system of its own (tmpfs)"
    else:
        machine.missing["disk-full"] = (
            "not on PostgreSQL: it PANICs when its WAL cannot be written, and the storage "
            "service's own quota counts its local folder only")
    if machine.netns:
        kinds.append("net-slow")
    return kinds


class Schedule:
    """Which fault comes next: every offered kind once in a seeded order, then again. A
    process's memory is judged over a life of 15 minutes at least (report.py: warm-up and
    judged life), which a kill every few minutes never leaves (all-in-one: one in four
    faults). So before `spared` seconds no process is killed: the faults are the other
    kinds, one a minute all the same; from then on every kind, kills of each process too."""

    def __init__(self, kinds: list[str], rng: random.Random, spared: float = 0.0) -> None:
        self.kinds, self.rng, self.spared = kinds, rng, spared
        self.unkilled = [k for k in kinds if not k.startswith("kill:")] or kinds
        self.cycle: list[str] = []
        self.sparing = False  # what the cycle was drawn for

    def next(self, elapsed: float) -> str:
        sparing = elapsed < self.spared
        if not self.cycle or sparing != self.sparing:
            pool = self.unkilled if sparing else self.kinds
            self.cycle, self.sparing = self.rng.sample(pool, len(pool)), sparing
        return self.cycle.pop()


def _is_tmpfs(path: Path) -> bool:
    best, fs = "", ""
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and str(path).startswith(parts[1]) and len(parts[1]) > len(best):
            best, fs = parts[1], parts[2]
    return fs == "tmpfs"


class Injector:
    """Runs one fault on `topo`; `wrote_since(t)` says when the first write sent after t
    was acknowledged (0: none yet)."""

    def __init__(self, topo: Topology, rng: random.Random,
                 wrote_since: Callable[[float], float], say: Callable[[str], None]) -> None:
        self.topo, self.rng, self._wrote_since, self.say = topo, rng, wrote_since, say

    def run(self, kind: str) -> FaultRun:
        run = FaultRun(kind, time.monotonic())
        action, _, name = kind.partition(":")
        try:
            {"kill": lambda: self._kill(name), "pause": lambda: self._pause(name),
             "pg-failover": self._pg_failover, "pg-pause": self._pg_pause,
             "disk-full": self._disk_full, "net-slow": self._net_slow}[action]()
        except Exception as e:  # noqa: BLE001 - reported: the soak goes on
            run.error = f"{type(e).__name__}: {str(e)[:300]}"
        run.healed_at = time.monotonic()
        return run

    def recovered(self, run: FaultRun) -> bool:
        if not run.recovered_at:
            run.recovered_at = self._wrote_since(run.healed_at)
        return bool(run.recovered_at)

    def _kill(self, name: str) -> None:
        p = self.topo.procs[name]
        p.kill()
        p.start()

    def _pause(self, name: str) -> None:
        p = self.topo.procs[name]
        p.pause()
        time.sleep(PAUSE_SECONDS)
        p.resume()

    def _pg_failover(self) -> None:
        pg = self.topo.pg
        pg.fail_over()
        pg.rebuild_standby()

    def _pg_pause(self) -> None:
        primary = self.topo.pg.primary
        pids = [primary.pid(), *_children(primary.pid())]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(PAUSE_SECONDS)
        finally:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass

    def _disk_full(self) -> None:
        filler = self.topo.data_dir / "filler"
        try:
            with open(filler, "wb") as f:
                chunk = b"\0" * FILL_CHUNK
                while shutil.disk_usage(self.topo.data_dir).free > FILL_CHUNK:
                    f.write(chunk)
                    f.flush()
                left = shutil.disk_usage(self.topo.data_dir).free - (256 << 10)
                if left > 0:
                    f.write(b"\0" * left)
            time.sleep(DISK_SECONDS)
        except OSError:
            time.sleep(DISK_SECONDS)  # full already: as intended
        finally:
            filler.unlink(missing_ok=True)

    def _net_slow(self) -> None:
        shape = ["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "1mbit",
                 "burst", "32kb", "latency", "300ms"]
        subprocess.run(shape, check=True, capture_output=True)
        try:
            time.sleep(NET_SECONDS)
        finally:
            subprocess.run(["tc", "qdisc", "del", "dev", "lo", "root"], capture_output=True)
