"""Placement (DIST-01, DIST-05 over shards): storage shards register in a real etcd, each
context is placed on one by rendezvous hashing, written once; transaction instances
route each context's reads and commits to its shard, and a recall replica follows every
shard's feed. One etcd, two storage shards, two transaction instances and a recall
replica, all real processes, shared by the module."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import etcd3gw
import grpc
import pytest

from morphz.services.recall.client import RecallClient
from morphz.services.storage.client import StorageClient
from morphz.shared.coord.etcd import EtcdCoordinator
from morphz.shared.coord.placement import PLACEMENT_PREFIX, SHARDS_PREFIX, Placement, rendezvous
from morphz.shared.errors import MorphzError

from tests.conftest import ServerProcess
from tests.etcd_server import EtcdServer
from tests.polling import until

TTL = 2
BOUND = 60.0
SHARDS = ("s1", "s2")
pytestmark = pytest.mark.split_processes


class Etcd:
    """Direct reads and writes of the test's etcd, beside the processes'."""

    def __init__(self, address: str) -> None:
        self.address = address
        host, port = address.rsplit(":", 1)
        self.c = etcd3gw.client(host=host, port=int(port), timeout=5, api_path="/v3/")

    def get(self, key: str) -> str | None:
        found = self.c.get(key.encode())
        return found[0].decode() if found else None

    def put(self, key: str, value: str) -> None:
        self.c.put(key.encode(), value.encode())

    def delete(self, key: str) -> None:
        self.c.delete(key.encode())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("placement")
    etcd = EtcdServer(root / "etcd").start()
    procs: dict[str, ServerProcess] = {}
    try:
        for shard in SHARDS:
            procs[shard] = ServerProcess(root / shard, args=[
                "storage", "--etcd", etcd.address, "--shard", shard]).start()
        for name in ("a", "b"):
            procs[name] = ServerProcess(root / name, args=[
                "transaction", "--etcd", etcd.address, "--lease-ttl", str(TTL)]).start()
        procs["recall"] = ServerProcess(root / "recall", args=[
            "recall", "--etcd", etcd.address, "--transaction", procs["a"].address]).start()
        direct = Etcd(etcd.address)
        yield procs, direct, root
        direct.c.session.close()
    finally:
        for p in procs.values():
            p.kill()
        etcd.stop()


def shard_contexts(procs, shard: str) -> set[str]:
    with grpc.insecure_channel(procs[shard].address) as ch:
        return set(StorageClient(ch, timeout=10).contexts())


def cli(address: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "--format=json",
                          "--server", address, *args], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def eventually_found(recall_process: ServerProcess, context: str, query: str,
                     refs: list[str]) -> None:
    """Wait (up to BOUND) until the recall replica's search finds exactly `refs`."""
    with grpc.insecure_channel(recall_process.address) as ch:
        recall = RecallClient(ch, timeout=30)
        deadline = time.monotonic() + BOUND
        while True:
            try:
                found = [h["ref"] for h in recall.search(context, query)["results"]]
            except MorphzError:
                found = []
            if found == refs:
                return
            assert time.monotonic() < deadline, (context, found)
            time.sleep(0.1)


def eventually_saved(path) -> None:
    """Wait (up to BOUND) for a feed position file: the replica saves a shard's position
    a moment after applying (a search can find what it applied before)."""
    until(lambda: os.path.exists(path), BOUND, path)


NAMES = [f"placed-{n}" for n in range(8)]


@pytest.fixture(scope="module")
def placed(cluster):
    """NAMES created through instance `a`, one commit each (the tests below build on
    them, whichever of them run)."""
    a = cluster[0]["a"].client()
    for name in NAMES:
        a.create_context(name)
        a.commit(name, f"(context-tx (base-version 0) (create plan (goal {name})))")
    return NAMES


def test_dist_05_contexts_are_placed_by_rendezvous_once_and_stored_on_their_shard(cluster,
                                                                                  placed):
    procs, direct, _ = cluster
    assert {s: json.loads(direct.get(SHARDS_PREFIX + s))["address"] for s in SHARDS} == \
        {s: procs[s].address for s in SHARDS}
    shard_of = {name: direct.get(PLACEMENT_PREFIX + name) for name in placed}
    # The documented rule, written out here: the shard with the highest sha256(shard NUL name).
    assert shard_of == {name: max(SHARDS, key=lambda s, n=name: hashlib.sha256(
        f"{s}\0{n}".encode()).digest()) for name in placed}
    expected = {s: {n for n, p in shard_of.items() if p == s} for s in SHARDS}
    assert all(expected.values()), expected  # these names land on both shards
    for s in SHARDS:  # each shard holds exactly its contexts
        assert {c for c in shard_contexts(procs, s) if c.startswith("placed-")} == expected[s]
    # The other instance reads every context from its shard (writes are the owner's).
    b = procs["b"].client()
    assert [b.status(n)["revision"] for n in NAMES] == [1] * len(NAMES)


