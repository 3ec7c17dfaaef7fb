"""Server-side jobs (SEC-07): a long operation (an audit, a rebuild) a caller starts and
gets an id for at once, then polls for its state and progress and may cancel, as with
etcd's or Elasticsearch's tasks or a Kubernetes Job.

A job runs on a thread of its own with a Deadline (shared/deadline.py) that has no
expiry: its `cancelled` is the job's cancel flag, its `progress` the job's counters, its
`pace` the admission ticket's. A cancelled job stops at the operation's next check,
exactly as a call whose caller went away (nothing half-done). Like the calls they
replace, jobs draw on the expensive calls' budgets (shared/admission.py): a job waits
queued until its principal's and the server's budgets admit it.

Bounded: queued and running jobs at most `limits.JOBS` per process and
`limits.PRINCIPAL_JOBS` per principal (RESOURCE_EXHAUSTED JOB_LIMIT /
PRINCIPAL_JOB_LIMIT); finished ones are remembered FINISHED_JOBS_KEPT_SECONDS, at most
`limits.FINISHED_JOBS`. Jobs live in memory: a restart forgets them.

Visibility: whoever may run a job's operation on its context may see and cancel it (the
`authorize` given is asked again at each look); to anyone else it answers JOB_NOT_FOUND,
as an id that never existed. Nothing here imports gRPC."""
from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Optional

from morphz.shared import limits
from morphz.shared.admission import Admission
from morphz.shared.auth import Caller
from morphz.shared.deadline import Deadline
from morphz.shared.errors import MorphzError, Status

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
    "queued", "running", "succeeded", "failed", "cancelled")
FINISHED = (SUCCEEDED, FAILED, CANCELLED)
ADMIT_RETRY_SECONDS = (0.05, 2.0)  # a queued job's wait between admission attempts
_log = logging.getLogger("morphz.jobs")

# (context, caller, deadline) -> the operation's reply (a JSON-able dict)
Work = Callable[[str, Caller, Deadline], dict]
# (kind, context, caller): raises (FORBIDDEN, CONTEXT_NOT_FOUND...) unless allowed
Authorize = Callable[[str, str, Caller], None]


@dataclass(frozen=True)
class JobView:
    """What a caller sees of a job at one moment."""
    id: str
    kind: str
    context: str
    state: str
    done: int
    total: int
    created_at: str
    started_at: str
    finished_at: str
    result: Optional[dict]
    error_reason: str
    error_message: str
    cancel_requested: bool


