"""RECALL-10: the index follows the change feed in the background, in batches.

A real LmdbStore, TransactionCore, Indexer and tantivy index; the store counts the feed
pages it is asked for."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.request import SearchRequest
from morphz.services.recall.runtime.pins import SearchPins
from morphz.services.recall.runtime.follower import FeedFollower
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.storage.client import RemoteReader, StorageClient
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME

from tests.polling import until
from tests.rpc_count import storage_service

BOUND = 120.0  # seconds a held feed may wait (generous: a loaded machine)


class CountingStore(LmdbStore):
    """Counts the feed pages read; pages of PAGE changes at most. While `held` (a
    context manager) the feed's pages wait to be read: commits made meanwhile are
    made "within one rest" of the follower, however long they take on a busy machine."""
    pages = 0
    PAGE = 500
    _open: threading.Event | None = None

    def changes(self, *args, **kwargs):
        if self._open is not None:
            assert self._open.wait(BOUND), "the feed was held for too long"
        self.pages += 1
        return super().changes(*args, **kwargs)

    @contextmanager
    def held(self):
        self._open = threading.Event()
        try:
            yield
        finally:
            self._open.set()
            self._open = None

    def watch(self, after, **kwargs):
        return super().watch(after, **dict(kwargs, limit=self.PAGE))


class _Interleaved(RemoteReader):
    """A reader that runs (and drops) the callables in its client's `between`, each given
    the reader, before its next get_tables: what happens between a request's reads."""

    def get_tables(self, wanted, **kw):
        while self._c.between:
            self._c.between.pop()(self)
        return super().get_tables(wanted, **kw)


class InterleavingClient(StorageClient):
    def __init__(self, channel, **kw) -> None:
        super().__init__(channel, **kw)
        self.between: list = []

    def reader(self, context):
        return _Interleaved(self, context)


def counting_follower(store, indexes: IndexDirectory, *, rest: float
                      ) -> tuple[FeedFollower, list[int]]:
    """A started follower that rests `rest` s after each application, and the number of
    changes of each application."""
    follower = FeedFollower(store, Indexer(store, indexes), indexes, rest_ratio=1e6,
                            max_rest_seconds=rest)
    applied: list[int] = []
    apply = follower.apply
    follower.apply = lambda changes: (applied.append(len(changes)), apply(changes))[1]
    return follower.start(), applied


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
        with store.held():  # all within one rest, however slow the appends
            for i in range(40):
                tx.append_event("c", "s1", "user-message", f"note {i} lantern", caller=ME)
        until(caught_up)
        assert store.pages - before <= 4  # a page per commit would be 40
        with store.reader("c") as r:
            assert indexer.position("c") == r.commit_seq  # every commit indexed
    finally:
        follower.stop()
        store.close()


def test_recall_10_with_nothing_to_index_the_follower_still_rests_between_pages(tmp_path):
    """Changes held (no search): an application takes microseconds, so only the shortest
    rest keeps the follower from reading a page per commit. Ten commits 50 ms apart: a
    read each with no shortest rest, a few in all with one of a second."""
    pages = {}
    for min_rest in (0.0, 1.0):
        store = CountingStore(str(tmp_path / f"store-{min_rest}"))
        tx = TransactionCore(store)
        tx.create_context("c", caller=ME)
        indexes = IndexDirectory(str(tmp_path / f"recall-{min_rest}"))
        follower = FeedFollower(store, Indexer(store, indexes), indexes,
                                min_rest_seconds=min_rest, idle_seconds=3600).start()
        try:
            # Taken up to the head: all that lags is held (the saved position stays).
            def taken(follower=follower) -> bool:
                st = follower.status()
                return st["feed_lag"] == st["feed_held"]
            until(taken)
            before = store.pages
            for i in range(10):
                time.sleep(0.05)
                tx.append_event("c", "s1", "user-message", f"note {i}", caller=ME)
            until(taken)
            pages[min_rest] = store.pages - before
        finally:
            follower.stop()
            store.close()
    assert pages[1.0] <= 4 and pages[0.0] >= 8, pages


def applications_of_a_backlog(store, recall_dir, rest: float,
                              then=lambda: None) -> list[int]:
    """The changes of each application that indexes 40 appends to one context, made
    within one rest of a follower that has caught up with the context's creation (its
    feed held while they are made: `assert 29 >= 30` once, when the appends of a loaded
    machine outlasted a 0.5 s rest); `then` is called once it has caught up."""
    tx = TransactionCore(store)
    tx.create_context("c", caller=ME)
    follower, applied = counting_follower(store, IndexDirectory(str(recall_dir)), rest=rest)
    try:
        caught_up = lambda: follower.status()["feed_position"] == store.feed_head()  # noqa: E731
        until(caught_up)
        applied.clear()
        then()
        with store.held():  # all within one rest, however slow the appends
            for i in range(40):
                tx.append_event("c", "s1", "user-message", f"note {i} lantern", caller=ME)
        until(caught_up)
        return applied
    finally:
        follower.stop()
        store.close()


