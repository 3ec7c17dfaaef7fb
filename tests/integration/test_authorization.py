"""SEC-01 (every context, session, recall and cross-session access is authorized) and
SEC-02 (references are scoped: a foreign or guessed one reveals nothing), against the
shared `morphz serve` processes of tests/security_servers.py (mutual TLS; bearer tokens).

The matrix takes every RPC of the public service descriptors, each with a minimal
request aimed at alice's context, and calls it as each kind of caller:
- no credentials, and a certificate of another CA (mTLS) / an unknown token: refused
  before any servicer runs (mTLS: the TLS handshake itself refuses, UNAVAILABLE;
  tokens: UNAUTHENTICATED);
- carol (no grant anywhere) and bob (admin of another context): PERMISSION_DENIED
  (FORBIDDEN), the same whether or not what they name exists;
- alice (who created the context, so administers it): OK.
Three RPCs name no existing context and are OK for every authenticated principal:
CreateContext (any principal may create a context, becoming its admin; the request
names a new one per caller), ListContexts (it lists only what the caller may read:
checked below) and server reflection (the schema, no data)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import grpc
import pytest
from google.protobuf import json_format, message_factory

from morphz.services.encoding.client import EncodingClient
from morphz.services.recall.client import RecallClient
from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.auth import PLAINTEXT, ClientAuth
from morphz.shared.grpc.errors import from_rpc_error

from tests.security_servers import (HANDSHAKE_REFUSED, OK, PUBLIC, SERVER_ADMIN, TOKENS,
                                    UNAUTHENTICATED, in_process_too, rpcs)
from tests.polling import until
from tests.topology import BOUND

DENIED = grpc.StatusCode.PERMISSION_DENIED
CTX, OTHER = "sec-alice", "sec-bobs1"  # names of one length: answers compare byte for byte
SESSION_TEXT = "ship the release once the regression tests pass"
TX = "/morphz.api.transaction.v1.TransactionService/"
RECALL = "/morphz.api.recall.v1.RecallService/"
ENCODING = "/morphz.api.encoding.v1.EncodingService/"
OPEN_TO_ALL = {TX + "CreateContext", TX + "ListContexts", TX + "ListJobs", RECALL + "ListJobs",
               "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"}
# A job (shared/jobs.py) of alice's answers as one that does not exist to whoever may not
# run its operation: NOT_FOUND (JOB_NOT_FOUND), not FORBIDDEN, which would confirm it.
HIDDEN = {TX + "GetJob", TX + "CancelJob", RECALL + "GetJob", RECALL + "CancelJob"}


def requests(world: dict, who: str) -> dict[str, dict]:
    """A minimal request per RPC (JSON form), aimed at alice's context."""
    c, snap = {"context": CTX}, {"context": CTX, "snapshot": world["snapshot"]}
    return {
        TX + "CreateContext": {"context": f"sec-new-{who}"},
        TX + "GetStatus": c,
        TX + "AppendEvent": dict(c, session="main", kind="user-message", text="matrix"),
        TX + "AppendEvents": dict(c, events=[dict(session="main", kind="user-message",
                                                  text="matrix batch")]),
        TX + "Activate": dict(c, session="main"),
        TX + "Deliver": dict(c, activation=world["activation"]),
        TX + "Commit": dict(c, text="(context-tx (base-version 0) (create note (seen)))"),
        TX + "GetFrame": dict(c, frameId="plan"),
        TX + "ListFrames": c,
        TX + "GetEvent": dict(c, ref="@e1"),
        TX + "Audit": c,
        TX + "RebuildProjections": c,
        TX + "SetPolicy": dict(c, op="grant", principal="dave", rights=["read"]),
        TX + "GetPolicy": c,
        TX + "Erase": dict(c, refs=["@e1"], dryRun=True),  # what it would take: nothing goes
        # a context of alice's made for it (_setup): the others are refused one they lack
        TX + "DeleteContext": {"context": f"sec-del-{who}", "reason": "matrix"},
        TX + "Export": c,
        TX + "ListContexts": {},
        TX + "StartJob": dict(c, kind="audit"),
        TX + "GetJob": {"id": world["tx_job"]},
        TX + "ListJobs": {},
        TX + "CancelJob": {"id": world["tx_job"]},
        RECALL + "Search": dict(c, query="release"),
        RECALL + "Read": dict(c, ref="@e1"),
        RECALL + "Traverse": dict(c, frameId="plan"),
        RECALL + "InspectIndex": c,
        RECALL + "RebuildIndex": c,
        RECALL + "StartJob": dict(c, kind="rebuild-index"),
        RECALL + "GetJob": {"id": world["recall_job"]},
        RECALL + "ListJobs": {},
        RECALL + "CancelJob": {"id": world["recall_job"]},
        ENCODING + "Compile": dict(c, session="main"),
        ENCODING + "ShowSnapshot": snap,
        ENCODING + "Replay": snap,
        ENCODING + "Check": snap,
        ENCODING + "Read": dict(snap, ref="plan"),
        ENCODING + "Search": dict(snap, query="release"),
        ENCODING + "ListSnapshots": dict(c, session="main"),
        ENCODING + "ShowEvaluation": dict(c, activation=world["activation"]),
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": {"listServices": ""},
    }


