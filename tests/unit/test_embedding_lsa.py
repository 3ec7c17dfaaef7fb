"""The LSA embedder (services/recall/embedding/lsa.py, `--embedder lsa`): learned from
the context's own text, deterministic, restorable, any script."""
from __future__ import annotations

import hashlib
import math
import os
import random
import subprocess
import sys

import pytest

from morphz.services.recall.embedding.api import Embedder
from morphz.services.recall.embedding.lsa import MIN_DOCS, LsaEmbedder

# Three topics, each with its own vocabulary in English and Chinese; documents mix
# words of one topic, so co-occurrence ties a topic's words together.
_TOPICS = [
    ["release", "launch", "ship", "version", "rollout", "canary", "changelog", "freeze",
     "hotfix", "发布", "上线", "版本", "灰度", "回滚", "冻结", "补丁"],
    ["database", "query", "index", "connection", "pool", "replica", "vacuum", "deadlock",
     "schema", "数据库", "查询", "连接", "索引", "副本", "死锁", "表结构"],
    ["invoice", "payment", "refund", "customer", "billing", "charge", "receipt", "discount",
     "subscription", "付款", "退款", "客户", "账单", "发票", "折扣", "订阅"],
    ["interview", "candidate", "offer", "onboarding", "laptop", "mentor", "salary", "resume",
     "referral", "面试", "候选人", "入职", "导师", "薪资", "简历", "内推"],
]


def _corpus(n: int = 400, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        words = rng.sample(_TOPICS[i % len(_TOPICS)], 5)
        docs.append(" ".join(words) + f" note {i}")
    return docs


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def _norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


@pytest.fixture(scope="module")
def fitted() -> LsaEmbedder:
    return LsaEmbedder().fitted(_corpus())


def test_lsa_embedder_is_an_embedder_with_its_identity():
    e = LsaEmbedder()
    assert isinstance(e, LsaEmbedder)
    embedder: Embedder = e  # the protocol's attributes and methods
    assert embedder.identity.name == "morphz-lsa" and embedder.identity.dimension > 0
    assert e.fitted(_corpus()).identity == e.identity


def test_same_corpus_same_state_bytes_same_vectors(fitted):
    again = LsaEmbedder().fitted(_corpus())
    assert again.learned and fitted.learned
    assert again.state() == fitted.state()
    texts = ["release the new version", "数据库连接池耗尽", "refund 退款 for customer"]
    assert again.embed(texts) == fitted.embed(texts)


def test_a_different_corpus_gives_a_different_state(fitted):
    assert LsaEmbedder().fitted(_corpus(seed=8)).state() != fitted.state()


def test_restore_round_trip_gives_the_same_vectors_and_state(fitted):
    state = fitted.state()
    restored = LsaEmbedder().restore(state)
    assert restored.learned and restored.identity == fitted.identity
    assert restored.state() == state
    texts = _corpus()[:20] + ["an unseen sentence", "全新的句子", ""]
    assert restored.embed(texts) == fitted.embed(texts)


@pytest.mark.parametrize("text", ["release the new version to staging",
                                  "数据库查询变慢，连接池耗尽",
                                  "customer 退款 failed twice, 账单 wrong"])
def test_chinese_english_and_mixed_texts_give_unit_vectors(fitted, text):
    for embedder in (fitted, LsaEmbedder()):  # learned and hashed mode
        (v,) = embedder.embed([text])
        assert len(v) == embedder.identity.dimension
        assert _norm(v) == pytest.approx(1.0, abs=1e-5)


def test_empty_text_gives_zeros(fitted):
    for embedder in (fitted, LsaEmbedder()):
        for v in embedder.embed(["", "   ", "，。!?"]):
            assert len(v) == embedder.identity.dimension and not any(v)


def test_embed_keeps_order_and_count(fitted):
    texts = ["invoice payment", "", "发布 上线"]
    vectors = fitted.embed(texts)
    assert len(vectors) == 3
    assert vectors[0] == fitted.embed(["invoice payment"])[0]
    assert vectors[2] == fitted.embed(["发布 上线"])[0]


def _closest_without_the_word(embedder, word: str, n: int = 10) -> list[str]:
    docs = [d for d in _corpus() if word not in d]
    q = embedder.embed([word])[0]
    scored = sorted(zip(embedder.embed(docs), docs), key=lambda p: -_cos(q, p[0]))
    return [d for _, d in scored[:n]]


def _of_topic(doc: str, topic: int) -> bool:
    return bool(set(doc.split()) & set(_TOPICS[topic]))


def test_learned_basis_relates_words_that_share_documents(fitted):
    """Of the documents without the word "launch", the closest to it are those of its
    topic (release): what relates them is the documents they share, not letters."""
    assert all(_of_topic(d, 0) for d in _closest_without_the_word(fitted, "launch"))


def test_unfitted_embedder_knows_no_topics():
    """The same check against the hashed mode: it must fail there, or the check
    above would prove nothing."""
    closest = _closest_without_the_word(LsaEmbedder(), "launch")
    assert not all(_of_topic(d, 0) for d in closest)


def test_a_corpus_too_small_to_learn_from_gives_hashed_vectors_that_still_match():
    small = LsaEmbedder().fitted(_corpus()[:MIN_DOCS - 1])
    assert not small.learned
    q, near, far = small.embed(["payment refund", "the refund of a payment", "版本发布"])
    assert _cos(q, near) > 0.5 and _cos(q, far) < 0.2
    assert LsaEmbedder().restore(small.state()).embed(["x y"]) == small.embed(["x y"])


def test_restore_refuses_foreign_or_mismatched_state(fitted):
    with pytest.raises(ValueError):
        LsaEmbedder().restore(b"not a state")
    with pytest.raises(ValueError):
        LsaEmbedder(dimension=64).restore(fitted.state())


def test_state_does_not_depend_on_the_process(fitted):
    """Another interpreter with another string-hash seed learns the same bytes (the
    state is kept beside the vectors and must match what a restart would learn)."""
    code = ("import hashlib, sys; sys.path.insert(0, 'tests/unit'); "
            "import test_embedding_lsa as t; "
            "from morphz.services.recall.embedding.lsa import LsaEmbedder; "
            "print(hashlib.sha256(LsaEmbedder().fitted(t._corpus()).state()).hexdigest())")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, check=True, text=True,
                         capture_output=True, env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert out.stdout.strip() == hashlib.sha256(fitted.state()).hexdigest()
