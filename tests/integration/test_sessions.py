"""Sessions and causal scopes (CONC-04, CONC-05, CONC-07) over real gRPC and real LMDB:
late tool results return to the scope that issued the call, messages between sessions
carry their text only, and an evaluation sees only its causal scope plus the shared Mind.
Every scenario ends with the server's audit matching (the reducer alone wrote it)."""
from __future__ import annotations

import grpc
import pytest

from morphz.services.encoding.client import EncodingClient
from morphz.services.recall.client import RecallClient

from tests.integration.test_recall import caught_up


@pytest.fixture(scope="module")
def enc(endpoints):
    with grpc.insecure_channel(endpoints.encoding) as ch:
        yield EncodingClient(ch, timeout=30)


@pytest.fixture(scope="module")
def recall(endpoints):
    with grpc.insecure_channel(endpoints.recall) as ch:
        yield RecallClient(ch, timeout=30)


def items(encoding: dict, kind: str) -> dict:
    return {it["key"]: it for it in encoding["items"] if it["kind"] == kind}


def line(encoding: dict, kind: str, key: str) -> str:
    it = items(encoding, kind)[key]
    return encoding["text"][it["start"]:it["end"]]


def sessions(mind) -> dict:
    return {s["id"]: s for s in mind.status()["sessions"]}


def audited(mind, enc=None, *encodings) -> None:
    """The projections equal a replay of the events; snapshots re-render byte for byte."""
    assert mind.client.audit(mind.context)["match"]
    for e in encodings:
        replay = enc.replay(mind.context, e["snapshot"])
        assert replay["match"] and not replay["problems"], replay["problems"]


def action(mind, session: str, activation: str, text: str = "npm test") -> dict:
    return mind.client.append_event(mind.context, session, "action", text,
                                    activation=activation, actor="npm")


def result(mind, call: str, text: str, session: str = "") -> dict:
    return mind.client.append_event(mind.context, session, "tool-result", text,
                                    causal_refs=[call], actor="npm")


# -- CONC-04 ------------------------------------------------------------------------------

def test_conc_04_late_tool_result_returns_into_the_open_activation_that_issued_the_call(
        mind, enc):
    mind.event("run the regression suite", session="s1")
    first = enc.compile(mind.context, "s1")                  # activation of s1: the scope
    call = action(mind, "s1", first["activation"])
    assert (call["session"], call["activation"]) == ("s1", first["activation"])
    # Meanwhile another session is the active one.
    mind.event("unrelated question", session="s2")
    other = enc.compile(mind.context, "s2")
    tick = mind.status()["cognitive_tick"]
    got = result(mind, call["ref"], "regression suite: 120 passed")
    assert (got["session"], got["activation"], got["call"], got["returned_to"]) == \
        ("s1", first["activation"], call["ref"], "activation")
    # It continues the same evaluation: not pending anywhere, the clock did not move.
    assert {s: v["pending"] for s, v in sessions(mind).items()} == {"s1": 0, "s2": 0}
    assert mind.status()["cognitive_tick"] == tick
    again = enc.compile(mind.context, "s1", activation=first["activation"])
    assert got["ref"] in items(again, "observation")
    assert "(freshness new)" in line(again, "state", got["ref"])
    assert f"(results {got['ref']})" in line(again, "activation", first["activation"])
    assert call["ref"] not in items(again, "call")          # answered: no longer outstanding
    assert got["ref"] not in items(enc.compile(mind.context, "s2",
                                               activation=other["activation"]), "observation")
    event = mind.client.get_event(mind.context, got["ref"])
    assert (event["session"], event["call"], event["causal_refs"]) == \
        ("s1", call["ref"], [call["ref"]])
    audited(mind, enc, first, again)