def call(channel: grpc.Channel, path: str, method, body: dict):
    """(status code, ErrorInfo reason) of one call with this request."""
    request = json_format.ParseDict(body, message_factory.GetMessageClass(method.input_type)())
    kind = f"{'stream' if method.client_streaming else 'unary'}_" \
           f"{'stream' if method.server_streaming else 'unary'}"
    stub = getattr(channel, kind)(path, request_serializer=lambda m: m.SerializeToString(),
                                  response_deserializer=lambda b: b)
    try:
        reply = stub(iter([request]) if method.client_streaming else request, timeout=30)
        if method.server_streaming:
            next(reply)
            reply.cancel()
        return OK, ""
    except grpc.RpcError as e:
        return e.code(), from_rpc_error(e).reason


def matrix(address: str, auth: ClientAuth, world: dict, who: str) -> dict[str, tuple]:
    calls = rpcs(*PUBLIC)
    bodies = requests(world, who)
    assert sorted(bodies) == sorted(p for p, _ in calls), "a request for every RPC"
    with auth.channel(address) as channel:
        return {path: call(channel, path, m, bodies[path]) for path, m in calls}


def _setup(address: str, auth_of) -> dict:
    """alice's context (an input, an activation, a frame, a snapshot; erin may read, write,
    recall and encode as session s2 only) and bob's context."""
    alice = TransactionClient(auth_of("alice").channel(address), timeout=30)
    alice.create_context(CTX)
    alice.append_event(CTX, "main", "user-message", SESSION_TEXT)  # @e1
    alice.append_event(CTX, "main", "user-message", "the release notes are drafted")
    alice.commit(CTX, "(context-tx (base-version 0) (create plan (goal release)))")
    alice.set_policy(CTX, "grant", "erin", ["read", "write", "recall", "encode"], "s2")
    alice.append_event(CTX, "s2", "user-message", "s2 has inputs of its own")
    snapshot = EncodingClient(auth_of("alice").channel(address), timeout=30).compile(
        CTX, "main")
    TransactionClient(auth_of("bob").channel(address), timeout=30).create_context(OTHER)
    alice.create_context("sec-del-alice")  # what the matrix deletes as alice
    recall = RecallClient(auth_of("alice").channel(address), timeout=30)
    jobs = {"tx_job": alice.start_job(CTX, "audit")["id"],
            "recall_job": recall.start_job(CTX, "rebuild-index")["id"]}
    # finished, so that the matrix's own jobs stay within alice's cap
    until(lambda: alice.get_job(jobs["tx_job"])["state"] == "succeeded", 60)
    until(lambda: recall.get_job(jobs["recall_job"])["state"] == "succeeded", 60)
    return {"snapshot": snapshot["snapshot"], "activation": snapshot["activation"], **jobs}


@pytest.fixture(scope="module")
def worlds(mtls_server, token_server, certs) -> dict:
    return {
        "mtls": (mtls_server.address, certs.client,
                 _setup(mtls_server.address, certs.client)),
        "tokens": (token_server.address, lambda who: certs.anonymous(token=TOKENS[who]),
                   _setup(token_server.address,
                          lambda who: certs.anonymous(token=TOKENS[who]))),
    }