def test_recall_10_a_backlog_longer_than_a_page_is_applied_at_once(tmp_path):
    store = CountingStore(str(tmp_path / "store"))
    store.PAGE = 10  # four pages
    applied = applications_of_a_backlog(store, tmp_path / "recall", rest=0.5)
    assert max(applied) >= 30  # not one page (10) per application


def test_recall_10_an_application_takes_the_rest_of_a_backlog_the_reader_is_reading(tmp_path):
    """The applier wakes on the backlog's first page while the reader still reads the
    others (here each page read takes 0.1 s): it waits for them, up to the head the
    first page named, rather than applying one page now and the rest a rest later."""
    class SlowPages(CountingStore):
        PAGE = 10
        slow = False

        def changes(self, *args, **kwargs):
            if self.slow:
                time.sleep(0.1)
            return super().changes(*args, **kwargs)

    store = SlowPages(str(tmp_path / "store"))
    applied = applications_of_a_backlog(store, tmp_path / "recall", rest=1.0,
                                        then=lambda: setattr(store, "slow", True))
    assert applied == [40]  # one page at a time: [10, 30] or [10, 10, 10, 10]


def test_dist_05_indexing_a_commit_reads_its_events_and_frames_in_one_round_trip(tmp_path):
    """Over the storage service: one GetMany for both tables, no snapshot held."""
    with storage_service(tmp_path / "server") as (app, channel, count):
        tx = app.transactions
        tx.create_context("c", caller=ME)
        tx.commit("c", "(context-tx (base-version 0) (create f (x 1)) (create g (y 2)))",
                  caller=ME)
        client = StorageClient(channel, timeout=30)
        # The lexical leg's reads only: the vector leg follows on its own (not here).
        indexer = Indexer(client, IndexDirectory(str(tmp_path / "recall")),
                          vectors_due=lambda context: None)
        feed = client.changes(0, context="c").changes
        count.calls.clear()
        indexer.apply("c", feed)
        assert [c for c in count.calls if c.startswith("GetMany")] == ["GetMany:events"]
        assert count.calls.count("Get:events") + count.calls.count("Get:frames") == 0
        assert "OpenSnapshot" not in count.calls and "CloseSnapshot" not in count.calls
        assert indexer.position("c") == 2


def test_recall_10_the_feed_lag_counts_commits_made_while_the_follower_rests(tmp_path):
    """A lazy (in-process) feed is not read during a rest; its lag still shows the commits
    waiting there, so `feed_lag == 0` means they are indexed."""
    store = LmdbStore(str(tmp_path / "store"))
    tx = TransactionCore(store)
    tx.create_context("c", caller=ME)
    indexes = IndexDirectory(str(tmp_path / "recall"))
    follower = FeedFollower(store, Indexer(store, indexes), indexes, rest_ratio=1e6,
                            max_rest_seconds=30.0).start()
    try:
        until(lambda: follower.status()["feed_position"] == store.feed_head())
        for i in range(3):  # the follower rests 30 s after the application above
            tx.append_event("c", "s1", "user-message", f"note {i}", caller=ME)
        status = follower.status()
        assert status["feed_head"] == store.feed_head()
        assert status["feed_lag"] == store.feed_head() - status["feed_position"] >= 3
    finally:
        follower.stop()
        store.close()


def test_dist_05_a_search_over_the_storage_service_reads_one_version(tmp_path):
    """A search's reads (the meta, then its page's observations and events, together)
    see one version even when a commit lands between them; over gRPC that is a Get that
    opens the snapshot and one GetMany in it that releases it (its last read)."""
    with storage_service(tmp_path / "server") as (app, channel, count):
        tx = app.transactions
        tx.create_context("c", caller=ME)
        refs = [tx.append_event("c", "s1", "user-message", f"lantern {i}", caller=ME).ref
                for i in range(3)]
        rev = tx.commit("c", f'(context-tx (base-version 0) (reason "seen") (retire {refs[0]}))',
                        caller=ME).revision
        client = InterleavingClient(channel, timeout=30)
        indexer = Indexer(client, IndexDirectory(str(tmp_path / "recall")))
        indexer.catch_up("c")
        core = RecallCore(client, tx, indexer, pins=SearchPins())
        client.between.append(lambda _reader: tx.commit(
            "c", f'(context-tx (base-version {rev}) (reason "later") (retire {refs[1]}))',
            caller=ME))
        count.calls.clear()
        # Lexical: a hybrid search of one word also looks it up as an id (more Gets,
        # of the same version).
        reply = core.search(SearchRequest.parse("c", "lantern", states=["active"], mode="lexical"),
                            caller=ME)
        assert not client.between  # the commit landed mid-search
        assert sorted(h.ref for h in reply.results) == sorted(refs[1:])  # as of the meta
        assert count.methods() == ["Get", "GetMany"]
        assert len(app.snapshots) == 0  # released with the GetMany
        reply = core.search(SearchRequest.parse("c", "lantern", states=["active"]), caller=ME)
        assert [h.ref for h in reply.results] == [refs[2]]  # the next search sees it


