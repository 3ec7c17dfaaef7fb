"""The web inspector's page load for a 10,000-frame Mind (run: scripts/bench ui).

Issue 45: page load p50 for the 10,000-frame context, target under 1 s. One `morphz
serve` and one `morphz ui` (development mode), each in its own process; the context is
built with bulk transactions (tests/inspector.py's seed_big); headless Debian chromium
under Selenium loads the page, each time in a fresh document, until the view is ready
(the Mind's JSON fetched and its graph drawn):

  baseline   the same page, the small release-story context (the page's fixed cost)
  mind 10k   the Mind view of the 10,000-frame context (page 1 of its frame list and the
             neighbourhood of its first frame); the first load after a change lists every
             frame (`cold`), later ones reuse that list while the context is unchanged

  scripts/bench ui
  scripts/bench ui -- --loads 10 --json /tmp/ui.json
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ServerProcess, log, percentile, table, target, write_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from morphz.client import Client  # noqa: E402

from tests.inspector import (BIG_FRAMES, browser, seed_big, seed_release,  # noqa: E402
                             wait_view)


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
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    loads = 3 if args.quick else args.loads
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as tmp:
        server = ServerProcess([sys.executable, "-m", "morphz.services.cli.main", "serve",
                                "--listen", "127.0.0.1:0", "--data", os.path.join(tmp, "data")],
                               log_path=os.path.join(tmp, "server.log"))
        ui = driver = None
        try:
            with Client(server.address, timeout=120) as mz:
                seed_release(mz, "release")
                t0 = time.perf_counter()
                seed_big(mz, "big")
                log(f"  seeded {BIG_FRAMES} frames in {time.perf_counter() - t0:.1f} s")
            ui = ServerProcess([sys.executable, "-m", "morphz.services.cli.main", "ui",
                                "--server", server.address, "--listen", "127.0.0.1:0"],
                               log_path=os.path.join(tmp, "ui.log"))
            base = f"http://127.0.0.1:{ui.port}/#/mind?context="
            driver = browser()
            rows = [measure(driver, "baseline: release story (3 frames)", base + "release", loads),
                    measure(driver, f"mind {BIG_FRAMES:,} frames", base + "big", loads)]
        finally:
            if driver is not None:
                driver.quit()
            for proc in (ui, server):
                if proc is not None:
                    proc.stop()
    print(table(rows, [("name", "case"), ("cold_ms", "cold ms"), ("p50_ms", "p50 ms"),
                       ("max_ms", "max ms"), ("loads", "loads")]))
    big = rows[1]
    print(f"10,000-frame Mind vs the 3-frame page: p50 x{big['p50_ms'] / rows[0]['p50_ms']:.1f}, "
          f"cold x{big['cold_ms'] / rows[0]['cold_ms']:.1f}")
    results = [target("ui page load p50, 10,000-frame Mind", big["p50_ms"] / 1e3, "< 1 s",
                      big["p50_ms"] < 1000, " s")]
    if args.json:
        write_json(args.json, {"rows": rows, "targets": results})


if __name__ == "__main__":
    main()
