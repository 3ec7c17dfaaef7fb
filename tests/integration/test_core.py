"""SC-Core transaction rules (CORE-01 .. CORE-21) over real gRPC and a real LMDB store."""
from __future__ import annotations


from morphz.shared.storage.api import Write

RELEASE_TX = """(context-tx
  (base-version {base})
  (reason "测试结果已吸收，继续准备发布")
  (derive test-result (from {ref}) (tests passed))
  (revise release (goal ship-v1) (stage packaging))
  (relate test-result supports release)
  (retire {ref}))"""


def test_core_01_events_are_immutable(mind, storage, expect_rejected):
    ev = mind.event("the regression report: 120 passed")
    before = mind.client.get_event(mind.context, ev["ref"])
    mind.tx(f"(create note (about {ev['ref']}))")
    mind.tx(f"(retire {ev['ref']})", reason="digested")
    after = mind.client.get_event(mind.context, ev["ref"])
    assert {k: after[k] for k in ("id", "text", "kind", "time", "seq")} == \
        {k: before[k] for k in ("id", "text", "kind", "time", "seq")}
    # Not even the storage service itself accepts a rewrite or a delete of an event.
    with storage.reader(mind.context) as r:
        seq = r.commit_seq
    expect_rejected("STORAGE_APPEND_ONLY", storage.commit, mind.context, seq,
                    [Write("events", (ev["seq"],), b"{}")])
    expect_rejected("STORAGE_APPEND_ONLY", storage.commit, mind.context, seq,
                    [Write("events", (ev["seq"],), None)])
    assert mind.client.get_event(mind.context, ev["ref"])["text"] == before["text"]


def test_core_02_event_identity_sequence_kind_actor_session_causal_refs(mind):
    # A causal ref names evidence the event's session may see (CONC-07): its own.
    first = mind.event("please ship v1", session="s2")
    second = mind.event("npm test: ok", kind="tool-result", session="s2", actor="npm",
                        causal_refs=[first["ref"]])
    assert second["seq"] == first["seq"] + 1 and second["ref"] == f"@e{second['seq']}"
    ev = mind.client.get_event(mind.context, second["id"])  # by full id
    assert ev["ref"] == second["ref"] and ev["id"] == second["id"]
    assert (ev["kind"], ev["actor"], ev["session"], ev["context"]) == \
        ("tool-result", "npm", "s2", mind.context)
    assert ev["causal_refs"] == [first["ref"]]
    assert ev["time"][-6] in "+-"  # time carries its offset
    assert mind.client.get_event(mind.context, first["ref"])["actor"] == "user-message"


def test_core_03_base_version_and_reason_are_required(mind, expect_rejected):
    mind.tx("(create f (x 1))")
    expect_rejected("TX_INVALID", mind.client.commit, mind.context, "(context-tx (create g))")
    expect_rejected("TX_REASON_REQUIRED", mind.tx, "(retire f)")
    mind.tx("(protect f)")
    expect_rejected("TX_REASON_REQUIRED", mind.tx, "(unprotect f)")
    assert mind.tx("(unprotect f)", reason="no longer needed")["results"][0]["outcome"] == \
        "unprotected"


def test_core_04_invalid_step_rejects_the_whole_transaction(mind, expect_rejected):
    mind.tx("(create release (goal ship-v1) (stage waiting-tests))")
    before = mind.status()
    frame_before = mind.frame("release")
    err = expect_rejected("FRAME_NOT_FOUND", mind.tx,
                          "(revise release (goal ship-v1) (stage packaging)) "
                          "(create other (x 1)) (relate other supports nowhere) (create third)")
    assert err.details["op_index"] == 2 and err.details["ref"] == "nowhere"
    after = mind.status()
    assert after["revision"] == before["revision"]
    assert after["event_count"] == before["event_count"]
    assert after["frames_by_state"] == before["frames_by_state"]
    assert mind.frame("release") == frame_before
    expect_rejected("FRAME_NOT_FOUND", mind.frame, "other")
    expect_rejected("TX_PARSE_ERROR", mind.client.commit, mind.context,
                    "(context-tx (base-version 1) (create x \"unterminated)")
    assert mind.client.audit(mind.context)["match"]


