"""Encoding service (CORE-22..26, ASM-01..05) over real gRPC and a real LMDB store."""
from __future__ import annotations

import hashlib

import grpc
import pytest

from morphz.services.encoding.client import EncodingClient
from morphz.services.encoding.core.render import REGIONS
from morphz.shared.sexpr import Ref, Symbol, parse_many

from tests.integration.test_core import RELEASE_TX  # the README's release walk-through


@pytest.fixture(scope="module")
def enc(endpoints):
    channel = grpc.insecure_channel(endpoints.encoding, options=[
        ("grpc.max_receive_message_length", 64 << 20)])
    yield EncodingClient(channel, timeout=30)
    channel.close()


def items(encoding: dict, kind: str) -> dict:
    return {it["key"]: it for it in encoding["items"] if it["kind"] == kind}


def span(encoding: dict, it: dict) -> str:
    return encoding["text"][it["start"]:it["end"]]


def release_context(mind) -> dict:
    """The seed-002 release example up to the test report arriving."""
    mind.event("请发布 v1", session="s1")
    mind.tx("(create release (goal ship-v1) (stage waiting-tests))", reason="发布计划")
    return mind.event("regression: 120 passed, 0 failed", kind="tool-result", actor="npm test")


# -- CORE-22..26 ------------------------------------------------------------------------------

def test_core_22_runtime_facts_and_agent_writing_are_distinguishable(mind, enc):
    report = release_context(mind)
    mind.tx(f"(derive test-result (from {report['ref']}) (tests passed)) "
            "(relate test-result supports release)")
    e = enc.compile(mind.context, "s1")
    text = e["text"]
    # Text: every item line is (HEAD [KEY] (runtime ...) [(agent ...)]).
    for form in parse_many(text):
        for line in form[1:] if form[0] != Symbol("evaluate") else [form]:
            owners = [p[0] for p in line if isinstance(p, list) and p and
                      p[0] in (Symbol("runtime"), Symbol("agent"))]
            assert owners, line
    # Structured: every item names the owner of each of its parts, with exact ranges.
    for it in e["items"]:
        assert it["parts"], it
        for p in it["parts"]:
            assert p["owner"] in ("runtime", "agent")
            assert text[p["start"]:p["end"]].startswith(f"({p['owner']}")
            assert it["start"] <= p["start"] < p["end"] <= it["end"]
    frame = items(e, "frame")["release"]
    owners = {p["owner"]: text[p["start"]:p["end"]] for p in frame["parts"]}
    assert owners["agent"].endswith("(body (goal ship-v1) (stage waiting-tests)))")
    assert "(revision 1)" in owners["runtime"] and "goal" not in owners["runtime"]
    rel = items(e, "relation")["test-result supports release"]
    assert [p["owner"] for p in rel["parts"]] == ["agent"]
    for kind in ("observation", "state", "activation", "pressure", "context", "session"):
        for it in items(e, kind).values():
            assert {p["owner"] for p in it["parts"]} == {"runtime"}, it


def test_core_23_only_claimed_observations_of_the_causal_scope_are_visible(mind, enc,
                                                                         expect_rejected):
    own = mind.event("mine", session="s1")
    other = mind.event("another session's evidence", session="s2")
    e = enc.compile(mind.context, "s1")
    late = mind.event("arrived after the claim", session="s1")
    again = enc.compile(mind.context, "s1", activation=e["activation"])
    assert own["ref"] in items(e, "observation")
    assert other["ref"] not in items(e, "observation")
    # Another session's private evidence is not even named: it reads as missing (CONC-07).
    assert other["ref"] not in {o["key"] for o in e["omitted"]}
    # Not claimed yet: it waits for the next activation, then it is visible.
    assert late["ref"] not in items(again, "observation")
    assert {"key": late["ref"], "reason": "pending: arrives with the next activation"} \
        in again["omitted"]
    assert late["ref"] in items(enc.compile(mind.context, "s1"), "observation")
    # "@e²" is no ref ("²".isdigit() is True but int("²") fails): missing, not a crash.
    err = expect_rejected("MUST_READ_MISSING", enc.compile, mind.context, "s1",
                          must_read=["@e999", other["ref"], "@e²"])
    assert set(err.details["missing"]) == {"@e999", other["ref"], "@e²"}
    assert err.details["why"][other["ref"]] == err.details["why"]["@e999"]


