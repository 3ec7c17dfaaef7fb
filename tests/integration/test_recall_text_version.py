"""RECALL-12 for indexes built before it: an index whose documents hold texts of an older
version (documents.TEXT_VERSION; version 1 still indexed recall observations) is rebuilt
the first time a recall process uses it, and no search returns a recall observation,
neither before that rebuild swaps in nor after. In-process cores over a real LMDB store
and a real tantivy index folder; the "older" index is the live one with what the older
code wrote into it (the observation's document, a meta without text_version), then
opened by a new Indexer as a restarted server would."""
from __future__ import annotations

import json

import pytest

from morphz.services.recall.core.documents import TEXT_VERSION, event_doc, event_key
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.request import SearchRequest
from morphz.services.recall.runtime.pins import SearchPins
from morphz.services.recall.core.results import SearchResult
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.recall.index.tantivy_search import Query
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME, SERVICE_CALLER
from morphz.shared.mind.state import MindState

from tests.polling import until


def caught_up(indexer: Indexer, context: str) -> None:
    while indexer.catch_up(context):
        pass


@pytest.fixture
def store(tmp_path):
    s = LmdbStore(str(tmp_path / "store"), sync=False)
    yield s
    s.close()


def refs(reply: SearchResult) -> set[str]:
    return {h.ref for h in reply.results}


def test_recall_12_an_index_of_older_texts_is_rebuilt_without_recall_observations(
        tmp_path, store):
    tx = TransactionCore(store)
    tx.create_context("c", caller=ME)
    notes = {tx.append_event("c", "s1", "tool-result", f"incident report {i}",
                             caller=ME).ref for i in range(5)}
    seen = tx.append_event("c", "s1", "recall", json.dumps(
        {"recall": "search", "reply": {"results": ["incident report 3"]}}),
        actor="recall", caller=SERVICE_CALLER)
    old = Indexer(store, IndexDirectory(str(tmp_path / "recall")))
    caught_up(old, "c")
    # What the index held before: the observation indexed, and no text_version.
    idx = old.index("c")
    with store.reader("c") as reader:
        ev = MindState(reader).event(seen.seq)
    meta = {k: v for k, v in idx.snapshot()[1].items() if k != "text_version"}
    idx.apply([event_doc(ev)], meta)
    held = Query(terms=["incident"], keys=[event_key(seen.seq)])
    assert idx.search(idx.snapshot()[0], held, 0, 10)  # the older index holds it

    # A restarted recall process opens it.
    indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")))
    core = RecallCore(store, tx, indexer, pins=SearchPins())
    for mode in ("lexical", "hybrid"):  # whether the rebuild has swapped in yet or not
        reply = core.search(SearchRequest.parse("c", "incident", limit=100, mode=mode), caller=ME)
        assert seen.ref not in refs(reply) and notes <= refs(reply), mode

    def rebuilt() -> bool:
        meta = indexer.index("c").snapshot()[1]
        return meta.get("text_version") == TEXT_VERSION and "last_rebuild" in meta \
            and not indexer.progress("c").running
    until(rebuilt, what="the index of older texts was not rebuilt")
    idx = indexer.index("c")
    assert not idx.search(idx.snapshot()[0], held, 0, 10)  # gone from the index itself
    until(lambda: indexer.vector_status("c", seen.commit_seq).lag == 0)
    assert indexer.leg_current(idx.vectors)
    for mode in ("lexical", "vector", "hybrid"):
        reply = core.search(SearchRequest.parse("c", "incident", limit=100, mode=mode), caller=ME)
        assert seen.ref not in refs(reply), mode
    assert notes <= refs(core.search(SearchRequest.parse("c", "incident", limit=100), caller=ME))


def test_recall_12_an_index_of_todays_texts_is_not_rebuilt(tmp_path, store):
    tx = TransactionCore(store)
    tx.create_context("c", caller=ME)
    tx.append_event("c", "s1", "tool-result", "incident report", caller=ME)
    caught_up(Indexer(store, IndexDirectory(str(tmp_path / "recall"))), "c")
    indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")))
    meta = indexer.index("c").snapshot()[1]
    assert meta["text_version"] == TEXT_VERSION
    assert "last_rebuild" not in meta and not indexer.progress("c").running
