"""Server-side jobs (shared/jobs.py) as the common Job messages the services answer."""
from __future__ import annotations

import json

from morphz.api.common.v1 import common_pb2 as pb
from morphz.shared.grpc.auth import caller_of
from morphz.shared.grpc.errors import rpc_boundary
from morphz.shared.jobs import JobRunner, JobView


class JobRpcs:
    """The four job RPCs every service with jobs answers alike, over its `_jobs`
    (JobRunner). Listed before the generated servicer base, whose stubs it replaces."""
    _jobs: JobRunner

    @rpc_boundary
    def StartJob(self, request, context):
        return job_message(self._jobs.start(request.kind, request.context,
                                            caller_of(context)))

    @rpc_boundary
    def GetJob(self, request, context):
        return job_message(self._jobs.get(request.id, caller_of(context)))

    @rpc_boundary
    def ListJobs(self, request, context):
        return job_list(self._jobs.list(caller_of(context), request.context))

    @rpc_boundary
    def CancelJob(self, request, context):
        return job_message(self._jobs.cancel(request.id, caller_of(context)))


def job_message(view: JobView) -> pb.Job:
    return pb.Job(id=view.id, kind=view.kind, context=view.context, state=view.state,
                  done=view.done, total=view.total, created_at=view.created_at,
                  started_at=view.started_at, finished_at=view.finished_at,
                  result_json="" if view.result is None else json.dumps(view.result,
                                                                         default=str),
                  error_reason=view.error_reason, error_message=view.error_message,
                  cancel_requested=view.cancel_requested)


def job_list(views: list[JobView]) -> pb.JobList:
    return pb.JobList(jobs=[job_message(v) for v in views])


def job_reply(plain: dict) -> dict:
    """A Job message's plain form (shared/protojson.to_plain) as the clients answer it:
    `result` (the operation's reply, or None) in place of `result_json`."""
    out = dict(plain)
    text = out.pop("result_json", "")
    out["result"] = json.loads(text) if text else None
    return out
