"""SEC-01 (every protected call authenticates a principal) and SEC-05 (the raw storage
API is reachable with the services' own credentials only), against real `morphz serve`
processes with real TLS certificates (scripts/dev-certs) on loopback.

Every RPC of every public service is taken from the service descriptors (so a new one
is not missed) and called with an empty request: what is asserted is whether the call
got past authentication, not what it answers then."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from morphz.services.encoding.client import EncodingClient
from morphz.services.recall.client import RecallClient
from morphz.services.storage.client import StorageClient
from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.auth import PLAINTEXT, ClientAuth
from morphz.shared.mind import records as R
from morphz.shared.storage.api import Write

from tests.certs import nameless
from tests.security_servers import (ALICE_TOKEN, HANDSHAKE_REFUSED, PUBLIC,
                                    SERVER_ADMIN, STORAGE, TOKENS, UNAUTHENTICATED,
                                    answers, in_process_too, rpcs)
from tests.topology import BOUND, SERVING, ServerProcess, SplitServers, health


def refused_everywhere(got: dict, code: grpc.StatusCode, reason: str = "") -> dict:
    """The calls NOT answered with `code` (and `reason`, if given)."""
    return {p: a for p, a in got.items() if a[0] != code or (reason and a[1] != reason)}


def authenticated_everywhere(got: dict) -> dict:
    """The calls refused as unauthenticated, unauthorized, or not reaching the server."""
    return {p: a for p, a in got.items() if a[0] in (
        UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAVAILABLE)}


# -- SEC-01: bearer tokens ---------------------------------------------------------------------
@in_process_too
def test_sec_01_every_public_rpc_needs_a_valid_bearer_token(token_server, certs):
    calls = rpcs(*PUBLIC)
    # transaction (Erase, DeleteContext, Export), recall, encoding (ListSnapshots,
    # ShowEvaluation), policy; the job RPCs of transaction and recall
    assert len(calls) == 18 + 5 + 8 + 1 + 4 + 4
    for auth in (certs.anonymous(),  # no credentials
                 certs.anonymous(token="not-a-token-of-this-server-0000")):  # a bad token
        assert refused_everywhere(answers(auth, token_server.address, calls),
                                  UNAUTHENTICATED, "UNAUTHENTICATED") == {}
    valid = answers(certs.anonymous(token=ALICE_TOKEN), token_server.address, calls)
    assert authenticated_everywhere(valid) == {}
    assert valid["/morphz.api.transaction.v1.TransactionService/GetStatus"][1] == \
        "CONTEXT_INPUT_INVALID"  # past authentication: the empty request is judged
    # Health checking needs no principal.
    assert health(token_server.address, auth=certs.anonymous()) == SERVING


@in_process_too
def test_sec_01_a_refused_token_changes_nothing(token_server, certs):
    for token in ("", "not-a-token-of-this-server-0000"):
        with pytest.raises(MorphzError) as info:
            TransactionClient(certs.anonymous(token=token).channel(token_server.address),
                              timeout=10).create_context("sec-01-refused")
        assert info.value.reason == "UNAUTHENTICATED"
    with pytest.raises(MorphzError) as info:  # a server admin may see that it is missing
        TransactionClient(certs.anonymous(token=TOKENS[SERVER_ADMIN]).channel(
            token_server.address), timeout=10).status("sec-01-refused")
    assert info.value.reason == "CONTEXT_NOT_FOUND"


@in_process_too
def test_sec_01_bearer_tokens_work_over_plaintext_loopback_too(tokens, tmp_path):
    proc = ServerProcess(tmp_path / "data", args=["--tokens", tokens["file"]],
                         auth=ClientAuth(token=ALICE_TOKEN)).start()
    try:
        assert proc.client().create_context("sec-01-plain")["context"] == "sec-01-plain"
        for auth in (PLAINTEXT, ClientAuth(token="not-a-token-of-this-server-0000")):
            with pytest.raises(MorphzError) as info:
                TransactionClient(auth.channel(proc.address), timeout=10).status("sec-01-plain")
            assert info.value.reason == "UNAUTHENTICATED"
    finally:
        proc.kill()


# -- SEC-01: mutual TLS ------------------------------------------------------------------------
@in_process_too
def test_sec_01_every_public_rpc_needs_a_client_certificate_of_the_ca(mtls_server, certs,
                                                                      other_ca):
    calls = rpcs(*PUBLIC)
    ca = certs.path("ca.crt")
    wrong_ca = ClientAuth.from_files(ca=ca, cert=other_ca.path("client.crt"),
                                     key=other_ca.path("client.key"))
    # Without a certificate of the CA the TLS handshake itself refuses the client (gRPC
    # Python servers can require a client certificate, not merely ask for one): no call
    # reaches the server, the channel reports UNAVAILABLE.
    for auth in (PLAINTEXT, certs.anonymous(), wrong_ca):
        assert refused_everywhere(answers(auth, mtls_server.address, calls),
                                  HANDSHAKE_REFUSED) == {}
    # A certificate of the CA that names no principal gets as far as the interceptor.
    assert refused_everywhere(answers(certs.client(nameless(certs)), mtls_server.address,
                                      calls), UNAUTHENTICATED, "UNAUTHENTICATED") == {}
    valid = answers(certs.client("alice"), mtls_server.address, calls)
    assert authenticated_everywhere(valid) == {}
    assert valid["/morphz.api.transaction.v1.TransactionService/GetStatus"][1] == \
        "CONTEXT_INPUT_INVALID"
    for auth in (PLAINTEXT, certs.anonymous(), wrong_ca):  # and they changed nothing
        with pytest.raises(MorphzError):
            TransactionClient(auth.channel(mtls_server.address),
                              timeout=10).create_context("sec-01-refused")
    with pytest.raises(MorphzError) as info:
        TransactionClient(certs.client(SERVER_ADMIN).channel(mtls_server.address),
                          timeout=10).status("sec-01-refused")
    assert info.value.reason == "CONTEXT_NOT_FOUND"


# -- SEC-05: the storage API -------------------------------------------------------------------
@in_process_too
def test_sec_05_public_port_answers_unimplemented_for_every_storage_method(mtls_server, certs):
    calls = rpcs(STORAGE)
    assert len(calls) == len(STORAGE.methods) >= 8
    for principal in ("alice", "service"):  # even the services' own principal
        got = answers(certs.client(principal), mtls_server.address, calls)
        assert refused_everywhere(got, grpc.StatusCode.UNIMPLEMENTED) == {}, principal
    with certs.client("alice").channel(mtls_server.address) as ch:
        reply = next(reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10))
    assert STORAGE.full_name not in {s.name for s in reply.list_services_response.service}


@in_process_too
def test_sec_05_storage_listener_serves_the_services_principal_only(mtls_server, certs):
    assert mtls_server.storage_address
    got = answers(certs.client("alice"), mtls_server.storage_address, rpcs(STORAGE))
    assert refused_everywhere(got, grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED") == {}
    with certs.client("service").channel(mtls_server.storage_address) as ch:
        assert isinstance(StorageClient(ch, timeout=10).contexts(), list)


def _forgery(storage: StorageClient, context: str) -> tuple[int, list[Write]]:
    """The reported forgery: a backdated context-tx event appended behind the transaction
    service's back (then RebuildProjections would make its frame real)."""
    with storage.reader(context) as r:
        seq, meta = r.commit_seq, json.loads(r.get("meta", ()))
    n = meta["next_seq"]
    event = R.Event(seq=n, id="forged", kind="context-tx", time="2000-01-01T00:00:00+00:00",
                    context=context, actor="agent", data={"rules": 2, "tx": {
                        "base_version": meta["revision"], "reason": "", "ops": [{
                            "op": "create", "frame_id": "forged", "sources": None,
                            "body": "(approved-by admin)"}]}},
                    text="(context-tx (create forged (approved-by admin)))")
    meta["next_seq"] = n + 1
    return seq, [Write("events", (n,), R.dumps(event)),
                 Write("meta", (), json.dumps(meta).encode())]


