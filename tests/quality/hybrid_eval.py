"""Hybrid recall quality on the labelled history (hybrid_set.py): recall@10 and MRR of
the lexical leg (the real index adapter and analyzer), the vector leg (the default
embedder fitted on the history, exact cosine) and their fusion as the server makes it
(services/recall/core/hybrid.py: its depth, its vector score floor, its fuse; the notes
are no conversation, so no neighbour smoothing), for the paraphrase queries and the
keyword queries apart. With --conversations, the conversation benchmark too
(conversation_eval.py: through a real server, per category).

    .venv/bin/python tests/quality/hybrid_eval.py [--background N] [--conversations]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Callable, Sequence
import numpy as np


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from history_background import background  # noqa: E402
from hybrid_set import HISTORY, KEYWORD, PARAPHRASE  # noqa: E402

from morphz.services.recall.core.hybrid import (FUSE_DEPTH, LEXICAL_GATE,  # noqa: E402
                                                LEXICAL_WEIGHT, VECTOR_MIN_SCORE, RankedHit,
                                                fuse)
from morphz.services.recall.embedding.api import PASSAGE, QUERY, embed_texts  # noqa: E402
from morphz.services.recall.embedding.default import default_embedder  # noqa: E402
from morphz.services.recall.embedding.e5 import E5Embedder  # noqa: E402
from morphz.services.recall.embedding.hashing import HashingEmbedder  # noqa: E402
from morphz.services.recall.embedding.lsa import LsaEmbedder  # noqa: E402
from morphz.services.recall.embedding.use import UseEmbedder  # noqa: E402
from morphz.services.recall.index.tantivy_docs import Doc  # noqa: E402
from morphz.services.recall.index.tantivy_index import ContextIndex  # noqa: E402
from morphz.services.recall.index.tantivy_search import Query  # noqa: E402
from morphz.services.recall.index.vector_index import quantized  # noqa: E402
from morphz.shared.text.analyze import query_terms, terms  # noqa: E402

K = 10

Ranking = list[str]


class Lexical(list):
    """A lexical ranking of (id, BM25 score), with the query terms' idf summed."""
    idf_total = 0.0


def lexical_rankings(docs: dict[str, str], queries: Sequence[str]) -> list[Lexical]:
    with tempfile.TemporaryDirectory() as tmp:
        idx = ContextIndex(tmp)
        idx.apply([Doc(f"f:{d}", "frame", terms(text), 0) for d, text in docs.items()],
                  {"position": 0})
        searcher, _ = idx.snapshot()
        out = []
        for q in queries:
            words = query_terms(q)
            ranking = Lexical((h.key[2:], h.score) for h in
                              idx.search(searcher, Query(terms=words), 0, FUSE_DEPTH))
            ranking.idf_total = sum(ContextIndex.idf(searcher, words))
            out.append(ranking)
        return out


def as_stored(vectors: np.ndarray) -> np.ndarray:
    """Vectors as the vector leg scores them: through float16 (the vector cache), then
    int8 with a scale per vector (vector_index.quantized), dequantized."""
    q, scale = quantized(np.asarray(vectors, dtype=np.float16).astype(np.float32))
    return q.astype(np.float32) * scale[:, None]


def vector_rankings(docs: dict[str, str], queries: Sequence[str], embedder=None,
                    stored: bool = False) -> list[list[tuple[str, float]]]:
    """`stored`: documents' vectors as the leg keeps them (else exact float32)."""
    ids = list(docs)
    fitted = (embedder or default_embedder()).fitted(list(docs.values()))
    doc_vectors = embed_texts(fitted, list(docs.values()), role=PASSAGE)
    if stored:
        doc_vectors = as_stored(doc_vectors)
    out = []
    for q in embed_texts(fitted, list(queries), role=QUERY):
        scores = doc_vectors @ q
        order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))[:FUSE_DEPTH]
        out.append([(ids[i], float(scores[i])) for i in order if scores[i] > VECTOR_MIN_SCORE])
    return out


def fused(lexical: Lexical, vector: list[tuple[str, float]]) -> Ranking:
    """The server's fusion of two rankings of (document id, score)."""
    lex = [RankedHit(f"f:{d}", score) for d, score in lexical]
    vec = [RankedHit(f"f:{d}", score) for d, score in vector]
    return [h.key[2:] for h in fuse(lex, vec, lexical.idf_total)]