def test_dist_05_a_search_whose_snapshot_went_while_the_context_moved_reads_again(tmp_path):
    """A remote reader's snapshot released under it (reaped, or let go early) while a
    commit moves the context: its next read cannot see the old version (StaleRead), so
    the search reads again, all of it, at the new version."""
    with storage_service(tmp_path / "server") as (app, channel, count):
        tx = app.transactions
        tx.create_context("c", caller=ME)
        refs = [tx.append_event("c", "s1", "user-message", f"lantern {i}", caller=ME).ref
                for i in range(3)]
        client = InterleavingClient(channel, timeout=30)
        indexer = Indexer(client, IndexDirectory(str(tmp_path / "recall")))
        indexer.catch_up("c")
        core = RecallCore(client, tx, indexer, pins=SearchPins())

        def release_and_move(reader: RemoteReader) -> None:
            app.snapshots.close_snapshot(reader._snapshot)  # as the reaper would
            tx.commit("c", f'(context-tx (base-version 0) (reason "done") (retire {refs[0]}))',
                      caller=ME)
        client.between.append(release_and_move)
        count.calls.clear()
        # Lexical: a hybrid search of one word also looks it up as an id (more Gets,
        # of the same version).
        reply = core.search(SearchRequest.parse("c", "lantern", states=["active"], mode="lexical"),
                            caller=ME)
        assert not client.between
        assert "OpenSnapshot" in count.methods()  # the old version was asked for: gone
        assert count.methods()[-2:] == ["Get", "GetMany"]  # then the whole read again
        assert sorted(h.ref for h in reply.results) == sorted(refs[1:])
        assert len(app.snapshots) == 0


def test_recall_10_a_streamed_feed_is_applied_in_batches_of_many_pages(tmp_path):
    """Over the storage service the feed streams a page for every commit or few; what
    arrives during one rest is applied together, however many pages it came in (the
    read-ahead is bounded by changes, not pages)."""
    class OnePerPage(StorageClient):  # a page per commit, as a busy stream's are small
        def watch(self, after, **kwargs):
            return super().watch(after, **dict(kwargs, limit=1))

    with storage_service(tmp_path / "server", sync=False) as (app, channel, _):
        client = OnePerPage(channel, timeout=30)
        tx = app.transactions
        tx.create_context("c", caller=ME)
        indexes = IndexDirectory(str(tmp_path / "recall"))
        follower, applied = counting_follower(client, indexes, rest=8.0)
        try:
            caught_up = lambda: follower.status()["feed_position"] == app.store.feed_head()  # noqa: E731
            until(caught_up)
            for i in range(400):  # one commit at a time: a page each, within one rest
                tx.append_event("c", "s1", "user-message", f"note {i} lantern", caller=ME)
            until(caught_up)
            assert max(applied) > 300  # 256 pages (here changes) per application at most before
        finally:
            follower.stop()


def test_recall_10_an_application_longer_than_a_chunk_indexes_every_row(tmp_path, monkeypatch):
    """Chunk by chunk (whole changes, here about 10 rows), each chunk's events and frames
    in one round trip over the storage service, and every event and frame indexed."""
    from morphz.services.recall.runtime import index_apply

    monkeypatch.setattr(index_apply, "SUPERSEDED_CHECK", 10)
    with storage_service(tmp_path / "server", sync=False) as (app, channel, count):
        tx = app.transactions
        tx.create_context("c", caller=ME)
        for i in range(25):
            tx.append_event("c", "s1", "user-message", f"event {i} lantern", caller=ME)
        creates = " ".join(f"(create f{i} (note frame {i} lantern))" for i in range(12))
        tx.commit("c", f"(context-tx (base-version 0) {creates})", caller=ME)
        client = StorageClient(channel, timeout=30)
        # The lexical leg's reads only: the vector leg follows on its own (not here).
        indexer = Indexer(client, IndexDirectory(str(tmp_path / "recall")),
                          vectors_due=lambda context: None)
        feed = client.changes(0, context="c").changes
        count.calls.clear()
        indexer.apply("c", feed)
        assert [c.split(":")[0] for c in count.calls if c.startswith("GetMany")] == \
            ["GetMany"] * 4  # whole changes, ~10 rows a chunk: the context's 2 events
        # and 8 appends, 10 appends, 7, then the commit of an event and 12 frames
        idx = indexer.index("c")
        searcher, _ = idx.snapshot()
        # with the two events that created the context and the frames
        assert idx.counts(searcher) == {"events": 27, "frames": 12}