def test_core_24_large_tool_result_is_a_marked_preview_and_its_ref_reads_the_whole(
        mind, enc, client):
    whole = "".join(f"line {i:07d}: build log 结果\n" for i in range(40_000))
    assert len(whole.encode()) > 1_000_000
    ref = mind.event(whole, kind="tool-result")["ref"]
    e = enc.compile(mind.context, "s1", preview_bytes=4096)
    it = items(e, "observation")[ref]
    assert it["residency"] == "preview"
    assert it["shown_bytes"] <= 4096 and it["total_bytes"] == len(whole.encode())
    line = span(e, it)
    assert f"(preview (shown-bytes {it['shown_bytes']}) (total-bytes {it['total_bytes']}) " \
           f"(full-text {ref})" in line
    assert whole not in e["text"] and len(e["text"].encode()) < 20_000
    assert "(residency preview)" in span(e, items(e, "state")[ref])
    # The @eN ref reads back the whole event, directly and through the snapshot's scope.
    assert client.get_event(mind.context, ref)["text"] == whole
    got, offset = [], 0
    while True:
        page = enc.read(mind.context, e["snapshot"], ref, offset=offset, limit=300_000)
        got.append(page["text"])
        offset = page["next_offset"]
        if not page["has_more"]:
            break
    assert "".join(got) == whole and page["total_chars"] == len(whole)


def test_core_25_pressure_is_reported_then_relieved_by_a_retire(mind, enc):
    mind.event("start", session="s1")
    mind.tx("(create plan (goal ship-v1))")
    mind.activate()
    logs = [mind.event("x" * 1500, kind="tool-result")["ref"] for _ in range(3)]
    size = enc.compile(mind.context, "s1")["bytes"]
    budget = size * 100 // 95  # 95% full
    e = enc.compile(mind.context, "s1", budget_bytes=budget)
    p = e["pressure"]
    assert p["level"] == "maintenance" and p["external_actions_deferred"]
    assert p["used_bytes"] == e["bytes"] and p["limit_bytes"] == budget
    pressure_line = span(e, items(e, "pressure")["context"])
    assert "(level maintenance) (external-actions deferred)" in pressure_line
    receipt = mind.tx(f"(retire {' '.join(logs)})", reason="logs digested")
    assert receipt["capacity"]["released_now_bytes"] == 4500
    after = enc.compile(mind.context, "s1", budget_bytes=budget)
    assert after["pressure"]["level"] == "normal" and not after["pressure"][
        "external_actions_deferred"]
    assert after["bytes"] < e["bytes"] - 4500
    assert "deferred" not in after["text"]


def test_core_25_token_budget_is_reported_and_enforced(mind, enc, expect_rejected):
    mind.event("汉字" * 600)  # whole (3600 bytes); ~one token per CJK character
    e = enc.compile(mind.context, "s1", budget_tokens=100_000)
    p = e["pressure"]
    assert p["limit_tokens"] == 100_000 and p["used_tokens"] >= 1200
    assert f"(used-tokens {p['used_tokens']}) (limit-tokens 100000)" in e["text"]
    err = expect_rejected("ENCODING_BUDGET_EXCEEDED", enc.compile, mind.context, "s1",
                          budget_tokens=1000)
    assert err.details["used_tokens"] > err.details["limit_tokens"] == 1000


