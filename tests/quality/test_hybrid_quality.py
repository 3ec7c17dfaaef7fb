"""HYB-01 quality gate on the labelled history (hybrid_set.py, report: hybrid_eval.py):
fusing the vector leg into the lexical one finds paraphrased queries the lexical leg
cannot, and costs keyword queries no more than 2 points of recall@10 or MRR."""
from __future__ import annotations

import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hybrid_eval import evaluate  # noqa: E402
from hybrid_set import HISTORY, KEYWORD, PARAPHRASE  # noqa: E402

from morphz.shared.text.analyze import CJK_CHARS, query_terms, terms  # noqa: E402

TOLERANCE = 0.02


def _script(text: str) -> str:
    cjk = bool(re.search(f"[{CJK_CHARS}]", text))
    latin = bool(re.search("[A-Za-z]", text))
    return "mixed" if cjk and latin else "zh" if cjk else "en"


def test_hyb_01_quality_set_has_60_queries_a_third_sharing_no_term_with_their_targets():
    queries = PARAPHRASE + KEYWORD
    assert len(queries) >= 60 and 3 * len(PARAPHRASE) >= len(queries)
    assert {_script(q) for q, _ in queries} >= {"zh", "en", "mixed"}
    assert all(d in HISTORY for _, rel in queries for d in rel)
    for q, rel in PARAPHRASE:  # with the lexical leg's own analyzer
        for d in rel:
            assert not set(query_terms(q)) & set(terms(HISTORY[d])), (q, d)
    for q, rel in KEYWORD:
        assert all(set(query_terms(q)) & set(terms(HISTORY[d])) for d in rel), q


@pytest.fixture(scope="module")
def report():
    return evaluate()


def test_hyb_01_hybrid_beats_lexical_on_paraphrased_queries(report):
    lexical, hybrid = report["paraphrase"]["lexical"], report["paraphrase"]["hybrid"]
    assert hybrid["recall@10"] > lexical["recall@10"]
    assert hybrid["mrr"] > lexical["mrr"]


def test_hyb_01_hybrid_loses_at_most_2_points_on_keyword_queries(report):
    lexical, hybrid = report["keyword"]["lexical"], report["keyword"]["hybrid"]
    assert hybrid["recall@10"] >= lexical["recall@10"] - TOLERANCE
    assert hybrid["mrr"] >= lexical["mrr"] - TOLERANCE
