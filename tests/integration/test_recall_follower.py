"""RECALL-10: the index follows the change feed in the background, in batches.

A real LmdbStore, TransactionCore, Indexer and tantivy index; the store counts the feed
pages it is asked for."""
from __future__ import annotations

import time

from morphz.services.recall.core.follower import FeedFollower
from morphz.services.recall.core.indexer import Indexer
from morphz.services.recall.index.tantivy_index import IndexDirectory
from morphz.services.storage.lmdb_store import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME


class CountingStore(LmdbStore):
    pages = 0

    def changes(self, *args, **kwargs):
        self.pages += 1
        return super().changes(*args, **kwargs)


def until(check, bound: float = 30.0) -> None:
    deadline = time.monotonic() + bound
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_recall_10_commits_made_while_the_follower_rests_are_read_as_one_page(tmp_path):
    store = CountingStore(str(tmp_path / "store"))
    tx = TransactionCore(store)
    tx.create_context("c", caller=ME)
    indexes = IndexDirectory(str(tmp_path / "recall"))
    indexer = Indexer(store, indexes)
    # After each application it rests 0.5 s (the ratio puts it at the cap).
    follower = FeedFollower(store, indexer, indexes, rest_ratio=1e6,
                            max_rest_seconds=0.5).start()
    try:
        caught_up = lambda: follower.status()["feed_position"] == store.feed_head()  # noqa: E731
        until(caught_up)
        before = store.pages
        for i in range(40):  # well within one rest
            tx.append_event("c", "s1", "user-message", f"note {i} lantern", caller=ME)
        until(caught_up)
        assert store.pages - before <= 4  # a page per commit would be 40
        with store.reader("c") as r:
            assert indexer.position("c") == r.commit_seq  # every commit indexed
    finally:
        follower.stop()
        store.close()