def test_core_25_runtime_never_rewrites_a_frame_to_fit(mind, enc, expect_rejected):
    body = " ".join(f"(step{i} \"{'detail ' * 40}\")" for i in range(12))
    mind.event("condense the procedure")
    mind.tx(f"(create procedure {body})")
    mind.tx("(create small (x 1))")
    before = mind.frame("procedure")
    err = expect_rejected("ENCODING_BUDGET_EXCEEDED", enc.compile, mind.context, "s1",
                          budget_bytes=2048)
    named = err.details["items"]
    assert named[0]["kind"] == "frame" and named[0]["key"] == "procedure"
    assert err.details["used_bytes"] > err.details["limit_bytes"] == 2048
    assert mind.frame("procedure") == before
    # With room, the body appears byte for byte as the agent wrote it.
    e = enc.compile(mind.context, "s1")
    assert f"(body {before['body']})" in span(e, items(e, "frame")["procedure"])


def test_core_26_regions_in_the_seeds_physical_order(mind, enc):
    release_context(mind)
    e = enc.compile(mind.context, "s1", capabilities=True, model="m1",
                    evaluation_profile="(harness coder)", bindings={"cwd": "/srv"})
    heads = [f[0].name for f in parse_many(e["text"])]
    assert heads == list(REGIONS) == [
        "protocol", "evaluation-profile", "inbox", "observation-state", "mind",
        "session-directory", "kernel", "cognitive-capabilities", "evaluation-environment",
        "evaluate"]
    assert [r["name"] for r in e["regions"]] == heads
    starts = [r["start"] for r in e["regions"]]
    assert starts == sorted(starts) and e["regions"][-1]["end"] == len(e["text"])
    plain = enc.compile(mind.context, "s1")
    assert [f[0].name for f in parse_many(plain["text"])] == \
        [r for r in REGIONS if r != "cognitive-capabilities"]
    assert "(profile (runtime none))" in plain["text"]
    last = parse_many(plain["text"])[-1]
    assert last[0] == Symbol("evaluate") and plain["text"].count("(evaluate ") == 1
    inbox = [f for f in parse_many(e["text"]) if f[0] == Symbol("inbox")][0]
    seqs = [line[1].seq for line in inbox[1:]]
    assert seqs == sorted(seqs) and all(isinstance(line[1], Ref) for line in inbox[1:])


# -- retirement as the encoding shows it ----------------------------------------------------------

def test_core_08_retired_observation_leaves_the_next_encoding_but_stays_readable(mind, enc,
                                                                                 client):
    report = release_context(mind)
    first = enc.compile(mind.context, "s1")
    assert report["ref"] in items(first, "observation")
    mind.client.commit(mind.context, RELEASE_TX.format(base=mind.revision(), ref=report["ref"]))
    second = enc.compile(mind.context, "s1")
    assert report["ref"] not in items(second, "observation")
    assert report["ref"] not in items(second, "state")
    assert "(sources " + report["ref"] + ")" in span(second, items(second, "frame")["test-result"])
    assert client.get_event(mind.context, report["ref"])["text"].startswith("regression")
    page = enc.read(mind.context, second["snapshot"], report["ref"])
    assert page["text"] == "regression: 120 passed, 0 failed" and page["state"] == "retired"


def test_core_09_retiring_frame_is_shown_with_its_reason_and_remaining_ticks(mind, enc):
    mind.tx("(create release-case-a (test \"npm test\"))")
    mind.tick(2)
    mind.tx("(retire release-case-a)", reason="folded into the procedure")
    mind.tick(3)
    e = enc.compile(mind.context, "s1")
    frame = items(e, "frame")["release-case-a"]
    assert frame["state"] == "retiring" and frame["remaining_ticks"] == 5
    line = span(e, frame)
    assert "(state retiring)" in line and "(remaining-ticks 5)" in line
    assert '(agent (retire-reason "folded into the procedure")' in line
    mind.tick(5)
    assert "release-case-a" not in items(enc.compile(mind.context, "s1"), "frame")


# -- ASM-01..05 ----------------------------------------------------------------------------------