def test_core_05_create_stable_id_and_conflicting_create_rejected(mind, expect_rejected):
    r = mind.tx("(create deployment/current (fact (region cn-hangzhou)))")
    assert r["results"][0]["outcome"] == "created"
    f = mind.frame("deployment/current")
    assert (f["id"], f["revision"], f["state"]) == ("deployment/current", 1, "active")
    again = mind.tx("(create deployment/current (fact (region cn-hangzhou)))")
    assert again["results"][0]["outcome"] == "unchanged"
    expect_rejected("FRAME_EXISTS", mind.tx, "(create deployment/current (fact (region us-east)))")
    assert mind.frame("deployment/current")["body"] == "(fact (region cn-hangzhou))"


def test_core_06_derive_stores_declared_sources(mind, expect_rejected):
    ev = mind.event("release case a: npm test ok, npm run build ok, dist/ verified",
                    kind="tool-result")
    mind.tx(f"(derive release-case-a (from {ev['ref']}) (test \"npm test\"))")
    mind.tx("(derive release-procedure (from release-case-a) (steps \"test, build, verify\"))")
    assert mind.frame("release-case-a")["sources"] == [ev["ref"]]
    assert mind.frame("release-procedure")["sources"] == ["release-case-a"]
    expect_rejected("SOURCE_NOT_FOUND", mind.tx, "(derive x (from @e9999) (y))")
    expect_rejected("SOURCE_NOT_FOUND", mind.tx, "(derive x (from no-such-frame) (y))")
    expect_rejected("TX_INVALID", mind.tx, "(derive x (y))")  # derive needs (from ...)
    expect_rejected("FRAME_NOT_FOUND", mind.frame, "x")


def test_core_07_revise_replaces_whole_body(mind):
    mind.tx("(create release (goal ship-v1) (stage waiting-tests) (owner ana))")
    r = mind.tx("(revise release (goal ship-v1) (stage packaging))")
    f = mind.frame("release")
    assert r["results"][0]["frame_revision"] == 2
    assert (f["id"], f["revision"]) == ("release", 2)
    assert f["body"] == "(goal ship-v1) (stage packaging)"  # owner was not restated: gone


def test_core_07_at_revision_returns_earlier_bodies(mind, expect_rejected):
    mind.tx("(create release (goal ship-v1) (stage waiting-tests))")            # revision 1
    mind.tx("(create other (x))")                                                # revision 2
    mind.tx("(revise release (goal ship-v1) (stage packaging)) (relate other supports release)")
    mind.tx("(revise release (goal ship-v1) (stage shipped))")                   # revision 4
    bodies = {rev: mind.frame("release", at_revision=rev) for rev in (1, 2, 3, 4)}
    assert bodies[1]["body"] == bodies[2]["body"] == "(goal ship-v1) (stage waiting-tests)"
    assert (bodies[3]["body"], bodies[3]["revision"]) == ("(goal ship-v1) (stage packaging)", 2)
    assert bodies[4] == {**mind.frame("release"), "relations": []}
    assert bodies[1]["as_of_revision"] == 1 and bodies[1]["relations"] == []
    expect_rejected("FRAME_NOT_FOUND", mind.frame, "other", at_revision=1)
    expect_rejected("REVISION_NOT_FOUND", mind.frame, "release", at_revision=99)


def test_core_07_release_example(mind):
    """derive / revise / relate / retire @e42 in one transaction, as the README walk-through shows it."""
    mind.tx("(create release (goal ship-v1) (stage waiting-tests))")
    report = mind.event("regression: 120 passed, 0 failed", kind="tool-result")
    mind.activate()
    r = mind.client.commit(mind.context, RELEASE_TX.format(base=mind.revision(),
                                                           ref=report["ref"]))
    assert [x["outcome"] for x in r["results"]] == ["derived", "revised", "related", "retired"]
    assert mind.frame("test-result")["sources"] == [report["ref"]]
    assert mind.frame("release")["body"] == "(goal ship-v1) (stage packaging)"
    assert {"subject": "test-result", "name": "supports", "object": "release"} in \
        mind.frame("release")["relations"]
    assert mind.client.get_event(mind.context, report["ref"])["state"] == "retired"


