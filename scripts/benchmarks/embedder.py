"""The default embedder's speed on synthetic agent events (recall.py's generator):
learning the basis, then embedding every event, beside the lexical analysis of the
same events (the per-event work a rebuild already does) measured in the same run.

    scripts/bench embedder [-- --events 100000]

A rebuild of 1M events with vectors must finish in 5 minutes; the target below gives
the embedder half of that: fit + embedding 1M events, projected from the measured rate.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import log, target  # noqa: E402
from recall import event_text, vocabulary, zipf_weights  # noqa: E402

from morphz.services.recall.embedding.default import default_embedder  # noqa: E402
from morphz.shared.text.analyze import terms_text  # noqa: E402

BUDGET_1M_S = 150.0


def events(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = vocabulary(rng)
    rng.shuffle(words)
    cum, acc = [], 0.0
    for w in zipf_weights(len(words)):
        acc += w
        cum.append(acc)
    return [event_text(rng, words, cum) for _ in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=15)
    args = ap.parse_args()
    texts = events(args.events, args.seed)
    log(f"{len(texts)} events, {sum(map(len, texts)) / len(texts):.0f} chars on average")

    # CPU seconds beside wall seconds: on a shared machine the wall clock also
    # counts the other processes' turns.
    w0, c0 = time.perf_counter(), time.process_time()
    for t in texts:
        terms_text(t)
    analysis_s, analysis_cpu = time.perf_counter() - w0, time.process_time() - c0

    w0, c0 = time.perf_counter(), time.process_time()
    embedder = default_embedder().fitted(texts)
    fit_s, fit_cpu = time.perf_counter() - w0, time.process_time() - c0
    state = embedder.state()

    w0, c0 = time.perf_counter(), time.process_time()
    embedder.embed_array(texts)
    embed_s, embed_cpu = time.perf_counter() - w0, time.process_time() - c0
    t0 = time.perf_counter()
    embedder.embed(texts[:20_000])
    lists_rate = min(len(texts), 20_000) / (time.perf_counter() - t0)

    n = len(texts)
    print(f"embedder {embedder.identity.label()}: fit {fit_s:.1f} s ({fit_cpu:.1f} CPU s), "
          f"state {len(state) / 1e6:.1f} MB; embed {n / embed_s:,.0f} events/s "
          f"({n / embed_cpu:,.0f} per CPU s) as arrays, {lists_rate:,.0f} events/s as lists")
    print(f"lexical analysis (baseline) {n / analysis_s:,.0f} events/s "
          f"({n / analysis_cpu:,.0f} per CPU s); embedding costs "
          f"{embed_cpu / analysis_cpu:.2f}x the analysis in CPU time")
    projected = fit_cpu + 1_000_000 * embed_cpu / n
    target("embedder fit + embed 1M events, projected CPU", projected,
           f"<= {BUDGET_1M_S:.0f}", projected <= BUDGET_1M_S, " s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