def test_asm_01_scope_can_only_be_narrowed_and_reads_outside_are_refused(mind, enc,
                                                                       expect_rejected):
    ask = mind.event("ship it", session="s1")
    log = mind.event("build ok", kind="tool-result", session="s1")
    foreign = mind.event("s2 secret", session="s2")
    mind.tx("(create release (goal ship-v1)) (create notes (x 1))")
    expect_rejected("SCOPE_VIOLATION", enc.compile, mind.context, "s1",
                    scope={"sessions": ["s1", "s2"]})
    parent = enc.compile(mind.context, "s1", scope={"kinds": ["user-message", "tool-result"],
                                                    "frames": ["release"]})
    assert set(items(parent, "frame")) == {"release"}
    child = enc.compile(mind.context, "s1", parent_snapshot=parent["snapshot"],
                        scope={"kinds": ["tool-result"]})
    assert set(items(child, "observation")) == {log["ref"]}
    assert set(items(child, "frame")) == {"release"}  # inherited, not widened
    expect_rejected("SCOPE_VIOLATION", enc.compile, mind.context, "s1",
                    parent_snapshot=child["snapshot"], scope={"kinds": ["user-message"]})
    expect_rejected("SCOPE_VIOLATION", enc.compile, mind.context, "s1",
                    parent_snapshot=parent["snapshot"], scope={"frames": ["notes"]})
    expect_rejected("SCOPE_VIOLATION", enc.compile, mind.context, "s2",
                    parent_snapshot=parent["snapshot"])
    # Reads and searches through a snapshot stay inside its frozen scope.
    assert enc.read(mind.context, child["snapshot"], log["ref"])["text"] == "build ok"
    expect_rejected("SCOPE_VIOLATION", enc.read, mind.context, child["snapshot"], ask["ref"])
    # Another session's private evidence is answered as a missing one (CONC-07).
    expect_rejected("EVENT_NOT_FOUND", enc.read, mind.context, parent["snapshot"],
                    foreign["ref"])
    expect_rejected("SCOPE_VIOLATION", enc.read, mind.context, parent["snapshot"], "notes")
    assert enc.search(mind.context, parent["snapshot"], "secret")["empty_reason"] == "no_match"


def test_asm_02_must_read_that_does_not_fit_fails_naming_it(mind, enc, expect_rejected):
    big = mind.event("y" * 60_000, kind="tool-result")["ref"]
    small = mind.event("z" * 5_000, kind="tool-result")["ref"]
    fits = enc.compile(mind.context, "s1", budget_bytes=32_768)
    assert items(fits, "observation")[big]["residency"] == "preview"
    err = expect_rejected("MUST_READ_MISSING", enc.compile, mind.context, "s1",
                          budget_bytes=32_768, must_read=[small, big])
    assert err.details["missing"] == [big]
    # A must-read that fits appears whole; nothing else was shortened for it.
    e = enc.compile(mind.context, "s1", budget_bytes=32_768, must_read=[small])
    assert items(e, "observation")[small]["residency"] == "full"
    assert "z" * 5_000 in e["text"]


def test_asm_03_snapshot_is_immutable_with_hash_and_item_ranges(mind, enc, storage,
                                                               expect_rejected):
    report = release_context(mind)
    foreign = mind.event("not for s1", session="s2")
    approval = mind.event("approved", kind="approval", session="s1")
    e = enc.compile(mind.context, "s1", budget_bytes=65_536,
                    scope={"kinds": ["user-message", "tool-result"]})
    record = enc.show(mind.context, e["snapshot"])
    text = e["text"]
    assert record["hash"] == e["hash"] == \
        "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    assert record["items"] == e["items"] and record["regions"] == e["regions"]
    for it in record["items"]:
        line = text[it["start"]:it["end"]]
        assert line.startswith("(" + it["kind"]) and line.endswith(")")
        assert len(line.encode()) == it["bytes"]
    # Selections name refs and frame revisions; omissions carry their reasons.
    assert [o["ref"] for o in record["inputs"]["observations"]][-1] == report["ref"]
    assert record["inputs"]["frames"] == [{"id": "release", "revision": 1, "state": "active",
                                           "protected": False, "retire_reason": "",
                                           "due_tick": 0, "remaining_ticks": 0}]
    assert {"key": approval["ref"], "reason": "outside scope: kind"} in record["omitted"]
    assert foreign["ref"] not in {o["key"] for o in record["omitted"]}  # not even named
    assert record["budget"]["bytes"] == 65_536 and record["scope"]["sessions"] == ["s1"]
    mind.client.commit(mind.context, RELEASE_TX.format(base=mind.revision(), ref=report["ref"]))
    assert enc.show(mind.context, e["snapshot"]) == record
    # Written once by the encoding service: not even the storage API rewrites it.
    expect_rejected("STORAGE_APPEND_ONLY", storage.put_record, mind.context, "snapshots",
                    (e["snapshot"],), b'{"forged": true}')
    assert enc.show(mind.context, e["snapshot"]) == record