def _not(got: dict, want, reason: str = "") -> dict:
    return {p: a for p, a in got.items() if a[0] != want or (reason and a[1] != reason)}


@in_process_too
@pytest.mark.parametrize("mode", ["mtls", "tokens"])
def test_sec_01_authorization_matrix_every_rpc_every_kind_of_caller(mode, worlds, certs,
                                                                    other_ca):
    address, auth_of, world = worlds[mode]
    if mode == "mtls":
        wrong_ca = ClientAuth.from_files(ca=certs.path("ca.crt"),
                                         cert=other_ca.path("client.crt"),
                                         key=other_ca.path("client.key"))
        outsiders, refused = (PLAINTEXT, certs.anonymous(), wrong_ca), HANDSHAKE_REFUSED
    else:
        outsiders = (certs.anonymous(), certs.anonymous(token="unknown-token-0000000000"))
        refused = UNAUTHENTICATED
    for auth in outsiders:
        got = matrix(address, auth, world, "nobody")
        assert _not(got, refused, "UNAUTHENTICATED" if refused == UNAUTHENTICATED else "") \
            == {}, auth
    for who in ("carol", "bob"):  # no grant at all; the admin of another context
        got = matrix(address, auth_of(who), world, who)
        assert _not({p: a for p, a in got.items() if p not in OPEN_TO_ALL | HIDDEN},
                    DENIED, "FORBIDDEN") == {}, who
        assert _not({p: a for p, a in got.items() if p in HIDDEN},
                    grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND") == {}, who
        assert _not({p: a for p, a in got.items() if p in OPEN_TO_ALL}, OK) == {}, who
    got = matrix(address, auth_of("alice"), world, "alice")
    assert _not(got, OK) == {}
    # Refused calls changed nothing: the policy is alice's and erin's, not dave's twice.
    policy = TransactionClient(auth_of("alice").channel(address), timeout=30).get_policy(CTX)
    assert sorted((g["principal"], g["right"]) for g in policy["grants"]
                  if g["principal"] == "dave") == [("dave", "read")]


@in_process_too
@pytest.mark.parametrize("mode", ["mtls", "tokens"])
def test_sec_01_list_contexts_shows_only_what_the_caller_may_read(mode, worlds):
    address, auth_of, _ = worlds[mode]

    def listed(who: str) -> set:
        with auth_of(who).channel(address) as ch:
            return set(TransactionClient(ch, timeout=30).list_contexts()["contexts"])
    assert CTX in listed("alice") and OTHER not in listed("alice")
    assert OTHER in listed("bob") and CTX not in listed("bob")
    assert CTX in listed("erin")  # a grant on one session shows the context
    assert not {CTX, OTHER} & listed("carol")
    assert {CTX, OTHER} <= listed(SERVER_ADMIN)


@in_process_too
def test_sec_01_session_bound_principal_acts_only_as_its_session(worlds):
    address, auth_of, world = worlds["tokens"]
    with auth_of("erin").channel(address) as ch:
        erin = TransactionClient(ch, timeout=30)
        assert erin.append_event(CTX, "s2", "user-message", "from s2")["ref"]
        for attempt in (lambda: erin.append_event(CTX, "main", "user-message", "as main"),
                        lambda: erin.activate(CTX, "main"),
                        # a message from s2 writes into main's inbox too
                        lambda: erin.append_event(CTX, "s2", "message", "hi",
                                                  target_session="main"),
                        # a transaction for no session changes the shared Mind as the context
                        lambda: erin.commit(CTX, "(context-tx (base-version 0) (create e (x)))"),
                        lambda: erin.audit(CTX),
                        lambda: erin.set_policy(CTX, "grant", "erin", ["admin"])):
            with pytest.raises(MorphzError) as info:
                attempt()
            assert info.value.reason == "FORBIDDEN"
        act = erin.activate(CTX, "s2")
        receipt = erin.commit(CTX, "(context-tx (base-version 0) (create from-s2 (x)))",
                              activation=act["id"])
        assert receipt["revision"] >= 2
        assert erin.get_frame(CTX, "plan")["body"]  # the shared Mind reads for every session
        assert [s["id"] for s in erin.status(CTX)["sessions"]] == ["s2"]
        with pytest.raises(MorphzError) as info:  # another session's activation: missing
            erin.deliver(CTX, world["activation"])
        assert info.value.reason == "ACTIVATION_NOT_FOUND"
        with pytest.raises(MorphzError) as info:  # recall needs its evaluation's session
            RecallClient(ch, timeout=30).search(CTX, "release")
        assert info.value.reason == "FORBIDDEN"
    audit = TransactionClient(auth_of("alice").channel(address), timeout=30).audit(CTX)
    assert audit["match"]  # policy events replay like every other


@in_process_too
def test_priv_01_erase_is_an_administrators_right_that_may_be_granted_alone(worlds):
    """Erasing needs the `erase` right: administrators hold it, a principal may be granted
    it alone (on the whole context, never one session); one with every other right but it
    is refused, even the dry run, and an erasure without a reason is refused too."""
    from morphz.services.transaction.core.erase_select import Selector
    address, auth_of, _ = worlds["tokens"]
    alice = TransactionClient(auth_of("alice").channel(address), timeout=30)
    context = "sec-erase"
    alice.create_context(context)
    ref = alice.append_event(context, "main", "user-message", "carol's note")["ref"]
    alice.set_policy(context, "grant", "carol", ["read", "write", "recall", "encode",
                                                 "reveal"])
    with pytest.raises(MorphzError) as info:
        alice.set_policy(context, "grant", "erin", ["erase"], "main")
    assert info.value.reason == "CONTEXT_INPUT_INVALID"
    with auth_of("carol").channel(address) as ch:
        carol = TransactionClient(ch, timeout=30)
        for dry in (True, False):
            with pytest.raises(MorphzError) as info:
                carol.erase(context, Selector(refs=(ref,)), "mine", dry_run=dry)
            assert (info.value.reason, info.value.details["right"]) == ("FORBIDDEN", "erase")
        alice.set_policy(context, "grant", "carol", ["erase"])
        with pytest.raises(MorphzError) as info:
            carol.erase(context, Selector(refs=(ref,)), "  ")
        assert info.value.reason == "ERASE_REASON_REQUIRED"
        done = carol.erase(context, Selector(refs=(ref,)), "mine")
        assert done["events"] == [ref]
        assert carol.get_event(context, ref)["erased"]["by"] == "carol"
    assert alice.audit(context)["match"]


# -- SEC-02: scoped references ----------------------------------------------------------------
def answer(fn) -> tuple:
    """The whole answer of a refused call: code, message and status details, as bytes."""
    try:
        fn()
    except grpc.RpcError as e:
        details = dict(e.trailing_metadata() or ()).get("grpc-status-details-bin", b"")
        return e.code(), e.details().encode(), details
    raise AssertionError("the call was not refused")


def same(foreign: tuple, missing: tuple, foreign_ref: str, missing_ref: str) -> bool:
    """Equal byte for byte once the (equally long) refs are swapped."""
    assert len(foreign_ref) == len(missing_ref)
    swap = (missing_ref.encode(), foreign_ref.encode())
    return foreign == (missing[0], missing[1].replace(*swap), missing[2].replace(*swap))


def _stub(channel, path: str):
    return channel.unary_unary(path, request_serializer=lambda m: m.SerializeToString(),
                               response_deserializer=lambda b: b)


def _req(path: str, **body):
    method = next(m for p, m in rpcs(*PUBLIC) if p == path)
    return json_format.ParseDict(body, message_factory.GetMessageClass(method.input_type)())


@in_process_too
@pytest.mark.parametrize("mode", ["mtls", "tokens"])
def test_asm_06_a_session_bound_principal_lists_its_sessions_snapshots_only(mode, worlds):
    """erin encodes as session s2 only: s2's listing is hers; main's and the whole
    context's (which holds main's) are FORBIDDEN, never silently filtered."""
    address, auth_of, _ = worlds[mode]
    with auth_of("erin").channel(address) as ch:
        enc = EncodingClient(ch, timeout=30)
        mine = enc.compile(CTX, "s2")
        listed = enc.list_snapshots(CTX, session="s2", limit=100)["snapshots"]
        assert mine["snapshot"] in [e["snapshot"] for e in listed]
        assert {e["session"] for e in listed} == {"s2"}
        for asked in ({"session": "main"}, {}):
            with pytest.raises(MorphzError) as info:
                enc.list_snapshots(CTX, **asked)
            assert info.value.reason == "FORBIDDEN", asked
        assert enc.evaluation(CTX, mine["activation"])["session"] == "s2"


@in_process_too
@pytest.mark.parametrize("mode", ["mtls", "tokens"])
def test_sec_02_foreign_references_answer_as_missing_ones_byte_for_byte(mode, worlds):
    address, auth_of, world = worlds[mode]
    snap = world["snapshot"]
    guess = "enc-" + "0" * (len(snap) - 4)

    def ask(who: str, path: str, **body):
        def run():
            with auth_of(who).channel(address) as ch:
                _stub(ch, path)(_req(path, **body), timeout=30)
        return answer(run)
    # erin (session s2 only): main's evidence and main's snapshot read as missing ones.
    with auth_of("erin").channel(address) as ch:
        act = TransactionClient(ch, timeout=30).activate(CTX, "s2")["id"]
    evaluation = {"session": "s2", "activation": act}
    for path, extra in ((TX + "GetEvent", {}), (RECALL + "Read", {"evaluation": evaluation})):
        assert same(ask("erin", path, context=CTX, ref="@e000001", **extra),
                    ask("erin", path, context=CTX, ref="@e999999", **extra),
                    "@e000001", "@e999999"), path
    for path in ("ShowSnapshot", "Replay", "Check"):
        assert same(ask("erin", ENCODING + path, context=CTX, snapshot=snap),
                    ask("erin", ENCODING + path, context=CTX, snapshot=guess), snap, guess)
    # main's evaluation (its activation) as an unknown one: its view and its snapshots.
    main_act = world["activation"]
    unknown = "a" + "9" * (len(main_act) - 1)
    for path in ("ShowEvaluation", "ListSnapshots"):
        assert same(ask("erin", ENCODING + path, context=CTX, activation=main_act),
                    ask("erin", ENCODING + path, context=CTX, activation=unknown),
                    main_act, unknown), path
    # bob, in his own context: alice's frame id, snapshot id, event id and a search
    # cursor of her context are as unknown there as made-up ones.
    with auth_of("alice").channel(address) as ch:
        event_id = TransactionClient(ch, timeout=30).get_event(CTX, "@e1")["id"]
        recall = RecallClient(ch, timeout=30)
        deadline = time.monotonic() + BOUND  # the index catches up in the background
        while not (page := recall.search(CTX, "release", limit=1))["next_cursor"]:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    cursor = page["next_cursor"]
    made_up = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
    for path, field, foreign, missing in (
            (TX + "GetFrame", "frameId", "plan", "nope"),
            (TX + "GetEvent", "ref", event_id, "f" * len(event_id)),
            (RECALL + "Read", "ref", event_id, "f" * len(event_id)),
            (ENCODING + "ShowSnapshot", "snapshot", snap, guess)):
        assert same(ask("bob", path, context=OTHER, **{field: foreign}),
                    ask("bob", path, context=OTHER, **{field: missing}), foreign, missing), path
    assert same(ask("bob", RECALL + "Search", context=OTHER, query="release", cursor=cursor),
                ask("bob", RECALL + "Search", context=OTHER, query="release", cursor=made_up),
                cursor, made_up)
    # carol, with no grant: alice's context answers as a context that does not exist,
    # whatever the reference.
    for path, field in ((TX + "GetEvent", "ref"), (RECALL + "Read", "ref")):
        assert same(ask("carol", path, context=CTX, **{field: "@e1"}),
                    ask("carol", path, context="sec-nobod", **{field: "@e1"}),
                    CTX, "sec-nobod"), path


# -- the CLI ------------------------------------------------------------------------------------
def _morphz(address: str, token: str, ca: str, *argv: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "--format=json",
                          "--server", address, *argv], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, MORPHZ_TOKEN=token,
                                               MORPHZ_TLS_CA=ca))
    return run.returncode, json.loads(run.stdout)


