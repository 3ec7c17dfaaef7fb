"""morphz.client's synchronous Client against a real server on loopback: every service
it fronts, its replies, its errors (stable reason, details, class), its deadlines and
its request ids."""
from __future__ import annotations

import inspect
import subprocess
import sys
import time

import pytest

from morphz.client import (NO_RETRY, AbortedError, AlreadyExistsError, AsyncClient, AuthError,
                           Client, ConflictError, Credentials, DataLossError, InternalError,
                           InvalidInputError, LimitError, MorphzError, NotFoundError,
                           PreconditionError, RetryPolicy, Tx, UnavailableError)
from morphz.client.errors import error_class
from morphz.client.options import service_targets
from morphz.shared.errors import REASONS


def seed(mz: Client, cx: str) -> dict:
    """The release example's start: a request, a plan, the test report as a tool result."""
    mz.append_event(cx, session="main", kind="user-message",
                    text="Ship v1 once the regression tests pass.")
    act = mz.activate(cx, session="main")
    mz.commit(cx, "(context-tx (base-version 0) (create release (goal ship-v1) "
              "(stage waiting-tests)))", session="main", activation=act.id)
    report = mz.tool_result(cx, session="main", text="regression suite: 120 passed, 0 failed",
                            actor="npm test")
    act2 = mz.activate(cx, session="main")
    return {"report": report.ref, "activation": act2.id}


def test_core_21_client_commits_builder_and_text_and_reads_the_mind(mz, cx):
    s = seed(mz, cx)
    tx = (Tx(1, "测试结果已吸收，继续准备发布")
          .derive("test-result", "(tests passed)", sources=[s["report"]])
          .revise("release", "(goal ship-v1) (stage packaging)")
          .relate("test-result", "supports", "release")
          .retire(s["report"]))
    receipt = mz.commit(cx, tx, session="main", activation=s["activation"])
    assert receipt.revision == 2 and not receipt.replayed
    assert [(r.op, r.target, r.outcome) for r in receipt.results] == [
        ("derive", "test-result", "derived"), ("revise", "release", "revised"),
        ("relate", "test-result supports release", "related"), ("retire", s["report"], "retired")]
    release = mz.frame(cx, "release")
    assert (release.revision, release.body) == (2, "(goal ship-v1) (stage packaging)")
    assert mz.frame(cx, "release", at_revision=1).body == "(goal ship-v1) (stage waiting-tests)"
    assert [f.id for f in mz.frames(cx).frames] == ["release", "test-result"]
    pages = list(mz.frame_pages(cx, max_bytes=1))  # a frame a page
    assert [[f.id for f in p.frames] for p in pages] == [["release"], ["test-result"]]
    assert mz.event(cx, s["report"]).state == "retired"
    assert mz.event(cx, receipt.event_ref).text == \
        "(context-tx " + tx.text()[len("(context-tx\n  "):].replace("\n  ", " ")
    status = mz.status(cx)
    assert (status.revision, status.cognitive_tick) == (2, 2)
    assert mz.audit(cx).match


def test_conc_02_client_conflict_error_lists_the_changed_boundaries(mz, cx):
    s = seed(mz, cx)
    mz.commit(cx, Tx(1).revise("release", "(goal ship-v1) (stage paused)"), session="main")
    with pytest.raises(ConflictError) as info:
        mz.commit(cx, Tx(1, "digested").revise("release", "(goal ship-v1) (stage packaging)")
                  .retire(s["report"]), session="main")
    err = info.value
    assert (err.reason, err.code) == ("TX_CONFLICT", "ABORTED")
    assert "frame:release" in err.boundaries
    assert (err.base, err.latest) == (1, 2)
    assert {"boundary": "frame:release", "revision": 2} in err.changed
    assert mz.status(cx).revision == 2  # nothing of it was applied


def test_sec_03_client_errors_carry_reason_details_and_class(mz, cx):
    with pytest.raises(NotFoundError) as info:
        mz.frame(cx, "no-such-frame")
    assert (info.value.reason, info.value.details) == ("FRAME_NOT_FOUND",
                                                       {"ref": "no-such-frame"})
    with pytest.raises(InvalidInputError) as info:
        mz.commit(cx, "(context-tx (base-version 0) (create")
    assert info.value.reason == "TX_PARSE_ERROR" and info.value.code == "INVALID_ARGUMENT"
    with pytest.raises(PreconditionError) as info:
        mz.commit(cx, "(context-tx (base-version 7) (create a (v 1)))")
    assert info.value.reason == "BASE_VERSION_AHEAD"
    assert info.value.to_dict()["details"] == {"base": 7, "latest": 0}


def test_sec_03_client_refuses_bad_input_before_sending(mz, cx):
    with pytest.raises(InvalidInputError) as info:
        Tx(0).derive("x", "(v 1)", sources=[])
    assert info.value.details == {"op_index": 0, "field": "derive.sources"}
    with pytest.raises(InvalidInputError):
        Tx(0).place("x", before="a", last=True)
    with pytest.raises(InvalidInputError):
        Tx(-1)
    with pytest.raises(InvalidInputError) as info:
        mz.frame(cx, "x", at_revision=-1)
    assert info.value.reason == "CONTEXT_INPUT_INVALID"


