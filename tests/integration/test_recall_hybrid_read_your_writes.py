"""RECALL-13 with the vector leg: a vector or hybrid search naming a commit sequence sees
it in both legs (it embeds the changes its vector leg lacks, within the same bound as the
lexical wait), and its next page, like a lexical one, reads what the first page kept and
waits for nothing. In-process cores over a real LMDB store and a real index folder, the
hashing embedder; no vector follower runs, so only the search itself can move the vector
leg (with one, whether it had moved by then would be a race)."""
from __future__ import annotations

import pytest

from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.request import SearchRequest
from morphz.services.recall.runtime.pins import SearchPins
from morphz.services.recall.core.results import SearchResult
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.embedding.hashing import HashingEmbedder
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME


@pytest.fixture
def stack(tmp_path):
    store = LmdbStore(str(tmp_path / "store"), sync=False)
    tx = TransactionCore(store)
    indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")),
                      embedder=HashingEmbedder(64), vectors_due=lambda context: None)
    yield tx, indexer, RecallCore(store, tx, indexer, pins=SearchPins())
    store.close()


def refs(reply: SearchResult) -> list[str]:
    return [h.ref for h in reply.results]


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_recall_13_a_search_with_the_vector_leg_sees_its_writes_in_both_legs(stack, mode):
    tx, indexer, core = stack
    tx.create_context("c", caller=ME)
    written = [tx.append_event("c", "s1", "user-message", f"lantern note {i}", caller=ME)
               for i in range(30)]
    last = written[-1].commit_seq
    reply = core.search(SearchRequest.parse("c", "lantern note", limit=10, mode=mode,
                                            min_commit_seq=last), caller=ME)
    assert reply.unclosed_lag == 0 and reply.index_position >= last
    assert reply.vector_position >= last and reply.vector_lag == 0
    assert len(reply.results) == 10 and all(h.vector_rank for h in reply.results)
    # The next page, after more writes and naming them: the first page's ranking, no wait.
    later = [tx.append_event("c", "s1", "user-message", "lantern note", caller=ME)
             for _ in range(3)]
    page = core.search(SearchRequest.parse("c", "lantern note", limit=10, mode=mode,
                                           cursor=reply.next_cursor,
                                           min_commit_seq=later[-1].commit_seq), caller=ME)
    # Nothing indexed the later writes (no follower runs): the page did not wait for them.
    assert indexer.position("c") == page.index_position == reply.index_position
    assert indexer.vector_status("c", 0).position == reply.vector_position
    assert page.unclosed_lag == later[-1].commit_seq - reply.index_position
    assert not set(refs(page)) & set(refs(reply))
    assert not set(refs(page)) & {e.ref for e in later}


def test_recall_13_the_default_mode_on_an_unbegun_vector_leg_waits_for_the_lexical_only(stack):
    tx, indexer, core = stack
    tx.create_context("c", caller=ME)
    last = tx.append_event("c", "s1", "user-message", "lantern", caller=ME).commit_seq
    reply = core.search(SearchRequest.parse("c", "lantern", min_commit_seq=last), caller=ME)
    assert reply.unclosed_lag == 0 and reply.results
    assert reply.results[0].vector_rank is None  # answered lexically, as it may
