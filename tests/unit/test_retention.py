"""Retention policies (PRIV-04; services/transaction/core/retention.py) over the
transaction core and a real in-memory store: the policy's text, its change as a `policy`
event (audited, replayed), what applying it takes (raw content of its kinds past its
age, never protected inputs, the sources of active frames, nor a frame body), a cancelled
application that keeps its committed steps and still rewrites the store, and the timer's
round (one job per context with a policy, owned here)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from morphz.services.transaction.core import erasure
from morphz.services.transaction.core.engine import TransactionCore
from morphz.services.transaction.core.retention import Retention, Schedule
from morphz.services.transaction.jobs import RETENTION, transaction_jobs
from morphz.services.transaction.retention_timer import RETENTION_CALLER, RetentionTimer
from morphz.shared.auth import IN_PROCESS_CALLER, TOKEN, Caller
from morphz.shared.deadline import Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.storage.memory_store import MemoryStore

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
POLICY = "(retention (kinds tool-result external) (days 30))"
ME = IN_PROCESS_CALLER
ALICE, BOB = Caller("alice", TOKEN), Caller("bob", TOKEN)


class Reclaims(MemoryStore):
    """An in-memory store that counts the rewrites an erasure asks of it."""

    def __init__(self) -> None:
        super().__init__()
        self.reclaims = 0

    def reclaim(self, context: str = "") -> dict:
        self.reclaims += 1
        return {"engine": "memory", "bytes_before": 0, "bytes_after": 0, "duration_ms": 0}


def core_at(store=None, every: float = 0) -> TransactionCore:
    return TransactionCore(store or Reclaims(), clock=lambda: NOW,
                           retention_schedule=Schedule(every))


def ago(days: float) -> str:
    return (NOW - timedelta(days=days)).isoformat()


def reason(fn, *args, **kwargs) -> str:
    with pytest.raises(MorphzError) as info:
        fn(*args, **kwargs)
    return info.value.reason


@pytest.mark.parametrize("text, field_or_policy", [
    (POLICY, "(retention (kinds external tool-result) (days 30))"),
    ('(retention (days 7) (kinds "user-message" approval approval))',
     "(retention (kinds approval user-message) (days 7))"),
    ("(retention (kinds tool-result))", "retention"),
    ("(retention (kinds frames) (days 3))", "retention"),
    ("(retention (kinds external) (days 0))", "retention"),
    ("(retention (kinds external) (days 36501))", "retention"),
    ("(retention (kinds external) (days 2) (days 3))", "retention"),
    ("(retention (kinds external) (hours 3))", "retention"),
    ("(keep (kinds external) (days 3))", "retention"),
    ("(retention (kinds external) (days 3)", "retention"),
    ("", "retention"),
])
def test_priv_04_a_policy_reads_one_form_and_renders_canonically(text, field_or_policy):
    if field_or_policy.startswith("("):
        policy = Retention.parse(text)
        assert policy.text() == field_or_policy
        assert Retention.parse(policy.text()) == policy
    else:
        with pytest.raises(MorphzError) as info:
            Retention.parse(text)
        assert (info.value.reason, info.value.details["field"]) == (
            "CONTEXT_INPUT_INVALID", field_or_policy)
    assert Retention.parse(" none ") is None


def test_priv_04_the_policy_is_an_administrators_policy_event_audited_and_replayed():
    core = core_at(every=3600)
    core.create_context("c", caller=ALICE)
    assert core.status("c", caller=ALICE).retention is None
    assert reason(core.set_policy, "c", "retention", "", [], retention_policy=POLICY,
                  caller=BOB) == "FORBIDDEN"
    assert reason(core.set_policy, "c", "retention", "bob", [], retention_policy=POLICY,
                  caller=ALICE) == "CONTEXT_INPUT_INVALID"
    assert reason(core.set_policy, "c", "grant", "bob", ["read"], retention_policy=POLICY,
                  caller=ALICE) == "CONTEXT_INPUT_INVALID"
    done = core.set_policy("c", "retention", "", [], retention_policy=POLICY, caller=ALICE)
    view = done.retention
    assert (view.policy, view.kinds, view.days, view.set_at) == (
        "(retention (kinds external tool-result) (days 30))", ("external", "tool-result"),
        30, done.event_ref)
    # The timer's next multiple of an hour after the core's clock.
    assert (view.next_due, view.every_seconds) == ("2026-06-01T13:00:00+00:00", 3600)
    assert [g.principal for g in done.grants] == ["alice"]  # the policy row is no grant
    assert core.status("c", caller=ALICE).retention == view
    assert core.get_policy("c", caller=ALICE).retention == view
    assert core.audit("c", caller=ALICE).match
    assert core.rebuild_projections("c", caller=ALICE).rewritten == {}
    assert core.set_policy("c", "retention", "", [], retention_policy="none",
                           caller=ALICE).retention is None
    assert core.status("c", caller=ALICE).retention is None and core.audit("c",
                                                                          caller=ALICE).match
    assert reason(core.apply_retention, "c", caller=ALICE) == "RETENTION_NOT_SET"


def test_priv_04_applying_takes_raw_content_past_its_age_never_what_it_keeps():
    core = core_at()
    core.create_context("c", caller=ME)
    add = lambda kind, days, text="", **kw: core.append_event(  # noqa: E731
        "c", "s1", kind, text or f"{kind} of {days} days ago", occurred_at=ago(days)
        if days is not None else "", caller=ME, **kw).ref
    old_tool, old_ext, young = add("tool-result", 45), add("external", 31), add("external", 29)
    old_user, protected = add("user-message", 60), add("tool-result", 50)
    cited, gone = add("external", 70), add("tool-result", 80)
    secret, now = add("external", 40, secret=True), add("tool-result", None)
    core.commit("c", f"""(context-tx (base-version 0) (protect {protected})
      (derive kept (from {cited}) (why cited)) (derive dropped (from {gone}) (why old)))""",
                caller=ME)
    core.commit("c", '(context-tx (base-version 1) (retire dropped) (reason "done"))',
                caller=ME)
    core.set_policy("c", "retention", "", [], retention_policy=POLICY, caller=ME)
    done = core.apply_retention("c", caller=ME)
    erased = {old_tool, old_ext, gone, secret}
    assert done.erased_events == 4 and len(done.erasures) == 1
    assert done.cutoff == (NOW - timedelta(days=30)).isoformat()
    for ref in (old_tool, old_ext, young, old_user, protected, cited, gone, secret, now):
        ev = core.get_event("c", ref, reveal_secrets=True, caller=ME)
        assert (ev.erased is not None) == (ref in erased), (ref, ev)
        if ref in erased:
            assert "retention policy (retention (kinds external tool-result) (days 30))" in \
                ev.erased.reason
    # Raw content only: the retired frame derived from an erased event keeps its body.
    assert core.get_frame("c", "dropped", caller=ME).body == "(why old)"
    assert core.get_frame("c", "kept", caller=ME).body == "(why cited)"
    report = core.audit("c", caller=ME)
    assert report.match and report.chain.erased == 4
    again = core.apply_retention("c", caller=ME)
    assert (again.erased_events, again.erasures) == (0, ())


def test_priv_04_a_cancelled_application_keeps_its_steps_and_rewrites_the_store(monkeypatch):
    """Erased a step (here 5 events) at a time, each its own commit: a cancel during the
    second step leaves the first committed, the history matching, and the store
    rewritten (what the first step took leaves the disk)."""
    monkeypatch.setattr(erasure, "ERASE_BATCH", 5)
    store = Reclaims()
    core = core_at(store)
    core.create_context("c", caller=ME)
    for i in range(12):
        core.append_event("c", "s1", "tool-result", f"log {i}", occurred_at=ago(40 + i),
                          caller=ME)
    core.set_policy("c", "retention", "", [], retention_policy=POLICY, caller=ME)
    checks = []

    def cancelled() -> bool:  # cancel once the first step's erasure event is in
        checks.append(1)
        return core.status("c", caller=ME).event_count > 14

    with pytest.raises(MorphzError) as info:
        core.apply_retention("c", caller=ME, deadline=Deadline(None, cancelled))
    assert info.value.reason == "CANCELLED"
    assert store.reclaims == 1
    report = core.audit("c", caller=ME)
    assert report.match and report.chain.erased == 5
    assert core.apply_retention("c", caller=ME).erased_events == 7


def test_priv_04_the_timers_round_applies_each_policy_owned_here_as_a_job():
    core = core_at()
    jobs = transaction_jobs(core)
    for name in ("a", "b", "elsewhere", "none"):
        core.create_context(name, caller=ME)
        core.append_event(name, "s1", "external", f"old news of {name}", occurred_at=ago(90),
                          caller=ME)
        if name != "none":
            core.set_policy(name, "retention", "", [], retention_policy=POLICY, caller=ME)
    timer = RetentionTimer(core, jobs, Schedule(3600), here=lambda c: c != "elsewhere")
    try:
        ended = timer.apply_all()
        assert [(j.context, j.kind, j.state) for j in ended] == [
            ("a", RETENTION, "succeeded"), ("b", RETENTION, "succeeded")]
        assert ended[0].result["erased_events"] == 1 and ended[0].done > 0
        ev = core.get_event("a", "@e1", caller=ME)
        assert ev.erased.by == RETENTION_CALLER.principal
        for name in ("elsewhere", "none"):
            assert core.get_event(name, "@e1", caller=ME).erased is None
        assert reason(jobs.start, RETENTION, "a", BOB) == "FORBIDDEN"
    finally:
        timer.stop()
        jobs.close()
