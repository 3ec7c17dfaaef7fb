"""DIST-05: `morphz serve storage|transaction|recall|encoding` as four real child
processes on loopback, each reaching the others over gRPC, behave like the all-in-one
server; each is ready only once the services it calls answer, and drains on SIGTERM."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from morphz.services.cli.main import main as cli_main
from morphz.services.encoding.client import EncodingClient
from morphz.services.recall.client import RecallClient
from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError

from tests.topology import (BOUND, NOT_SERVING, SERVING, InProcessServers, ServerProcess,
                            SplitServers, health, wait_health)

SERVICES = {"storage": "morphz.api.storage.v1.StorageService",
            "transaction": "morphz.api.transaction.v1.TransactionService",
            "recall": "morphz.api.recall.v1.RecallService",
            "encoding": "morphz.api.encoding.v1.EncodingService"}
WALK = "dist-05-walk"  # one name in both topologies
pytestmark = pytest.mark.split_processes


def wait_indexed(recall: RecallClient, context: str) -> None:
    deadline = time.monotonic() + BOUND  # the index follows the outbox in the background
    while recall.inspect(context)["lag"]:
        assert time.monotonic() < deadline, recall.inspect(context)
        time.sleep(0.1)


def start(tmp_path, role: str, *args: str, listen: str = "127.0.0.1:0") -> ServerProcess:
    return ServerProcess(tmp_path / role, args=[role, *args], listen=listen).start()


@pytest.fixture
def cluster(tmp_path):
    """The four services, each its own process, all SERVING."""
    servers = SplitServers(tmp_path).start()
    yield servers.procs
    servers.kill()


def scenario(tx: TransactionClient, recall: RecallClient, enc: EncodingClient,
             context: str) -> dict:
    """The walk-through's first steps through each service; what any topology must answer
    alike (ids, times and snapshot ids left out)."""
    out = {"create": tx.create_context(context)["revision"]}
    event = tx.append_event(context, "main", "user-message",
                            "Ship v1 once the regression tests pass.")
    out["event"] = {k: v for k, v in event.items() if k != "id"}
    out["activate"] = tx.activate(context, "main")
    out["commit"] = tx.commit(context, "(context-tx (base-version 0) (create release "
                              "(goal ship-v1) (stage waiting-tests)))", session="main")
    out["frame"] = tx.get_frame(context, "release")
    out["audit"] = tx.audit(context)
    wait_indexed(recall, context)
    out["search"] = [(h["kind"], h["ref"], h["state"], h["preview"])
                     for h in recall.search(context, "regression")["results"]]
    e = enc.compile(context, "main")
    mind = next(r for r in e["regions"] if r["name"] == "mind")
    out["encoding"] = {"regions": [r["name"] for r in e["regions"]],
                       "mind": e["text"][mind["start"]:mind["end"]],
                       "activation": e["activation"], "revision": e["revision"],
                       "replay_match": enc.replay(context, e["snapshot"])["match"]}
    return out


def clients(tx_address: str, recall_address: str, enc_address: str):
    return (TransactionClient(grpc.insecure_channel(tx_address), timeout=30),
            RecallClient(grpc.insecure_channel(recall_address), timeout=30),
            EncodingClient(grpc.insecure_channel(enc_address), timeout=30))


def test_dist_05_split_processes_serve_the_same_behaviour(cluster, tmp_path):
    split = scenario(*clients(cluster["transaction"].address, cluster["recall"].address,
                              cluster["encoding"].address), WALK)
    assert split["commit"]["revision"] == 1
    assert split["frame"]["body"] == "(goal ship-v1) (stage waiting-tests)"
    assert split["audit"]["match"] and split["audit"]["events_replayed"] == 4
    assert ("event", "@e1", "active", "Ship v1 once the «regression» tests pass.") \
        in split["search"]
    assert "(frame release" in split["encoding"]["mind"] and split["encoding"]["replay_match"]
    # The same steps against an all-in-one server.
    one = InProcessServers(tmp_path / "all-in-one").start()
    try:
        at = one.endpoints
        assert split == scenario(*clients(at.transaction, at.recall, at.encoding), WALK)
    finally:
        one.stop()


def test_dist_05_each_split_process_serves_only_its_own_service(cluster):
    for role, proc in cluster.items():
        with grpc.insecure_channel(proc.address) as ch:
            stub = reflection_pb2_grpc.ServerReflectionStub(ch)
            req = reflection_pb2.ServerReflectionRequest(list_services="")
            reply = next(stub.ServerReflectionInfo(iter([req]), timeout=5))
        names = {s.name for s in reply.list_services_response.service}
        assert names == {SERVICES[role], "grpc.health.v1.Health",
                         "grpc.reflection.v1alpha.ServerReflection"}, role
        assert health(proc.address, SERVICES[role]) == SERVING


def test_dist_05_cli_reaches_a_split_cluster_through_per_service_addresses(cluster,
                                                                           monkeypatch):
    monkeypatch.setenv("MORPHZ_SERVER", cluster["transaction"].address)
    monkeypatch.setenv("MORPHZ_RECALL", cluster["recall"].address)
    monkeypatch.setenv("MORPHZ_ENCODING", cluster["encoding"].address)
    monkeypatch.delenv("MORPHZ_TRANSACTION", raising=False)

    def run(*argv: str) -> dict:
        out = io.StringIO()
        monkeypatch.setattr("sys.stdout", out)
        assert cli_main(["--format=json", *argv]) == 0, out.getvalue()
        return json.loads(out.getvalue())

    assert run("context", "create", "cli")["context"] == "cli"
    run("context", "event", "--context", "cli", "--session", "main", "--kind",
        "user-message", "--text", "hello")
    assert run("context", "recall-index", "inspect", "cli")["context"] == "cli"
    assert run("context", "encode", "--context", "cli", "--session", "main")["activation"]


def restart_on_its_address(server) -> None:
    """Start `server` again on its former port. While that port is down, tx's reconnects
    to it can briefly hold it from the client side (a loopback connection may take the
    port it dials as its own source port), so a bind refused "Address already in use"
    is tried again, bounded, until the port is free."""
    deadline = time.monotonic() + 60
    while True:
        try:
            server.start()
            return
        except AssertionError as e:
            if "Address already in use" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_dist_05_a_service_is_not_serving_until_its_dependency_answers(tmp_path):
    storage = start(tmp_path, "storage")
    wait_health(storage, SERVING)
    assert storage.stop() == 0  # its port is now free: the dependency is down
    tx = start(tmp_path, "transaction", "--storage", storage.address)
    try:
        assert health(tx.address) == NOT_SERVING
        assert health(tx.address, SERVICES["transaction"]) == NOT_SERVING
        with pytest.raises(MorphzError) as info:
            tx.client(timeout=5).create_context("early")
        assert info.value.reason == "UNAVAILABLE"
        storage.listen = storage.address
        restart_on_its_address(storage)  # the dependency comes up on the address tx was given
        wait_health(tx, SERVING)
        assert tx.client().create_context("late")["revision"] == 0
        assert storage.stop() == 0  # down again: tx follows it
        wait_health(tx, NOT_SERVING)
        restart_on_its_address(storage)
        wait_health(tx, SERVING)
        assert tx.client().status("late")["revision"] == 0  # its data survived the restart
    finally:
        tx.kill()
        storage.kill()


def test_dist_05_recall_keeps_indexing_across_a_storage_restart(cluster):
    tx, recall, _ = clients(cluster["transaction"].address, cluster["recall"].address,
                            cluster["encoding"].address)
    tx.create_context("restart")
    tx.append_event("restart", "main", "user-message", "before the outage")
    wait_indexed(recall, "restart")
    storage = cluster["storage"]
    assert storage.stop() == 0
    wait_health(cluster["recall"], NOT_SERVING)
    storage.listen = storage.address
    storage.start()
    for role in ("transaction", "recall"):
        wait_health(cluster[role], SERVING)
    tx.append_event("restart", "main", "user-message", "after the outage")
    wait_indexed(recall, "restart")
    assert {h["ref"] for h in recall.search("restart", "outage")["results"]} == {"@e1", "@e2"}


def test_dist_05_split_services_read_a_history_of_large_events_in_bounded_replies(cluster):
    """Audit, rebuild-projections and RebuildIndex walk the history over the storage
    service; 14 events of 5 MiB (70 MiB, past what one gRPC message may hold) arrive a
    few per reply (a Scan of them was one reply, refused by gRPC), and search finds them."""
    tx, recall, _ = clients(cluster["transaction"].address, cluster["recall"].address,
                            cluster["encoding"].address)
    tx.create_context("large")
    for i in range(14):
        tx.append_event("large", "main", "tool-result", f"lantern w{i} " + "x " * (5 << 19))
    audit = tx.audit("large")
    assert audit["match"] and audit["events_replayed"] == 15
    assert tx.rebuild_projections("large")["events_replayed"] == 15
    assert recall.rebuild("large")["documents"] == 15
    hits = recall.search("large", "lantern", limit=20)["results"]
    assert sorted(h["ref"] for h in hits) == sorted(f"@e{i}" for i in range(1, 15))


def test_dist_05_sigterm_drains_every_split_process(cluster):
    for role in ("encoding", "recall", "transaction", "storage"):  # callers first
        assert cluster[role].stop() == 0, cluster[role].stderr()
        assert "morphz: stopped" in cluster[role].stderr()


@pytest.mark.parametrize("argv, field", [
    (["recall", "--storage", "127.0.0.1:1"], "transaction"),  # one it calls is missing
    (["all", "--storage", "127.0.0.1:1"], "storage"),  # all-in-one calls nothing remote
    (["storage", "--recall-idle", "5"], "recall_idle"),  # only recall indexes
    (["recall", "--storage", "127.0.0.1:1", "--transaction", "127.0.0.1:2",
      "--row-cache", "1MiB"], "row_cache"),  # only encoding compiles
], ids=["recall-without-transaction", "all-with-storage", "storage-with-recall-idle",
        "recall-with-row-cache"])
def test_dist_05_serve_role_gets_exactly_the_addresses_it_calls(tmp_path, argv, field):
    proc = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "serve", *argv,
                           "--listen", "127.0.0.1:0", "--data", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert (error["reason"], error["details"]["field"]) == ("CONTEXT_INPUT_INVALID", field)
    assert not (tmp_path / "data").exists()  # refused before opening anything
