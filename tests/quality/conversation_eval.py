"""Recall quality on the labelled conversations (conversation_set.py), through a real
server with its defaults (`morphz serve --embedder default`, or --server ADDRESS): each
conversation imported into a context of its own as an agent runtime records one, each
question searched in each mode (limit 10), scored against the turns that hold its
answer: recall@10 (the share of a question's evidence turns in its top 10), any@10 (at
least one of them) and MRR (of the first), per category and overall.

    .venv/bin/python tests/quality/conversation_eval.py [--server HOST:PORT] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from typing import Iterator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conversation_set import CATEGORIES, Conversation, conversations, import_into  # noqa: E402

MODES = ("lexical", "vector", "hybrid")
K = 10


@contextmanager
def server(args: list[str] = ()) -> Iterator[str]:
    """`morphz serve` with the default embedder on a data folder of its own: its address."""
    with tempfile.TemporaryDirectory(prefix="morphz-conv-eval-") as data:
        proc = subprocess.Popen(
            [sys.executable, "-m", "morphz.services.cli.main", "serve", "--listen",
             "127.0.0.1:0", "--data", data, "--embedder", "default", *args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            line = proc.stdout.readline()
            if not line.startswith("morphz: serving on"):
                raise RuntimeError(f"the server did not start: {line!r}")
            yield line.split()[3]
        finally:
            proc.terminate()
            proc.wait(60)


def _caught_up(client, contexts: list[str], bound: float = 1800.0) -> None:
    """Both legs of every context at its head (the vector leg follows on its own)."""
    deadline = time.monotonic() + bound
    for cx in contexts:
        while True:
            st = client.inspect_index(cx)
            if st.lag == 0 and st.vectors.lag == 0 and st.vectors.position == st.head:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{cx}: the index did not catch up: {st}")
            time.sleep(0.2)


def _scores(ranked: list[str], evidence: set[str]) -> tuple[float, float, float]:
    top = ranked[:K]
    first = next((i + 1 for i, ref in enumerate(top) if ref in evidence), None)
    return (len(evidence & set(top)) / len(evidence), 1.0 if first else 0.0,
            1.0 / first if first else 0.0)


def evaluate(address: str, convs: list[Conversation], modes=MODES,
             progress=lambda msg: None) -> dict:
    """{"questions": [{conversation, id, category, mode: [recall@10, any@10, rr]}],
    "summary": {mode: {category or "all": [recall@10, any@10, MRR]}}}."""
    from morphz.client import Client, Credentials  # noqa: PLC0415
    rows: list[dict] = []
    with Client(address, credentials=Credentials(), timeout=120) as client:
        refs = {}
        for conv in convs:
            started = time.monotonic()
            refs[conv.id] = import_into(client, f"conv-{conv.id}", conv)
            progress(f"imported {conv.id}: {len(conv.turns)} turns in "
                     f"{time.monotonic() - started:.1f} s")
        started = time.monotonic()
        _caught_up(client, [f"conv-{c.id}" for c in convs])
        progress(f"both legs caught up {time.monotonic() - started:.1f} s later")
        for conv in convs:
            for q in conv.questions:
                evidence = {refs[conv.id][e] for e in q.evidence}
                row = {"conversation": conv.id, "id": q.id, "category": q.category}
                for mode in modes:
                    hits = client.search(f"conv-{conv.id}", q.question, limit=K, mode=mode,
                                         kinds=["event"], min_commit_seq=0).results
                    row[mode] = _scores([h.ref for h in hits], evidence)
                rows.append(row)
    return {"questions": rows, "summary": summary(rows, modes)}


def summary(rows: list[dict], modes=MODES) -> dict:
    out: dict = {}
    for mode in modes:
        out[mode] = {}
        for cat in (*CATEGORIES, "all"):
            picked = [r[mode] for r in rows if cat in ("all", r["category"])]
            out[mode][cat] = [sum(x[i] for x in picked) / len(picked) for i in range(3)]
    return out


def table(result: dict) -> str:
    s = result["summary"]
    lines = ["| mode | " + " | ".join(f"{c} R@10" for c in CATEGORIES) +
             " | all R@10 | all any@10 | all MRR |", "|" + " --- |" * (len(CATEGORIES) + 4)]
    for mode, cats in s.items():
        lines.append(f"| {mode} | " + " | ".join(f"{cats[c][0]:.3f}" for c in CATEGORIES) +
                     f" | {cats['all'][0]:.3f} | {cats['all'][1]:.3f} | {cats['all'][2]:.3f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default="", help="a running server (default: start one)")
    ap.add_argument("--json", default="", help="also write every question's scores here")
    args = ap.parse_args()
    convs = conversations()
    say = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    n_q = sum(len(c.questions) for c in convs)
    say(f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, "
        f"{n_q} questions")
    if args.server:
        result = evaluate(args.server, convs, progress=say)
    else:
        with server() as address:
            result = evaluate(address, convs, progress=say)
    print(table(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