def test_dist_05_status_shows_owner_shard_and_token(cluster, placed):
    procs, direct, _ = cluster
    name = NAMES[0]
    for via in ("a", "b"):  # any instance tells who owns it
        st = cli(procs[via].address, "context", "status", name)
        assert st["owner"] == st["owner_address"] == procs["a"].address
        assert st["shard"] == direct.get(PLACEMENT_PREFIX + name)
        assert st["fencing_token"] > 0
    text = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "--server",
                           procs["b"].address, "context", "status", name],
                          capture_output=True, text=True, timeout=60)
    assert text.returncode == 0, text.stderr
    for key in ("owner", "shard", "fencing_token"):
        assert f"\n{key}: " in text.stdout


def test_dist_05_a_new_shard_does_not_move_a_placed_context(cluster, placed):
    procs, direct, _ = cluster
    a = procs["a"].client()
    # A shard named so that rendezvous would now prefer it for NAMES[0].
    newcomer = next(f"z{n}" for n in range(1000)
                    if rendezvous(NAMES[0], [*SHARDS, f"z{n}"]) == f"z{n}")
    direct.put(SHARDS_PREFIX + newcomer, json.dumps({"address": "127.0.0.1:1"}))
    try:
        before = direct.get(PLACEMENT_PREFIX + NAMES[0])
        receipt = a.commit(NAMES[0], "(context-tx (base-version 1) (create more (x 1)))")
        assert receipt["revision"] == 2
        assert direct.get(PLACEMENT_PREFIX + NAMES[0]) == before
        # `a` knows its placements already: an instance that never saw this context asks
        # etcd, where the newcomer would win a fresh placement, and keeps the recorded one.
        fresh = Placement(EtcdCoordinator(direct.address, timeout=5))
        assert fresh.shard_of(NAMES[0], place=True) == before
    finally:
        direct.delete(SHARDS_PREFIX + newcomer)


def test_dist_05_the_placement_map_wins_over_the_rule(cluster):
    procs, direct, _ = cluster
    name = next(f"pinned-{n}" for n in range(100) if rendezvous(f"pinned-{n}", list(SHARDS))
                == "s1")
    direct.put(PLACEMENT_PREFIX + name, "s2")  # placed by an operator, before any write
    procs["a"].client().create_context(name)
    assert name in shard_contexts(procs, "s2") and name not in shard_contexts(procs, "s1")


def test_dist_06_a_recall_replica_follows_every_shards_feed(cluster, placed):
    procs, _, root = cluster
    a = procs["a"].client()
    refs = {}
    for name in NAMES[:4]:
        refs[name] = a.append_event(name, "main", "user-message", f"sharded hello {name}")["ref"]
    for name in NAMES[:4]:
        eventually_found(procs["recall"], name, "sharded", [refs[name]])
    for s in SHARDS:  # a position per shard's feed
        eventually_saved(root / "recall" / "recall" / f"FEED_POSITION.{s}")


def test_dist_06_a_recall_replica_follows_a_shard_registered_after_it_started(cluster):
    """A third shard joins; a context an operator placed on it is indexed by the running
    replica without a restart. Last of the module's cluster tests: the shard leaves again
    (its registration deleted), so it takes no other test's contexts."""
    procs, direct, root = cluster
    etcd_address = direct.address
    late = ServerProcess(root / "s3", args=["storage", "--etcd", etcd_address,
                                            "--shard", "s3"]).start()
    try:
        name = "placed-late"
        direct.put(PLACEMENT_PREFIX + name, "s3")  # before any write: it goes to s3
        a = procs["a"].client()
        a.create_context(name)
        ref = a.append_event(name, "main", "user-message", "a latecomer shard")["ref"]
        assert name in shard_contexts({"s3": late}, "s3")
        eventually_found(procs["recall"], name, "latecomer", [ref])
        eventually_saved(root / "recall" / "recall" / "FEED_POSITION.s3")
    finally:
        direct.delete(SHARDS_PREFIX + "s3")
        late.kill()


@pytest.mark.parametrize("argv, field", [
    (["storage", "--etcd", "127.0.0.1:1"], "etcd"),
    (["storage", "--shard", "s1"], "shard"),
    (["storage", "--etcd", "127.0.0.1:1", "--shard", "a/b"], "shard"),
    (["transaction", "--etcd", "127.0.0.1:1", "--shard", "s1"], "shard"),
    (["recall", "--transaction", "127.0.0.1:1"], "storage"),
    (["transaction"], "storage"),
    (["encoding", "--storage", "127.0.0.1:1", "--transaction", "127.0.0.1:1",
      "--embedder", "hashing"], "embedder"),
], ids=["storage-etcd-without-shard", "shard-without-etcd", "shard-name", "shard-not-storage",
        "recall-without-storage-or-etcd", "transaction-without-storage-or-etcd",
        "embedder-not-recall"])
def test_dist_05_shard_flags_are_checked(tmp_path, argv, field):
    proc = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "serve", *argv,
                           "--listen", "127.0.0.1:0", "--data", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert (error["reason"], error["details"]["field"]) == ("CONTEXT_INPUT_INVALID", field)
