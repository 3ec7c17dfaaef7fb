"""The transaction service's server-side jobs (shared/jobs.py): an audit or a rebuild of
a context's projections, or the application of its retention policy, run by
TransactionCore with the job's cancellable Deadline."""
from __future__ import annotations

from typing import Optional

from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.admission import Admission
from morphz.shared.auth import Caller
from morphz.shared.jobs import JobRunner

AUDIT, REBUILD, RETENTION = "audit", "rebuild-projections", "retention"


def transaction_jobs(core: TransactionCore, admission: Optional[Admission] = None,
                     **caps) -> JobRunner:
    def authorize(kind: str, context: str, caller: Caller) -> None:
        # Audit and rebuild need the context's admin right (which reading its policy
        # needs), retention (an erasure) the erase right (which reading its retention
        # policy needs): refused (FORBIDDEN, CONTEXT_NOT_FOUND) as the calls would be.
        if kind == RETENTION:
            core.retention_policy(context, caller=caller)
        else:
            core.get_policy(context, caller=caller)

    # A job's result is kept in its plain (JSON) form, the one its reply carries.
    works = {AUDIT: lambda context, caller, deadline: core.audit(
                 context, caller=caller, deadline=deadline).plain(),
             REBUILD: lambda context, caller, deadline: core.rebuild_projections(
                 context, caller=caller, deadline=deadline).plain(),
             RETENTION: lambda context, caller, deadline: core.apply_retention(
                 context, caller=caller, deadline=deadline).plain()}
    return JobRunner(works, authorize, admission=admission, prefix="tx", **caps)
