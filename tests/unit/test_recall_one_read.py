"""One storage reader and one authorization per search (issue 56): the page is read from
one view, which the caller is authorized on once and every leg reads; only a search that
must wait for its index (its writes not indexed yet, or its index's first open) is
authorized on a view of its own first, so nobody unauthorized makes the server wait or
index. In-process cores over a real LMDB store and a real index folder, the hashing
embedder (so the hybrid mode reads both legs); no follower runs, so only the search
itself moves the index."""
from __future__ import annotations

import pytest

from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.request import Evaluation, SearchRequest
from morphz.services.recall.embedding.hashing import HashingEmbedder
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.runtime.pins import SearchPins
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared import policy
from morphz.shared.auth import TOKEN, Caller
from morphz.shared.errors import MorphzError

ALICE, BOB = Caller("alice", TOKEN), Caller("bob", TOKEN)


class Counted:
    """The store, counting the readers opened (everything else passed through)."""

    def __init__(self, store: LmdbStore) -> None:
        self._store = store
        self.readers = 0

    def reader(self, context: str):
        self.readers += 1
        return self._store.reader(context)

    def __getattr__(self, name: str):
        return getattr(self._store, name)


@pytest.fixture
def stack(tmp_path, monkeypatch):
    store = LmdbStore(str(tmp_path / "store"), sync=False)
    tx = TransactionCore(store)
    indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")),
                      embedder=HashingEmbedder(64), vectors_due=lambda context: None)
    counted = Counted(store)
    core = RecallCore(counted, tx, indexer, pins=SearchPins())
    asked: list[str] = []  # each read of a caller's recall grants: one authorization
    sessions = policy.sessions

    def counted_sessions(view, caller, right):
        if right == policy.RECALL:
            asked.append(right)
        return sessions(view, caller, right)
    monkeypatch.setattr(policy, "sessions", counted_sessions)
    tx.create_context("c", caller=ALICE)
    tx.set_policy("c", "grant", "bob", ["recall", "write"], "s1", caller=ALICE)
    for i in range(12):
        last = tx.append_event("c", "s1", "user-message", f"lantern note {i}", caller=ALICE)
    while indexer.catch_up("c"):
        pass
    indexer.vectors_up_to("c", 10 ** 9, float("inf"))
    core.search(SearchRequest.parse("c", "lantern"), caller=ALICE)  # its index opened
    counted.readers, asked[:] = 0, []
    yield tx, indexer, core, counted, asked, last.commit_seq
    store.close()


def searched(core, counted, asked, caller, **request) -> tuple[int, list[str], object]:
    """(readers opened, grants read, the reply) of one search."""
    counted.readers, asked[:] = 0, []
    reply = core.search(SearchRequest.parse("c", "lantern note", **request), caller=caller)
    return counted.readers, asked, reply


@pytest.mark.parametrize("mode", ["lexical", "vector", "hybrid"])
def test_dist_05_a_search_reads_one_view_and_authorizes_once(stack, mode):
    tx, _, core, counted, asked, written = stack
    readers, rights, reply = searched(core, counted, asked, ALICE, mode=mode, limit=5)
    assert (readers, rights) == (1, ["recall"]) and len(reply.results) == 5
    # Its next page too.
    readers, rights, _ = searched(core, counted, asked, ALICE, mode=mode, limit=5,
                                  cursor=reply.next_cursor)
    assert (readers, rights) == (1, ["recall"])
    # A search naming writes its index holds already waits for nothing: one view.
    readers, rights, reply = searched(core, counted, asked, ALICE, mode=mode,
                                      min_commit_seq=written)
    assert (readers, rights) == (1, ["recall"]) and reply.unclosed_lag == 0
    # A search for an evaluation (whose activation the same view checks) by a principal
    # granted recall for that session only.
    evaluation = Evaluation("s1", tx.activate("c", "s1", caller=BOB).id)
    readers, rights, reply = searched(core, counted, asked, BOB, mode=mode,
                                      evaluation=evaluation)
    assert (readers, rights) == (1, ["recall"]) and reply.results and reply.observation_ref


def test_recall_13_a_search_that_waits_is_authorized_once_before_it_waits(stack):
    tx, indexer, core, counted, asked, _ = stack
    last = tx.append_event("c", "s1", "user-message", "lantern note late", caller=ALICE)
    # Refused before any work: nothing indexed for a caller who may not recall there.
    with pytest.raises(MorphzError) as info:
        searched(core, counted, asked, BOB, min_commit_seq=last.commit_seq)
    assert info.value.reason == "FORBIDDEN" and asked == ["recall"]
    assert indexer.position("c") < last.commit_seq
    # Allowed: authorized on a view before the wait, the page read from one after it.
    readers, rights, reply = searched(core, counted, asked, ALICE,
                                      min_commit_seq=last.commit_seq)
    assert (readers, rights) == (2, ["recall"])
    assert reply.unclosed_lag == 0 and last.ref in {h.ref for h in reply.results}
