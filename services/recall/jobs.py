"""The recall service's server-side jobs (shared/jobs.py): a rebuild of a context's index,
run by RecallCore with the job's cancellable Deadline (a stopped rebuild swaps nothing in)."""
from __future__ import annotations

from typing import Optional

from morphz.services.recall.core.engine import RecallCore
from morphz.shared.admission import Admission
from morphz.shared.auth import Caller
from morphz.shared.jobs import JobRunner

REBUILD_INDEX = "rebuild-index"


def recall_jobs(core: RecallCore, admission: Optional[Admission] = None, **caps) -> JobRunner:
    def authorize(kind: str, context: str, caller: Caller) -> None:
        core.may_rebuild(context, caller=caller)

    # A job's result is stored and answered as JSON: the reply's plain form.
    works = {REBUILD_INDEX: lambda context, caller, deadline: core.rebuild(
        context, caller=caller, deadline=deadline).plain()}
    return JobRunner(works, authorize, admission=admission, prefix="recall", **caps)
