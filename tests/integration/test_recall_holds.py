"""RECALL-10: changes of contexts nobody searches are held back from their indexes, and a
read applies them first (services/recall/runtime/holds.py, follower.py).

A real LmdbStore, TransactionCore, Indexer, tantivy indexes and a started FeedFollower;
the RecallCore's reads catch up through the follower as the server wires them."""
from __future__ import annotations

from contextlib import contextmanager

import pytest

from morphz.services.recall.client import RecallClient
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.request import SearchRequest
from morphz.services.recall.runtime.pins import SearchPins
from morphz.services.recall.runtime.follower import FeedFollower
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.client import TransactionClient
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME

from tests.polling import until
from tests.topology import ServerProcess, SplitServers


@contextmanager
def recall(tmp_path, idle: float, store=None):
    """(store, transactions, indexer, follower, core): the follower rests 0.05 s."""
    store = store or LmdbStore(str(tmp_path / "store"))
    tx = TransactionCore(store)
    indexes = IndexDirectory(str(tmp_path / "recall"))
    indexer = Indexer(store, indexes)
    follower = FeedFollower(store, indexer, indexes, rest_ratio=1e6, max_rest_seconds=0.05,
                            idle_seconds=idle).start()
    core = RecallCore(store, tx, indexer, pins=SearchPins(), feed_status=follower.status,
                      catch_up=follower.catch_up)
    try:
        yield store, tx, indexer, follower, core
    finally:
        follower.stop()


def appends(tx, context: str, n: int) -> None:
    for i in range(n):
        tx.append_event(context, "s1", "user-message", f"note {i} lantern", caller=ME)


def head(store, context: str) -> int:
    with store.reader(context) as r:
        return r.commit_seq


def test_recall_10_an_unread_contexts_changes_wait_for_its_next_search(tmp_path):
    with recall(tmp_path, idle=60.0) as (store, tx, indexer, follower, core):
        for c in ("a", "b"):
            tx.create_context(c, caller=ME)
            appends(tx, c, 3)
        held = head(store, "a") + head(store, "b")  # every commit of both: one change each
        until(lambda: follower.status()["feed_held"] == held)
        assert indexer.position("a") == indexer.position("b") == 0  # nothing applied
        status = follower.status()
        assert status["feed_position"] == 0 < status["feed_head"]  # saved below them
        reply = core.search(SearchRequest.parse("a", "lantern"), caller=ME)
        assert len(reply.results) == 3 and reply.lag == 0  # applied first
        assert indexer.position("b") == 0  # the other context still waits
        assert follower.status()["feed_held"] == head(store, "b")
        st = core.inspect("b", caller=ME)  # an inspection reads the index too
        assert st.lag == 0 and st.events == 1 + 3  # the creation's event too
        until(lambda: follower.status()["feed_lag"] == 0)  # nothing held: saved to head
        assert follower.status()["feed_held"] == 0
        appends(tx, "b", 1)  # b was inspected, not searched: held again
        until(lambda: follower.status()["feed_held"] == 1)
        appends(tx, "a", 1)  # a was searched: indexed as it comes
        until(lambda: indexer.position("a") == head(store, "a"))
        assert follower.status()["feed_held"] == 1


def test_recall_10_a_context_searched_lately_is_indexed_as_its_changes_come(tmp_path):
    with recall(tmp_path, idle=60.0) as (store, tx, indexer, follower, core):
        tx.create_context("a", caller=ME)
        until(lambda: follower.status()["feed_held"] > 0)
        core.search(SearchRequest.parse("a", "lantern"), caller=ME)  # read now: not held for 60 s
        appends(tx, "a", 5)
        until(lambda: indexer.position("a") == head(store, "a"))  # with no read
        assert follower.status()["feed_held"] == 0


def test_recall_10_held_changes_are_indexed_within_the_idle_time_unread(tmp_path):
    with recall(tmp_path, idle=1.0) as (store, tx, indexer, follower, _):
        tx.create_context("a", caller=ME)
        appends(tx, "a", 3)
        until(lambda: follower.status()["feed_held"] > 0)
        # With no read: held 1 s, then applied (within the bound, far short of forever).
        until(lambda: indexer.position("a") == head(store, "a"), bound=20.0)
        until(lambda: follower.status()["feed_lag"] == 0)


