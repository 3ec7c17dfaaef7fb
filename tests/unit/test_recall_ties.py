"""RECALL-10: equal scores (and equal times) are ordered by key, events by seq then frames
by id, so the ranking never depends on how the index was built: one commit or many,
in any order. Ties here are large (hundreds of documents with the same words and
length) and straddle page ends at every offset tried."""
from __future__ import annotations

import random

import pytest

from morphz.services.recall.index.tantivy_docs import Doc

from morphz.services.recall.index.tantivy_index import ContextIndex

from morphz.services.recall.index.tantivy_search import Query
from morphz.shared.text.analyze import query_terms


def _docs() -> list[Doc]:
    docs = []
    for seq in range(600):
        # Three groups of identical documents (one score each per query), times repeating.
        text = ("launch hold" if seq % 3 == 0 else "launch hold weather" if seq % 3 == 1
                else "launch payment refused twice")
        docs.append(Doc(f"e:{seq}", "event", query_terms(text), 1000 + seq % 5, f"s{seq % 2}"))
    for i in range(40):
        docs.append(Doc(f"f:frame-{(i * 7) % 40:02d}", "frame", query_terms("launch hold"),
                        1000 + i % 5))
    return docs


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    docs = _docs()
    at_once = ContextIndex(str(tmp_path_factory.mktemp("once")))
    at_once.apply(docs, {"position": 1}, fresh=True)
    piecewise = ContextIndex(str(tmp_path_factory.mktemp("pieces")))
    shuffled = docs[:]
    random.Random(5).shuffle(shuffled)
    for i in range(0, len(shuffled), 37):
        piecewise.apply(shuffled[i:i + 37], {"position": i + 1})
    piecewise.apply(shuffled[:50], {"position": 1000})  # rewritten: new document addresses
    return docs, at_once, piecewise


def _keys(idx: ContextIndex, q: Query, offset: int, count: int) -> list[str]:
    return [h.key for h in idx.search(idx.snapshot()[0], q, offset, count)]


def _key_order(key: str) -> tuple:
    kind, _, ident = key.partition(":")
    return (0, int(ident), "") if kind == "e" else (1, 0, ident)


QUERIES = [Query(terms=query_terms("launch")), Query(terms=query_terms("hold")),
           Query(terms=query_terms("weather hold")), Query(terms=query_terms("launch"),
                                                           sessions=["s1"]),
           Query(since_us=1000, until_us=1004), Query(kinds=["frame"])]


@pytest.mark.parametrize("q", QUERIES)
def test_recall_10_ties_order_by_key_whatever_way_the_index_was_built(built, q):
    _, at_once, piecewise = built
    whole = _keys(at_once, q, 0, 700)
    assert whole and whole == _keys(piecewise, q, 0, 700)
    for offset, count in ((0, 20), (19, 1), (20, 20), (150, 100), (199, 3), (395, 20)):
        page = _keys(at_once, q, offset, count)
        assert page == whole[offset:offset + count] == _keys(piecewise, q, offset, count)


def test_recall_10_equal_scores_come_in_key_order(built):
    docs, at_once, _ = built
    snap = at_once.snapshot()[0]
    hits = at_once.search(snap, Query(terms=query_terms("hold")), 0, 700)
    by_score: dict[float, list[str]] = {}
    for h in hits:
        by_score.setdefault(h.score, []).append(h.key)
    assert len(by_score) >= 2 and max(len(v) for v in by_score.values()) >= 200
    assert [s for s in by_score] == sorted(by_score, reverse=True)
    for keys in by_score.values():
        assert keys == sorted(keys, key=_key_order)
    in_time = _keys(at_once, Query(since_us=1000, until_us=1004), 0, 700)
    times = {d.key: d.time_us for d in docs}
    assert in_time == sorted(in_time, key=lambda k: (times[k], _key_order(k)))
