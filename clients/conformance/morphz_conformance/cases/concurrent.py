"""SC-Concurrent: semantic rebase of independent work, rejection of real conflicts,
causal scopes of sessions (CONC-*), through the Driver."""
from __future__ import annotations

from morphz_conformance.registry import CaseRun, case


def _boundaries(err) -> dict[str, dict]:
    return {c.get("boundary"): c for c in err.details.get("changed") or []
            if isinstance(c, dict)}


@case("CONC-01", "two transactions on independent boundaries both commit; the older rebases")
def conc_01_independent_both_commit(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create release (goal ship-v1) (stage waiting-tests)) (create docs (todo api))")
    base = t.revision(ctx)
    a = t.tx(ctx, "(revise release (goal ship-v1) (stage packaging))", base=base)
    b = t.tx(ctx, "(revise docs (todo none)) (relate docs supports release)", base=base)
    t.check(not a.rebased and b.rebased, "the second, older-based transaction is rebased")
    t.eq(b.revision, base + 2, "the rebased transaction's revision")
    t.eq((d.frame(ctx, "release").body, d.frame(ctx, "docs").body),
         ("(goal ship-v1) (stage packaging)", "(todo none)"), "both changes applied")
    t.check(d.audit(ctx).match, "the audit matches")


@case("CONC-02", "a changed read/written boundary rejects with the changes listed; no LWW")
def conc_02_changed_boundary_rejected(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create release (goal ship-v1) (stage waiting-tests))")
    base = t.revision(ctx)
    t.tx(ctx, "(revise release (goal ship-v1) (stage packaging))", base=base)
    err = t.rejected("TX_CONFLICT", t.tx, ctx, "(revise release (goal ship-v1) (stage paused))",
                     base=base)
    changed = _boundaries(err)
    t.check("frame:release" in changed, f"the changed boundaries name frame:release: {changed}")
    t.eq(changed["frame:release"].get("revision"), base + 1, "the boundary's revision")
    t.eq(d.frame(ctx, "release").body, "(goal ship-v1) (stage packaging)",
         "the stale transaction was not applied (last writer did not win)")
    merged = t.tx(ctx, "(revise release (goal ship-v1) (stage packaging) (hold paused))")
    t.check(not merged.rebased, "the reread and merged transaction commits")


@case("CONC-03", "incompatible concurrent changes are rejected; independent ones rebase")
def conc_03_incompatible_rejected(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create src (x)) (create a (x))")
    base = t.revision(ctx)
    t.tx(ctx, "(create plan (a)) (revise src (x 2))", base=base)
    for ops in ("(create plan (b))",             # the same id created with other content
                "(derive out (from src) (y))",   # its declared source changed
                "(revise src (x 3))"):           # the same frame revision changed
        t.rejected("TX_CONFLICT", t.tx, ctx, ops, base=base, reason="r")
    t.rejected("FRAME_NOT_FOUND", d.frame, ctx, "out")
    t.eq(d.frame(ctx, "plan").body, "(a)", "the first create stands")
    t.check(t.tx(ctx, "(relate a supports src)", base=base).rebased,
            "an independent change at the same base is rebased")


@case("CONC-04", "a late tool result returns to the causal scope that made the call")
def conc_04_late_result_returns_to_its_scope(t: CaseRun):
    d, ctx = t.driver, t.context()
    d.append(ctx, "s1", "user-message", "deploy v1 to staging")
    first = d.encoding(ctx, "s1")
    call = d.append(ctx, "s1", "action", "deploy --env staging", activation=first.activation)
    t.eq((call.session, call.activation), ("s1", first.activation), "the call's scope")
    d.deliver(ctx, first.activation)
    d.append(ctx, "s2", "user-message", "what is the weather")
    busy = d.encoding(ctx, "s2")  # s2 is the active session now
    got = d.append(ctx, "", "tool-result", "deploy: staging is live", causal_refs=[call.ref])
    t.eq((got.session, got.returned_to), ("s1", "session"),
         "the result returns to the issuing session, not the active one")
    again = d.encoding(ctx, "s2", activation=busy.activation)
    t.check(got.ref not in again.keys("observation"), "the active session does not see it")
    t.check(got.ref in d.encoding(ctx, "s1").keys("observation"),
            "the issuing session's next evaluation claims it")