def test_recall_10_a_restart_indexes_the_changes_that_were_held(tmp_path):
    store = LmdbStore(str(tmp_path / "store"))
    try:
        with recall(tmp_path, idle=60.0, store=store) as (_, tx, indexer, follower, _):
            tx.create_context("a", caller=ME)
            appends(tx, "a", 4)
            until(lambda: follower.status()["feed_held"] == head(store, "a"))
        saved, _ = IndexDirectory(str(tmp_path / "recall")).feed_position()
        assert saved == 0  # below the held changes, which were never applied
        with recall(tmp_path, idle=0.0, store=store) as (_, _, indexer, follower, core):
            until(lambda: follower.status()["feed_lag"] == 0)
            assert indexer.position("a") == head(store, "a")
            assert len(core.search(SearchRequest.parse("a", "lantern"), caller=ME).results) == 4
    finally:
        store.close()


def test_recall_10_a_search_that_cannot_apply_held_changes_answers_and_keeps_them(tmp_path):
    with recall(tmp_path, idle=60.0) as (store, tx, indexer, follower, core):
        tx.create_context("a", caller=ME)
        appends(tx, "a", 2)
        until(lambda: follower.status()["feed_held"] == head(store, "a"))
        apply = indexer.apply

        def fail_once(context, changes):
            indexer.apply = apply
            raise OSError("disk full")
        indexer.apply = fail_once
        reply = core.search(SearchRequest.parse("a", "lantern"), caller=ME)
        assert reply.results == () and reply.lag == head(store, "a")  # as it was
        assert follower.status()["feed_held"] == head(store, "a")  # kept, not lost
        assert len(core.search(SearchRequest.parse("a", "lantern"), caller=ME).results) == 2


def hold_three_events(tx: TransactionClient, rc: RecallClient) -> list[str]:
    """Contexts a and b, three events appended to a; returns their refs once every change
    of a is held (b inspected until then: its own changes applied)."""
    tx.create_context("a")
    tx.create_context("b")
    refs = [tx.append_event("a", "s1", "user-message", f"held lantern {i}")["ref"]
            for i in range(3)]
    held = tx.status("a")["commit_seq"]  # a change each: the creation and the appends
    until(lambda: rc.inspect("b")["feed_held"] == held)
    return refs


def found(rc: RecallClient) -> list[str]:
    return sorted(h["ref"] for h in rc.search("a", "lantern")["results"])


@contextmanager
def serving_a_held_context(tmp_path):
    """`morphz serve --recall-idle 3600` as a process, with hold_three_events done:
    (server, recall client, a's event refs)."""
    srv = ServerProcess(tmp_path / "data", args=["--recall-idle", "3600"]).start()
    try:
        channel = srv.channel()
        rc = RecallClient(channel, timeout=30)
        yield srv, rc, hold_three_events(TransactionClient(channel, timeout=30), rc)
    finally:
        srv.kill()


def test_recall_10_morphz_serve_holds_an_unread_contexts_changes_until_its_search(tmp_path):
    """Over gRPC: inspecting one context shows the other's changes held (`feed_held`)
    until a search of it applies them."""
    with serving_a_held_context(tmp_path) as (_, rc, refs):
        reply = rc.search("a", "lantern")
        assert sorted(h["ref"] for h in reply["results"]) == sorted(refs)
        assert reply["lag"] == 0
        until(lambda: (s := rc.inspect("b"))["feed_held"] == 0 and s["feed_lag"] == 0)


def test_recall_10_a_server_killed_while_changes_are_held_indexes_them_after_restart(tmp_path):
    """SIGKILL while the only copy of what recall took is its memory: the position saved
    is below those changes, so the restarted server reads and indexes them again."""
    with serving_a_held_context(tmp_path) as (srv, _, refs):
        srv.kill()
        saved, _ = IndexDirectory(str(tmp_path / "data" / "recall")).feed_position()
        assert saved == 0  # below a's first change (its creation), held until the kill
        rc = RecallClient(srv.start().channel(), timeout=30)
        until(lambda: found(rc) == sorted(refs))


@pytest.mark.split_processes
def test_recall_10_a_recall_process_holds_the_streamed_feed_and_a_kill_loses_nothing(
        tmp_path):
    """Split: recall in its own process follows the storage service's streamed feed.
    Held changes wait for a search; killed while holding, the recall process alone
    restarts and still finds them (storage and transaction stay up)."""
    servers = SplitServers(tmp_path / "split",
                           role_args={"recall": ["--recall-idle", "3600"]}).start()
    try:
        tx = TransactionClient(servers.procs["transaction"].channel(), timeout=30)
        rc = RecallClient(servers.procs["recall"].channel(), timeout=30)
        refs = hold_three_events(tx, rc)
        recall = servers.procs["recall"]
        recall.kill()
        rc = RecallClient(recall.start().channel(), timeout=30)
        until(lambda: found(rc) == sorted(refs))
        more = tx.append_event("a", "s1", "user-message", "searched lantern")["ref"]
        until(lambda: found(rc) == sorted([*refs, more]))  # and follows new commits
    finally:
        servers.kill()
