"""SC-Core: the object model, authority, transactions, provenance and attention
(CORE-01..26), black-box through the Driver."""
from __future__ import annotations

from morphz_conformance.registry import CaseRun, case

RELEASE_TX = """(context-tx
  (base-version {base})
  (reason "测试结果已吸收，继续准备发布")
  (derive test-result (from {ref}) (tests passed))
  (revise release (goal ship-v1) (stage packaging))
  (relate test-result supports release)
  (retire {ref}))"""


def _fields(ev):
    return (ev.id, ev.text, ev.kind, ev.time, ev.seq, ev.session, ev.actor, ev.causal_refs)


@case("CORE-01", "events are immutable; corrections are new events")
def core_01_events_are_immutable(t: CaseRun):
    d, ctx = t.driver, t.context()
    ev = d.append(ctx, "s1", "user-message", "the regression report: 120 passed")
    before = d.event(ctx, ev.ref)
    t.tx(ctx, f"(create note (about {ev.ref}))")
    t.tx(ctx, f"(retire {ev.ref})", reason="digested")
    t.tx(ctx, f"(restore {ev.ref})")
    correction = d.append(ctx, "s1", "user-message", "correction: 121 passed",
                          causal_refs=[ev.ref])
    t.eq(_fields(d.event(ctx, ev.ref)), _fields(before), "the event after commits over it")
    t.check(correction.seq > ev.seq and correction.id != ev.id,
            "a correction is a new event with its own id and sequence")
    # The same request id cannot overwrite an event with another text either.
    rid = t.request_id("core01")
    d.append(ctx, "s1", "user-message", "first", request_id=rid)
    t.rejected("IDEMPOTENCY_MISMATCH", d.append, ctx, "s1", "user-message", "second",
               request_id=rid)


@case("CORE-02", "events carry id, @eN sequence, kind, actor, context, session, causal refs")
def core_02_event_identity(t: CaseRun):
    d, ctx = t.driver, t.context()
    first = d.append(ctx, "s2", "user-message", "please ship v1")
    second = d.append(ctx, "s2", "tool-result", "npm test: ok", actor="npm",
                      causal_refs=[first.ref])
    t.eq(second.seq, first.seq + 1, "per-context sequence")
    t.eq(second.ref, f"@e{second.seq}", "the @eN ref")
    ev = d.event(ctx, second.id)  # by its full id
    t.eq((ev.ref, ev.id), (second.ref, second.id), "read by full id")
    t.eq((ev.kind, ev.actor, ev.session, ev.context), ("tool-result", "npm", "s2", ctx),
         "kind, actor, session, context")
    t.eq(list(ev.causal_refs), [first.ref], "causal refs")
    t.check(len(ev.time) > 6 and ev.time[-6] in "+-" or ev.time.endswith("Z"),
            f"the event time carries its offset: {ev.time!r}")


@case("CORE-03", "base-version declared; reason required to retire protected/active or unprotect")
def core_03_base_version_and_reason(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create f (x 1))")
    t.rejected("TX_INVALID", d.commit, ctx, "(context-tx (create g))")
    t.rejected("TX_REASON_REQUIRED", t.tx, ctx, "(retire f)")
    t.tx(ctx, "(protect f)")
    t.rejected("TX_REASON_REQUIRED", t.tx, ctx, "(unprotect f)")
    t.eq(t.tx(ctx, "(unprotect f)", reason="no longer needed").outcomes, ["unprotected"],
         "unprotect with a reason")


@case("CORE-04", "an invalid step rejects the whole transaction, state unchanged")
def core_04_invalid_step_rejects_all(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create release (goal ship-v1) (stage waiting-tests))")
    before, frame_before = d.status(ctx), d.frame(ctx, "release")
    err = t.rejected("FRAME_NOT_FOUND", t.tx, ctx,
                     "(revise release (goal ship-v1) (stage packaging)) "
                     "(create other (x 1)) (relate other supports nowhere) (create third)")
    t.eq(err.details.get("op_index"), 2, "the rejection names the offending op")
    after = d.status(ctx)
    t.eq((after.revision, after.event_count, dict(after.frames_by_state)),
         (before.revision, before.event_count, dict(before.frames_by_state)),
         "revision, events and frames after the rejection")
    t.eq(d.frame(ctx, "release"), frame_before, "the revised frame after the rejection")
    t.rejected("FRAME_NOT_FOUND", d.frame, ctx, "other")
    t.rejected("TX_PARSE_ERROR", d.commit, ctx,
               '(context-tx (base-version 1) (create x "unterminated)')
    t.check(d.audit(ctx).match, "the audit matches after the rejections")


