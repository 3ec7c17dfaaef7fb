"""Helpers shared by the benchmarks in scripts/benchmarks/ (not a benchmark itself).

  log / Progress          messages and periodic progress lines on stderr
  percentile, summarize   latency lists -> ops/s, p50, p99
  ServerProcess           a server in its own process, its port read from its first line
  closed_loop             asyncio closed-loop load: N callers in flight for a time window
  run_drivers             run a load function in separate (spawned) processes, collect results
  table, write_json       results out
  target                  one issue target: measured value, goal, MET / NOT MET
  print_spy               the top functions of a py-spy raw file
  free_port               a loopback port nothing listens on now
"""
from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional, Sequence


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Progress:
    """`with Progress("what", seconds):` prints `what: 3/5 s` every `every` seconds."""

    def __init__(self, what: str, seconds: float, every: float = 2.0) -> None:
        self.what, self.seconds, self.every = what, seconds, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.wait(self.every):
            log(f"    {self.what}: {time.monotonic() - t0:.0f}/{self.seconds:.0f} s")

    def __enter__(self) -> "Progress":
        if self.seconds > self.every * 1.5:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()


def percentile(xs: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of `xs` (p in 0..100); NaN when empty."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


def summarize(latencies_s: Sequence[float], seconds: float, **extra) -> dict:
    """Throughput and latency (ms) of the operations completed in a `seconds` window."""
    n = len(latencies_s)
    return {"ops": n, "seconds": round(seconds, 3), "ops_per_s": n / seconds if seconds else 0.0,
            "p50_ms": percentile(latencies_s, 50) * 1e3, "p99_ms": percentile(latencies_s, 99) * 1e3,
            "mean_ms": (sum(latencies_s) / n * 1e3) if n else float("nan"), **extra}


def cpu_times(pid, *, reaped: bool = False) -> tuple[float, float]:
    """(user + system, system) CPU time of a process (all its threads) from
    /proc/PID/stat; `pid` may also be a path below /proc such as "self/task/TID" (one
    thread). `reaped`: with the CPU of its children that ended and were waited for."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    user, system = int(fields[11]), int(fields[12])  # then cutime, cstime
    if reaped:
        user, system = user + int(fields[13]), system + int(fields[14])
    tick = os.sysconf("SC_CLK_TCK")
    return (user + system) / tick, system / tick


def cpu_seconds(pid, *, reaped: bool = False) -> float:
    """User + system CPU time of a process or thread (see cpu_times)."""
    return cpu_times(pid, reaped=reaped)[0]


def process_tree(pid: int) -> list[int]:
    """pid and every living descendant (a server's worker processes: recall's fit worker,
    a rebuild's pool), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue  # ended while listed
            children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def tree_usage(pid: int, *, switches: bool = False) -> tuple[float, float, int]:
    """(user + system, system) CPU time of a process and all its descendants, living or
    ended, and with `switches` the context switches (voluntary and not) of the tree's
    living threads, all from one walk of /proc (so they are of one instant). A child that
    ends between two readings moves from the living into its parent's reaped time, so
    differences hold. A thread that waits for the GIL, a lock or the disk switches out,
    so switches per call show how much a server's threads hand work back and forth."""
    total = kernel = 0.0
    count = 0
    for p in process_tree(pid):
        try:
            cpu, system = cpu_times(p, reaped=True)
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile (and counted in its parent's reaped time)
        total, kernel = total + cpu, kernel + system
        if switches:
            count += _switches(p)
    return total, kernel, count


def _switches(pid: int) -> int:
    """Context switches of a process's living threads (one that ends meanwhile is left
    out)."""
    count = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/status") as f:
                count += sum(int(line.split()[1]) for line in f if "ctxt_switches:" in line)
        except (OSError, ValueError):
            continue
    return count


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and its living descendants."""
    total = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) * 1024 for line in f
                              if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            continue
    return total


class ServerProcess:
    """Start `cmd`; its first stdout line must contain HOST:PORT (`ready` regex, group 1 = port).

    The rest of its stdout/stderr goes to `log_path` (or is discarded)."""

    def __init__(self, cmd: Sequence[str], *, ready: str = r":(\d+)\b", timeout: float = 60,
                 env: Optional[dict] = None, log_path: Optional[str] = None) -> None:
        self._log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=self._log,
                                     env={**os.environ, **(env or {})}, start_new_session=True)
        self.pid = self.proc.pid
        line = self._first_line(timeout)
        m = re.search(ready, line)
        if not m:
            self.stop()
            raise RuntimeError(f"{cmd[0]}: unexpected first line {line!r}")
        self.port = int(m.group(1))
        self.first_line = line.strip()
        # Keep draining stdout so the server never blocks on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()

    def _first_line(self, timeout: float) -> str:
        box: list[str] = []
        t = threading.Thread(target=lambda: box.append(self.proc.stdout.readline().decode()),
                             daemon=True)
        t.start()
        t.join(timeout)
        if not box or not box[0]:
            self.stop()
            raise RuntimeError(f"server did not report its port within {timeout}s "
                               f"(exit code {self.proc.poll()})")
        return box[0]

    def _drain(self) -> None:
        for _ in iter(self.proc.stdout.readline, b""):
            pass

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        """The server's CPU, its worker processes' included."""
        return tree_usage(self.pid)[0]

    def usage(self) -> tuple[float, float, int]:
        """The server's CPU (user + system, system), its worker processes' included, and
        its living threads' context switches, read together (tree_usage)."""
        return tree_usage(self.pid, switches=True)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not subprocess.DEVNULL:
            self._log.close()

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass
class LoadResult:
    """What one closed loop saw inside its measurement window."""
    latencies_s: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    tags: dict[str, int] = field(default_factory=dict)  # counters an op chose to report
    seconds: float = 0.0
    cpu_s: float = 0.0  # this (client) process's CPU time inside the window


async def closed_loop(op: Callable[[int, int], Awaitable[Optional[str]]], inflight: int,
                      seconds: float, warmup: float) -> LoadResult:
    """`inflight` callers each await `op(caller, i)` back to back for warmup + seconds.

    Only calls that start inside the window after the warm-up count; `op` may return a tag
    (counted), and an exception counts as an error under its type (or gRPC code)."""
    res = LoadResult(seconds=seconds)
    loop = asyncio.get_running_loop()
    t_start = loop.time() + warmup
    t_end = t_start + seconds
    cpu: list[float] = []
    loop.call_at(t_start, lambda: cpu.append(time.process_time()))
    loop.call_at(t_end, lambda: cpu.append(time.process_time()))

    async def caller(c: int) -> None:
        i = 0
        while True:
            t0 = loop.time()
            if t0 >= t_end:
                return
            try:
                tag = await op(c, i)
            except Exception as e:  # noqa: BLE001 - a measurement records failures
                code = getattr(e, "code", None)
                name = str(code()) if callable(code) else type(e).__name__
                if t0 >= t_start:
                    res.errors[name] = res.errors.get(name, 0) + 1
                i += 1
                continue
            t1 = loop.time()
            if t0 >= t_start:
                res.latencies_s.append(t1 - t0)
                if tag:
                    res.tags[tag] = res.tags.get(tag, 0) + 1
            i += 1

    await asyncio.gather(*(caller(c) for c in range(inflight)))
    if len(cpu) == 2:
        res.cpu_s = cpu[1] - cpu[0]
    return res


def merge(results: Sequence[LoadResult]) -> LoadResult:
    out = LoadResult(seconds=max((r.seconds for r in results), default=0.0))
    for r in results:
        out.latencies_s += r.latencies_s
        out.cpu_s += r.cpu_s
        for src, dst in ((r.errors, out.errors), (r.tags, out.tags)):
            for k, v in src.items():
                dst[k] = dst.get(k, 0) + v
    return out


def _driver_main(fn, spec, ready, go, out) -> None:
    try:
        out.put(("ok", fn(spec, ready, go)))
    except BaseException as e:  # noqa: BLE001 - report to the parent, never hang it
        ready.set()
        out.put(("error", f"{type(e).__name__}: {e}"))


def run_drivers(fn: Callable[[dict, Any, Any], LoadResult], specs: Sequence[dict], *,
                during: Callable[[], Any] = lambda: None,
                before: Callable[[], Any] = lambda: None,
                timeout: float = 600) -> tuple[LoadResult, Any]:
    """Run `fn(spec, ready, go)` in one spawned process per spec and merge their results.

    Each driver sets its `ready` event after its (untimed) set-up and waits for `go`, so
    all start together; `before()` runs in this process once all are ready (before `go`),
    `during()` once they are going, and its return value is handed back (e.g. server CPU
    sampled over the window)."""
    mp = multiprocessing.get_context("spawn")
    out = mp.Queue()
    go = mp.Event()
    procs, readies = [], []
    for spec in specs:
        ready = mp.Event()
        p = mp.Process(target=_driver_main, args=(fn, spec, ready, go, out), daemon=True)
        p.start()
        procs.append(p)
        readies.append(ready)
    try:
        for r in readies:
            if not r.wait(timeout):
                raise RuntimeError("load driver did not get ready")
        before()
        go.set()
        observed = during()
        results = []
        for _ in procs:
            status, value = out.get(timeout=timeout)
            if status != "ok":
                raise RuntimeError(f"load driver failed: {value}")
            results.append(value)
        return merge(results), observed
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()


def split(total: int, parts: int) -> list[int]:
    """`total` callers spread over `parts` processes, as evenly as possible."""
    parts = max(1, min(parts, total))
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def fmt(v: Any) -> str:
    if isinstance(v, float):
        if v != v:
            return "-"
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}"
    return str(v)


def table(rows: Sequence[dict], columns: Sequence[tuple[str, str]]) -> str:
    """A plain-text table; `columns` are (key, header) pairs."""
    cells = [[h for _, h in columns]] + [[fmt(r.get(k, "")) for k, _ in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_json(path: str, obj: Any) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=False, default=str)
        f.write("\n")


def target(name: str, value: float, goal: str, met: bool, unit: str = "") -> dict:
    """Print one target line the way every benchmark does and return it (for --json)."""
    print(f"TARGET {name}: {value:,.3f}{unit} (target {goal}): {'MET' if met else 'NOT MET'}",
          flush=True)
    return {"target": name, "value": value, "goal": goal, "met": met}


def print_spy(path: str, top: int) -> None:
    """Top functions of a py-spy raw file ("f1;f2;...;leaf N" per line; a frame is
    "name (file:line)", counted here by function: "name (file)")."""
    own: dict[str, int] = {}
    under: dict[str, int] = {}
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            k = int(count)
            frames = [re.sub(r":\d+\)$", ")", fr) for fr in stack.split(";")]
            total += k
            own[frames[-1]] = own.get(frames[-1], 0) + k
            for fr in set(frames):
                under[fr] = under.get(fr, 0) + k
    print(f"py-spy: {total} samples in {path}")
    for title, counts in (("own samples", own), ("samples under (inclusive)", under)):
        print(f"top {top} by {title}:")
        for fr, k in sorted(counts.items(), key=lambda kv: -kv[1])[:top]:
            print(f"  {100 * k / total:5.1f}%  {fr}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