def test_core_08_retire_observation_at_once_and_still_readable(mind):
    log = mind.event("x" * 5000, kind="tool-result")
    r = mind.tx(f"(retire {log['ref']})", reason="digested")
    assert r["results"][0]["outcome"] == "retired"
    assert r["capacity"]["released_now_bytes"] == 5000
    assert r["capacity"]["released_now"] == [log["ref"]]
    ev = mind.client.get_event(mind.context, log["ref"])
    assert ev["state"] == "retired" and ev["text"] == "x" * 5000


def test_core_09_frame_retirement_window_counted_by_external_inputs(mind):
    mind.tx("(create old-plan (plan a))")
    tick0 = mind.status()["cognitive_tick"]
    r = mind.tx("(retire old-plan)", reason="plan b chosen")
    assert r["results"][0]["outcome"] == "retiring"
    assert r["results"][0]["due_tick"] == tick0 + 8
    assert r["capacity"]["released_after_window"] == ["old-plan"]
    f = mind.frame("old-plan")
    assert f["state"] == "retiring"
    assert f["retire"]["reason"] == "plan b chosen" and f["retire"]["remaining_ticks"] == 8
    # Activations without an external fact and transactions do not move the clock.
    mind.event("thinking on", kind="continuation")
    mind.activate()
    mind.activate()  # an empty batch: a model continuation
    mind.tx("(create unrelated (x 1))")
    assert mind.frame("old-plan")["retire"]["remaining_ticks"] == 8
    mind.tick(7)
    f = mind.frame("old-plan")
    assert f["state"] == "retiring" and f["retire"]["remaining_ticks"] == 1
    act = mind.tick(1)
    assert act["retired_frames"] == ["old-plan"]
    assert mind.frame("old-plan")["state"] == "retired"
    assert mind.status()["cognitive_tick"] == tick0 + 8


def test_core_09_window_is_configurable_per_context(client, request):
    name = f"window-3-{request.node.name}"
    assert client.create_context(name, window=3)["window"] == 3
    from conftest import Mind
    m = Mind(client, name)
    m.tx("(create f (x))")
    assert m.tx("(retire f)", reason="r")["results"][0]["due_tick"] == 3
    m.tick(3)
    assert m.frame("f")["state"] == "retired"


def test_core_10_tick_advances_once_per_batch_with_external_fact(mind):
    assert mind.status()["cognitive_tick"] == 0
    for i in range(3):
        mind.event(f"message {i}")
    act = mind.activate()
    assert act["tick_advanced"] and act["tick"] == 1 and len(act["claimed"]) == 3
    # Empty batch (model continuation), continuation input, receipts: no advance.
    assert not mind.activate()["tick_advanced"]
    mind.event("continue", kind="continuation")
    assert mind.activate()["tick"] == 1
    mind.tx("(create f (x))")
    # A retried input (same request id) is not a new input.
    first = mind.event("approved", kind="approval", request_id="approval-1")
    again = mind.event("approved", kind="approval", request_id="approval-1")
    assert again["replayed"] and again["seq"] == first["seq"]
    act = mind.activate()
    assert act["claimed"] == [first["ref"]] and act["tick"] == 2
    assert not mind.activate()["tick_advanced"]
    assert mind.status()["cognitive_tick"] == 2


def test_core_11_revise_restore_protect_cancel_and_repeat_keeps_due(mind):
    mind.tx("(create a (x)) (create b (x)) (create c (x))")
    r = mind.tx("(retire a b c)", reason="tidy")
    due = {x["target"]: x["due_tick"] for x in r["results"]}
    mind.tick(2)
    again = mind.tx("(retire a)", reason="tidy again")
    assert again["results"][0]["due_tick"] == due["a"]  # original due tick kept
    assert mind.frame("a")["retire"]["reason"] == "tidy"
    out = mind.tx("(revise a (y)) (restore b) (protect c)")
    assert [x["outcome"] for x in out["results"]] == [
        "revised (retire request cancelled)", "restored", "protected (retire request cancelled)"]
    mind.tick(10)
    states = {f: mind.frame(f) for f in "abc"}
    assert all(s["state"] == "active" and s["retire"] is None for s in states.values())
    assert states["c"]["protected"]


