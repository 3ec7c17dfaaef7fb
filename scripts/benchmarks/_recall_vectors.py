"""The vector leg off the hot paths (HYB-06), for scripts/benchmarks/recall.py (a helper: scripts/bench runs no `_` module).

- `fill_after_rebuild`: a rebuild's lexical part, then the time its vector leg takes to
  reach the head (it follows on its own), first with an empty vector cache and then
  again (the same embedder: every vector cached).
- `hot_paths`: commit (AppendEvent) p50 and lexical search p50 while the vector leg is
  idle, then while it lags behind a burst of events the lexical leg has indexed, and
  the vector leg's lag right after the burst and the time it takes to catch up.
(The default embedder's own rows, the hours a cold 1M-event leg takes among them:
_recall_default.py.)
"""
from __future__ import annotations

import time
from typing import Callable


from common import log, percentile

from morphz.shared.errors import MorphzError

POLL = 0.02


def _until(check: Callable[[], bool], bound: float) -> float:
    """Seconds until `check()` holds (polled), at most `bound`."""
    t = time.perf_counter()
    while not check():
        if time.perf_counter() - t > bound:
            raise TimeoutError("the vector leg did not catch up in time")
        time.sleep(POLL)
    return time.perf_counter() - t


def _vectors_lag(recall, context: str) -> int:
    """The leg's lag; an inspect past its deadline (a server just started on a loaded
    machine: one took over 60 s) counts as still lagging, and is asked again."""
    try:
        return recall.inspect(context)["vectors"]["lag"]
    except MorphzError as e:
        if e.reason != "DEADLINE_EXCEEDED":
            raise
        log(f"    (inspect of {context} past its deadline; asking again)")
        return -1


def fill_after_rebuild(recall, context: str, cold_rebuild_s: float, bound: float,
                       cached: bool = True) -> dict:
    """After the first rebuild (`cold_rebuild_s`, the cache empty): its vector fill; then
    (`cached`) a second rebuild and its fill, from the cache."""
    cold_fill = _until(lambda: _vectors_lag(recall, context) == 0, bound)
    if not cached:
        return {"cold_fill_s": cold_fill, "cold_total_s": cold_rebuild_s + cold_fill}
    t = time.perf_counter()
    recall.rebuild(context)
    warm_rebuild = time.perf_counter() - t
    warm_fill = _until(lambda: _vectors_lag(recall, context) == 0, bound)
    st = recall.inspect(context)["vectors"]
    return {"cold_fill_s": cold_fill, "cold_total_s": cold_rebuild_s + cold_fill,
            "cached_rebuild_s": warm_rebuild, "cached_fill_s": warm_fill,
            "cached_total_s": warm_rebuild + warm_fill,
            "ratio": (cold_rebuild_s + cold_fill) / (warm_rebuild + warm_fill),
            "cache_hits": st["cache_hits"], "cache_misses": st["cache_misses"]}


def hot_paths(tx, recall, store_commit_burst: Callable[[int], None], context: str,
              words: list[str], samples: int, burst: int) -> dict:
    """Commit and lexical search p50, vector leg idle vs lagging after `burst` events."""
    def ops(n: int, lagging: Callable[[], bool] = lambda: True) -> tuple[list, list, int]:
        commits, searches = [], []
        for i in range(n):
            if not lagging():
                break
            t = time.perf_counter()
            tx.append_event(context, "s1", "user-message", f"{words[i % len(words)]} hot {i}")
            commits.append(time.perf_counter() - t)
            t = time.perf_counter()
            recall.search(context, words[(i * 7) % len(words)], limit=20)
            searches.append(time.perf_counter() - t)
        return commits, searches, len(commits)

    ops(20)  # warm-up
    _until(lambda: _vectors_lag(recall, context) == 0, 600)
    idle_c, idle_s, _ = ops(samples)
    _until(lambda: _vectors_lag(recall, context) == 0, 600)
    t = time.perf_counter()
    store_commit_burst(burst)
    _until(lambda: recall.inspect(context)["lag"] == 0, 600)  # the lexical leg has it
    lexical_s = time.perf_counter() - t
    lag = _vectors_lag(recall, context)
    busy_c, busy_s, n_busy = ops(samples, lambda: _vectors_lag(recall, context) != 0)
    caught = _until(lambda rc=recall: _vectors_lag(rc, context) == 0, 3600)
    p = lambda xs: percentile(xs, 50) * 1000 if xs else float("nan")  # noqa: E731
    return {"idle_commit_p50_ms": p(idle_c), "idle_search_p50_ms": p(idle_s),
            "lagging_commit_p50_ms": p(busy_c), "lagging_search_p50_ms": p(busy_s),
            "lagging_samples": n_busy, "burst": burst, "burst_lexical_s": lexical_s,
            "vector_lag_after_burst": lag,
            "vector_catch_up_s": time.perf_counter() - t - lexical_s if caught else 0.0}


