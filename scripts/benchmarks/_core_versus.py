"""versus.py --in-process: this checkout's TransactionCore against another's, each in a
process of its own under its own venv (_core_calls.py), CPU per append and per five-op
commit, runs alternated A B B A; with --profile, cProfile of both diffed by function (own
time and calls per operation): where a ratio's microseconds go."""
from __future__ import annotations

import os
import pstats
import re
import subprocess
import tempfile

from common import log

HERE = os.path.dirname(os.path.abspath(__file__))
CALLS_SCRIPT = os.path.join(HERE, "_core_calls.py")
OPS = ("append", "commit")


def _python(checkout: str) -> str:
    return os.path.join(checkout, ".venv", "bin", "python")


def _cpu_us(checkout: str, op: str, calls: int) -> float:
    done = subprocess.run([_python(checkout), CALLS_SCRIPT, op, str(calls)], check=True,
                          capture_output=True, text=True, cwd=checkout)
    return float(done.stdout.split()[-1])


def _profile(checkout: str, op: str, calls: int, out: str) -> dict:
    subprocess.run([_python(checkout), CALLS_SCRIPT, op, str(calls), out], check=True,
                   capture_output=True, cwd=checkout)
    by_function: dict[tuple[str, str], list] = {}
    for (path, _, name), (_, ncalls, own, _, _) in pstats.Stats(out).stats.items():
        # One key across checkouts: the path inside the repository (or the library's).
        where = re.sub(r"^.*?/(services|shared|clients|site-packages|python3\.\d+)/", r"\1/",
                       path)
        name = re.sub(r" at 0x[0-9a-f]+", "", name)  # a builtin's object address
        row = by_function.setdefault((where, name), [0, 0.0])
        row[0] += ncalls
        row[1] += own
    return by_function


def run(this: str, other: str, calls: int, rounds: int, profile: bool, top: int = 25) -> None:
    print(f"\nin process: us of CPU per call (median of {rounds} alternated runs of {calls}); "
          "ratio = other / this")
    print(f"{'operation':10} {'this':>8} {'other':>8} {'ratio':>6}")
    for op in OPS:
        runs: dict[str, list[float]] = {"this": [], "other": []}
        for r in range(rounds):
            order = (("this", this), ("other", other))
            for name, checkout in (order if r % 2 == 0 else order[::-1]):
                runs[name].append(_cpu_us(checkout, op, calls))
            log(f"    {op}: run {r + 1}/{rounds} done")
        a, b = (sorted(runs[k])[len(runs[k]) // 2] for k in ("this", "other"))
        print(f"{op:10} {a:8.1f} {b:8.1f} {b / a:6.2f}")
    if not profile:
        return
    with tempfile.TemporaryDirectory() as d:
        for op in OPS:
            mine = _profile(this, op, calls, os.path.join(d, "this.prof"))
            theirs = _profile(other, op, calls, os.path.join(d, "other.prof"))
            rows = []
            for key in set(mine) | set(theirs):
                m, t = mine.get(key, [0, 0.0]), theirs.get(key, [0, 0.0])
                rows.append((m[1] - t[1], key, m[0], t[0]))
            rows.sort(key=lambda r: -abs(r[0]))
            print(f"\n{op}, profiled (cProfile inflates): own us per call, this minus other; "
                  "calls per operation")
            for diff, (where, name), mc, tc in rows[:top]:
                print(f"{1e6 * diff / calls:+8.2f}  {mc / calls:6.1f} {tc / calls:6.1f}  "
                      f"{name} ({where[-60:]})")