def test_conc_04_after_delivery_the_result_is_a_pending_input_of_the_issuing_session(
        mind, enc, expect_rejected):
    mind.event("deploy v1 to staging", session="s1")
    first = enc.compile(mind.context, "s1")
    call = action(mind, "s1", first["activation"], "deploy --env staging")
    mind.client.deliver(mind.context, first["activation"])
    # s2 is the session active now, and the caller even names it: a structured error.
    mind.event("what is the weather", session="s2")
    busy = enc.compile(mind.context, "s2")
    err = expect_rejected("CAUSAL_SCOPE_VIOLATION", result, mind, call["ref"], "deployed",
                          session="s2")
    assert (err.details["call"], err.details["call_session"], err.details["session"],
            err.details["activation"]) == (call["ref"], "s1", "s2", first["activation"])
    tick = mind.status()["cognitive_tick"]
    got = result(mind, call["ref"], "deploy: staging is live")
    assert (got["session"], got["returned_to"], got["activation"]) == \
        ("s1", "session", first["activation"])
    assert {s: v["pending"] for s, v in sessions(mind).items()} == {"s1": 1, "s2": 0}
    # Never into the active session: s2's scope neither shows nor names it.
    s2 = enc.compile(mind.context, "s2", activation=busy["activation"])
    assert got["ref"] not in items(s2, "observation")
    assert got["ref"] not in {o["key"] for o in s2["omitted"]}
    assert enc.compile(mind.context, "s2")["claimed"] == []
    # The originating session's next activation claims it, with a late-result notice.
    nxt = enc.compile(mind.context, "s1")
    assert nxt["claimed"] == [got["ref"]] and nxt["tick"] == tick + 1
    assert got["ref"] in items(nxt, "observation")
    notice = line(nxt, "late-result", got["ref"])
    assert f"(call {call['ref']}) (activation {first['activation']})" in notice
    expect_rejected("CALL_ANSWERED", result, mind, call["ref"], "deployed twice")
    audited(mind, enc, busy, s2, nxt)


def test_conc_04_the_kernel_shows_the_sessions_outstanding_calls(mind, enc):
    mind.event("hello", session="s2")
    s2 = enc.compile(mind.context, "s2")
    mind.event("build and test", session="s1")
    e = enc.compile(mind.context, "s1")
    build = action(mind, "s1", e["activation"], "npm run build")
    test = action(mind, "s1", e["activation"], "npm test")
    result(mind, build["ref"], "build ok")
    kernel = enc.compile(mind.context, "s1", activation=e["activation"])
    assert list(items(kernel, "call")) == [test["ref"]]
    assert f'(activation {e["activation"]}) (actor "npm") (result outstanding)' in \
        line(kernel, "call", test["ref"])
    assert items(enc.compile(mind.context, "s2", activation=s2["activation"]), "call") == {}
    assert sessions(mind)["s1"]["outstanding_calls"] == 1
    # An action is no observation: not in the inbox, not pending, the clock stays.
    assert test["ref"] not in items(kernel, "observation")
    assert sessions(mind)["s1"]["pending"] == 0
    assert kernel["tick"] == e["tick"] == mind.status()["cognitive_tick"]
    audited(mind, enc, kernel)


def test_conc_04_calls_and_results_are_checked_with_structured_errors(mind, enc,
                                                                      expect_rejected):
    mind.event("go", session="s1")
    a1 = enc.compile(mind.context, "s1")["activation"]
    mind.event("go", session="s2")
    a2 = mind.activate("s2")["id"]
    expect_rejected("ACTIVATION_NOT_FOUND", action, mind, "s1", "a999")
    err = expect_rejected("CAUSAL_SCOPE_VIOLATION", action, mind, "s1", a2)
    assert err.details["activation"] == a2
    expect_rejected("CONTEXT_INPUT_INVALID", mind.client.append_event, mind.context, "s1",
                    "action", "no activation")
    expect_rejected("CONTEXT_INPUT_INVALID", mind.client.append_event, mind.context, "s1",
                    "user-message", "hi", activation=a1)
    c1, c2 = action(mind, "s1", a1, "ls"), action(mind, "s1", a1, "pwd")
    err = expect_rejected("CONTEXT_INPUT_INVALID", mind.client.append_event, mind.context, "",
                          "tool-result", "two answers", causal_refs=[c1["ref"], c2["ref"]])
    assert err.details["calls"] == [c1["ref"], c2["ref"]]
    expect_rejected("CONTEXT_INPUT_INVALID", mind.client.append_event, mind.context, "",
                    "tool-result", "whose?")
    expect_rejected("NOT_AN_OBSERVATION", mind.tx, f"(retire {c1['ref']})", reason="no")
    mind.client.deliver(mind.context, a1)
    expect_rejected("ACTIVATION_DELIVERED", action, mind, "s1", a1)
    # A non-action ref of a tool result is an ordinary causal ref of its own session.
    plain = mind.client.append_event(mind.context, "s1", "tool-result", "ok",
                                     causal_refs=["@e1"])
    assert "call" not in plain and sessions(mind)["s1"]["pending"] == 1
    audited(mind)