def steady_state(serve: Callable[[str], tuple], embedders: dict[str, str], context: str,
                 search_context: str, queries: list[str], words: list[str], rate: float,
                 samples: int, rounds: int) -> dict:
    """Commit p50 and lexical search p50 at a constant commit rate, the vector leg off
    (`--embedder none`) against on, each in a server of its own over the same data,
    `rounds` times each in turn (off, on, off, on...: load on the shared machine hits
    both alike). A tick: one commit to `context`, one lexical search of
    `search_context`, then sleep to the next tick of `rate` per second. With the leg
    on, its lag is sampled every tenth tick (outside the timings): the rate is one the
    leg keeps up with when its lag stays small and ends at 0."""
    out: dict = {name: {"commit": [], "search": [], "max_lag": 0, "end_lag": 0}
                 for name in embedders}
    tick = 1.0 / rate
    for r in range(rounds):
        for name, spec in embedders.items():
            app, tx, recall = serve(spec)
            row = out[name]
            try:
                if name == "on":  # what the off rounds wrote: the leg catches up first
                    _until(lambda rc=recall: _vectors_lag(rc, context) == 0, 3600)
                for i in range(10):  # warm-up
                    tx.append_event(context, "s1", "user-message", f"warm {r} {i}")
                    recall.search(search_context, queries[i % len(queries)], limit=20,
                                  mode="lexical")
                nxt = time.perf_counter()
                for i in range(samples):
                    t = time.perf_counter()
                    tx.append_event(context, "s1", "user-message",
                                    f"{words[i % len(words)]} steady {r} {i}")
                    row["commit"].append(time.perf_counter() - t)
                    t = time.perf_counter()
                    recall.search(search_context, queries[i % len(queries)], limit=20,
                                  mode="lexical")
                    row["search"].append(time.perf_counter() - t)
                    if name == "on" and i % 10 == 9:
                        row["max_lag"] = max(row["max_lag"], _vectors_lag(recall, context))
                    nxt += tick
                    time.sleep(max(0.0, nxt - time.perf_counter()))
                if name == "on":
                    row["end_lag"] = _vectors_lag(recall, context)
                    _until(lambda rc=recall: _vectors_lag(rc, context) == 0, 600)
            finally:
                app()
        log(f"    steady state: round {r + 1}/{rounds} done")
    p = lambda xs: percentile(xs, 50) * 1000  # noqa: E731
    res = {"rate_per_s": rate, "samples": samples, "rounds": rounds}
    for name, row in out.items():
        res[name] = {"commit_p50_ms": p(row["commit"]), "search_p50_ms": p(row["search"]),
                     "max_lag": row["max_lag"], "end_lag": row["end_lag"]}
    res["commit_ratio"] = res["on"]["commit_p50_ms"] / res["off"]["commit_p50_ms"]
    res["search_ratio"] = res["on"]["search_p50_ms"] / res["off"]["search_p50_ms"]
    return res