class _Job:
    """A job's mutable record (changed under the runner's lock, or by its own thread for
    the progress counters, which are read as they are)."""

    def __init__(self, id: str, kind: str, context: str, caller: Caller,
                 created_at: str) -> None:
        self.id, self.kind, self.context, self.caller = id, kind, context, caller
        self.state = QUEUED
        self.done = self.total = 0
        self.created_at, self.started_at, self.finished_at = created_at, "", ""
        self.finished_mono = 0.0
        self.result: Optional[dict] = None
        self.error_reason = self.error_message = ""
        self.cancel = threading.Event()
        self.thread: Optional[threading.Thread] = None

    def advanced(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def view(self) -> JobView:
        return JobView(self.id, self.kind, self.context, self.state, self.done, self.total,
                       self.created_at, self.started_at, self.finished_at, self.result,
                       self.error_reason, self.error_message, self.cancel.is_set())


def _principal(caller: Caller) -> str:
    return caller.principal if caller.authenticated else ""


def _now_text() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


class JobRunner:
    def __init__(self, works: dict[str, Work], authorize: Authorize, *,
                 admission: Optional[Admission] = None, prefix: str = "job",
                 max_jobs: int = limits.JOBS.max,
                 max_principal_jobs: int = limits.PRINCIPAL_JOBS.max,
                 keep_finished: int = limits.FINISHED_JOBS.max,
                 keep_seconds: float = limits.FINISHED_JOBS_KEPT_SECONDS,
                 clock: Callable[[], float] = time.monotonic,
                 now_text: Callable[[], str] = _now_text) -> None:
        """`works`: the operation of each kind; `authorize`: who may run (and so see)
        a kind on a context; `admission`: the process's expensive-call budgets (None:
        none); `prefix`: of the ids, naming the service that holds them."""
        self._works, self._authorize, self._admission = works, authorize, admission
        self._prefix = prefix
        self._max_jobs, self._max_principal_jobs = max_jobs, max_principal_jobs
        self._keep_finished, self._keep_seconds = keep_finished, keep_seconds
        self._clock, self._now_text = clock, now_text
        self._lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}  # in creation order
        self._closed = False

    # -- the API ----------------------------------------------------------------------------
    def start(self, kind: str, context: str, caller: Caller) -> JobView:
        """Start a job of `kind` on `context` for `caller` (refused as the operation
        itself would refuse the caller, or at a cap), answering at once."""
        work = self._works.get(kind)
        if work is None:
            raise MorphzError("CONTEXT_INPUT_INVALID", f"unknown job kind {kind[:40]!r}: "
                              f"{' | '.join(sorted(self._works))}", field="kind")
        self._authorize(kind, context, caller)
        who = _principal(caller)
        with self._lock:
            if self._closed:
                raise MorphzError("JOB_LIMIT", "the server is stopping: it starts no job",
                                  **limits.JOBS.details(0))
            self._forget_old()
            active = [j for j in self._jobs.values() if j.state not in FINISHED]
            mine = sum(1 for j in active if _principal(j.caller) == who)
            if mine >= self._max_principal_jobs:
                raise _refusal(limits.PRINCIPAL_JOBS, self._max_principal_jobs, who,
                               f"{who or 'the anonymous caller'} holds its limit of "
                               f"{self._max_principal_jobs} queued or running jobs")
            if len(active) >= self._max_jobs:
                raise _refusal(limits.JOBS, self._max_jobs, who, "the server holds its "
                               f"limit of {self._max_jobs} queued or running jobs")
            job = _Job(f"{self._prefix}-{secrets.token_hex(8)}", kind, context, caller,
                       self._now_text())
            self._jobs[job.id] = job
            job.thread = threading.Thread(target=self._run, args=(job, work),
                                          name=f"job {job.id}", daemon=True)
            job.thread.start()
            return job.view()

    def get(self, id: str, caller: Caller) -> JobView:
        return self._visible(id, caller).view()

    def list(self, caller: Caller, context: str = "") -> list[JobView]:
        """The jobs `caller` may see (of `context` if given), oldest first."""
        with self._lock:
            self._forget_old()
            jobs = [j for j in self._jobs.values() if not context or j.context == context]
        return [j.view() for j in jobs if self._may_see(j, caller)]

    def cancel(self, id: str, caller: Caller) -> JobView:
        """Ask the job to stop (at its next check; at once if still queued). A finished
        job is answered as it is."""
        job = self._visible(id, caller)
        with self._lock:
            if job.state not in FINISHED:
                job.cancel.set()
            return job.view()

    def forget_context(self, context: str) -> None:
        """A deleted context's jobs: those running are asked to stop, every one is
        forgotten (its id then answers JOB_NOT_FOUND)."""
        with self._lock:
            gone = [j for j in self._jobs.values() if j.context == context]
            for j in gone:
                j.cancel.set()
                del self._jobs[j.id]

    def close(self, timeout: float = 10.0) -> None:
        """Cancel every job and wait (bounded) for their threads: at a server's stop."""
        with self._lock:
            self._closed = True
            jobs = list(self._jobs.values())
        for j in jobs:
            j.cancel.set()
        end = time.monotonic() + timeout
        for j in jobs:
            if j.thread is not None:
                j.thread.join(max(0.0, end - time.monotonic()))

    # -- internals ----------------------------------------------------------------------------
    def _may_see(self, job: _Job, caller: Caller) -> bool:
        try:
            self._authorize(job.kind, job.context, caller)
        except MorphzError:
            return False
        return True

    def _visible(self, id: str, caller: Caller) -> _Job:
        with self._lock:
            self._forget_old()
            job = self._jobs.get(id)
        if job is None or not self._may_see(job, caller):
            raise MorphzError("JOB_NOT_FOUND", f"no job {id[:80]!r}", id=id[:80])
        return job

    def _forget_old(self) -> None:
        """Drop finished jobs past their time, then the oldest past the count (the lock
        held)."""
        now = self._clock()
        finished = [j for j in self._jobs.values() if j.state in FINISHED]
        for j in finished:
            if now - j.finished_mono > self._keep_seconds:
                del self._jobs[j.id]
        finished = [j for j in finished if j.id in self._jobs]
        for j in finished[:max(0, len(finished) - self._keep_finished)]:
            del self._jobs[j.id]

    def _finish(self, job: _Job, state: str, result: Optional[dict] = None,
                error: Optional[MorphzError] = None) -> None:
        with self._lock:
            job.state, job.result = state, result
            if error is not None:
                job.error_reason, job.error_message = error.reason, error.message
            job.finished_at, job.finished_mono = self._now_text(), self._clock()

    def _admitted(self, job: _Job):
        """The job's admission ticket once the budgets take it (waiting queued, cancel
        aware), or None if it was cancelled first or there are no budgets."""
        if self._admission is None:
            return None
        wait = ADMIT_RETRY_SECONDS[0]
        while not job.cancel.is_set():
            # Paced as its principal's calls are (its own polls do not slow it); without
            # authentication its caller is the job itself.
            authenticated = job.caller.authenticated
            try:
                return self._admission.admit(
                    job.caller.principal if authenticated else None,
                    f"principal:{job.caller.principal}" if authenticated else f"job:{job.id}")
            except MorphzError as e:
                if e.status is not Status.RESOURCE_EXHAUSTED:
                    raise
                after = e.details.get("retry_after_seconds")
                job.cancel.wait(float(after) if after else wait)
                wait = min(wait * 2, ADMIT_RETRY_SECONDS[1])
        return None

    def _run(self, job: _Job, work: Work) -> None:
        ticket = None
        try:
            ticket = self._admitted(job)
            with self._lock:
                if job.cancel.is_set():
                    raise MorphzError("CANCELLED", "the job was cancelled before it ran")
                job.state, job.started_at = RUNNING, self._now_text()
            paced = {"pace": ticket.pace} if ticket is not None else {}
            deadline = Deadline(None, job.cancel.is_set, progress=job.advanced, **paced)
            result = work(job.context, job.caller, deadline)
            self._finish(job, SUCCEEDED, result=result)
        except MorphzError as e:
            self._finish(job, CANCELLED if e.reason == "CANCELLED" else FAILED, error=e)
        except Exception as e:  # noqa: BLE001 - a job's failure is its state, not a crash
            _log.error("job %s (%s of %s) failed", job.id, job.kind, job.context,
                       exc_info=True)
            self._finish(job, FAILED, error=MorphzError(
                "INTERNAL", f"the job failed: {type(e).__name__}"))
        finally:
            if ticket is not None:
                ticket.__exit__(None, None, None)


def _refusal(limit: limits.Limit, value: int, principal: str, message: str) -> MorphzError:
    return MorphzError(limit.reason, f"{message}; wait for one to finish or cancel one",
                       **limit.details(value, principal=principal))