# -- CONC-05 ------------------------------------------------------------------------------

def test_conc_05_message_names_source_and_target_and_gives_the_target_its_text_only(
        mind, enc, recall, expect_rejected):
    secret = mind.event("s1 private: the rollback password is hunter2", session="s1")
    enc.compile(mind.context, "s1")
    mind.event("ready when you are", session="s2")
    enc.compile(mind.context, "s2")
    msg = mind.client.append_event(mind.context, "s1", "message",
                                   "please review the release notes", target_session="s2")
    assert (msg["session"], msg["target_session"]) == ("s1", "s2")
    event = mind.client.get_event(mind.context, msg["ref"])
    assert (event["kind"], event["session"], event["target_session"]) == \
        ("message", "s1", "s2")
    tick = mind.status()["cognitive_tick"]
    e = enc.compile(mind.context, "s2")
    assert e["claimed"] == [msg["ref"]] and e["tick"] == tick + 1  # an external fact
    assert '(kind message) (from s1) (to s2) (actor "message")' in \
        line(e, "observation", msg["ref"])
    assert "please review the release notes" in e["text"]
    assert "hunter2" not in e["text"] and secret["ref"] not in items(e, "observation")
    # The source's other evidence stays invisible to the target's evaluation...
    evaluation = {"session": "s2", "activation": e["activation"]}
    expect_rejected("EVENT_NOT_FOUND", recall.read, mind.context, secret["ref"],
                    evaluation=evaluation)
    expect_rejected("EVENT_NOT_FOUND", enc.read, mind.context, e["snapshot"], secret["ref"])
    assert recall.read(mind.context, msg["ref"], evaluation=evaluation)["text"] == \
        "please review the release notes"
    # ... while the message is visible to both ends.
    source = enc.compile(mind.context, "s1")
    assert recall.read(mind.context, msg["ref"], evaluation={
        "session": "s1", "activation": source["activation"]})["session"] == "s1"
    expect_rejected("SESSION_NOT_FOUND", mind.client.append_event, mind.context, "s1",
                    "message", "anyone?", target_session="nobody")
    expect_rejected("CONTEXT_INPUT_INVALID", mind.client.append_event, mind.context, "s1",
                    "message", "to myself", target_session="s1")
    expect_rejected("CONTEXT_INPUT_INVALID", mind.client.append_event, mind.context, "s1",
                    "message", "to whom?")
    audited(mind, enc, e, source)


def test_conc_05_naming_a_session_does_not_activate_it_and_the_directory_shows_waiting(
        mind, enc):
    mind.event("start", session="s1")
    mind.event("idle", session="s2")
    mind.activate("s2")
    before = mind.status()
    msg = mind.client.append_event(mind.context, "s1", "message", "ping", target_session="s2")
    after = mind.status()
    # One event, the message itself: no activation of s2, no tick.
    assert after["event_count"] == before["event_count"] + 1 == msg["seq"] + 1
    assert after["cognitive_tick"] == before["cognitive_tick"]
    assert (sessions(mind)["s2"]["pending"], sessions(mind)["s2"]["messages_waiting"]) == (1, 1)
    e = enc.compile(mind.context, "s1")
    assert "(messages-waiting 1)" in line(e, "session", "s2")
    assert "messages-waiting" not in line(e, "session", "s1")
    assert msg["ref"] not in items(e, "observation")         # the target's inbox, not s1's
    claimed = enc.compile(mind.context, "s2")
    assert claimed["claimed"] == [msg["ref"]]
    assert sessions(mind)["s2"]["messages_waiting"] == 0
    assert "messages-waiting" not in line(claimed, "session", "s2")
    audited(mind, enc, e, claimed)


