"""DIST-06: recall replicas follow the storage change feed. Storage, transaction and two
recall processes run as real children on loopback; the replicas serve identical results,
and one killed with SIGKILL while commits stream in resumes from its saved position with
every event and frame indexed exactly once."""
from __future__ import annotations

import threading
import time

import grpc
import pytest

from morphz.services.recall.client import RecallClient
from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError

from tests.conftest import ServerProcess
from tests.integration.test_split import BOUND, SERVING, start, wait_health

CONTEXTS = ("feed-a", "feed-b")
pytestmark = pytest.mark.split_processes


@pytest.fixture
def replicas(tmp_path):
    procs = {"storage": start(tmp_path, "storage")}
    store = ["--storage", procs["storage"].address]
    procs["transaction"] = start(tmp_path, "transaction", *store)
    both = store + ["--transaction", procs["transaction"].address]
    for replica in ("recall-1", "recall-2"):  # each with its own index folder
        procs[replica] = ServerProcess(tmp_path / replica, args=["recall", *both]).start()
    for p in procs.values():
        wait_health(p, SERVING)
    yield procs
    for p in procs.values():
        p.kill()


def recall(proc) -> RecallClient:
    return RecallClient(grpc.insecure_channel(proc.address), timeout=30)


def caught_up(rc: RecallClient, contexts=CONTEXTS) -> dict:
    """Wait (bounded) until the replica reports lag 0 for every context and the feed."""
    import time
    deadline = time.monotonic() + BOUND
    while True:
        status = {c: rc.inspect(c) for c in contexts}
        if all(s["lag"] == 0 and s["feed_lag"] == 0 and s.get("vectors", {}).get("lag", 0) == 0
               for s in status.values()):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.1)


def write_story(tx: TransactionClient, context: str, n: int) -> None:
    """Events, frames, a relation, a revision and a rollback: every kind of change."""
    tx.create_context(context)
    for i in range(n):
        tx.append_event(context, "main", "user-message", f"{context} deploy note {i} sandbox")
    tx.commit(context, "(context-tx (base-version 0) (checkpoint start))")
    tx.commit(context, "(context-tx (base-version 1) (create release (stage testing)) "
                       "(create tests (result green sandbox)) (relate tests supports release))")
    tx.commit(context, "(context-tx (base-version 2) (revise release (stage shipped)))")
    tx.commit(context, "(context-tx (base-version 3) (create scratch (note temporary)))")
    tx.commit(context, "(context-tx (base-version 4) (rollback start))")
    tx.commit(context, "(context-tx (base-version 5) (create release (stage again)) "
                       "(create tests (result green sandbox)) (relate tests supports release))")


def answers(rc: RecallClient, context: str, walk_from: str = "") -> dict:
    out = {}
    for query in ("sandbox", "deploy note", "release", "green", "streamed"):
        out[query] = [(h["ref"] or h["id"], h["kind"], h["state"], h["preview"])
                      for h in rc.search(context, query, limit=50)["results"]]
    if walk_from:
        walk = rc.traverse(context, walk_from, depth=2, include_bodies=True)
        out["walk"] = [(n.get("id") or n.get("ref"), n.get("body")) for n in walk["nodes"]]
    return out


def expected_documents(tx: TransactionClient, context: str) -> int:
    """Events and frames in the authoritative store: what the index must hold, once each."""
    return tx.status(context)["event_count"] + len(tx.list_frames(context)["frames"])


def test_dist_06_two_replicas_serve_identical_results(replicas):
    tx = TransactionClient(grpc.insecure_channel(replicas["transaction"].address), timeout=30)
    for context in CONTEXTS:
        write_story(tx, context, 12)
    one, two = recall(replicas["recall-1"]), recall(replicas["recall-2"])
    status_one, status_two = caught_up(one), caught_up(two)
    for context in CONTEXTS:
        assert status_one[context]["documents"] == status_two[context]["documents"] \
            == expected_documents(tx, context)
        assert status_one[context]["position"] == status_two[context]["position"] \
            == tx.status(context)["commit_seq"]
        first = answers(one, context, "release")
        assert first["sandbox"] and first["walk"]
        frames = {ref for hits in first.values() for ref, kind, *_ in hits if kind == "frame"}
        assert "release" in frames and "scratch" not in frames  # rolled back: gone from it
        assert one.search(context, "temporary", kinds=["frame"])["results"] == []
        assert first == answers(two, context, "release")


