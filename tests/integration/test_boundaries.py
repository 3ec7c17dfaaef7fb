"""CONC-06: every boundary an operation actually changes is stamped with the revision (or,
for a window retirement, the revision and tick) that changed it; a transaction that read
before that change and touches the boundary is rejected, never applied over it."""
from __future__ import annotations

from conftest import Mind


def _changed(err) -> dict:
    return {c["boundary"]: c for c in err.details["changed"]}


def test_conc_06_rollback_is_not_overwritten_by_a_stale_revise(mind, expect_rejected):
    """The lost update as a new user met it: create a; checkpoint cp; revise a; rollback cp
    at base 3; then revise a at base 3 must be rejected, and the rolled-back body survive."""
    mind.tx("(create a (v original))")                       # revision 1
    mind.tx("(checkpoint cp)")                                # 2
    mind.tx("(revise a (v changed))")                         # 3
    mind.tx("(rollback cp)", base=3)                          # 4
    err = expect_rejected("TX_CONFLICT", mind.tx, "(revise a (v stale))", base=3)
    assert err.to_dict()["code"] == "ABORTED"
    assert _changed(err)["frame:a"] == {"boundary": "frame:a", "revision": 4}
    assert mind.frame("a")["body"] == "(v original)"
    assert mind.revision() == 4
    assert mind.client.audit(mind.context)["match"]


def test_conc_06_rollback_stamps_edges_order_lifecycles_and_sources(mind, expect_rejected):
    mind.tx("(create a (x)) (create b (y)) (derive c (from a) (z)) (relate a supports b)")
    mind.tx("(checkpoint cp)")
    mind.tx("(unrelate a supports b) (place b first) (retire a) (revise c (from b) (z))",
            reason="restructure")
    rollback = mind.tx("(rollback cp)")["revision"]
    stale = rollback - 1
    for ops, boundary in [("(relate a supports b)", "edge:a supports b"),
                          ("(place a first)", "order"),
                          ("(restore a)", "life:a"),
                          ("(derive d (from c) (w))", "frame:c")]:
        err = expect_rejected("TX_CONFLICT", mind.tx, ops, base=stale)
        assert _changed(err)[boundary]["revision"] == rollback, (ops, err.details)
    # What the rollback did not change still rebases.
    assert mind.tx("(create fresh (x))", base=stale)["rebased"]
    frames = {f["id"]: f for f in mind.client.list_frames(mind.context)["frames"]}
    assert frames["a"]["state"] == "active" and frames["c"]["sources"] == ["a"]
    assert mind.client.audit(mind.context)["match"]


def test_conc_06_session_attention_is_a_boundary(mind, expect_rejected):
    mind.event("side work", session="side")
    mind.tx("(create f (x))")
    base = mind.revision()
    mind.tx("(retire-session side)", reason="side task done")
    # A retired session's evaluations no longer commit.
    expect_rejected("SESSION_RETIRED", mind.tx, "(revise f (side))", base=base, session="side")
    restored = mind.tx("(restore-session side)")["revision"]
    # Its evaluation read before the session's attention changed twice: rejected.
    err = expect_rejected("TX_CONFLICT", mind.tx, "(revise f (side))", base=base,
                          session="side")
    assert _changed(err)["session:side"]["revision"] == restored
    # The same transaction from another session, or read after the change, commits.
    assert mind.tx("(revise f (main))", base=base, session="")["rebased"]
    assert not mind.tx("(create g (side))", session="side")["rebased"]
    assert mind.client.audit(mind.context)["match"]


def _retiring(client, ctx: str, window: int = 1) -> Mind:
    """A context whose frame `old` is `window` ticks from the end of its window."""
    client.create_context(ctx, window=window)
    m = Mind(client, ctx)
    m.tx("(create old (x)) (create other (y))")
    m.tx("(retire old)", reason="digested")
    return m