# -- CONC-07 ------------------------------------------------------------------------------

def test_conc_07_recall_for_an_evaluation_never_returns_another_sessions_evidence(
        mind, enc, recall, expect_rejected):
    own = mind.event("deploy rotation log alpha from s1", session="s1")
    foreign = mind.event("deploy rotation log beta from s2", session="s2")
    tx = mind.tx('(create deploy/notes (text "deploy rotation notes"))', session="s2")
    s1 = {"session": "s1", "activation": enc.compile(mind.context, "s1")["activation"]}
    s2 = {"session": "s2", "activation": enc.compile(mind.context, "s2")["activation"]}
    caught_up(recall, mind.context)

    def refs(reply):
        return {h["ref"] or h["id"] for h in reply["results"]}
    hits = recall.search(mind.context, "deploy rotation", evaluation=s1)
    # The shared Mind (the frame, the committed transaction) stays visible to both.
    shared = {"deploy/notes", tx["event_ref"]}
    assert refs(hits) == {own["ref"]} | shared
    assert refs(recall.search(mind.context, "deploy rotation", evaluation=s2)) == \
        {foreign["ref"]} | shared
    # The recall observation recorded for the evaluation holds only what it may see.
    recorded = mind.client.get_event(mind.context, hits["observation_ref"])
    assert recorded["session"] == "s1" and "beta" not in recorded["text"]
    assert "alpha" in recorded["text"]
    # Reads: as if it did not exist (by @eN and by full id), for recall and the encoding.
    expect_rejected("EVENT_NOT_FOUND", recall.read, mind.context, foreign["ref"],
                    evaluation=s1)
    expect_rejected("FRAME_NOT_FOUND", recall.read, mind.context, foreign["id"],
                    evaluation=s1)
    assert recall.read(mind.context, own["ref"], evaluation=s1)["text"].endswith("s1")
    # Traversal: frames of the shared Mind for both; an uncited private event for neither.
    for ev in (s1, s2):
        walk = recall.traverse(mind.context, "deploy/notes", evaluation=ev,
                               include_bodies=True)
        assert [n["id"] for n in walk["nodes"]] == ["deploy/notes"]
    # Operators (no evaluation) see everything.
    assert refs(recall.search(mind.context, "deploy rotation", kinds=["event"])) >= \
        {own["ref"], foreign["ref"]}
    assert recall.read(mind.context, foreign["ref"])["text"].endswith("s2")
    assert mind.client.get_event(mind.context, foreign["ref"])["session"] == "s2"
    audited(mind)


def test_conc_07_derive_from_another_sessions_private_event_is_rejected_like_a_missing_one(
        mind, expect_rejected):
    private = mind.event("s2 private: disk is 91% full", session="s2")
    mind.event("s1 request", session="s1")
    mind.tx("(create capacity (disk unknown))")
    missing = expect_rejected("SOURCE_NOT_FOUND", mind.tx,
                              "(derive disk (from @e999) (full 91))", session="s1")
    err = expect_rejected("SOURCE_NOT_FOUND", mind.tx,
                          f"(derive disk (from {private['ref']}) (full 91))", session="s1")
    assert err.message == missing.message.replace("@e999", private["ref"])
    assert err.details == dict(missing.details, ref=private["ref"])
    expect_rejected("SOURCE_NOT_FOUND", mind.tx,
                    f"(revise capacity (from {private['ref']}) (disk 91))", session="s1")
    expect_rejected("EVENT_NOT_FOUND", mind.tx, f"(retire {private['ref']})",
                    session="s1", reason="not mine")
    expect_rejected("EVENT_NOT_FOUND", mind.event, "follow-up", session="s1",
                    causal_refs=[private["ref"]])
    # Its own session may cite it; the commit promotes it into the shared Mind.
    mind.tx(f"(derive disk (from {private['ref']}) (full 91))", session="s2")
    mind.tx(f"(derive disk-alert (from {private['ref']} disk) (page ops))", session="s1")
    assert mind.frame("disk-alert")["sources"] == [private["ref"], "disk"]
    audited(mind)


