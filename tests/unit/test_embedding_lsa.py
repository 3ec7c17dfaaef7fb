"""The default embedder (services/recall/embedding/lsa.py): LSA learned from the
context's own text, deterministic, restorable, any script."""
from __future__ import annotations

import math
import random

import pytest

from morphz.services.recall.embedding.api import Embedder
from morphz.services.recall.embedding.default import default_embedder
from morphz.services.recall.embedding.lsa import MIN_DOCS, LsaEmbedder

# Three topics, each with its own vocabulary in English and Chinese; documents mix
# words of one topic, so co-occurrence ties a topic's words together.
_TOPICS = [
    ["release", "launch", "ship", "version", "rollout", "发布", "上线", "版本", "灰度"],
    ["database", "query", "index", "connection", "pool", "数据库", "查询", "连接", "索引"],
    ["invoice", "payment", "refund", "customer", "billing", "付款", "退款", "客户", "账单"],
]


def _corpus(n: int = 240, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        words = rng.sample(_TOPICS[i % 3], 4)
        docs.append(" ".join(words) + f" note {i}")
    return docs


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def _norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


@pytest.fixture(scope="module")
def fitted() -> LsaEmbedder:
    return default_embedder().fitted(_corpus())


def test_default_embedder_is_an_embedder_with_its_identity():
    e = default_embedder()
    assert isinstance(e, LsaEmbedder)
    embedder: Embedder = e  # the protocol's attributes and methods
    assert embedder.identity.name == "morphz-lsa" and embedder.identity.dimension > 0
    assert e.fitted(_corpus()).identity == e.identity


def test_same_corpus_same_state_bytes_same_vectors(fitted):
    again = default_embedder().fitted(_corpus())
    assert again.learned and fitted.learned
    assert again.state() == fitted.state()
    texts = ["release the new version", "数据库连接池耗尽", "refund 退款 for customer"]
    assert again.embed(texts) == fitted.embed(texts)


def test_a_different_corpus_gives_a_different_state(fitted):
    assert default_embedder().fitted(_corpus(seed=8)).state() != fitted.state()


def test_restore_round_trip_gives_the_same_vectors_and_state(fitted):
    state = fitted.state()
    restored = default_embedder().restore(state)
    assert restored.learned and restored.identity == fitted.identity
    assert restored.state() == state
    texts = _corpus()[:20] + ["an unseen sentence", "全新的句子", ""]
    assert restored.embed(texts) == fitted.embed(texts)


@pytest.mark.parametrize("text", ["release the new version to staging",
                                  "数据库查询变慢，连接池耗尽",
                                  "customer 退款 failed twice, 账单 wrong"])
def test_chinese_english_and_mixed_texts_give_unit_vectors(fitted, text):
    for embedder in (fitted, default_embedder()):  # learned and hashed mode
        (v,) = embedder.embed([text])
        assert len(v) == embedder.identity.dimension
        assert _norm(v) == pytest.approx(1.0, abs=1e-5)


def test_empty_text_gives_zeros(fitted):
    for embedder in (fitted, default_embedder()):
        for v in embedder.embed(["", "   ", "，。!?"]):
            assert len(v) == embedder.identity.dimension and not any(v)


def test_embed_keeps_order_and_count(fitted):
    texts = ["invoice payment", "", "发布 上线"]
    vectors = fitted.embed(texts)
    assert len(vectors) == 3
    assert vectors[0] == fitted.embed(["invoice payment"])[0]
    assert vectors[2] == fitted.embed(["发布 上线"])[0]


def test_learned_basis_relates_words_that_share_documents(fitted):
    """"launch" and "rollout" never meet in a query/target pair below, but share a
    topic in the corpus: their vectors are close, and far from another topic's."""
    q, same, other = fitted.embed(["launch", "rollout 灰度", "refund 账单"])
    assert _cos(q, same) > 0.5 > _cos(q, other)


def test_a_corpus_too_small_to_learn_from_gives_hashed_vectors_that_still_match():
    small = default_embedder().fitted(_corpus()[:MIN_DOCS - 1])
    assert not small.learned
    q, near, far = small.embed(["payment refund", "the refund of a payment", "版本发布"])
    assert _cos(q, near) > 0.5 and _cos(q, far) < 0.2
    assert default_embedder().restore(small.state()).embed(["x y"]) == small.embed(["x y"])


def test_restore_refuses_foreign_or_mismatched_state(fitted):
    with pytest.raises(ValueError):
        default_embedder().restore(b"not a state")
    with pytest.raises(ValueError):
        LsaEmbedder(dimension=64).restore(fitted.state())
