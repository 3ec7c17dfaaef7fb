"""First search after a restart: how long the first search of a fresh `morphz serve`
process over an existing recall index takes, "after" (this code: every index opened in
the background at start) against "before", in the same run, turn about. Before: the
code under --baseline (a PYTHONPATH root whose morphz/ holds an earlier tree's services
and shared folders, with api and client linked to this tree's), else this code with
MORPHZ_RECALL_OPEN_AT_START=0 (each index opened by its first request).

    scripts/bench first_search                      # 50,000 events
    scripts/bench first_search -- --events 20000 --rounds 1
    mkdir -p /tmp/base/morphz && git archive main services shared | tar -x -C /tmp/base/morphz
    ln -s $PWD/build/gen/morphz/api $PWD/clients/python/morphz_client /tmp/base/morphz/
    mv /tmp/base/morphz/morphz_client /tmp/base/morphz/client
    scripts/bench first_search -- --baseline /tmp/base

The corpus is recall.py's (generated with a fixed seed, written through the reducer into
a real LMDB store), plus a small context of a few events. The index is built once
(RebuildIndex, then the vector leg followed to its end), then the server is restarted
for each row and one search sent:
- at once: a hybrid search of the big context as soon as the server says it serves;
- small at once: a lexical search of the small context at once (is it held up by the
  big context's open?);
- after the open: the first hybrid search sent once the big context's index is open
  (the log line saying so; before, as long after serving as the longest such open);
- warm: the next search in the same process.
Latencies are wall time from sending to the answer, over loopback gRPC.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import log  # noqa: E402
import recall as corpus  # noqa: E402  (its generator and vocabulary)

import grpc  # noqa: E402

from morphz.services.recall.client import RecallClient  # noqa: E402
from morphz.services.transaction.client import TransactionClient  # noqa: E402

OPEN_ENV = "MORPHZ_RECALL_OPEN_AT_START"
SMALL = "bench-small"
OPENED = "opened the recall index of "  # the log line of runtime/opener.py


class Server:
    """`morphz serve` over `data`, its stderr read line by line (opened lines noted)."""

    def __init__(self, data: str, embedder: str, env: dict) -> None:
        self.opened: dict[str, float] = {}
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "morphz.services.cli.main", "serve", "--listen",
             "127.0.0.1:0", "--data", data, "--embedder", embedder],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1", **env))
        self.address = self.proc.stdout.readline().split()[3]
        self.serving = time.perf_counter()
        self._seen = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            if OPENED in line:
                context = line.split(OPENED, 1)[1].split(" ", 1)[0]
                with self._seen:
                    self.opened[context] = time.perf_counter()
                    self._seen.notify_all()

    def wait_opened(self, context: str, bound: float) -> float | None:
        with self._seen:
            self._seen.wait_for(lambda: context in self.opened, bound)
            return self.opened.get(context)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)


def timed_search(recall: RecallClient, context: str, query: str, mode: str) -> float:
    t = time.perf_counter()
    recall.search(context, query, limit=20, mode=mode)
    return time.perf_counter() - t


def build(data: str, args) -> None:
    server = Server(data, args.embedder, {})
    try:
        with grpc.insecure_channel(server.address) as channel:
            tx = TransactionClient(channel, timeout=600)
            tx.create_context(SMALL)
            tx.append_events(SMALL, [dict(session="s", kind="user-message",
                                          text=f"small context event {i} release")
                                     for i in range(20)])
            recall = RecallClient(channel, timeout=3600)
            t = time.perf_counter()
            recall.rebuild(corpus.CONTEXT)
            log(f"    index built in {time.perf_counter() - t:.1f} s; vector leg following ...")
            while recall.inspect(corpus.CONTEXT)["vectors"]["lag"]:
                time.sleep(1)
            st = recall.inspect(corpus.CONTEXT)
            log(f"    {st['documents']:,} documents, {st['index_bytes'] / 1e6:.0f} MB, "
                f"{st['vectors']['count']:,} vectors")
    finally:
        server.stop()


def one_start(data: str, args, background: bool, query: str, queries: list[str]) -> dict:
    """One restart's rows (seconds)."""
    env = {OPEN_ENV: "1"} if background else \
        {"PYTHONPATH": args.baseline} if args.baseline else {OPEN_ENV: "0"}
    out: dict = {}
    # at once: the big context's first search, then the small one's (each its own start)
    server = Server(data, args.embedder, env)
    try:
        with grpc.insecure_channel(server.address) as channel:
            recall = RecallClient(channel, timeout=600)
            out["at_once"] = timed_search(recall, corpus.CONTEXT, query, "hybrid")
            out["serving_s"] = server.serving - server.started
            out["warm"] = timed_search(recall, corpus.CONTEXT, queries[1], "hybrid")
    finally:
        server.stop()
    server = Server(data, args.embedder, env)
    try:
        with grpc.insecure_channel(server.address) as channel:
            out["small_at_once"] = timed_search(RecallClient(channel, timeout=600), SMALL,
                                                "release", "lexical")
    finally:
        server.stop()
    # after the open: the background one's log line; lazily, as long after serving
    server = Server(data, args.embedder, env)
    try:
        with grpc.insecure_channel(server.address) as channel:
            recall = RecallClient(channel, timeout=600)
            if background:
                at = server.wait_opened(corpus.CONTEXT, 600)
                out["open_s"] = (at - server.serving) if at else None
            else:
                time.sleep(args.lazy_wait)
            out["after_open"] = timed_search(recall, corpus.CONTEXT, queries[2], "hybrid")
    finally:
        server.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20260804)
    ap.add_argument("--embedder", default="hashing:384",
                    help="the server's --embedder (default hashing:384, as recall.py)")
    ap.add_argument("--data", default="", help="work directory (default: a temporary one)")
    ap.add_argument("--reuse", action="store_true", help="the corpus and index in --data")
    ap.add_argument("--baseline", default="", help="PYTHONPATH root of the code measured as "
                    "'before' (default: this code, the indexes opened lazily)")
    args = ap.parse_args()
    data = args.data or tempfile.mkdtemp(prefix="morphz-bench-first-")
    try:
        log(f"== first search after a restart: {args.events:,} events, in {data}")
        if args.reuse and os.path.exists(os.path.join(data, "recall")):
            words = corpus.corpus_words(args.seed)
        else:
            t = time.perf_counter()
            words = corpus.generate(data, args.events, args.seed)
            log(f"    corpus written in {time.perf_counter() - t:.1f} s")
            build(data, args)
        queries = corpus.make_queries(words, args.seed, 8)[2]
        rows: dict[str, list[dict]] = {"before": [], "after": []}
        for r in range(args.rounds):
            for name in ("after", "before"):
                log(f"    round {r + 1}: {name} ...")
                # before: waits as long as the longest background open so far
                done = [x["open_s"] for x in rows["after"] if x.get("open_s")]
                args.lazy_wait = max(done) if done else 5.0
                rows[name].append(one_start(data, args, name == "after",
                                            queries[r % len(queries)], queries))
        print(f"first search after a restart, {args.events:,} events "
              f"(--embedder {args.embedder}); each round's ms, and the ratio of the sums:")
        for key, what in (("at_once", "hybrid search sent at once"),
                          ("small_at_once", "small context, lexical, sent at once"),
                          ("after_open", "hybrid search sent after the open"),
                          ("warm", "the next search (warm)")):
            before, after = ([x[key] for x in rows[n]] for n in ("before", "after"))
            shown = {n: " / ".join(f"{v * 1000:.1f}" for v in xs)
                     for n, xs in (("before", before), ("after", after))}
            print(f"  {what:38s} before {shown['before']:>20s}  after {shown['after']:>20s}"
                  f"  before/after {sum(before) / sum(after):6.1f}x")
        print("  before: " + (f"the code under {args.baseline}" if args.baseline else
                              f"this code with {OPEN_ENV}=0"))
        opens = [x["open_s"] for x in rows["after"] if x.get("open_s") is not None]
        print("  background open of the big context, s after serving: "
              + " / ".join(f"{v:.2f}" for v in opens))
        return 0
    finally:
        if not args.data:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