def test_core_12_due_retirement_checks_generation(mind):
    mind.tx("(create f (x))")
    mind.tx("(retire f)", reason="first")       # due at 8, generation 1
    mind.tx("(restore f)")
    mind.tick(3)
    r = mind.tx("(retire f)", reason="second")  # due at 11, generation 2
    assert r["results"][0]["due_tick"] == 11
    mind.tick(5)                                 # tick 8: the stale request is void
    f = mind.frame("f")
    assert f["state"] == "retiring" and f["retire"]["generation"] == 2
    mind.tick(3)
    assert mind.frame("f")["state"] == "retired"


INDUCTION_TX = """(context-tx
  (base-version {base})
  (reason "将两次发布经验归纳为可复用流程")
  (derive release-procedure
    (from release-case-a release-case-b)
    (steps "测试通过后构建，核验本次产物，再打包。")
    (single-package (test "npm test") (build "npm run build") (artifact "dist/"))
    (workspace (test "pnpm --filter web test") (build "pnpm --filter web build")
               (artifact "apps/web/dist/"))
    (applicability "先核对当前项目布局和脚本，再选择对应分支。"))
  (relate release-procedure supersedes release-case-a)
  (relate release-procedure supersedes release-case-b)
  (retire release-case-a release-case-b))"""


def test_core_13_induction_successor_retires_cases_at_once(mind):
    mind.tx('(create release-case-a (layout single-package) (test "npm test")) '
            '(create release-case-b (layout workspace) (test "pnpm --filter web test"))')
    r = mind.client.commit(mind.context, INDUCTION_TX.format(base=mind.revision()))
    for case in ("release-case-a", "release-case-b"):
        assert mind.frame(case)["state"] == "retired"
        assert case in r["capacity"]["released_now"]
    assert r["capacity"]["released_after_window"] == []
    assert mind.frame("release-procedure")["state"] == "active"


def test_core_13_successor_in_later_transaction_and_both_conditions_needed(mind):
    mind.tx("(create case-a (x)) (create case-b (x)) (create other (x))")
    mind.tx("(retire case-a case-b)", reason="condense")
    # supersedes without sources: not a successor; sources without supersedes: neither.
    mind.tx("(create s1 (y)) (relate s1 supersedes case-a)")
    mind.tx("(derive s2 (from case-b) (y))")
    assert mind.frame("case-a")["state"] == "retiring"
    assert mind.frame("case-b")["state"] == "retiring"
    r = mind.tx("(relate s2 supersedes case-b)")
    assert mind.frame("case-b")["state"] == "retired"
    assert "case-b" in r["capacity"]["released_now"]
    assert mind.frame("case-a")["state"] == "retiring"


def test_core_13_a_transaction_of_many_frames_retires_what_its_successor_now_cites(mind):
    """The rule's path for a transaction touching more frames than it reads relations of
    one by one: s1 supersedes case-a from before and now cites it; case-a is named by no
    op of the transaction, yet leaves at once. (The frame is found through s1's sources;
    the relations read add nothing the sources miss in states the rule has kept.)"""
    mind.tx("(create case-a (x))")
    mind.tx("(retire case-a)", reason="condense")
    mind.tx("(create s1 (y)) (relate s1 supersedes case-a)")
    assert mind.frame("case-a")["state"] == "retiring"
    r = mind.tx("(revise s1 (from case-a) (y2)) "
                + " ".join(f"(create n{i} (z))" for i in range(20)))
    assert mind.frame("case-a")["state"] == "retired"
    assert "case-a" in r["capacity"]["released_now"]