def _logical(status: dict) -> dict:
    """A status without the physical version (a rebuild moves it)."""
    return {k: v for k, v in status.items() if k != "commit_seq"}


@in_process_too
def test_sec_05_backdated_event_forgery_is_impossible_from_the_public_port(mtls_server, certs):
    alice = mtls_server.client()
    alice.create_context("sec-05-forgery")
    alice.commit("sec-05-forgery", "(context-tx (base-version 0) (create plan (goal ship)))")
    before = _logical(alice.status("sec-05-forgery"))
    with certs.client("service").channel(mtls_server.storage_address) as ch:
        seq, writes = _forgery(StorageClient(ch, timeout=10), "sec-05-forgery")
    for address, reason in ((mtls_server.address, "UNIMPLEMENTED"),
                            (mtls_server.storage_address, "PERMISSION_DENIED")):
        with certs.client("alice").channel(address) as ch:
            with pytest.raises(MorphzError) as info:
                StorageClient(ch, timeout=10).commit("sec-05-forgery", seq, writes)
            assert info.value.reason == reason, address
    assert alice.rebuild_projections("sec-05-forgery")["rewritten"] == {}
    with pytest.raises(MorphzError) as info:
        alice.get_frame("sec-05-forgery", "forged")
    assert info.value.reason == "FRAME_NOT_FOUND"
    assert _logical(alice.status("sec-05-forgery")) == before
    assert alice.audit("sec-05-forgery")["match"]
    # The same writes with the services' credentials on the storage listener do land:
    # the refusals above are what stands between a caller and a forged history.
    with certs.client("service").channel(mtls_server.storage_address) as ch:
        service = StorageClient(ch, timeout=10)
        service.commit("sec-05-forgery", *_forgery(service, "sec-05-forgery"))
    alice.rebuild_projections("sec-05-forgery")
    assert alice.get_frame("sec-05-forgery", "forged")["body"] == "(approved-by admin)"