@case("CONC-05", "cross-session messages name source and target and import no transcript")
def conc_05_messages(t: CaseRun):
    d, ctx = t.driver, t.context()
    private = d.append(ctx, "s1", "user-message", "s1 private: rollback password is hunter2")
    d.encoding(ctx, "s1")
    d.append(ctx, "s2", "user-message", "ready when you are")
    d.encoding(ctx, "s2")
    msg = d.append(ctx, "s1", "message", "please review the release notes",
                   target_session="s2")
    ev = d.event(ctx, msg.ref)
    t.eq((ev.kind, ev.session), ("message", "s1"), "the message's source")
    e = d.encoding(ctx, "s2")
    t.check(msg.ref in e.keys("observation"), "the target's evaluation sees the message")
    t.check("please review the release notes" in e.text, "the message text reaches the target")
    t.check("hunter2" not in e.text and private.ref not in e.keys("observation"),
            "the source's other evidence does not reach the target")
    t.rejected("SESSION_NOT_FOUND", d.append, ctx, "s1", "message", "anyone?",
               target_session="nobody")


@case("CONC-06", "every changed boundary is stamped; a transaction based before it is rejected")
def conc_06_boundaries_stamped(t: CaseRun):
    d, ctx = t.driver, t.context()
    # A rollback stamps what it changed.
    t.tx(ctx, "(create a (v original))")
    t.tx(ctx, "(checkpoint cp)")
    t.tx(ctx, "(revise a (v changed))")
    base = t.revision(ctx)
    rollback = t.tx(ctx, "(rollback cp)").revision
    err = t.rejected("TX_CONFLICT", t.tx, ctx, "(revise a (v stale))", base=base)
    t.eq(_boundaries(err).get("frame:a", {}).get("revision"), rollback,
         "frame:a stamped by the rollback")
    t.eq(d.frame(ctx, "a").body, "(v original)", "the rolled-back body survives")
    # A window retirement stamps the frame's lifecycle.
    w = t.context(window=1)
    t.tx(w, "(create old (x)) (create other (y))")
    t.tx(w, "(retire old)", reason="digested")
    base = t.revision(w)
    act = t.tick(w, 1)
    t.eq(list(act.retired_frames), ["old"], "the window ran out")
    t.rejected("TX_CONFLICT", t.tx, w, "(restore old)", base=base)
    t.eq(d.frame(w, "old").state, "retired", "the retirement was not undone unseen")
    # Session attention is a boundary too.
    s = t.context()
    d.append(s, "side", "user-message", "side work")
    t.tx(s, "(create f (x))")
    base = t.revision(s)
    t.tx(s, "(retire-session side)", reason="side task done")
    t.tx(s, "(restore-session side)")
    t.rejected("TX_CONFLICT", t.tx, s, "(revise f (side))", base=base, session="side")
    t.check(d.audit(ctx).match and d.audit(w).match and d.audit(s).match, "audits match")


@case("CONC-07", "an evaluation sees only its causal scope plus the shared Mind")
def conc_07_causal_scope(t: CaseRun):
    d, ctx = t.driver, t.context()
    private = d.append(ctx, "s2", "user-message", "s2 private: disk is 91% full")
    d.append(ctx, "s1", "user-message", "s1 request")
    t.tx(ctx, "(create capacity (disk unknown))")
    t.rejected("SOURCE_NOT_FOUND", t.tx, ctx, f"(derive disk (from {private.ref}) (full 91))",
               session="s1")
    e = d.encoding(ctx, "s1")
    t.check(private.ref not in e.keys("observation") and "91%" not in e.text,
            "s1's encoding does not show s2's evidence")
    t.check("capacity" in e.keys("frame"), "the shared Mind is visible")
    # Its own session may cite it; the commit promotes it into the shared Mind.
    t.tx(ctx, f"(derive disk (from {private.ref}) (full 91))", session="s2")
    t.check("disk" in d.encoding(ctx, "s1").keys("frame"), "the promoted frame is shared")