def test_dur_04_client_request_id_replays_the_original_receipt(mz, cx):
    first = mz.append_event(cx, session="main", kind="user-message", text="hi",
                            request_id="ev-1")
    again = mz.append_event(cx, session="main", kind="user-message", text="hi",
                            request_id="ev-1")
    assert (again.ref, again.id, again.replayed) == (first.ref, first.id, True)
    receipt = mz.commit(cx, Tx(0).create("a", "(v 1)"), request_id="tx-1")
    replay = mz.commit(cx, "(context-tx (base-version 0) (create a (v 1)))", request_id="tx-1")
    assert replay.replayed and (replay.revision, replay.event_ref) == \
        (receipt.revision, receipt.event_ref)
    assert mz.status(cx).event_count == 3  # created, one message, one transaction
    with pytest.raises(MorphzError) as info:
        mz.commit(cx, Tx(0).create("a", "(v 2)"), request_id="tx-1")
    assert info.value.reason == "IDEMPOTENCY_MISMATCH"


def test_client_sends_a_fresh_request_id_with_every_write(mz, cx):
    a = mz.append_event(cx, session="main", kind="user-message", text="same text")
    b = mz.append_event(cx, session="main", kind="user-message", text="same text")
    ids = [mz.event(cx, r).request_id for r in (a.ref, b.ref)]
    assert a.ref != b.ref and all(ids) and ids[0] != ids[1]
    none = mz.append_event(cx, session="main", kind="user-message", text="x", request_id="")
    assert mz.event(cx, none.ref).request_id == ""


def test_conc_04_client_actions_results_and_messages(mz, cx):
    mz.append_event(cx, session="main", kind="user-message", text="Deploy v1 to staging.")
    act = mz.activate(cx, session="main")
    call = mz.record_action(cx, session="main", activation=act.id, actor="deploy",
                            text="deploy --env staging")
    assert (call.session, call.activation) == ("main", act.id)
    result = mz.tool_result(cx, call=call.ref, text="deployed", actor="deploy")
    assert (result.session, result.call, result.returned_to) == ("main", call.ref, "activation")
    mz.append_event(cx, session="ops", kind="user-message", text="status?")
    msg = mz.send_message(cx, session="main", to="ops", text="staging is being deployed")
    assert msg.target_session == "ops"
    delivered = mz.deliver(cx, act.id)
    assert delivered.delivered and mz.deliver(cx, act.id).delivered  # a retry is harmless
    waiting = {s.id: s.messages_waiting for s in mz.status(cx).sessions}
    assert waiting["ops"] == 1


def _indexed(mz, cx) -> None:
    deadline = time.monotonic() + 30
    while mz.inspect_index(cx).lag and time.monotonic() < deadline:
        time.sleep(0.05)


def test_recall_05_client_search_read_traverse_and_walk(mz, cx):
    s = seed(mz, cx)
    mz.commit(cx, Tx(1, "digested").derive("test-result", "(tests passed)",
                                           sources=[s["report"]])
              .relate("test-result", "supports", "release").retire(s["report"]))
    _indexed(mz, cx)
    # Lexical: the one event holding the word (a hybrid search may add its session's
    # neighbours once the vector leg has caught up, which this wait does not wait for).
    hits = mz.search(cx, "suite", mode="lexical")
    assert [h.ref for h in hits.results] == [s["report"]] and hits.results[0].state == "retired"
    page = mz.read(cx, s["report"], offset=0, limit=10)
    assert (page.text, page.has_more) == ("regression", True)
    one = mz.traverse(cx, "test-result", depth=1, include_events=True)
    assert {n.id if n.kind == "frame" else n.ref for n in one.nodes} == \
        {"test-result", "release", s["report"]}
    pages = list(mz.walk(cx, "test-result", depth=1, max_nodes=1))
    assert len(pages) == 3 and [p.nodes[0].depth for p in pages] == [0, 1, 1]
    assert not pages[-1].next_cursor


def test_core_26_client_compiles_and_checks_snapshots(mz, cx):
    s = seed(mz, cx)
    encoding = mz.compile(cx, session="main", activation=s["activation"],
                          bindings={"cwd": "/srv/app"})
    assert encoding.text.startswith("(protocol") and encoding.activation == s["activation"]
    assert f"(observation {s['report']}" in encoding.text
    record = mz.show_snapshot(cx, encoding.snapshot)
    assert record["hash"] == encoding.hash
    replay = mz.replay_snapshot(cx, encoding.snapshot)
    assert replay.match and replay.hash == encoding.hash
    assert mz.check_snapshot(cx, encoding.snapshot).current
    assert mz.read_snapshot(cx, encoding.snapshot, s["report"]).text.startswith("regression")
    assert mz.search_snapshot(cx, encoding.snapshot, "regression").hits
    with pytest.raises(NotFoundError) as info:
        mz.show_snapshot(cx, "enc-nosuchsnapshot")
    assert info.value.reason == "SNAPSHOT_NOT_FOUND"