def test_conc_07_promoted_evidence_becomes_visible_and_operators_see_everything(
        mind, enc, recall, expect_rejected):
    private = mind.event("s2 measured p99 latency 840ms", session="s2")
    other = mind.event("s2 scratch note latency guess", session="s2")
    mind.event("s1 asks about latency", session="s1")
    e = enc.compile(mind.context, "s1")
    s1 = {"session": "s1", "activation": e["activation"]}
    expect_rejected("EVENT_NOT_FOUND", recall.read, mind.context, private["ref"],
                    evaluation=s1)
    # s2 cites it in a committed frame: promoted into the shared Mind, for good.
    mind.tx(f"(derive latency (from {private['ref']}) (p99-ms 840))", session="s2")
    assert recall.read(mind.context, private["ref"], evaluation=s1)["text"] == \
        "s2 measured p99 latency 840ms"
    assert enc.read(mind.context, e["snapshot"], private["ref"])["text"].endswith("840ms")
    expect_rejected("EVENT_NOT_FOUND", enc.read, mind.context, e["snapshot"], other["ref"])
    caught_up(recall, mind.context)
    found = {h["ref"] for h in recall.search(mind.context, "latency", kinds=["event"],
                                             evaluation=s1)["results"]}
    assert private["ref"] in found and other["ref"] not in found
    walk = recall.traverse(mind.context, "latency", include_events=True, evaluation=s1)
    leaf = {n["ref"]: n for n in walk["nodes"] if n["kind"] == "event"}[private["ref"]]
    assert leaf["text"] == "s2 measured p99 latency 840ms" and not leaf["missing"]
    mind.tx(f"(derive latency-s1 (from {private['ref']}) (seen yes))", session="s1")
    mind.tx("(retire latency)", reason="superseded")  # promotion outlives the citing frame
    assert recall.read(mind.context, private["ref"], evaluation=s1)["text"].endswith("840ms")
    # Operators' reads see every session's evidence.
    assert mind.client.get_event(mind.context, other["ref"])["text"].startswith("s2 scratch")
    assert recall.read(mind.context, other["ref"])["session"] == "s2"
    assert other["ref"] in {h["ref"] for h in recall.search(mind.context, "scratch")["results"]}
    audited(mind, enc, e)


def test_conc_07_an_open_evaluations_scope_does_not_widen_while_it_runs(mind, enc):
    """What arrives for a session while its evaluation runs waits for the next activation:
    the running causal scope is the one its activation claimed (no concurrent widening)."""
    mind.event("summarize the incident", session="s2")
    running = enc.compile(mind.context, "s2")
    msg = mind.client.append_event(mind.context, "s1", "message", "new facts",
                                   target_session="s2")
    later = mind.event("and also this", session="s2")
    again = enc.compile(mind.context, "s2", activation=running["activation"])
    shown = items(again, "observation")
    assert msg["ref"] not in shown and later["ref"] not in shown
    assert {o["key"]: o["reason"] for o in again["omitted"]}[msg["ref"]].startswith("pending")
    nxt = enc.compile(mind.context, "s2")
    assert nxt["claimed"] == [msg["ref"], later["ref"]]
    audited(mind, enc, running, again, nxt)


def test_conc_07_recall_for_an_evaluation_pages_over_the_server(mind, enc, recall):
    """Each page records a recall observation (never indexed itself: RECALL-12); the
    cursor pages the first page's evidence set, and only what s1's scope may see."""
    mine = {mind.event(f"incident note {i}", session="s1")["ref"] for i in range(5)}
    theirs = {mind.event(f"incident note {i}", session="s2")["ref"] for i in range(5)}
    e = enc.compile(mind.context, "s1")
    caught_up(recall, mind.context)
    evaluation = {"session": "s1", "activation": e["activation"]}
    reply = recall.search(mind.context, "incident", limit=2, evaluation=evaluation)
    seen = [h["ref"] for h in reply["results"]]
    while reply["next_cursor"]:
        caught_up(recall, mind.context)  # the page's own observation is indexed now
        reply = recall.search(mind.context, "incident", limit=2, evaluation=evaluation,
                              cursor=reply["next_cursor"])
        seen += [h["ref"] for h in reply["results"]]
    assert sorted(seen) == sorted(mine) and not set(seen) & theirs
    audited(mind)
