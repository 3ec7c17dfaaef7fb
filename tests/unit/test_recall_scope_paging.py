"""CONC-07 paging: a search made for an evaluation drops the hits its causal scope may
not see without breaking its cursors (the pages hold every visible hit once, in rank
order). The cores run in-process on real LMDB and a real tantivy index, with no
background worker, so the index is held still (over the server, where each page's own
recall observation moves it: tests/integration/test_sessions.py)."""
from __future__ import annotations

import pytest

from morphz.shared.auth import IN_PROCESS_CALLER
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.runtime.pins import SearchPins
from morphz.services.recall.core.request import Evaluation, SearchRequest
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.errors import MorphzError


@pytest.fixture
def cores(tmp_path):
    store = LmdbStore(str(tmp_path / "store"), sync=False)
    tx = TransactionCore(store)
    indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")))
    yield tx, indexer, RecallCore(store, tx, indexer, pins=SearchPins())
    store.close()


def test_conc_07_search_for_an_evaluation_pages_through_visible_hits_only(cores):
    tx, indexer, recall = cores
    tx.create_context("c", caller=IN_PROCESS_CALLER)
    mine = []
    for i in range(30):  # every third one is s1's, the rest another session's
        session = "s1" if i % 3 == 0 else "s2"
        ref = tx.append_event("c", session, "tool-result", f"incident report {i}",
                              caller=IN_PROCESS_CALLER).ref
        if session == "s1":
            mine.append(ref)
    evaluation = Evaluation("s1", tx.activate("c", "s1", caller=IN_PROCESS_CALLER).id)
    while indexer.catch_up("c"):
        pass
    everything = [h.ref for h in recall.search(SearchRequest.parse("c", "incident", limit=100),
                                               caller=IN_PROCESS_CALLER).results]
    assert len(everything) == 30
    pages, reply = [], recall.search(SearchRequest.parse("c", "incident", limit=3,
                                                         evaluation=evaluation),
                                     caller=IN_PROCESS_CALLER)
    while True:
        pages.append([h.ref for h in reply.results])
        if not reply.next_cursor:
            break
        reply = recall.search(SearchRequest.parse("c", "incident", limit=3, evaluation=evaluation,
                                                  cursor=reply.next_cursor),
                              caller=IN_PROCESS_CALLER)
    seen = [r for page in pages for r in page]
    assert [len(p) for p in pages] == [3, 3, 3, 1]
    assert seen == [r for r in everything if r in mine]  # rank order, each once
    # A cursor pages one causal scope's evidence set: not an operator's, nor another's.
    first = recall.search(SearchRequest.parse("c", "incident", limit=3, evaluation=evaluation),
                          caller=IN_PROCESS_CALLER).next_cursor
    with pytest.raises(MorphzError) as info:
        recall.search(SearchRequest.parse("c", "incident", limit=3, cursor=first),
                      caller=IN_PROCESS_CALLER)
    assert info.value.reason == "RECALL_CURSOR_INVALID"