def test_core_14_protected_content_cannot_be_retired(mind, expect_rejected):
    ev = mind.event("the user's constraint: never deploy on friday")
    mind.tx(f"(create constraint (no-friday-deploys)) (protect constraint {ev['ref']})")
    expect_rejected("FRAME_PROTECTED", mind.tx, "(retire constraint)", reason="cleanup")
    expect_rejected("OBSERVATION_PROTECTED", mind.tx, f"(retire {ev['ref']})", reason="cleanup")
    r = mind.tx("(unprotect constraint) (retire constraint)", reason="superseded by policy")
    assert [x["outcome"] for x in r["results"]] == ["unprotected", "retiring"]


def test_core_15_undelivered_root_request_cannot_be_retired(mind, expect_rejected):
    ask = mind.event("please ship v1 today")
    mind.event("npm test ok", kind="tool-result")
    act = mind.activate()
    assert act["root"] == ask["ref"]
    expect_rejected("ROOT_REQUEST_PROTECTED", mind.tx, f"(retire {ask['ref']})", reason="done?")
    mind.client.deliver(mind.context, act["id"])
    assert mind.tx(f"(retire {ask['ref']})", reason="delivered")["results"][0]["outcome"] == \
        "retired"


def test_core_16_restore_then_revise_in_one_transaction(mind, expect_rejected):
    mind.tx("(create old (v 1)) (create new (v 2)) (relate new supersedes old)")
    mind.tx("(retire old)", reason="replaced")
    mind.tx("(revise new (from old) (v 2))")  # new cites old: the successor rule applies
    assert mind.frame("old")["state"] == "retired"
    expect_rejected("FRAME_RETIRED", mind.tx, "(revise old (v 3))")
    r = mind.tx("(restore old) (revise old (v 3))")
    assert [x["outcome"] for x in r["results"]] == ["restored", "revised"]
    f = mind.frame("old")
    assert f["state"] == "active" and f["body"] == "(v 3)"
    ev = mind.event("log")
    mind.tx(f"(retire {ev['ref']})", reason="r")
    mind.tx(f"(restore {ev['ref']})")
    assert mind.client.get_event(mind.context, ev["ref"])["state"] == "active"


def test_core_17_relate_unrelate_exact_open_named_edges(mind, expect_rejected):
    mind.tx("(create a (x)) (create b (x))")
    mind.tx("(relate a 蕴含 b) (relate a supports b)")
    edges = mind.frame("a")["relations"]
    assert {"subject": "a", "name": "蕴含", "object": "b"} in edges and len(edges) == 2
    mind.tx("(unrelate a supports b)")
    assert mind.frame("b")["relations"] == [{"subject": "a", "name": "蕴含", "object": "b"}]
    expect_rejected("RELATION_NOT_FOUND", mind.tx, "(unrelate b 蕴含 a)")  # exact direction
    assert mind.tx("(relate a 蕴含 b)")["results"][0]["outcome"] == "unchanged"


def test_core_18_place_changes_order_only(mind, expect_rejected):
    mind.tx("(create a (x 1)) (create b (x 2)) (create c (x 3))")
    before = {f["id"]: f for f in mind.client.list_frames(mind.context)["frames"]}
    mind.tx("(place c first) (place a (after b))")
    listed = mind.client.list_frames(mind.context)["frames"]
    assert [f["id"] for f in listed] == ["c", "b", "a"]
    for f in listed:
        assert (f["body"], f["revision"], f["state"]) == \
            (before[f["id"]]["body"], before[f["id"]]["revision"], before[f["id"]]["state"])
    mind.tx("(place c last) (place b (before a))")
    assert [f["id"] for f in mind.client.list_frames(mind.context)["frames"]] == ["b", "a", "c"]
    expect_rejected("PLACE_ANCHOR_INVALID", mind.tx, "(place a (before a))")