def rrf(lexical: Lexical, vector: list[tuple[str, float]], k: int = 60) -> Ranking:
    """Plain reciprocal rank fusion (Cormack et al. 2009), for comparison."""
    score: dict[str, float] = {}
    for ranking in ([d for d, _ in lexical], [d for d, _ in vector]):
        for rank, d in enumerate(ranking, 1):
            score[d] = score.get(d, 0.0) + 1.0 / (k + rank)
    return sorted(score, key=lambda d: -score[d])


def metrics(rankings: Sequence[Ranking], relevant: Sequence[set[str]]) -> dict:
    recalls, rranks = [], []
    for ranked, rel in zip(rankings, relevant):
        top = ranked[:K]
        recalls.append(len(rel & set(top)) / len(rel))
        first = next((i + 1 for i, d in enumerate(top) if d in rel), None)
        rranks.append(1 / first if first else 0.0)
    n = len(rankings)
    return {"recall@10": sum(recalls) / n, "mrr": sum(rranks) / n}


def evaluate(embedder=None, background_notes: int = 0,
             stored: bool = False) -> dict[str, dict[str, dict]]:
    """{group: {leg: {"recall@10", "mrr"}}} for groups paraphrase, keyword, all;
    `background_notes` unlabelled notes (history_background.py) join the history;
    `stored`: the vector leg's int8 vectors instead of exact float32 ones."""
    groups = {"paraphrase": PARAPHRASE, "keyword": KEYWORD, "all": PARAPHRASE + KEYWORD}
    queries = [q for q, _ in groups["all"]]
    history = {**HISTORY, **background(background_notes)}
    lexical = dict(zip(queries, lexical_rankings(history, queries)))
    vector = dict(zip(queries, vector_rankings(history, queries, embedder, stored)))
    legs: dict[str, Callable[[str], Ranking]] = {
        "lexical": lambda q: [d for d, _ in lexical[q]],
        "vector": lambda q: [d for d, _ in vector[q]],
        "hybrid": lambda q: fused(lexical[q], vector[q]),
        "rrf": lambda q: rrf(lexical[q], vector[q]),
    }
    return {g: {leg: metrics([rank(q) for q, _ in qs], [r for _, r in qs])
                for leg, rank in legs.items()}
            for g, qs in groups.items()}


EMBEDDERS = {"default": default_embedder, "e5-c": E5Embedder, "use": UseEmbedder,
             "lsa": LsaEmbedder, "hashing": HashingEmbedder}


def main() -> int:
    ap = argparse.ArgumentParser(description="hybrid recall quality on the labelled history")
    ap.add_argument("--background", type=int, default=0, metavar="N",
                    help="add N unlabelled notes of the same workstreams (report only)")
    ap.add_argument("--embedder", action="append", choices=sorted(EMBEDDERS),
                    help="the embedders to measure (repeatable; default: default)")
    ap.add_argument("--stored", action="store_true",
                    help="score the vectors as the leg stores them (int8 and a scale)")
    ap.add_argument("--conversations", action="store_true",
                    help="also the conversation benchmark, through a real server")
    args = ap.parse_args()
    print(f"{len(PARAPHRASE) + len(KEYWORD)} queries ({len(PARAPHRASE)} paraphrase, "
          f"{len(KEYWORD)} keyword) over {len(HISTORY) + args.background} events; "
          f"hybrid: score fusion, lexical weight {LEXICAL_WEIGHT}, gate {LEXICAL_GATE}; "
          "rrf: plain RRF (k=60) for comparison")
    print("| embedder | queries | leg | recall@10 | MRR |\n| --- | --- | --- | --- | --- |")
    for name in args.embedder or ["default"]:
        embedder = EMBEDDERS[name]()
        report = evaluate(embedder, background_notes=args.background, stored=args.stored)
        for group, legs in report.items():
            for leg, m in legs.items():
                print(f"| {embedder.identity.name} | {group} | {leg} | {m['recall@10']:.3f} "
                      f"| {m['mrr']:.3f} |")
    if args.conversations:
        import conversation_eval  # noqa: PLC0415 - tests/quality is on sys.path
        convs = conversation_eval.conversations()
        print(f"\n{len(convs)} conversations, {sum(len(c.questions) for c in convs)} "
              "questions, through a server with its defaults:")
        with conversation_eval.server() as address:
            print(conversation_eval.table(conversation_eval.evaluate(address, convs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
