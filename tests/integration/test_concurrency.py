"""SC-Concurrent: semantic rebase of independent work, rejection of real conflicts."""
from __future__ import annotations

import threading

import grpc
import pytest

from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError


def test_conc_01_independent_boundaries_both_commit(mind):
    mind.tx("(create release (goal ship-v1) (stage waiting-tests)) (create docs (todo api))")
    base = mind.revision()
    a = mind.tx("(revise release (goal ship-v1) (stage packaging))", base=base, session="")
    b = mind.tx("(revise docs (todo none)) (relate docs supports release)", base=base)
    assert not a["rebased"]
    assert b["rebased"] and b["rebased_from"] == base and b["revision"] == base + 2
    assert mind.frame("release")["body"] == "(goal ship-v1) (stage packaging)"
    assert mind.frame("docs")["body"] == "(todo none)"
    assert mind.client.audit(mind.context)["match"]


def test_conc_02_changed_boundary_rejected_with_the_changes(mind, expect_rejected):
    mind.tx("(create release (goal ship-v1) (stage waiting-tests))")
    base = mind.revision()
    mind.tx("(revise release (goal ship-v1) (stage packaging))", base=base)  # tests passed
    err = expect_rejected("TX_CONFLICT", mind.tx,
                          "(revise release (goal ship-v1) (stage paused))", base=base)  # pause!
    assert err.to_dict()["code"] == "ABORTED"
    assert err.details["changed"] == [{"boundary": "frame:release", "revision": base + 1},
                                      {"boundary": "life:release", "revision": base + 1}]
    assert mind.frame("release")["body"] == "(goal ship-v1) (stage packaging)"  # no LWW
    # The agent rereads and merges both facts at the latest version.
    merged = mind.tx("(revise release (goal ship-v1) (stage packaging) (hold user-asked-pause))")
    assert not merged["rebased"]


@pytest.mark.parametrize("ops, reason", [
    ("(create plan (b))", "TX_CONFLICT"),                        # same id, other content
    ("(derive out (from src) (y))", "TX_CONFLICT"),              # its source was revised
    ("(relate a supports src)", None),                           # independent: rebased
    ("(place a first)", None),
    ("(retire a)", None),
    ("(retire src)", "TX_CONFLICT"),                             # src's lifecycle: revised
])
def test_conc_03_incompatible_changes_rejected_independent_rebased(mind, ops, reason):
    mind.tx("(create src (x)) (create a (x))")
    base = mind.revision()
    mind.tx("(create plan (a)) (revise src (x 2))", base=base)
    if reason is None:
        assert mind.tx(ops, base=base, reason="r")["rebased"]
    else:
        with pytest.raises(MorphzError) as info:
            mind.tx(ops, base=base, reason="r")
        assert info.value.reason == reason


def test_conc_03_exact_version_operations_never_rebase(mind, expect_rejected):
    mind.event("side work", session="side")
    mind.tx("(create f (x))")
    base = mind.revision()
    mind.tx("(create g (x))", base=base)
    for ops in ("(checkpoint cp)", "(retire-session side)", "(restore-session side)"):
        expect_rejected("EXACT_VERSION_REQUIRED", mind.tx, ops, base=base, reason="r")


def test_conc_02_k8_writers_racing_on_one_base_one_winner_per_boundary(address, ctx, mind):
    """8 threads, each its own channel, all from one base: on the shared frame exactly one
    wins; each writer's private frame commits (rebased); nothing is last-writer-wins."""
    mind.tx("(create shared (v 0)) " + " ".join(f"(create own-{i} (v 0))" for i in range(8)))
    base = mind.revision()
    results: dict[int, object] = {}
    barrier = threading.Barrier(8)

    def writer(i: int) -> None:
        with grpc.insecure_channel(address) as ch:
            c = TransactionClient(ch, timeout=30)
            barrier.wait()
            try:
                results[i] = c.commit(ctx, f"(context-tx (base-version {base}) "
                                           f"(revise shared (v {i})))")
            except MorphzError as e:
                results[i] = e
            c.commit(ctx, f"(context-tx (base-version {base}) (revise own-{i} (v {i})))")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, r in results.items() if isinstance(r, dict)]
    losers = [r for r in results.values() if isinstance(r, MorphzError)]
    assert len(winners) == 1 and len(losers) == 7
    assert all(e.reason == "TX_CONFLICT" for e in losers)
    assert mind.frame("shared")["body"] == f"(v {winners[0]})"
    assert all(mind.frame(f"own-{i}")["body"] == f"(v {i})" for i in range(8))
    assert mind.revision() == base + 9
    assert mind.client.audit(mind.context)["match"]
