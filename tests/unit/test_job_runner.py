"""The job runner (shared/jobs.py, SEC-07) with real threads and a real Admission; each
job's work is a function that waits on an event the test sets, so what is running or
queued is known, never guessed from timing."""
from __future__ import annotations

import threading

import pytest

from morphz.shared import limits
from morphz.shared.admission import Admission, Budgets
from morphz.shared.auth import TOKEN, Caller
from morphz.shared.errors import MorphzError
from morphz.shared.jobs import JobRunner
from tests.polling import until

ALICE, BOB, CAROL = (Caller(p, TOKEN) for p in ("alice", "bob", "carol"))


class Work:
    """A job's work: records its deadline, waits until released or cancelled (checking
    the deadline as a core's loop does), reports progress."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()

    def __call__(self, context, caller, deadline) -> dict:
        self.started.set()
        step = 0
        while not self.release.wait(0.01):
            deadline.check("the work")
            step += 1
            deadline.advanced(min(step, 9), 10)
        return {"context": context, "by": caller.principal}


def allow_own(kind: str, context: str, caller: Caller) -> None:
    """Each principal may run jobs on the context named after it only."""
    if context != caller.principal:
        raise MorphzError("FORBIDDEN", "not yours")


@pytest.fixture
def work():
    w = Work()
    yield w
    w.release.set()


def runner(work, **kw) -> JobRunner:
    return JobRunner({"audit": work}, allow_own, **kw)


def finished(jobs: JobRunner, id: str, caller: Caller) -> dict:
    until(lambda: jobs.get(id, caller).state not in ("queued", "running"), 30)
    return jobs.get(id, caller)


def test_sec_07_a_job_runs_reports_progress_and_answers_its_result(work):
    jobs = runner(work)
    job = jobs.start("audit", "alice", ALICE)
    until(lambda: jobs.get(job.id, ALICE).done > 0, 30)
    assert jobs.get(job.id, ALICE).state == "running"
    work.release.set()
    done = finished(jobs, job.id, ALICE)
    assert done.state == "succeeded" and done.result == {"context": "alice", "by": "alice"}
    assert done.started_at and done.finished_at and done.error_reason == ""
    jobs.close()


def test_sec_07_job_caps_refuse_with_their_named_reasons(work):
    jobs = runner(work, max_jobs=3, max_principal_jobs=2)
    held = [jobs.start("audit", "alice", ALICE) for _ in range(2)]
    with pytest.raises(MorphzError) as e:
        jobs.start("audit", "alice", ALICE)
    assert e.value.reason == limits.PRINCIPAL_JOBS.reason == "PRINCIPAL_JOB_LIMIT"
    assert e.value.status.name == "RESOURCE_EXHAUSTED"
    assert e.value.details == {"limit": "principal_jobs", "max": 2, "principal": "alice"}
    held.append(jobs.start("audit", "bob", BOB))
    with pytest.raises(MorphzError) as e:
        jobs.start("audit", "carol", CAROL)
    assert e.value.reason == limits.JOBS.reason == "JOB_LIMIT"
    assert e.value.details["limit"] == "jobs" and e.value.details["max"] == 3
    # A finished job frees its place.
    jobs.cancel(held[0].id, ALICE)
    assert finished(jobs, held[0].id, ALICE).state == "cancelled"
    assert jobs.start("audit", "carol", CAROL).state in ("queued", "running")
    jobs.close()


def test_sec_07_a_job_waits_queued_for_the_admission_budgets_and_can_be_cancelled_there(work):
    admission = Admission(Budgets(expensive_rpcs=1, principal_rpcs=1))
    jobs = runner(work, admission=admission)
    with admission.admit(None, "someone else's call"):  # the one slot taken
        job = jobs.start("audit", "alice", ALICE)
        assert jobs.get(job.id, ALICE).state == "queued"
        cancelled = jobs.start("audit", "alice", ALICE)
        jobs.cancel(cancelled.id, ALICE)
        view = finished(jobs, cancelled.id, ALICE)
        assert view.state == "cancelled" and view.started_at == ""
        assert jobs.get(job.id, ALICE).state == "queued" and not work.started.is_set()
    until(lambda: jobs.get(job.id, ALICE).state == "running", 30)  # admitted once freed
    assert admission.running() == 1 and admission.running("alice") == 1
    work.release.set()
    assert finished(jobs, job.id, ALICE).state == "succeeded"
    assert admission.running() == 0  # its slot given back
    jobs.close()


def test_sec_07_a_job_is_visible_only_to_who_may_run_it(work):
    jobs = runner(work)
    job = jobs.start("audit", "alice", ALICE)
    for verb in (jobs.get, jobs.cancel):
        with pytest.raises(MorphzError) as e:
            verb(job.id, BOB)
        assert e.value.reason == "JOB_NOT_FOUND"
    assert jobs.list(BOB) == [] and [j.id for j in jobs.list(ALICE)] == [job.id]
    with pytest.raises(MorphzError) as e:
        jobs.start("audit", "alice", BOB)
    assert e.value.reason == "FORBIDDEN"
    assert jobs.get(job.id, ALICE).cancel_requested is False
    jobs.close()


def test_sec_07_finished_jobs_are_kept_for_a_bounded_count_and_time(work):
    now = [0.0]
    jobs = runner(work, keep_finished=2, keep_seconds=60, clock=lambda: now[0])
    work.release.set()
    ids = []
    for _ in range(3):
        ids.append(jobs.start("audit", "alice", ALICE).id)
        finished(jobs, ids[-1], ALICE)
    assert [j.id for j in jobs.list(ALICE)] == ids[1:]  # the oldest forgotten
    with pytest.raises(MorphzError) as e:
        jobs.get(ids[0], ALICE)
    assert e.value.reason == "JOB_NOT_FOUND"
    now[0] = 61.0
    assert jobs.list(ALICE) == []
    jobs.close()


def test_sec_07_closing_the_runner_cancels_its_jobs(work):
    jobs = runner(work)
    job = jobs.start("audit", "alice", ALICE)
    work.started.wait(30)
    jobs.close()
    assert jobs.get(job.id, ALICE).state == "cancelled"
    with pytest.raises(MorphzError) as e:
        jobs.start("audit", "alice", ALICE)
    assert e.value.reason == "JOB_LIMIT"