@in_process_too
def test_sec_01_policy_cli_grants_revokes_and_refuses_as_json(worlds, certs):
    address = worlds["tokens"][0]
    ca = certs.path("ca.crt")
    ctx = ["--context", CTX]
    code, reply = _morphz(address, TOKENS["carol"], ca, "context", "status", CTX)
    assert code == 1 and reply["error"]["reason"] == "FORBIDDEN"
    code, reply = _morphz(address, TOKENS["alice"], ca, "context", "policy", "grant", "carol",
                          "read", *ctx)
    assert code == 0 and reply["event_ref"].startswith("@e")
    assert {"principal": "carol", "right": "read", "session": ""} in reply["grants"]
    assert _morphz(address, TOKENS["carol"], ca, "context", "status", CTX)[1]["context"] == CTX
    code, reply = _morphz(address, TOKENS["carol"], ca, "context", "policy", "show", *ctx)
    assert code == 1 and reply["error"]["reason"] == "FORBIDDEN"  # reading is not administering
    code, reply = _morphz(address, TOKENS["alice"], ca, "context", "policy", "revoke", "carol",
                          "read", *ctx)
    assert code == 0 and all(g["principal"] != "carol" for g in reply["grants"])
    code, reply = _morphz(address, TOKENS["alice"], ca, "context", "policy", "grant", "carol",
                          "fly", *ctx)
    assert code == 1 and reply["error"]["details"]["field"] == "rights"
    assert _morphz(address, TOKENS["carol"], ca, "context", "status", CTX)[0] == 1