def test_dist_06_a_replica_killed_mid_feed_resumes_from_its_position(replicas):
    tx = TransactionClient(grpc.insecure_channel(replicas["transaction"].address), timeout=30)
    for context in CONTEXTS:
        tx.create_context(context)
    victim = replicas["recall-2"]
    stop, written, errors = threading.Event(), [0], []

    def writer():
        i = 0
        while not stop.is_set():
            context = CONTEXTS[i % 2]
            try:
                tx.append_event(context, "main", "user-message", f"stream {i} sandbox")
                if i % 10 == 0:
                    tx.commit(context, f"(context-tx (base-version {tx.status(context)['revision']})"
                                       f" (create f{i} (note streamed sandbox)))")
            except MorphzError as e:  # a writer racing its own status read: try the next
                if e.reason != "TX_CONFLICT":
                    errors.append(e.to_dict())
            written[0] = i
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        rc = recall(victim)
        import time
        deadline = time.monotonic() + BOUND
        while rc.inspect(CONTEXTS[0])["feed_position"] < 20:  # it has applied some
            assert time.monotonic() < deadline
            time.sleep(0.05)
        saved = rc.inspect(CONTEXTS[0])["feed_position"]
        victim.kill()  # SIGKILL, while the writer keeps committing
        while written[0] < 120:
            assert time.monotonic() < deadline + BOUND
            time.sleep(0.05)
        victim.listen = victim.address
        victim.start()
        wait_health(victim, SERVING)
        resumed = recall(victim).inspect(CONTEXTS[0])["feed_position"]
        assert resumed >= saved  # from its saved position, not from the start
    finally:
        stop.set()
        t.join(60)
    assert not errors, errors
    survivor, restarted = caught_up(recall(replicas["recall-1"])), caught_up(recall(victim))
    for context in CONTEXTS:
        want = expected_documents(tx, context)
        assert restarted[context]["documents"] == survivor[context]["documents"] == want
        assert restarted[context]["events"] == tx.status(context)["event_count"]
        assert answers(recall(victim), context) == answers(recall(replicas["recall-1"]), context)


def test_dist_06_two_replicas_cannot_share_an_index_folder(replicas):
    import json
    import subprocess
    import sys
    first = replicas["recall-1"]
    both = ["--storage", replicas["storage"].address,
            "--transaction", replicas["transaction"].address]
    second = subprocess.run(
        [sys.executable, "-m", "morphz.services.cli.main", "serve", "recall", *both,
         "--listen", "127.0.0.1:0", "--data", first.data_dir],
        capture_output=True, text=True, timeout=60)
    assert second.returncode != 0
    assert json.loads(second.stdout)["error"]["reason"] == "RECALL_INDEX_LOCKED"
    assert not first.died()  # the replica holding the folder goes on serving


@pytest.mark.parametrize("role", ["all", "recall"])
def test_dist_06_a_stopping_server_holds_its_index_folder_until_its_followers_stop(
        tmp_path, monkeypatch, role):
    """Recall's folder lock is let go last, by the all-in-one server and by a recall
    process: while the feed followers are stopping (an application may still be writing
    indexes and the feed position), another process taking the folder would interleave
    its writes with theirs."""

    from morphz.services.recall.runtime.feeds import Feeds
    from morphz.services.recall.index.index_directory import lock_root
    from morphz.services.server.app import AllInOne, ServerConfig
    from morphz.services.server.roles import ServiceProcess

    seen = []
    stop_feeds = Feeds.stop

    def stop(self):
        try:
            lock_root(root)()  # what a second process would do: take it (and let go)
            seen.append("taken")
        except MorphzError as e:
            seen.append(e.reason)
        stop_feeds(self)
    monkeypatch.setattr(Feeds, "stop", stop)
    home = AllInOne(ServerConfig(str(tmp_path / "home"), "127.0.0.1:0",
                                 storage_listen="127.0.0.1:0")).start()
    try:
        if role == "all":
            server, root = home, str(tmp_path / "home" / "recall")
        else:
            server = ServiceProcess("recall", ServerConfig(
                str(tmp_path / "replica"), "127.0.0.1:0",
                storage=f"127.0.0.1:{home.storage_port}",
                transaction=f"127.0.0.1:{home.port}")).start()
            root = str(tmp_path / "replica" / "recall")
        server.stop(grace=1)
        assert seen == ["RECALL_INDEX_LOCKED"]
        lock_root(root)()  # and let go once the server has stopped
    finally:
        if role != "all":
            home.stop(grace=1)


def test_dist_06_an_application_outliving_the_stop_keeps_the_index_folder_locked(
        tmp_path, monkeypatch):
    """A follower's application is not cut short by the server's stop, which waits for
    it only so long (STOP_SECONDS). Should it still run after that, the folder stays
    locked until it ends: it still writes indexes and the feed position there."""
    from morphz.services.recall.runtime import follower
    from morphz.services.recall.runtime.indexer import Indexer
    from morphz.services.recall.index.index_directory import lock_root
    from morphz.services.server.app import AllInOne, ServerConfig
    from morphz.shared.auth import IN_PROCESS_CALLER

    applying, finish = threading.Event(), threading.Event()
    apply = Indexer.apply

    def slow_apply(self, context, changes):
        if context == "slow":
            applying.set()
            finish.wait(60)
        return apply(self, context, changes)
    monkeypatch.setattr(Indexer, "apply", slow_apply)
    monkeypatch.setattr(follower, "STOP_SECONDS", 0.2)
    root = str(tmp_path / "recall")
    server = AllInOne(ServerConfig(str(tmp_path), "127.0.0.1:0",
                                   recall_idle_seconds=0)).start()
    try:
        server.transactions.create_context("slow", caller=IN_PROCESS_CALLER)
        assert applying.wait(30)  # the follower applies the creation, and stays there
        server.stop(grace=1)  # returns with the application still under way
        with pytest.raises(MorphzError) as refused:
            lock_root(root)
        assert refused.value.reason == "RECALL_INDEX_LOCKED"
    finally:
        finish.set()
    deadline = time.monotonic() + 30
    while True:  # let go once the application has ended
        try:
            lock_root(root)()
            break
        except MorphzError:
            assert time.monotonic() < deadline, "the index folder stayed locked"
            time.sleep(0.05)