def test_asm_04_replay_of_a_snapshot_taken_100_commits_ago_reproduces_its_hash(
        mind, enc, expect_rejected):
    report = release_context(mind)
    mind.tx("(create notes (n 0))")
    e = enc.compile(mind.context, "s1", model="m1", bindings={"tz": "+08:00"})
    assert enc.check(mind.context, e["snapshot"])["current"]
    mind.client.commit(mind.context, RELEASE_TX.format(base=mind.revision(), ref=report["ref"]))
    for i in range(1, 100):
        mind.tx(f"(revise notes (n {i}))")
    assert mind.status()["revision"] == e["revision"] + 100
    replay = enc.replay(mind.context, e["snapshot"])
    assert replay["match"] and replay["ranges_match"] and not replay["problems"]
    assert replay["replay_hash"] == replay["hash"] == e["hash"]
    assert replay["text"] == e["text"]
    # Changed sources make the snapshot invalid for new use, explicitly, per input.
    check = enc.check(mind.context, e["snapshot"])
    assert not check["current"] and not check["valid_for_new_use"]
    reasons = {(d["key"], d["reason"]) for d in check["changed"]}
    assert reasons == {(report["ref"], "source_retired"), ("release", "frame_revised"),
                       ("notes", "frame_revised")}
    notes = [d for d in check["changed"] if d["key"] == "notes"][0]
    assert (notes["recorded_revision"], notes["current_revision"]) == (1, 100)
    mind.tx("(retire-session s1)", reason="done")
    revoked = enc.check(mind.context, e["snapshot"])
    assert ("s1", "access_revoked") in {(d["key"], d["reason"]) for d in revoked["changed"]}
    assert enc.replay(mind.context, e["snapshot"])["replay_hash"] == e["hash"]
    # Revoked access: the frozen scope serves no new reads, the snapshot stays replayable.
    expect_rejected("SNAPSHOT_INVALID", enc.read, mind.context, e["snapshot"], report["ref"])
    expect_rejected("SNAPSHOT_INVALID", enc.search, mind.context, e["snapshot"], "passed")


def test_asm_05_blank_query_rejected_and_empty_results_say_why(mind, enc, expect_rejected):
    mind.event("warm up", session="s9")  # the session exists, with nothing for s1
    empty = enc.compile(mind.context, "s9", scope={"kinds": ["approval"]})
    expect_rejected("CONTEXT_INPUT_INVALID", enc.search, mind.context, empty["snapshot"], "  ")
    expect_rejected("CONTEXT_INPUT_INVALID", enc.search, mind.context, "no-such-snapshot", "")
    assert enc.search(mind.context, empty["snapshot"], "anything")["empty_reason"] == \
        "empty_index"
    release_context(mind)
    e = enc.compile(mind.context, "s1")
    miss = enc.search(mind.context, e["snapshot"], "kubernetes")
    assert (miss["empty_reason"], miss["hits"]) == ("no_match", []) and miss["message"]
    hit = enc.search(mind.context, e["snapshot"], "PASSED")
    assert hit["empty_reason"] == "" and [h["key"] for h in hit["hits"]] == \
        [items(e, "observation")[k]["key"] for k in items(e, "observation")
         if "passed" in span(e, items(e, "observation")[k])]


# -- input limits ------------------------------------------------------------------------------

