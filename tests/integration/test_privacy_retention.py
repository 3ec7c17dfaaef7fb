"""Retention policies over a real server (PRIV-04; docs/privacy.md): a context with events
of every kind that occurred over 90 days (one a day), some protected, some the sources of
frames, a secret one and some with no occurred time, under `(retention (kinds tool-result
external) (days 30))` set with `morphz context policy retention`: `morphz job start
retention` erases exactly the tool results and external facts that occurred more than 30
days before, but the protected one and the active frame's source, and no frame body; the
history audits `match` with that count; `status` shows the policy and when it is next due.
Restarted with a timer of a second, the server applies it by itself, as a job."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from morphz.services.recall.client import RecallClient
from tests.integration.test_cli import run_cli
from tests.polling import until
from tests.topology import ServerProcess

pytestmark = pytest.mark.split_processes  # servers of its own: the same in either topology
POLICY = "(retention (kinds tool-result external) (days 30))"
KINDS = ("tool-result", "external", "user-message", "approval")
DAYS = 90


def cli(srv, *args: str) -> tuple[int, dict]:
    proc = run_cli(*args, "--format=json", address=srv.address, timeout=120)
    return proc.returncode, json.loads(proc.stdout)


def plant(c, now: datetime) -> dict[str, tuple[str, float]]:
    """One event a day for 90 days (kinds in turn, six hours past each day, so none is
    near the 30-day line when the job runs), three with no occurred time; ref -> (kind,
    age in days, or -1 for none)."""
    c.create_context("kept")
    events = {}
    for day in range(DAYS):
        kind = KINDS[day % len(KINDS)]
        at = now - timedelta(days=day, hours=6)
        ref = c.append_event("kept", f"s{day % 3}", kind, f"{kind} number {day} WHORTLE{day}",
                             occurred_at=at.isoformat(), secret=day == 41)["ref"]
        events[ref] = (kind, day + 0.25)
    for kind in KINDS[:3]:
        events[c.append_event("kept", "s1", kind, f"{kind} as it happens")["ref"]] = (kind, -1)
    return events


def due(events: dict, keep: set[str]) -> set[str]:
    return {ref for ref, (kind, age) in events.items()
            if kind in ("tool-result", "external") and age > 30 and ref not in keep}


def test_priv_04_a_retention_policy_erases_exactly_what_it_names_over_90_days(tmp_path):
    srv = ServerProcess(tmp_path / "data", {"MORPHZ_EMBEDDER": "hashing"},
                        args=["--retention-every", "0"]).start()
    try:
        c = srv.client(timeout=60)
        events = plant(c, datetime.now(timezone.utc))
        by_age = sorted((age, ref) for ref, (kind, age) in events.items()
                        if kind in ("tool-result", "external") and age > 30)
        protected, cited, derived = by_age[-1][1], by_age[-2][1], by_age[-3][1]
        c.commit("kept", f"""(context-tx (base-version 0) (protect {protected})
          (derive cited (from {cited}) (why "still relied on"))
          (derive digest (from {derived}) (why "summed up")))""")
        c.commit("kept", '(context-tx (base-version 1) (retire digest) (reason "done"))')
        code, refused = cli(srv, "context", "policy", "retention", "(retention (days 30))",
                            "--context", "kept")
        assert code == 1 and refused["error"]["details"]["field"] == "retention", refused
        code, set_ = cli(srv, "context", "policy", "retention", POLICY, "--context", "kept")
        assert code == 0, set_
        assert set_["retention"]["policy"] == "(retention (kinds external tool-result) " \
            "(days 30))" and set_["retention"]["set_at"] == set_["event_ref"]
        status = c.status("kept")
        assert status["retention"]["policy"] == set_["retention"]["policy"]
        assert not status["retention"].get("next_due")  # --retention-every 0: on demand
        text = run_cli("context", "status", "--context", "kept", address=srv.address).stdout
        assert "retention: (retention (kinds external tool-result) (days 30))" in text
        before = {ref: c.get_event("kept", ref, reveal_secrets=True) for ref in events}

        code, job = cli(srv, "job", "start", "retention", "kept")
        assert code == 0 and job["kind"] == "retention", job
        until(lambda: cli(srv, "job", "get", job["id"])[1]["state"] == "succeeded", 120,
              "the retention job ran")
        done = cli(srv, "job", "get", job["id"])[1]
        expected = due(events, {protected, cited})
        assert len(expected) == 28 and derived in expected  # 30 of 60 days, less two kept
        assert done["result"]["erased_events"] == len(expected), done
        assert done["done"] == done["total"] > DAYS
        for ref in events:
            ev = c.get_event("kept", ref, reveal_secrets=True)
            if ref in expected:
                assert ev["erased"]["reason"].startswith("retention policy (retention "
                                                         "(kinds external tool-result)")
                assert ev["text"] == f"[erased {done['result']['erasures'][0]}]"
                assert "WHORTLE" not in json.dumps(ev)
            else:
                assert ev == before[ref], ref  # unchanged, as read before
        assert c.get_frame("kept", "digest")["body"] == '(why "summed up")'
        assert c.get_frame("kept", "cited")["body"] == '(why "still relied on")'
        report = c.audit("kept")
        assert report["match"] and report["chain"]["erased"] == len(expected), report
        # Applied again at once: nothing is due, nothing is written.
        again = c.start_job("kept", "retention")
        until(lambda: c.get_job(again["id"])["state"] == "succeeded", 60, "again")
        assert c.get_job(again["id"])["result"]["erased_events"] == 0
        assert c.status("kept")["event_count"] == status["event_count"] + 1  # one erasure
        recall = RecallClient(srv.channel(), timeout=60)
        until(lambda: not recall.inspect("kept")["erasure_pending"], 60, "recall rewrote")
        hits = recall.search("kept", "number", mode="lexical", limit=100)["results"]
        assert {h["ref"] for h in hits} == {r for r, (k, a) in events.items()
                                           if a >= 0 and r not in expected}
        c.close()
    finally:
        assert srv.stop() == 0
    assert "WHORTLE4" not in srv.stderr()


def test_priv_04_the_servers_timer_applies_the_policy_when_it_falls_due(tmp_path):
    """`--retention-every 1`: status names the next whole second as due, and the timer's
    job (by the server's own principal, listed with the jobs) erases what falls due."""
    srv = ServerProcess(tmp_path / "data", {"MORPHZ_EMBEDDER": "hashing"},
                        args=["--retention-every", "1"]).start()
    try:
        c = srv.client(timeout=60)
        c.create_context("timed")
        now = datetime.now(timezone.utc)
        old = c.append_event("timed", "s1", "tool-result", "an old tool output",
                             occurred_at=(now - timedelta(days=3)).isoformat())["ref"]
        young = c.append_event("timed", "s1", "tool-result", "a young one",
                               occurred_at=(now - timedelta(hours=20)).isoformat())["ref"]
        c.set_retention("timed", "(retention (kinds tool-result) (days 2))")
        status = c.status("timed")["retention"]
        assert status["every_seconds"] == 1
        next_due = datetime.fromisoformat(status["next_due"])
        assert now < next_due <= datetime.now(timezone.utc) + timedelta(seconds=1)
        until(lambda: c.get_event("timed", old).get("erased"), 60, "the timer erased it")
        assert c.get_event("timed", old)["erased"]["by"] == "morphz-retention"
        assert not c.get_event("timed", young).get("erased")
        jobs = [j for j in c.list_jobs("timed")["jobs"] if j["kind"] == "retention"]
        assert jobs and any(j["state"] == "succeeded" and j["result"]["erased_events"] == 1
                            for j in jobs), jobs
        assert c.audit("timed")["match"]
        c.close()
    finally:
        assert srv.stop() == 0