def test_conc_06_window_retirement_is_never_undone_unseen(client, ctx, expect_rejected):
    m = _retiring(client, ctx + "-w")
    base = m.revision()
    act = m.tick(1)                                          # the window runs out
    assert act["retired_frames"] == ["old"] and m.revision() == base
    # Read before the retirement (no read tick, or an earlier one): rejected with the stamp.
    err = expect_rejected("TX_CONFLICT", m.tx, "(restore old)", base=base)
    assert _changed(err)["life:old"] == {"boundary": "life:old", "revision": base,
                                         "tick": act["tick"]}
    early = f"(base-tick {act['tick'] - 1}) (restore old)"
    expect_rejected("TX_CONFLICT", m.tx, early, base=base)
    # Read after it (the activation's tick, or a later base-tick): the agent saw it.
    ok = m.tx(f"(base-tick {act['tick']}) (revise other (z))", base=base)
    assert not ok["rebased"]
    assert m.frame("old")["state"] == "retired"
    assert client.audit(ctx + "-w")["match"]


def test_conc_06_window_retirement_seen_through_the_evaluations_activation(client, ctx,
                                                                        expect_rejected):
    m = _retiring(client, ctx + "-a", window=2)
    base = m.revision()
    m.event("a question", session="s1")
    earlier = m.activate("s1")["id"]      # an evaluation that read before the window ran out
    act = m.tick(1, session="s2")         # another session's input advances the clock
    assert act["retired_frames"] == ["old"]
    err = expect_rejected("TX_CONFLICT", client.commit, ctx + "-a",
                          f"(context-tx (base-version {base}) (restore old))",
                          activation=earlier)
    assert _changed(err)["life:old"]["tick"] == act["tick"]
    # The evaluation that claimed the tick saw the retirement: its restore is deliberate.
    r = client.commit(ctx + "-a", f"(context-tx (base-version {base}) (restore old))",
                      activation=act["id"])
    assert r["revision"] == base + 1
    committed = client.get_event(ctx + "-a", r["event_ref"])
    assert (committed["session"], committed["activation"]) == ("s2", act["id"])
    expect_rejected("CAUSAL_SCOPE_VIOLATION", client.commit, ctx + "-a",
                    f"(context-tx (base-version {base + 1}) (revise other (q)))",
                    session="s1", activation=act["id"])
    expect_rejected("BASE_TICK_AHEAD", m.tx, f"(base-tick {act['tick'] + 1}) (revise other (q))")
    assert client.audit(ctx + "-a")["match"]


def test_conc_06_rollback_needs_to_have_seen_the_window_retirements(client, ctx,
                                                                   expect_rejected):
    m = _retiring(client, ctx + "-r")
    m.tx("(checkpoint cp)")
    base = m.revision()
    act = m.tick(1)
    assert act["retired_frames"] == ["old"]
    # At the exact latest revision, but read before the window ran out: the rollback
    # would bring `old` back without anyone having seen it leave.
    err = expect_rejected("TX_CONFLICT", m.tx, "(rollback cp)", base=base)
    assert _changed(err)["window"] == {"boundary": "window", "revision": base,
                                       "tick": act["tick"]}
    assert m.frame("old")["state"] == "retired"
    r = m.tx(f"(base-tick {act['tick']}) (rollback cp)", base=base)
    assert r["revision"] == base + 1 and m.frame("old")["state"] == "retiring"
    assert client.audit(ctx + "-r")["match"]


def test_conc_06_cli_commit_names_its_evaluation(address, client, ctx):
    """`morphz context tx --activation aN`: the evaluation's tick is the read tick."""
    from tests.integration.test_cli import assert_error, run_cli, run_json
    m = _retiring(client, ctx + "-cli")
    base = m.revision()
    act = m.tick(1)
    c = ("--context", ctx + "-cli")
    tx = f"(context-tx (base-version {base}) (restore old))"
    err = assert_error(run_cli("context", "tx", *c, "-", "--format=json", address=address,
                               stdin=tx), "ABORTED", "TX_CONFLICT")
    assert err["details"]["changed"][0]["tick"] == act["tick"]
    receipt = run_json("context", "tx", *c, "--activation", act["id"], "-", address=address,
                       stdin=tx)
    assert receipt["revision"] == base + 1
