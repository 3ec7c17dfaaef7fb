"""HYB-01 and HYB-05 quality gates on the labelled history (hybrid_set.py and
hybrid_set_more.py, report: hybrid_eval.py), with the default embedder (e5; USE where the
CPU lacks AVX2): fusing the vector leg into the lexical one finds paraphrased queries the
lexical leg cannot and keeps the vector leg's paraphrase hits (recall@10 >= 0.5 and
>= 0.9x the vector leg's), and keeps keyword queries' exact hits (recall@10 >= 0.98, MRR
within 2 points of the lexical leg's)."""
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


def test_hyb_01_quality_set_has_150_queries_a_third_sharing_no_term_with_their_targets():
    queries = PARAPHRASE + KEYWORD
    assert len(queries) >= 150 and 3 * len(PARAPHRASE) >= len(queries)
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


def test_hyb_05_hybrid_keeps_the_vector_legs_paraphrase_hits(report):
    vector, hybrid = report["paraphrase"]["vector"], report["paraphrase"]["hybrid"]
    assert hybrid["recall@10"] >= 0.5
    assert hybrid["recall@10"] >= 0.9 * vector["recall@10"]


def test_hyb_05_hybrid_keeps_the_lexical_legs_exact_hits(report):
    lexical, hybrid = report["keyword"]["lexical"], report["keyword"]["hybrid"]
    assert hybrid["recall@10"] >= 0.98
    assert hybrid["mrr"] >= lexical["mrr"] - TOLERANCE
