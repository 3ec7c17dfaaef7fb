"""SEC-09: context names live in namespaces, so a name taken in one reveals nothing to a
principal of another; and a context made in development mode is handed to a principal
once authentication is on. Real `morphz serve` processes (tests/topology.py) with bearer
tokens over loopback, the services' own clients, and the CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from morphz.services.encoding.client import EncodingClient
from morphz.services.recall.client import RecallClient
from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.auth import ClientAuth

from tests.topology import ServerProcess, SplitServers

TOKENS = {p: f"{p}-token-namespaces-0123456789" for p in ("alice", "bob", "carol", "root",
                                                          "morphz-service")}


def token_file(tmp_path) -> str:
    path = tmp_path / "tokens"
    path.write_text("".join(f"{t} {p}\n" for p, t in TOKENS.items()))
    return str(path)


def serve(tmp_path, *flags: str) -> ServerProcess:
    return ServerProcess(tmp_path / "data", args=["--tokens", token_file(tmp_path),
                                                   "--admin", "root", *flags]).start()


def tx(srv: ServerProcess, who: str) -> TransactionClient:
    return TransactionClient(srv.channel(ClientAuth(token=TOKENS[who])), timeout=30)


def refusal(fn, *args) -> MorphzError:
    with pytest.raises(MorphzError) as info:
        fn(*args)
    return info.value


def test_sec_09_a_name_taken_in_another_namespace_reveals_nothing(tmp_path):
    srv = serve(tmp_path, "--private-namespaces")
    try:
        alice, carol, root = tx(srv, "alice"), tx(srv, "carol"), tx(srv, "root")
        assert alice.create_context("plans")["context"] == "~alice/plans"
        alice.append_event("plans", "main", "user-message", "alice's launch plan")
        # Before namespaces: CONTEXT_EXISTS told carol that the name was taken.
        mine = carol.create_context("plans")
        assert mine["context"] == "~carol/plans" and mine["event_count"] == 1
        carol.append_event("plans", "main", "user-message", "carol's own notes")
        assert alice.status("plans")["event_count"] == 2
        assert carol.status("plans")["event_count"] == 2
        # Another namespace's full name: refused alike whether or not it exists.
        taken = refusal(carol.status, "~alice/plans")
        free = refusal(carol.status, "~alice/nothing")
        assert taken.reason == free.reason == "FORBIDDEN"
        assert str(taken).replace("plans", "NAME") == str(free).replace("nothing", "NAME")
        assert refusal(carol.create_context, "~alice/plans").reason == "FORBIDDEN"
        assert refusal(carol.create_context, "~alice/fresh").reason == "FORBIDDEN"
        # A grant, addressed by the full name; administrators reach every namespace.
        alice.set_policy("plans", "grant", "carol", ["read", "recall"])
        assert carol.status("~alice/plans")["event_count"] == 3  # the grant is an event
        assert sorted(carol.list_contexts()["contexts"]) == ["~alice/plans", "~carol/plans"]
        assert root.status("~carol/plans")["event_count"] == 2
        assert root.create_context("plans")["context"] == "plans"  # the default namespace
        # Recall and encoding resolve names the same way.
        recall = RecallClient(srv.channel(ClientAuth(token=TOKENS["carol"])), timeout=30)
        found = recall.search("plans", "notes", min_commit_seq=mine["commit_seq"] + 1)
        assert [h["ref"] for h in found["results"]] == ["@e1"]
        encoding = EncodingClient(srv.channel(ClientAuth(token=TOKENS["carol"])), timeout=30)
        assert encoding.compile("plans", "main")["activation"]
    finally:
        srv.kill()


def test_sec_09_principals_of_one_tenant_share_its_namespace(tmp_path):
    srv = serve(tmp_path, "--namespace", "alice=acme", "--namespace", "bob=acme")
    try:
        alice, bob, carol = tx(srv, "alice"), tx(srv, "bob"), tx(srv, "carol")
        assert alice.create_context("board")["context"] == "~acme/board"
        assert refusal(bob.status, "board").reason == "FORBIDDEN"
        alice.set_policy("board", "grant", "bob", ["read"])
        assert bob.status("board")["context"] == "~acme/board"
        # Within a namespace names are shared (README: what remains).
        assert refusal(bob.create_context, "board").reason == "CONTEXT_EXISTS"
        # carol has no namespace: the default one, where "board" is free.
        assert carol.create_context("board")["context"] == "board"
    finally:
        srv.kill()


def morphz(srv: ServerProcess, who: str, *argv: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "--format=json",
                          "--server", srv.address, *argv], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, MORPHZ_TOKEN=TOKENS[who]))
    return run.returncode, json.loads(run.stdout)


def test_sec_09_a_context_made_in_development_mode_is_handed_over(tmp_path):
    dev = ServerProcess(tmp_path / "data").start()
    try:
        dev.client().create_context("legacy")
        dev.client().append_event("legacy", "main", "user-message", "made without tokens")
    finally:
        dev.stop()
    srv = serve(tmp_path)
    try:
        code, reply = morphz(srv, "alice", "context", "status", "legacy")
        assert code == 1 and reply["error"]["reason"] == "FORBIDDEN"
        # The refusal says what to do, and says the same for a context that does not exist.
        assert "morphz context policy grant PRINCIPAL admin" in reply["error"]["message"]
        missing = morphz(srv, "alice", "context", "status", "absent")[1]["error"]["message"]
        assert reply["error"]["message"].replace("legacy", "absent") == missing
        code, reply = morphz(srv, "root", "context", "policy", "grant", "alice", "admin",
                             "--context", "legacy")
        assert code == 0, reply
        code, reply = morphz(srv, "alice", "context", "status", "legacy")
        assert code == 0 and reply["event_count"] == 3  # created, the input, the grant
        code, reply = morphz(srv, "alice", "context", "policy", "grant", "bob", "read",
                             "--context", "legacy")
        assert code == 0  # alice administers it now
    finally:
        srv.kill()


@pytest.mark.split_processes
def test_sec_09_every_service_of_a_split_cluster_resolves_names_alike(tmp_path):
    service_token = tmp_path / "service.token"
    service_token.write_text(TOKENS["morphz-service"] + "\n")
    flags = ["--tokens", token_file(tmp_path), "--service-token-file", str(service_token),
             "--private-namespaces"]
    cluster = SplitServers(tmp_path / "split", args=flags,
                           auth=ClientAuth(token=TOKENS["root"])).start()
    try:
        ends = cluster.endpoints

        def as_(who: str, address: str):
            return ClientAuth(token=TOKENS[who]).channel(address)
        for who in ("alice", "carol"):
            made = TransactionClient(as_(who, ends.transaction), timeout=30).create_context(
                "notes")
            assert made["context"] == f"~{who}/notes"
            TransactionClient(as_(who, ends.transaction), timeout=30).append_event(
                "notes", "main", "user-message", f"{who} wrote this")
        for who in ("alice", "carol"):
            found = RecallClient(as_(who, ends.recall), timeout=30).search(
                "notes", "wrote", min_commit_seq=3)
            assert [h["preview"] for h in found["results"]] == [f"{who} «wrote» this"]
            encoded = EncodingClient(as_(who, ends.encoding), timeout=30).compile(
                "notes", "main")
            assert f"{who} wrote this" in encoded["text"]
        with pytest.raises(MorphzError) as info:
            RecallClient(as_("carol", ends.recall), timeout=30).search("~alice/notes", "wrote")
        assert info.value.reason == "FORBIDDEN"
    finally:
        cluster.kill()
