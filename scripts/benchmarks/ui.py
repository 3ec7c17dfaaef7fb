"""The web inspector's page loads: a 10,000-frame Mind, and the evaluation pages of a
context of 100,000 events and 10,000 snapshots (run: scripts/bench ui).

Issue 45: page load p50 for the 10,000-frame context, target under 1 s. One `morphz
serve` and one `morphz ui` (development mode), each in its own process; the context is
built with bulk transactions (tests/inspector.py's seed_big); headless Debian chromium
under Selenium loads the page, each time in a fresh document, until the view is ready
(the Mind's JSON fetched and its graph drawn):

  baseline   the same page, the small release-story context (the page's fixed cost)
  mind 10k   the Mind view of the 10,000-frame context (page 1 of its frame list and the
             neighbourhood of its first frame); the first load after a change lists every
             frame (`cold`), later ones reuse that list while the context is unchanged

Issue 57: the evaluation pages (UI-03), target under 1 s each, for a context of
--events events (100,000) and --snapshots snapshots (10,000), built in process through the
import path and the cores (scripts/benchmarks/_evaluations_seed.py; its build time is
reported), then served by `morphz serve` from its data folder; beside the same pages of
the 20-step loop of tests/evaluation_loop.py (the pages' fixed cost):

  evaluations         a session's evaluations, the first page (the newest 20 snapshots)
  evaluations deep    the page 200 pages into the listing (through its cursor)
  step newest         the step view of the newest evaluation
  step oldest         the step view of the oldest one (its history read from its claim)
  encoding diff       two consecutive steps' encodings, region by region

  scripts/bench ui
  scripts/bench ui -- --loads 10 --json /tmp/ui.json
  scripts/bench ui -- --only evaluations --events 20000 --snapshots 2000
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from typing import Iterator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ServerProcess, log, percentile, table, target, write_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from morphz.client import Client  # noqa: E402

from tests import evaluation_loop as loop  # noqa: E402
from tests.inspector import (BIG_FRAMES, browser, seed_big, seed_release,  # noqa: E402
                             wait_view)
import _evaluations_seed as seed  # noqa: E402


def load_once(driver, url: str) -> float:
    driver.get("about:blank")
    t0 = time.perf_counter()
    driver.get(url)
    state = wait_view(driver, timeout=120)
    elapsed = time.perf_counter() - t0
    if state != "ready":
        raise RuntimeError(f"{url}: the view did not load: "
                           f"{driver.find_element('id', 'error').text}")
    return elapsed


def measure(driver, name: str, url: str, loads: int) -> dict:
    cold = load_once(driver, url)
    warm = [load_once(driver, url) for _ in range(loads)]
    row = {"name": name, "cold_ms": cold * 1e3, "p50_ms": percentile(warm, 50) * 1e3,
           "max_ms": max(warm) * 1e3, "loads": loads}
    log(f"  {name}: cold {row['cold_ms']:.0f} ms, p50 {row['p50_ms']:.0f} ms")
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loads", type=int, default=10, help="page loads per case after the cold one")
    ap.add_argument("--quick", action="store_true", help="3 loads per case")
    ap.add_argument("--only", choices=("mind", "evaluations"), default="",
                    help="run one half (default: both)")
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--snapshots", type=int, default=10_000)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    loads = 3 if args.quick else args.loads
    out: dict = {"rows": [], "targets": []}
    if args.only != "evaluations":
        mind(loads, out)
    if args.only != "mind":
        evaluations_bench(loads, args.events, args.snapshots, out)
    if args.json:
        write_json(args.json, out)


@contextlib.contextmanager
def served(tmp: str, data: str, *flags: str) -> Iterator[ServerProcess]:
    """`morphz serve` on `data`, stopped on the way out."""
    server = ServerProcess([sys.executable, "-m", "morphz.services.cli.main", "serve",
                            "--listen", "127.0.0.1:0", "--data", data, *flags],
                           log_path=os.path.join(tmp, "server.log"))
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def inspected(tmp: str, server: ServerProcess) -> Iterator[tuple[str, object]]:
    """`morphz ui` (development mode) in front of `server`, and a browser: (the page's
    base URL, the driver)."""
    ui = ServerProcess([sys.executable, "-m", "morphz.services.cli.main", "ui", "--server",
                        server.address, "--listen", "127.0.0.1:0"],
                       log_path=os.path.join(tmp, "ui.log"))
    driver = None
    try:
        driver = browser()
        yield f"http://127.0.0.1:{ui.port}/#/", driver
    finally:
        if driver is not None:
            driver.quit()
        ui.stop()


def mind(loads: int, out: dict) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as tmp, \
            served(tmp, os.path.join(tmp, "data")) as server:
        with Client(server.address, timeout=120) as mz:
            seed_release(mz, "release")
            t0 = time.perf_counter()
            seed_big(mz, "big")
            log(f"  seeded {BIG_FRAMES} frames in {time.perf_counter() - t0:.1f} s")
        with inspected(tmp, server) as (base, driver):
            rows = [measure(driver, "baseline: release story (3 frames)",
                            base + "mind?context=release", loads),
                    measure(driver, f"mind {BIG_FRAMES:,} frames", base + "mind?context=big",
                            loads)]
    print(table(rows, COLUMNS))
    big = rows[1]
    print(f"10,000-frame Mind vs the 3-frame page: p50 x{big['p50_ms'] / rows[0]['p50_ms']:.1f}, "
          f"cold x{big['cold_ms'] / rows[0]['cold_ms']:.1f}")
    out["rows"] += rows
    out["targets"].append(target("ui page load p50, 10,000-frame Mind", big["p50_ms"] / 1e3,
                                 "< 1 s", big["p50_ms"] < 1000, " s"))


def evaluations_bench(loads: int, events: int, snapshots: int, out: dict) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-ui-evals-") as tmp:
        data = os.path.join(tmp, "data")
        t0 = time.perf_counter()
        built = seed.build(data, "big", events, snapshots, log)
        log(f"  built {built['events']:,} events and {built['snapshots']:,} snapshots in "
            f"{time.perf_counter() - t0:.0f} s (history {built['import_s']:.0f} s, "
            f"evaluations {built['evaluations_s']:.0f} s)")
        with served(tmp, data, "--embedder", "hashing") as server:
            with Client(server.address, timeout=120) as mz:
                steps = loop.run(mz, "small")
                cases = [(f"{name}, 20-step loop", route) for name, route in
                         pages(mz, "small", steps[-1].session).items()]
                cases += [(f"{name}, {built['events']:,} events / {built['snapshots']:,} "
                           "snapshots", route) for name, route in pages(mz, "big", "main").items()]
            with inspected(tmp, server) as (base, driver):
                rows = [measure(driver, name, base + route, loads) for name, route in cases]
    print(table(rows, COLUMNS))
    half = len(rows) // 2
    for small, big in zip(rows[:half], rows[half:]):
        print(f"{big['name']} vs the loop's: p50 x{big['p50_ms'] / small['p50_ms']:.2f}")
        out["targets"].append(target(f"ui page load p50, {big['name']}", big["p50_ms"] / 1e3,
                                     "< 1 s", big["p50_ms"] < 1000, " s"))
    out["rows"] += rows
    out["built"] = built


COLUMNS = [("name", "case"), ("cold_ms", "cold ms"), ("p50_ms", "p50 ms"), ("max_ms", "max ms"),
           ("loads", "loads")]


def pages(mz: Client, context: str, session: str) -> dict[str, str]:
    """The routes of the evaluation pages of `context`: the listing's first page and one
    200 pages in (or its last), the newest and the oldest step, and the diff of the
    newest step's encoding with the one before."""
    first = mz.list_snapshots(context, session=session, limit=20)
    cursor, page = first.next_cursor, first
    for _ in range(199):
        if not page.next_cursor:
            break
        cursor = page.next_cursor
        page = mz.list_snapshots(context, session=session, limit=20, cursor=cursor)
    newest = mz.evaluation(context, first.snapshots[0].activation)
    older = mz.evaluation(context, newest.previous)
    oldest = page.snapshots[-1].activation
    q = f"context={context}&session={session}"
    return {"evaluations": f"evaluations?{q}",
            "evaluations deep": f"evaluations?{q}&cursor={cursor}",
            "step newest": f"evaluation?context={context}&activation={newest.activation}",
            "step oldest": f"evaluation?context={context}&activation={oldest}",
            "encoding diff": f"encdiff?context={context}&from={older.snapshots[-1].snapshot}"
                             f"&to={newest.snapshots[-1].snapshot}"}


if __name__ == "__main__":
    main()
