"""RECALL-01 quality gate: the labelled set keeps its recall@10 and MRR, and CJK
bigrams beside the ICU words improve them (see evaluate.py for the full report)."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from evaluate import evaluate  # noqa: E402
from recall_set import QUERIES  # noqa: E402


def test_recall_01_quality_bigrams_improve_recall_and_mrr():
    assert len(QUERIES) >= 40
    icu, both = evaluate(False), evaluate(True)
    assert both["recall@10"] > icu["recall@10"] and both["mrr"] > icu["mrr"]
    assert both["recall@10"] >= 0.9 and both["mrr"] >= 0.85