def test_encoding_rejects_bad_input_with_structured_reasons(mind, enc, expect_rejected):
    mind.event("hi")
    expect_rejected("CONTEXT_INPUT_INVALID", enc.compile, mind.context, "s1",
                    budget_bytes=1 << 40)
    expect_rejected("CONTEXT_INPUT_INVALID", enc.compile, mind.context, "s1",
                    scope={"since": "2026-08-04T09:00:00"})
    expect_rejected("CONTEXT_INPUT_INVALID", enc.compile, mind.context, "bad session")
    expect_rejected("SESSION_NOT_FOUND", enc.compile, mind.context, "nobody")
    expect_rejected("CONTEXT_NOT_FOUND", enc.compile, "no-such-context", "s1")
    expect_rejected("SNAPSHOT_NOT_FOUND", enc.replay, mind.context, "enc-missing")
    status = mind.status()
    # Rejected compiles claimed nothing.
    assert [s["pending"] for s in status["sessions"] if s["id"] == "s1"] == [1]


def test_core_15_every_undelivered_root_request_is_an_objective_until_delivered(mind, enc):
    ask = mind.event("请发布 v1", session="s1")
    first = mind.activate("s1")                       # claims the request: its root
    mind.event("regression: 120 passed", kind="tool-result", session="s1")
    e = enc.compile(mind.context, "s1")               # a later activation, no root of its own
    objectives = items(e, "objective")
    assert list(objectives) == [ask["ref"]]
    assert f"(root-request {ask['ref']})" in span(e, objectives[ask["ref"]])
    assert "(root-request yes)" in span(e, items(e, "state")[ask["ref"]])
    mind.client.deliver(mind.context, first["id"])
    e = enc.compile(mind.context, "s1")
    assert "(objective (runtime none))" in e["text"]
    assert enc.replay(mind.context, e["snapshot"])["replay_hash"] == e["hash"]


def test_dist_05_a_compile_over_the_storage_service_reads_its_scans_in_one_round_trip(
        tmp_path):
    """An encoding compiled through the storage service (the split topology) reads its
    whole prefixes (frames, order, relations, sessions...) in one ScanMany, not a Scan
    each, and its rows in three GetMany: six storage round trips in all (nineteen
    before). It renders exactly what a compile in the storage's own process renders."""
    from datetime import datetime, timezone

    from morphz.services.encoding.core.engine import EncodingCore
    from morphz.services.storage.client import StorageClient
    from morphz.shared.auth import IN_PROCESS_CALLER as ME
    from tests.rpc_count import storage_service

    with storage_service(tmp_path / "server") as (app, channel, count):
        tx = app.transactions
        tx.create_context("c", caller=ME)
        ref = tx.append_event("c", "s1", "tool-result", "120 tests passed", caller=ME).ref
        tx.commit("c", "(context-tx (base-version 0) (create release (goal ship-v1)))",
                  caller=ME)
        base = tx.status("c", caller=ME).revision
        tx.commit("c", RELEASE_TX.format(base=base, ref=ref), caller=ME)
        tx.append_event("c", "s1", "user-message", "and the changelog?", caller=ME)
        act = tx.activate("c", "s1", caller=ME).id

        def clock():
            return datetime(2026, 12, 1, tzinfo=timezone.utc)
        here = EncodingCore(app.store, tx, clock=clock, new_id=lambda: "enc-here")
        remote = EncodingCore(StorageClient(channel, timeout=30), tx, clock=clock,
                              new_id=lambda: "enc-remote")
        expected = here.compile("c", "s1", activation=act, caller=ME)
        count.calls.clear()
        got = remote.compile("c", "s1", activation=act, caller=ME)
        # Permissions and session (the snapshot released with them); the activation and
        # meta, the scans, the inbox's events and observations; the snapshot record.
        assert count.methods() == ["GetMany", "GetMany", "ScanMany", "GetMany",
                                   "CloseSnapshot", "PutRecords"]
        assert got.text == expected.text and got.hash == expected.hash
        assert "supports" in got.text  # the relation, read by the ScanMany
