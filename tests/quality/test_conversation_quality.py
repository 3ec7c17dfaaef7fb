"""HYB-07 on the labelled conversations (conversation_set.py; report: conversation_eval.py),
through a real server with its defaults: a question that shares some of its words with its
evidence finds it in hybrid's top 10 far more often than with either leg alone (recall@10
at least 12 points above the lexical leg's, above the vector leg's), in every category.
And the set is what it claims to be: long, multi-session, with tool calls and their
results, in English, Chinese and mixed text, most questions sharing some but not all of
their words with their evidence (by the lexical leg's own analyzer)."""
from __future__ import annotations

import os
import re
import sys
from collections import Counter

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conversation_eval import evaluate, server  # noqa: E402
from conversation_set import CATEGORIES, conversations  # noqa: E402

from morphz.shared.text.analyze import query_terms, terms  # noqa: E402

# Words of a question that tell nothing (asked of any evidence): left out when its overlap
# with the evidence is counted.
FUNCTION_WORDS = set(
    "the a an of to in on at for and or is was were be been did do does what which who when "
    "where why how that this it we i you he she they my our your his her their with about "
    "from by as have has had not no yes can could would should will 的 了 是 吗 什么 哪 我 你 "
    "他 她 我们 在 和 有 吧 呢 么".split())


@pytest.fixture(scope="module")
def convs():
    return conversations()


def test_hyb_07_the_conversation_set_is_long_multi_session_and_mostly_partial_overlap(convs):
    agent = [c for c in convs if not c.is_chat]
    assert len(agent) >= 8 and all(len(c.turns) >= 300 for c in convs)
    assert all(len({t.session for t in c.turns}) >= 10 for c in convs)
    assert {c.language for c in convs} >= {"en", "zh", "mixed"}
    for c in agent:  # tool calls and the results that answer them
        kinds = Counter(t.kind for t in c.turns)
        assert kinds["user-message"] and kinds["action"] and kinds["tool-result"], c.id
        calls = {t.id for t in c.turns if t.kind == "action"}
        assert all(t.answers in calls for t in c.turns if t.kind == "tool-result"), c.id
    questions = [(c, q) for c in convs for q in c.questions]
    assert len(questions) >= 400
    assert Counter(q.category for _, q in questions).keys() == set(CATEGORIES)
    partial = 0
    for c, q in questions:
        turns = {t.id: t for t in c.turns}
        assert all(e in turns for e in q.evidence), (c.id, q.id)
        asked = {w for w in query_terms(q.question)
                 if w not in FUNCTION_WORDS and not re.fullmatch(r"\W+", w)}
        said = {w for e in q.evidence for w in terms(turns[e].text)}
        partial += 0 < len(asked & said) < len(asked)
    assert partial >= 0.7 * len(questions), (partial, len(questions))


@pytest.fixture(scope="module")
def report(convs):
    with server() as address:
        return evaluate(address, convs)["summary"]


def test_hyb_07_hybrid_recall_at_10_beats_the_lexical_leg_by_12_points_and_the_vector_leg(report):
    lexical, vector, hybrid = (report[m]["all"][0] for m in ("lexical", "vector", "hybrid"))
    assert hybrid >= lexical + 0.12, report
    assert hybrid > vector, report


def test_hyb_07_hybrid_is_ahead_of_both_legs_in_every_category(report):
    for category in CATEGORIES:
        hybrid = report["hybrid"][category][0]
        assert hybrid >= report["lexical"][category][0], (category, report)
        assert hybrid >= report["vector"][category][0] - 0.02, (category, report)
