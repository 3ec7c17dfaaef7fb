"""The retention timer (docs/privacy.md, PRIV-04): at every multiple of its period
(core/retention.py Schedule: the times `status` shows as next due) the transaction
service applies each context's retention policy, one context after another, each as a
`retention` job (shared/jobs.py: listed by `morphz job list`, with its progress, and
cancellable) run by the server's own caller, whose name the erasures record. A context
with a retention job already queued or running (one started on demand) is left to it.

Where etcd places contexts on several transaction instances, an instance applies the
policies of the contexts it owns and of those nobody owns now (the erasure's commit
takes the context; another instance's attempt then fails NOT_OWNER and is logged)."""
from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Callable, Optional

from morphz.services.transaction.core.engine import TransactionCore
from morphz.services.transaction.core.ownership import Ownership
from morphz.services.transaction.runtime.lease import LeaseOwnership
from morphz.services.transaction.core.retention import Schedule
from morphz.services.transaction.jobs import RETENTION
from morphz.shared.auth import IN_PROCESS, Caller
from morphz.shared.errors import MorphzError
from morphz.shared.jobs import FINISHED, JobRunner, JobView

RETENTION_CALLER = Caller("morphz-retention", IN_PROCESS)  # unrestricted, as in-process code
POLL_SECONDS = 0.2  # how often a running job's state is looked at
_log = logging.getLogger("morphz.retention")


def owned_here(owners: Ownership) -> Callable[[str], bool]:
    """Whether this instance applies `context`'s policy: it owns it, nobody does, or
    there is no coordinator (one instance owns every context)."""
    me = owners.instance.id if isinstance(owners, LeaseOwnership) else ""
    return lambda context: owners.describe(context).get("owner", "") in ("", me)


class RetentionTimer:
    def __init__(self, core: TransactionCore, jobs: JobRunner, schedule: Schedule, *,
                 here: Callable[[str], bool] = lambda context: True,
                 now: Callable[[], datetime] = lambda: datetime.now().astimezone()) -> None:
        self._core, self._jobs, self._schedule = core, jobs, schedule
        self._here, self._now = here, now
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "RetentionTimer":
        if self._schedule.every > 0:
            self._thread = threading.Thread(target=self._run, name="retention timer",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop at once (a job it started is cancelled by the job runner's close)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = self._now()
            due = self._schedule.next_after(now)
            if self._stop.wait(max(0.0, (due - now).total_seconds())):
                return
            try:
                self.apply_all()
            except Exception:  # noqa: BLE001 - the next period tries again
                _log.error("the retention timer's round failed", exc_info=True)

    def apply_all(self) -> list[JobView]:
        """One round: each context with a retention policy, owned here, in turn; the
        jobs as they ended."""
        ended = []
        for context in self._core.list_contexts(caller=RETENTION_CALLER).contexts:
            if self._stop.is_set():
                break
            try:
                if not self._due(context):
                    continue
                job = self._jobs.start(RETENTION, context, RETENTION_CALLER)
            except MorphzError as e:  # deleted meanwhile, a job cap: the next round
                _log.warning("retention of %s not started: %s %s", context[:80], e.reason,
                             e.message)
                continue
            ended.append(self._wait(job))
        return ended

    def _due(self, context: str) -> bool:
        if not self._here(context):
            return False
        if self._core.retention_policy(context, caller=RETENTION_CALLER).retention is None:
            return False
        return not any(j.kind == RETENTION and j.state not in FINISHED
                       for j in self._jobs.list(RETENTION_CALLER, context))

    def _wait(self, job: JobView) -> JobView:
        while job.state not in FINISHED and not self._stop.wait(POLL_SECONDS):
            try:
                job = self._jobs.get(job.id, RETENTION_CALLER)
            except MorphzError:  # its context deleted: its jobs forgotten
                return job
        if job.state not in FINISHED:
            return job
        if job.error_reason:
            _log.warning("retention of %s %s: %s %s", job.context[:80], job.state,
                         job.error_reason, job.error_message)
        else:
            _log.info("retention of %s: %d events erased", job.context[:80],
                      (job.result or {}).get("erased_events", 0))
        return job