def test_core_19_checkpoint_rollback_drop(mind, expect_rejected):
    mind.tx("(create plan (step 1)) (create risk (low))")
    mind.tx("(checkpoint before-restructure)")
    mind.tx("(revise plan (step 2)) (create extra (x)) (relate extra supports plan)")
    stale = mind.revision() - 1
    expect_rejected("EXACT_VERSION_REQUIRED", mind.tx, "(rollback before-restructure)", base=stale)
    r = mind.tx("(rollback before-restructure)")
    assert r["results"][0]["outcome"].startswith("rolled back")
    plan = mind.frame("plan")
    assert plan["body"] == "(step 1)" and plan["revision"] == 3  # revisions keep rising
    expect_rejected("FRAME_NOT_FOUND", mind.frame, "extra")
    assert plan["relations"] == []
    mind.tx("(drop-checkpoint before-restructure)")
    expect_rejected("CHECKPOINT_NOT_FOUND", mind.tx, "(rollback before-restructure)")
    assert mind.client.audit(mind.context)["match"]


def test_core_20_session_attention_atomic_with_mind_changes(mind, expect_rejected):
    mind.event("side task: check the docs", session="side")
    mind.tx("(create f (x))")
    expect_rejected("EXACT_VERSION_REQUIRED", mind.tx, "(retire-session side)",
                    base=mind.revision() - 1, reason="done")
    expect_rejected("TX_REASON_REQUIRED", mind.tx, "(retire-session side)")
    # One invalid op: neither the session nor the frame changes.
    expect_rejected("FRAME_NOT_FOUND", mind.tx, "(retire-session side) (revise ghost (x))",
                    reason="done")
    assert {s["id"]: s["state"] for s in mind.status()["sessions"]}["side"] == "active"
    r = mind.tx("(retire-session side) (revise f (y))", reason="side task done")
    assert [x["outcome"] for x in r["results"]] == ["session retired", "revised"]
    st = {s["id"]: s for s in mind.status()["sessions"]}
    assert st["side"]["state"] == "retired"
    assert mind.client.get_event(mind.context, "@e1")["session"] == "side"  # history stays
    mind.tx("(restore-session side)")
    assert {s["id"]: s["state"] for s in mind.status()["sessions"]}["side"] == "active"


def test_core_21_receipt_and_structured_rejection(mind, expect_rejected):
    mind.tx("(create keep (x)) (create drop (y y y))")
    ev = mind.event("z" * 100, kind="tool-result")
    r = mind.tx(f"(retire drop {ev['ref']})", reason="cleanup")
    assert r["revision"] == mind.revision() and r["base_version"] == r["revision"] - 1
    assert r["capacity"]["released_now_bytes"] == 100
    assert r["capacity"]["released_after_window_bytes"] == len("drop") + len("(y y y)")
    assert r["event_ref"].startswith("@e")
    err = expect_rejected("TX_CONFLICT", mind.tx, "(revise keep (z))", base=0)
    assert err.details["latest"] == r["revision"]
    # Creating `keep` brought its content and its lifecycle into being (CONC-06).
    assert err.details["changed"] == [{"boundary": "frame:keep", "revision": 1},
                                      {"boundary": "life:keep", "revision": 1}]
    err = expect_rejected("FRAME_NOT_FOUND", mind.tx, "(create n (x)) (revise missing (x))")
    assert err.to_dict()["code"] == "NOT_FOUND"
    assert (err.details["op_index"], err.details["op"], err.details["ref"]) == \
        (1, "revise", "missing")


def test_core_21_rollback_receipt_names_what_it_released(mind):
    """A rollback's receipt counts the frames it removes or puts back retired (released now)
    and those it puts back into their window (released after it)."""
    mind.tx("(create keep (x)) (create wait (y y)) (create gone (z))")
    mind.tx("(retire wait gone)", reason="tidy")
    mind.tx("(checkpoint cp)")
    mind.tx("(restore wait gone) (create extra (e e e))")
    r = mind.tx("(rollback cp)")
    cap = r["capacity"]
    # `wait` and `gone` were retiring at the checkpoint; `extra` did not exist yet.
    assert sorted(cap["released_after_window"]) == ["gone", "wait"]
    assert cap["released_now"] == ["extra"]
    assert cap["released_now_bytes"] == len("extra") + len("(e e e)")
    assert cap["released_after_window_bytes"] == len("wait(y y)") + len("gone(z)")
    assert mind.client.audit(mind.context)["match"]
