"""Recall quality on the labelled set (recall_set.py): recall@10 and MRR, with and
without CJK bigrams, through the real index adapter and analyzer.

    .venv/bin/python tests/quality/evaluate.py
"""
from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recall_set import DOCS, QUERIES  # noqa: E402

from morphz.services.recall.index.tantivy_docs import Doc  # noqa: E402

from morphz.services.recall.index.tantivy_index import ContextIndex  # noqa: E402

from morphz.services.recall.index.tantivy_search import Query  # noqa: E402
from morphz.shared.text.analyze import query_terms, terms  # noqa: E402

K = 10


def evaluate(bigrams: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        idx = ContextIndex(tmp)
        keys = {f"f:{doc_id}": doc_id for doc_id in DOCS}
        idx.apply([Doc(f"f:{d}", "frame", terms(text, bigrams=bigrams), 0)
                   for d, text in DOCS.items()], {"position": 0})
        searcher, _ = idx.snapshot()
        recalls, rranks, per_query = [], [], []
        for q, relevant in QUERIES:
            hits = idx.search(searcher, Query(terms=query_terms(q, bigrams=bigrams)), 0, K)
            ranked = [keys[h.key] for h in hits]
            found = relevant & set(ranked)
            first = next((i + 1 for i, d in enumerate(ranked) if d in relevant), None)
            recalls.append(len(found) / len(relevant))
            rranks.append(1 / first if first else 0.0)
            per_query.append((q, recalls[-1], rranks[-1]))
    n = len(QUERIES)
    return {"recall@10": sum(recalls) / n, "mrr": sum(rranks) / n, "queries": per_query}


def main() -> int:
    icu, both = evaluate(False), evaluate(True)
    print(f"{len(QUERIES)} queries over {len(DOCS)} documents")
    print(f"{'analysis':<24} {'recall@10':>10} {'MRR':>8}")
    print(f"{'ICU words only':<24} {icu['recall@10']:>10.3f} {icu['mrr']:>8.3f}")
    print(f"{'ICU words + CJK bigrams':<24} {both['recall@10']:>10.3f} {both['mrr']:>8.3f}")
    print("\nqueries that change (recall@10, reciprocal rank): ICU only -> with bigrams")
    for (q, r0, m0), (_, r1, m1) in zip(icu["queries"], both["queries"]):
        if (r0, m0) != (r1, m1):
            print(f"  {q:<28} {r0:.2f},{m0:.2f} -> {r1:.2f},{m1:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
