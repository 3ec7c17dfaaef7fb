"""RECALL-03: a search cursor pages the evidence set of its first page from the searcher
kept for it; once that searcher is no longer kept (too old, or evicted), continuing is
refused as stale, never answered from a moved index. In-process cores on real LMDB and a
real tantivy index; the clock of the kept searchers is the test's."""
from __future__ import annotations

import pytest

from morphz.shared.auth import IN_PROCESS_CALLER
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.request import SearchRequest
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.runtime.pins import PIN_BYTES, SearchPins
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.errors import MorphzError


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def setup(tmp_path):
    store = LmdbStore(str(tmp_path / "store"), sync=False)
    tx = TransactionCore(store)
    indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")))
    clock = Clock()
    recall = RecallCore(store, tx, indexer, pins=SearchPins(max_bytes=2 * PIN_BYTES + 4096,
                                                            seconds=60, clock=clock))
    tx.create_context("c", caller=IN_PROCESS_CALLER)
    for i in range(6):
        tx.append_event("c", "s1", "tool-result", f"incident report {i}", caller=IN_PROCESS_CALLER)
    while indexer.catch_up("c"):
        pass
    yield tx, indexer, recall, clock, store
    store.close()


def _moved(tx, indexer) -> None:
    tx.append_event("c", "s1", "tool-result", "incident report late", caller=IN_PROCESS_CALLER)
    while indexer.catch_up("c"):
        pass


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_recall_03_kept_searcher_pages_the_first_pages_set(setup, mode):
    tx, indexer, recall, clock, _ = setup
    # Hybrid keeps its fused ranking with the lexical searcher (its vector leg moved too).
    first = recall.search(SearchRequest.parse("c", "incident", limit=4, mode=mode),
                          caller=IN_PROCESS_CALLER)
    _moved(tx, indexer)
    clock.now = 59
    second = recall.search(SearchRequest.parse("c", "incident", limit=4, cursor=first.next_cursor,
                                               mode=mode), caller=IN_PROCESS_CALLER)
    refs = [h.ref for h in first.results + second.results]
    assert len(refs) == len(set(refs)) == 6 and second.next_cursor == ""
    assert second.index_position == first.index_position


@pytest.mark.parametrize("how", ["expired", "evicted"])
def test_recall_03_cursor_past_its_kept_searcher_is_stale(setup, how):
    tx, indexer, recall, clock, _ = setup
    first = recall.search(SearchRequest.parse("c", "incident", limit=4), caller=IN_PROCESS_CALLER)
    _moved(tx, indexer)
    if how == "expired":
        clock.now = 61
    else:  # two newer pinned searches push it out (room for about two)
        recall.search(SearchRequest.parse("c", "incident", limit=1), caller=IN_PROCESS_CALLER)
        _moved(tx, indexer)
        recall.search(SearchRequest.parse("c", "incident", limit=1), caller=IN_PROCESS_CALLER)
    with pytest.raises(MorphzError) as info:
        recall.search(SearchRequest.parse("c", "incident", limit=4, cursor=first.next_cursor),
                      caller=IN_PROCESS_CALLER)
    assert info.value.reason == "RECALL_CURSOR_STALE"


def test_recall_03_hybrid_cursor_without_its_kept_ranking_is_stale(setup):
    """Even with the index where it was: a fused ranking cannot be made again as it was
    (the vector leg follows on its own), so its cursor needs the ranking kept for it."""
    tx, indexer, recall, clock, _ = setup
    first = recall.search(SearchRequest.parse("c", "incident", limit=4, mode="hybrid"),
                          caller=IN_PROCESS_CALLER)
    assert first.results[0].vector_rank and first.next_cursor
    clock.now = 61
    with pytest.raises(MorphzError) as info:
        recall.search(SearchRequest.parse("c", "incident", limit=4, cursor=first.next_cursor,
                                          mode="hybrid"), caller=IN_PROCESS_CALLER)
    assert info.value.reason == "RECALL_CURSOR_STALE"


def test_recall_03_cursors_survive_a_burst_of_200_hybrid_searches(setup):
    """Each paged hybrid search keeps a fused ranking of its own: 200 of them within the
    two minutes a pin lives all stay within the pins' bytes, so the first one's cursor
    still pages (before: a count of 64 pushed it out, RECALL_CURSOR_STALE)."""
    tx, indexer, _, _, store = setup
    pins = SearchPins()
    recall = RecallCore(store, tx, indexer, pins=pins)
    queries = [f"incident report {i % 6}" for i in range(200)]
    firsts = [recall.search(SearchRequest.parse("c", q, limit=2, mode="hybrid"),
                            caller=IN_PROCESS_CALLER)
              for q in queries]
    assert all(f.next_cursor for f in firsts)
    for i in (0, 99):
        second = recall.search(SearchRequest.parse("c", queries[i], limit=2, mode="hybrid",
                                                   cursor=firsts[i].next_cursor),
                               caller=IN_PROCESS_CALLER)
        assert second.results
        assert not {h.ref for h in second.results} & {h.ref for h in firsts[i].results}