@case("CORE-05", "create makes a stable id; a conflicting create is rejected")
def core_05_create_stable_id(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.eq(t.tx(ctx, "(create deployment/current (fact (region cn-hangzhou)))").outcomes,
         ["created"], "create")
    f = d.frame(ctx, "deployment/current")
    t.eq((f.id, f.revision, f.state), ("deployment/current", 1, "active"), "the new frame")
    t.eq(t.tx(ctx, "(create deployment/current (fact (region cn-hangzhou)))").outcomes,
         ["unchanged"], "the same create again")
    t.rejected("FRAME_EXISTS", t.tx, ctx, "(create deployment/current (fact (region us-east)))")
    t.eq(d.frame(ctx, "deployment/current").body, "(fact (region cn-hangzhou))", "body kept")


@case("CORE-06", "derive stores its declared sources; unknown sources reject")
def core_06_derive_sources(t: CaseRun):
    d, ctx = t.driver, t.context()
    ev = d.append(ctx, "s1", "tool-result", "release case a: npm test ok, build ok")
    t.tx(ctx, f'(derive release-case-a (from {ev.ref}) (test "npm test"))')
    t.tx(ctx, '(derive release-procedure (from release-case-a) (steps "test, build"))')
    t.eq(list(d.frame(ctx, "release-case-a").sources), [ev.ref], "sources of a derive from @eN")
    t.eq(list(d.frame(ctx, "release-procedure").sources), ["release-case-a"],
         "sources of a derive from a frame")
    t.rejected("SOURCE_NOT_FOUND", t.tx, ctx, "(derive x (from @e9999) (y))")
    t.rejected("SOURCE_NOT_FOUND", t.tx, ctx, "(derive x (from no-such-frame) (y))")
    t.rejected("FRAME_NOT_FOUND", d.frame, ctx, "x")


@case("CORE-07", "revise keeps the id, raises the revision, replaces the whole body")
def core_07_revise_replaces_whole_body(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create release (goal ship-v1) (stage waiting-tests) (owner ana))")
    r = t.tx(ctx, "(revise release (goal ship-v1) (stage packaging))")
    t.eq(r.results[0].frame_revision, 2, "the receipt's frame revision")
    f = d.frame(ctx, "release")
    t.eq((f.id, f.revision, f.body), ("release", 2, "(goal ship-v1) (stage packaging)"),
         "the revised frame (a field not restated is gone)")
    t.eq(d.frame(ctx, "release", at_revision=1).body,
         "(goal ship-v1) (stage waiting-tests) (owner ana)", "the body as of revision 1")


@case("CORE-08", "retire @eN leaves the next encoding at once; the event stays readable")
def core_08_retire_observation(t: CaseRun):
    d, ctx = t.driver, t.context()
    log = d.append(ctx, "s1", "tool-result", "x" * 5000)
    t.check(log.ref in d.encoding(ctx, "s1").keys("observation"),
            "the observation is in the encoding before the retire")
    r = t.tx(ctx, f"(retire {log.ref})", reason="digested")
    t.eq(r.outcomes, ["retired"], "retire of an observation")
    t.eq((r.released_now_bytes, list(r.released_now)), (5000, [log.ref]), "released now")
    t.check(log.ref not in d.encoding(ctx, "s1").keys("observation"),
            "the retired observation is gone from the next encoding")
    ev = d.event(ctx, log.ref)
    t.eq((ev.state, ev.text), ("retired", "x" * 5000), "the retired event reads whole")


@case("CORE-09", "a frame retire waits out the window of cognitive ticks, then retires")
def core_09_retirement_window(t: CaseRun):
    d, ctx = t.driver, t.context()
    d.append(ctx, "s1", "user-message", "choose a plan")
    d.activate(ctx, "s1")
    t.tx(ctx, "(create old-plan (plan a))")
    tick0 = d.status(ctx).cognitive_tick
    r = t.tx(ctx, "(retire old-plan)", reason="plan b chosen")
    t.eq((r.outcomes, r.results[0].due_tick), (["retiring"], tick0 + 8), "retiring, due +8")
    t.eq(list(r.released_after_window), ["old-plan"], "released after the window")
    f = d.frame(ctx, "old-plan")
    t.eq((f.state, f.retire.reason, f.retire.remaining_ticks), ("retiring", "plan b chosen", 8),
         "the retiring frame")
    enc = d.encoding(ctx, "s1")
    item = next((i for i in enc.items if i.kind == "frame" and i.key == "old-plan"), None)
    t.check(item is not None and item.state == "retiring" and item.remaining_ticks == 8,
            "the retiring frame stays in the encoding with its remaining window")
    t.tick(ctx, 7)
    t.eq(d.frame(ctx, "old-plan").state, "retiring", "state one tick before due")
    act = t.tick(ctx, 1)
    t.eq(list(act.retired_frames), ["old-plan"], "the activation at the due tick retires it")
    t.eq(d.frame(ctx, "old-plan").state, "retired", "state at the due tick")
    # The window is configurable per context.
    short = t.context(window=3)
    t.tx(short, "(create f (x))")
    t.eq(t.tx(short, "(retire f)", reason="r").results[0].due_tick, 3, "due with window 3")
    t.tick(short, 3)
    t.eq(d.frame(short, "f").state, "retired", "retired after a window of 3")


@case("CORE-10", "cognitive_tick advances once per claimed batch holding an external fact")
def core_10_tick_advances_once_per_batch(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.eq(d.status(ctx).cognitive_tick, 0, "a new context's tick")
    for i in range(3):
        d.append(ctx, "s1", "user-message", f"message {i}")
    act = d.activate(ctx, "s1")
    t.eq((act.tick_advanced, act.tick, len(act.claimed)), (True, 1, 3), "one batch of three")
    t.check(not d.activate(ctx, "s1").tick_advanced, "an empty batch does not advance")
    d.append(ctx, "s1", "continuation", "continue")
    t.eq(d.activate(ctx, "s1").tick, 1, "a continuation does not advance")
    t.tx(ctx, "(create f (x))")
    rid = t.request_id("approval-1")
    first = d.append(ctx, "s1", "approval", "approved", request_id=rid)
    again = d.append(ctx, "s1", "approval", "approved", request_id=rid)
    t.check(again.replayed and again.seq == first.seq, "a retried input is not a new input")
    act = d.activate(ctx, "s1")
    t.eq((list(act.claimed), act.tick), ([first.ref], 2), "the approval's batch")
    t.eq(d.status(ctx).cognitive_tick, 2, "tick after everything")


@case("CORE-11", "inside the window revise/restore/protect cancel; a repeated retire keeps due")
def core_11_window_cancellations(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create a (x)) (create b (x)) (create c (x))")
    r = t.tx(ctx, "(retire a b c)", reason="tidy")
    due = {x.target: x.due_tick for x in r.results}
    t.tick(ctx, 2)
    again = t.tx(ctx, "(retire a)", reason="tidy again")
    t.eq(again.results[0].due_tick, due["a"], "a repeated retire keeps the original due tick")
    t.eq(d.frame(ctx, "a").retire.reason, "tidy", "the original reason")
    out = t.tx(ctx, "(revise a (y)) (restore b) (protect c)")
    t.eq(out.outcomes, ["revised (retire request cancelled)", "restored",
                        "protected (retire request cancelled)"], "the cancellations")
    t.tick(ctx, 10)
    for f in (d.frame(ctx, x) for x in "abc"):
        t.check(f.state == "active" and f.retire is None, f"{f.id} stays active: {f.state}")
    t.check(d.frame(ctx, "c").protected, "c is protected")


@case("CORE-12", "at the due tick a retire applies only if generation and revision are unchanged")
def core_12_due_checks_generation(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create f (x))")
    t.tx(ctx, "(retire f)", reason="first")
    t.tx(ctx, "(restore f)")
    t.tick(ctx, 3)
    t.eq(t.tx(ctx, "(retire f)", reason="second").results[0].due_tick, 11, "the second due tick")
    t.tick(ctx, 5)  # tick 8: the first request's due tick, now void
    f = d.frame(ctx, "f")
    t.eq((f.state, f.retire.generation if f.retire else None), ("retiring", 2),
         "the stale request does not apply")
    t.tick(ctx, 3)
    t.eq(d.frame(ctx, "f").state, "retired", "the current request applies at its due tick")


INDUCTION_TX = """(context-tx
  (base-version {base})
  (reason "将两次发布经验归纳为可复用流程")
  (derive release-procedure (from release-case-a release-case-b)
    (steps "测试通过后构建，核验本次产物，再打包。"))
  (relate release-procedure supersedes release-case-a)
  (relate release-procedure supersedes release-case-b)
  (retire release-case-a release-case-b))"""


@case("CORE-13", "a successor citing and superseding a retiring frame releases it at once")
def core_13_successor_releases_at_once(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, '(create release-case-a (layout single)) (create release-case-b (layout ws))')
    r = d.commit(ctx, INDUCTION_TX.format(base=t.revision(ctx)))
    for name in ("release-case-a", "release-case-b"):
        t.eq(d.frame(ctx, name).state, "retired", f"{name} after the induction")
        t.check(name in r.released_now, f"{name} released now")
    t.eq(list(r.released_after_window), [], "nothing waits for the window")
    # Both conditions are needed: supersedes alone or sources alone keep the window.
    t.tx(ctx, "(create case-a (x)) (create case-b (x))")
    t.tx(ctx, "(retire case-a case-b)", reason="condense")
    t.tx(ctx, "(create s1 (y)) (relate s1 supersedes case-a)")
    t.tx(ctx, "(derive s2 (from case-b) (y))")
    t.eq((d.frame(ctx, "case-a").state, d.frame(ctx, "case-b").state), ("retiring", "retiring"),
         "one condition alone")
    r = t.tx(ctx, "(relate s2 supersedes case-b)")
    t.eq(d.frame(ctx, "case-b").state, "retired", "both conditions in a later transaction")
    t.check("case-b" in r.released_now, "case-b released now")


@case("CORE-14", "retire of protected content is rejected until unprotect")
def core_14_protected_not_retired(t: CaseRun):
    d, ctx = t.driver, t.context()
    ev = d.append(ctx, "s1", "user-message", "never deploy on friday")
    t.tx(ctx, f"(create constraint (no-friday-deploys)) (protect constraint {ev.ref})")
    t.rejected("FRAME_PROTECTED", t.tx, ctx, "(retire constraint)", reason="cleanup")
    t.rejected("OBSERVATION_PROTECTED", t.tx, ctx, f"(retire {ev.ref})", reason="cleanup")
    r = t.tx(ctx, "(unprotect constraint) (retire constraint)", reason="superseded")
    t.eq(r.outcomes, ["unprotected", "retiring"], "unprotect then retire")


@case("CORE-15", "the undelivered root request of the activation cannot be retired")
def core_15_root_request(t: CaseRun):
    d, ctx = t.driver, t.context()
    ask = d.append(ctx, "s1", "user-message", "please ship v1 today")
    d.append(ctx, "s1", "tool-result", "npm test ok")
    act = d.activate(ctx, "s1")
    t.eq(act.root, ask.ref, "the activation's root request")
    t.rejected("ROOT_REQUEST_PROTECTED", t.tx, ctx, f"(retire {ask.ref})", reason="done?")
    d.deliver(ctx, act.id)
    t.eq(t.tx(ctx, f"(retire {ask.ref})", reason="delivered").outcomes, ["retired"],
         "retire after delivery")


@case("CORE-16", "restore brings back a retired frame or observation; restore before revise")
def core_16_restore(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create old (v 1)) (create new (v 2)) (relate new supersedes old)")
    t.tx(ctx, "(retire old)", reason="replaced")
    t.tx(ctx, "(revise new (from old) (v 2))")
    t.eq(d.frame(ctx, "old").state, "retired", "old retired by its successor")
    t.rejected("FRAME_RETIRED", t.tx, ctx, "(revise old (v 3))")
    t.eq(t.tx(ctx, "(restore old) (revise old (v 3))").outcomes, ["restored", "revised"],
         "restore and revise in one transaction")
    f = d.frame(ctx, "old")
    t.eq((f.state, f.body), ("active", "(v 3)"), "the restored frame")
    ev = d.append(ctx, "s1", "user-message", "log")
    t.tx(ctx, f"(retire {ev.ref})", reason="r")
    t.tx(ctx, f"(restore {ev.ref})")
    t.eq(d.event(ctx, ev.ref).state, "active", "a restored observation")


@case("CORE-17", "relate/unrelate add or remove one exact named edge; names are open")
def core_17_relate_unrelate(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create a (x)) (create b (x))")
    t.tx(ctx, "(relate a 蕴含 b) (relate a supports b)")
    edges = {(r.subject, r.name, r.object) for r in d.frame(ctx, "a").relations}
    t.eq(edges, {("a", "蕴含", "b"), ("a", "supports", "b")}, "edges after relate")
    t.tx(ctx, "(unrelate a supports b)")
    t.eq([(r.subject, r.name, r.object) for r in d.frame(ctx, "b").relations],
         [("a", "蕴含", "b")], "edges after unrelate")
    t.rejected("RELATION_NOT_FOUND", t.tx, ctx, "(unrelate b 蕴含 a)")  # exact direction


@case("CORE-18", "place changes projection order only, never meaning")
def core_18_place_order_only(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create a (x 1)) (create b (x 2)) (create c (x 3))")
    before = {f.id: (f.body, f.revision, f.state) for f in d.frames(ctx)}
    t.tx(ctx, "(place c first) (place a (after b))")
    listed = d.frames(ctx)
    t.eq([f.id for f in listed], ["c", "b", "a"], "order after place")
    t.eq({f.id: (f.body, f.revision, f.state) for f in listed}, before, "frames unchanged")
    t.rejected("PLACE_ANCHOR_INVALID", t.tx, ctx, "(place a (before a))")


@case("CORE-19", "checkpoint, rollback (exact latest version), drop-checkpoint")
def core_19_checkpoint_rollback(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create plan (step 1)) (create risk (low))")
    t.tx(ctx, "(checkpoint before-restructure)")
    t.tx(ctx, "(revise plan (step 2)) (create extra (x)) (relate extra supports plan)")
    stale = t.revision(ctx) - 1
    t.rejected("EXACT_VERSION_REQUIRED", t.tx, ctx, "(rollback before-restructure)", base=stale)
    r = t.tx(ctx, "(rollback before-restructure)")
    t.check(r.outcomes[0].startswith("rolled back"), f"rollback outcome {r.outcomes}")
    plan = d.frame(ctx, "plan")
    t.eq((plan.body, plan.relations), ("(step 1)", ()), "the rolled-back frame")
    t.rejected("FRAME_NOT_FOUND", d.frame, ctx, "extra")
    t.tx(ctx, "(drop-checkpoint before-restructure)")
    t.rejected("CHECKPOINT_NOT_FOUND", t.tx, ctx, "(rollback before-restructure)")
    t.check(d.audit(ctx).match, "the audit matches after a rollback")


@case("CORE-20", "retire-session/restore-session keep history, are atomic, need the exact version")
def core_20_session_attention(t: CaseRun):
    d, ctx = t.driver, t.context()
    side = d.append(ctx, "side", "user-message", "side task: check the docs")
    t.tx(ctx, "(create f (x))")
    t.rejected("EXACT_VERSION_REQUIRED", t.tx, ctx, "(retire-session side)",
               base=t.revision(ctx) - 1, reason="done")
    t.rejected("TX_REASON_REQUIRED", t.tx, ctx, "(retire-session side)")
    t.rejected("FRAME_NOT_FOUND", t.tx, ctx, "(retire-session side) (revise ghost (x))",
               reason="done")
    t.eq(d.status(ctx).session("side").state, "active", "the session after the rejection")
    r = t.tx(ctx, "(retire-session side) (revise f (y))", reason="side task done")
    t.eq(r.outcomes, ["session retired", "revised"], "retire-session with a Mind change")
    t.eq(d.status(ctx).session("side").state, "retired", "the retired session")
    t.eq(d.event(ctx, side.ref).session, "side", "the session's history stays")
    t.tx(ctx, "(restore-session side)")
    t.eq(d.status(ctx).session("side").state, "active", "the restored session")


@case("CORE-21", "a commit returns revision and structured receipt; a rejection a structured reason")
def core_21_receipt_and_rejection(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create keep (x)) (create drop (y y y))")
    ev = d.append(ctx, "s1", "tool-result", "z" * 100)
    r = t.tx(ctx, f"(retire drop {ev.ref})", reason="cleanup")
    t.eq((r.revision, r.base_version), (t.revision(ctx), r.revision - 1), "revisions")
    t.eq(r.released_now_bytes, 100, "released now (the observation)")
    t.eq(r.released_after_window_bytes, len("drop") + len("(y y y)"),
         "released after the window (the frame)")
    t.check(r.event_ref.startswith("@e"), f"the transaction's event ref {r.event_ref!r}")
    err = t.rejected("TX_CONFLICT", t.tx, ctx, "(revise keep (z))", base=0)
    t.eq(err.details.get("latest"), r.revision, "the conflict names the latest revision")
    err = t.rejected("FRAME_NOT_FOUND", t.tx, ctx, "(create n (x)) (revise missing (x))")
    t.eq((err.details.get("op_index"), err.details.get("ref")), (1, "missing"),
         "the rejection names the op and the ref")


@case("CORE-22", "runtime facts and agent-written conclusions are distinguishable")
def core_22_runtime_and_agent_parts(t: CaseRun):
    d, ctx = t.driver, t.context()
    report = d.append(ctx, "s1", "tool-result", "regression: 120 passed")
    t.tx(ctx, "(create release (goal ship-v1))")
    t.tx(ctx, f"(derive test-result (from {report.ref}) (tests passed)) "
              "(relate test-result supports release)")
    e = d.encoding(ctx, "s1")
    for it in e.items:
        t.check(it.parts, f"item {it.kind} {it.key} names no owner of its parts")
        for p in it.parts:
            t.check(p.owner in ("runtime", "agent"), f"owner {p.owner!r}")
            t.check(e.text[p.start:p.end].startswith(f"({p.owner}"),
                    f"part of {it.key} is not marked ({p.owner} ...) in the text")
    frame = next(i for i in e.items if i.kind == "frame" and i.key == "release")
    owners = {p.owner: e.text[p.start:p.end] for p in frame.parts}
    t.check("goal" in owners.get("agent", "") and "goal" not in owners.get("runtime", ""),
            "the frame body is the agent's part, its revision the runtime's")
    obs = next(i for i in e.items if i.kind == "observation" and i.key == report.ref)
    t.eq({p.owner for p in obs.parts}, {"runtime"}, "an observation is a runtime fact")


@case("CORE-23", "a source is visible only once it exists and the causal scope may see it")
def core_23_visibility(t: CaseRun):
    d, ctx = t.driver, t.context()
    own = d.append(ctx, "s1", "user-message", "mine")
    other = d.append(ctx, "s2", "user-message", "another session's evidence")
    e = d.encoding(ctx, "s1")
    late = d.append(ctx, "s1", "user-message", "arrived after the claim")
    again = d.encoding(ctx, "s1", activation=e.activation)
    t.check(own.ref in e.keys("observation"), "the session's own claimed input is visible")
    t.check(other.ref not in e.keys("observation"), "another session's input is not visible")
    t.check(late.ref not in again.keys("observation"),
            "an input not claimed yet is not visible to the open activation")
    t.check(late.ref in d.encoding(ctx, "s1").keys("observation"),
            "the next activation claims and shows it")


@case("CORE-24", "previews are marked as previews; the @eN ref reads the full event")
def core_24_previews_marked(t: CaseRun):
    d, ctx = t.driver, t.context()
    whole = "".join(f"line {i:05d}: build log 结果\n" for i in range(4000))
    ref = d.append(ctx, "s1", "tool-result", whole).ref
    e = d.encoding(ctx, "s1", preview_bytes=2048)
    it = e.item("observation", ref)
    t.check(it is not None, "the large observation is in the encoding")
    t.eq(it.residency, "preview", "the large observation's residency")
    t.check(it.shown_bytes <= 2048 and it.total_bytes == len(whole.encode()),
            f"shown {it.shown_bytes} of {it.total_bytes} bytes")
    t.check(whole not in e.text, "the preview does not stand in for the whole text")
    t.check("preview" in e.span(it) and ref in e.span(it),
            "the preview is marked as such in the text and names its ref")
    t.eq(d.event(ctx, ref).text, whole, "the ref reads the full event")
    small = d.append(ctx, "s1", "user-message", "short").ref
    t.eq(d.encoding(ctx, "s1").item("observation", small).residency, "full",
         "a small observation is shown whole")


@case("CORE-25", "resource pressure is a signal; the runtime never rewrites a frame body")
def core_25_pressure_is_a_signal(t: CaseRun):
    d, ctx = t.driver, t.context()
    d.append(ctx, "s1", "user-message", "start")
    body = " ".join(f'(step{i} "{"detail " * 30}")' for i in range(6))
    t.tx(ctx, f"(create procedure {body})")
    d.activate(ctx, "s1")
    logs = [d.append(ctx, "s1", "tool-result", "x" * 1500).ref for _ in range(3)]
    size = d.encoding(ctx, "s1").bytes
    budget = size * 100 // 95  # 95% full
    before = d.frame(ctx, "procedure")
    e = d.encoding(ctx, "s1", budget_bytes=budget)
    t.eq((e.pressure.used_bytes, e.pressure.limit_bytes), (e.bytes, budget), "pressure figures")
    t.check(e.pressure.level in ("elevated", "maintenance"),
            f"pressure at 95% is signalled: {e.pressure.level}")
    t.eq(d.frame(ctx, "procedure"), before, "the frame under pressure")
    item = e.item("frame", "procedure")
    t.check(item is not None and before.body in e.span(item),
            "the frame body appears as the agent wrote it")
    t.tx(ctx, f"(retire {' '.join(logs)})", reason="logs digested")
    after = d.encoding(ctx, "s1", budget_bytes=budget)
    t.eq(after.pressure.level, "normal", "pressure after the agent retired the logs")
    # Over budget, the runtime refuses rather than rewriting or dropping the frame.
    t.rejected("ENCODING_BUDGET_EXCEEDED", d.encoding, ctx, "s1", budget_bytes=1024)
    t.eq(d.frame(ctx, "procedure"), before, "the frame after an over-budget encoding")


@case("CORE-26", "the encoding's regions in the seeds' physical order")
def core_26_region_order(t: CaseRun):
    d, ctx = t.driver, t.context()
    d.append(ctx, "s1", "user-message", "hello")
    t.tx(ctx, "(create f (x))")
    order = ("protocol", "evaluation-profile", "inbox", "observation-state", "mind",
             "session-directory", "kernel", "cognitive-capabilities",
             "evaluation-environment", "evaluate")
    e = d.encoding(ctx, "s1", capabilities=True)
    t.eq(list(e.regions), list(order), "the regions with the optional one")
    plain = d.encoding(ctx, "s1")
    t.eq(list(plain.regions), [r for r in order if r != "cognitive-capabilities"],
         "the regions without the optional one")
    t.check(plain.text.rstrip().endswith(")") and "(evaluate" in plain.text,
            "the encoding ends with the evaluate region")