@in_process_too
def test_sec_04_revealing_a_secret_needs_the_reveal_right(worlds):
    """A principal may read and encode yet not reveal: asking to is FORBIDDEN (never
    answered redacted as if allowed); once granted `reveal`, the same requests show it."""
    address, auth_of, _ = worlds["tokens"]
    context, marker = "sec-reveal", "sk-live-5f1e8c"
    alice = TransactionClient(auth_of("alice").channel(address), timeout=30)
    alice.create_context(context)
    ref = alice.append_event(context, "main", "tool-result", f"api key {marker}",
                             secret=True)["ref"]
    alice.set_policy(context, "grant", "carol", ["read", "encode"])
    alice.set_policy(context, "grant", "carol", ["reveal"], "s2")  # another session's only
    revealed = EncodingClient(auth_of("alice").channel(address), timeout=30).compile(
        context, "main", scope={"reveal_secrets": True})["snapshot"]
    with auth_of("carol").channel(address) as ch:
        carol, encoding = TransactionClient(ch, timeout=30), EncodingClient(ch, timeout=30)
        assert marker not in carol.get_event(context, ref)["text"]
        # reveal on s2 only: main's event stays hidden (frames, the shared Mind, would not)
        for attempt in (lambda: carol.get_event(context, ref, reveal_secrets=True),
                        lambda: encoding.compile(context, "main",
                                                 scope={"reveal_secrets": True}),
                        # a snapshot alice's revealing scope froze shows the secret
                        lambda: encoding.replay(context, revealed),
                        lambda: encoding.read(context, revealed, ref)):
            with pytest.raises(MorphzError) as info:
                attempt()
            assert info.value.reason == "FORBIDDEN" and info.value.details["right"] == "reveal"
        alice.set_policy(context, "grant", "carol", ["reveal"])
        assert marker in carol.get_event(context, ref, reveal_secrets=True)["text"]
        compiled = encoding.compile(context, "main", scope={"reveal_secrets": True})
        assert marker in compiled["text"]


@in_process_too
def test_sec_01_an_admin_revoking_their_own_admin_is_answered_with_the_new_policy(worlds):
    address, auth_of, _ = worlds["tokens"]
    alice = TransactionClient(auth_of("alice").channel(address), timeout=30)
    alice.create_context("sec-selfrevoke")
    reply = alice.set_policy("sec-selfrevoke", "revoke", "alice", ["admin"])
    assert ("alice", "admin") not in {(g["principal"], g["right"]) for g in reply["grants"]}
    with pytest.raises(MorphzError) as info:  # and it holds from now on
        alice.get_policy("sec-selfrevoke")
    assert info.value.reason == "FORBIDDEN"