# -- the split topology with authentication ----------------------------------------------------
def _cli(env: dict, *argv: str, stdin: str = "") -> dict:
    run = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "--format=json",
                          *argv], input=stdin, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, **env))
    reply = json.loads(run.stdout)
    assert run.returncode == 0, reply
    return reply


@pytest.mark.split_processes
@pytest.mark.parametrize("how", ["mtls", "tokens"])
def test_sec_01_split_topology_with_authentication_end_to_end(how, certs, tokens, tmp_path):
    if how == "mtls":  # each service presents the services' certificate, both ways
        flags, probe = certs.server_flags("service"), certs.client("service")
        user = {"MORPHZ_TLS_CA": certs.path("ca.crt"), "MORPHZ_TLS_CERT": certs.path(
            "alice.crt"), "MORPHZ_TLS_KEY": certs.path("alice.key")}
        alice, nobody = certs.client("alice"), certs.anonymous()
        carol, erin = certs.client("carol"), certs.client("erin")
    else:  # TLS for privacy, tokens for principals; the services send theirs
        flags = [*certs.server_flags("service", mutual=False), "--tokens", tokens["file"],
                 "--service-token-file", tokens["service"]]
        probe = certs.anonymous()
        user = {"MORPHZ_TLS_CA": certs.path("ca.crt"), "MORPHZ_TOKEN": ALICE_TOKEN}
        alice, nobody = certs.anonymous(token=ALICE_TOKEN), certs.anonymous()
        carol, erin = (certs.anonymous(token=TOKENS[who]) for who in ("carol", "erin"))
    cluster = SplitServers(tmp_path / how, args=flags, auth=probe).start()
    try:
        env = dict(cluster.endpoints.cli_env(), **user)
        ctx = f"sec-split-{how}"
        assert _cli(env, "context", "create", ctx)["context"] == ctx
        _cli(env, "context", "event", "--context", ctx, "--session", "main", "--kind",
             "user-message", "--text", "ship once the regression tests pass")
        assert _cli(env, "context", "tx", "--context", ctx, "-", stdin="(context-tx "
                    "(base-version 0) (create release (goal ship)))")["revision"] == 1
        deadline = time.monotonic() + BOUND  # recall indexes in the background
        while not _cli(env, "context", "recall", "search", "regression",
                       "--context", ctx)["results"]:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        encoding = _cli(env, "context", "encode", "--context", ctx, "--session", "main")
        assert "(frame release" in encoding["text"]
        # Recall and encoding authorize the user's principal themselves (reading the
        # policy through storage), then call on as the services: carol, with no grant, is
        # refused at each; erin, granted session s2 only, compiles s2 but not main.
        _cli(env, "context", "policy", "grant", "erin", "encode", "recall", "--session", "s2",
             "--context", ctx)
        _cli(env, "context", "event", "--context", ctx, "--session", "s2", "--kind",
             "user-message", "--text", "s2 here")
        for address, attempt in (
                (cluster.endpoints.recall, lambda ch: RecallClient(ch, timeout=30).search(
                    ctx, "regression")),
                (cluster.endpoints.encoding, lambda ch: EncodingClient(ch, timeout=30).compile(
                    ctx, "main")),
                (cluster.endpoints.transaction, lambda ch: TransactionClient(
                    ch, timeout=30).status(ctx))):
            with carol.channel(address) as ch:
                with pytest.raises(MorphzError) as info:
                    attempt(ch)
            assert info.value.reason == "FORBIDDEN", address
        with erin.channel(cluster.endpoints.encoding) as ch:
            assert EncodingClient(ch, timeout=30).compile(ctx, "s2")["snapshot"]
            with pytest.raises(MorphzError) as info:
                EncodingClient(ch, timeout=30).compile(ctx, "main")
            assert info.value.reason == "FORBIDDEN"
        # A user reaching `serve storage` directly is refused; without credentials,
        # the services are refused as the all-in-one server refuses.
        with alice.channel(cluster.endpoints.storage) as ch:
            with pytest.raises(MorphzError) as info:
                StorageClient(ch, timeout=10).contexts()
        assert info.value.reason == "PERMISSION_DENIED"
        with nobody.channel(cluster.endpoints.transaction) as ch:
            with pytest.raises(MorphzError) as info:
                TransactionClient(ch, timeout=10).status(ctx)
        assert info.value.reason == ("UNAVAILABLE" if how == "mtls" else "UNAUTHENTICATED")
        assert health(cluster.endpoints.storage, auth=probe) == SERVING
    finally:
        cluster.kill()