def test_client_unreachable_server_is_unavailable_with_a_deadline(unused_address):
    with Client(unused_address, credentials=Credentials(), timeout=2,
                retry=NO_RETRY) as client:
        started = time.monotonic()
        with pytest.raises(UnavailableError) as info:
            client.status("anything")
    assert info.value.reason in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
    assert time.monotonic() - started < 30  # bounded by the deadline, not hanging


def test_client_and_async_client_have_the_same_methods():
    def methods(cls):
        return {name: inspect.signature(fn).replace(return_annotation=None)
                for name, fn in vars(cls).items()
                if callable(fn) and not name.startswith("_") and name != "close"}
    sync, aio = methods(Client), methods(AsyncClient)
    assert sync == aio and len(sync) >= 25


def test_client_error_classes_follow_the_error_table():
    by_status = {"INVALID_ARGUMENT": InvalidInputError, "NOT_FOUND": NotFoundError,
                 "ALREADY_EXISTS": AlreadyExistsError, "FAILED_PRECONDITION": PreconditionError,
                 "ABORTED": AbortedError, "RESOURCE_EXHAUSTED": LimitError,
                 "UNAVAILABLE": UnavailableError, "DEADLINE_EXCEEDED": UnavailableError,
                 "CANCELLED": UnavailableError,
                 "UNAUTHENTICATED": AuthError, "PERMISSION_DENIED": AuthError,
                 "DATA_LOSS": DataLossError, "INTERNAL": InternalError}
    assert {s.value for s in REASONS.values()} <= set(by_status)
    for reason, status in REASONS.items():
        cls = error_class(reason, status.value)
        assert issubclass(cls, by_status[status.value]), reason
    assert error_class("TX_CONFLICT", "ABORTED") is ConflictError


def test_client_imports_the_stubs_and_no_server_code():
    probe = ("import sys, morphz.client; print(sorted({m.split('.')[1] for m in sys.modules "
             "if m.startswith('morphz.') and m.count('.') >= 1}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "['api', 'client']"


def test_client_finds_services_and_checks_options_as_the_cli_does():
    split = {"MORPHZ_SERVER": "s:1", "MORPHZ_RECALL": "r:2"}
    assert service_targets(None, recall=None, encoding=None, env=split) == \
        {"transaction": "s:1", "recall": "r:2", "encoding": "s:1"}
    assert service_targets("a:1", recall=None, encoding="e:3", env=split) == \
        {"transaction": "a:1", "recall": "a:1", "encoding": "e:3"}  # given: wins over env
    assert set(service_targets(None, recall=None, encoding=None, env={}).values()) == \
        {"127.0.0.1:7070"}
    env = {"MORPHZ_TLS_CA": "ca.pem", "MORPHZ_TOKEN": "t0k"}
    creds = Credentials.from_env(env)
    assert creds.uses_tls and creds.metadata() == (("authorization", "Bearer t0k"),)
    assert "t0k" not in repr(creds)
    for bad in (lambda: RetryPolicy(attempts=0), lambda: RetryPolicy(initial_backoff=9),
                lambda: Client("x:1", timeout=0), lambda: Credentials(tls_cert="c.pem")
                .channel_credentials()):
        with pytest.raises(InvalidInputError):
            bad()


def test_sec_04_client_marks_secrets_and_reveals_them_on_request(mz, cx):
    ref = mz.append_event(cx, session="main", kind="tool-result", text="token sk-7731",
                          secret=True).ref
    assert "sk-7731" not in mz.event(cx, ref).text and mz.event(cx, ref).secret
    assert mz.event(cx, ref, reveal_secrets=True).text == "token sk-7731"
    mz.commit(cx, '(context-tx (base-version 0) (create db (password (secret "hunter2"))))')
    assert "hunter2" not in mz.frame(cx, "db").body
    assert "hunter2" in mz.frames(cx, reveal_secrets=True).frames[0].body


def test_sec_01_client_grants_revokes_and_lists(mz, cx):
    policy = mz.grant(cx, "bob", ["read", "recall"], session="main")
    assert {(g.principal, g.right, g.session) for g in policy.grants} >= {
        ("bob", "read", "main"), ("bob", "recall", "main")}
    mz.revoke(cx, "bob", ["recall"], session="main")
    assert ("bob", "recall", "main") not in {(g.principal, g.right, g.session)
                                             for g in mz.policy(cx).grants}
    assert cx in mz.contexts()  # development mode: every context reads


def test_sec_03_client_credentials_never_echo_a_key_or_a_long_path(tmp_path):
    key = "-----BEGIN PRIVATE KEY-----\n" + "k" * 4000 + "\n-----END PRIVATE KEY-----\n"
    with pytest.raises(InvalidInputError) as info:  # a key given as text is used, not read
        Credentials(tls_ca=str(tmp_path / ("d" * 4000)), tls_cert=key, tls_key=key) \
            .channel_credentials()
    err = info.value
    assert "kkkk" not in str(err) and len(err.message) < 400 and len(err.details["path"]) <= 200
