"""TransactionService over gRPC: request shape -> TransactionCore -> reply message."""
from __future__ import annotations

from morphz.api.transaction.v1 import transaction_pb2 as pb
from morphz.api.transaction.v1 import transaction_pb2_grpc as pb_grpc
from morphz.services.transaction.convert import append_fields_from_proto, tx_from_proto
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.errors import MorphzError
from morphz.shared.grpc_auth import caller_of
from morphz.shared.grpc_deadline import deadline_of
from morphz.shared.grpc_errors import rpc_boundary
from morphz.shared.job_messages import job_list, job_message
from morphz.shared.jobs import JobRunner
from morphz.shared.protojson import from_plain


class TransactionServicer(pb_grpc.TransactionServiceServicer):
    def __init__(self, core: TransactionCore, jobs: JobRunner) -> None:
        """`jobs`: the audits and rebuilds run as server-side jobs (transaction/jobs.py)."""
        self._core = core
        self._jobs = jobs

    @rpc_boundary
    def CreateContext(self, request, context):
        return from_plain(self._core.create_context(request.context, request.window,
                                                    caller=caller_of(context)),
                          pb.ContextStatus)

    @rpc_boundary
    def GetStatus(self, request, context):
        return from_plain(self._core.status(request.context,
                                            caller=caller_of(context)), pb.ContextStatus)

    @rpc_boundary
    def AppendEvent(self, request, context):
        reply = self._core.append_event(request.context, **append_fields_from_proto(request),
                                        caller=caller_of(context))
        return from_plain(reply, pb.AppendEventResponse)

    @rpc_boundary
    def AppendEvents(self, request, context):
        for i, e in enumerate(request.events):
            if e.context not in ("", request.context):
                raise MorphzError("CONTEXT_INPUT_INVALID", "an event of the batch names "
                                  "another context", field="events.context", index=i)
        reply = self._core.append_events(request.context,
                                         [append_fields_from_proto(e) for e in request.events],
                                         caller=caller_of(context))
        return from_plain(reply, pb.AppendEventsResponse)

    @rpc_boundary
    def Activate(self, request, context):
        return from_plain(self._core.activate(request.context, request.session,
                                              caller=caller_of(context)), pb.Activation)

    @rpc_boundary
    def Deliver(self, request, context):
        return from_plain(self._core.deliver(request.context, request.activation,
                                             caller=caller_of(context)),
                          pb.Activation)

    @rpc_boundary
    def Commit(self, request, context):
        form = request.WhichOneof("tx")
        if form is None:
            raise MorphzError("TX_INVALID", "give the transaction as text or structured")
        tx = request.text if form == "text" else tx_from_proto(request.structured)
        receipt = self._core.commit(request.context, tx, session=request.session,
                                    request_id=request.request_id,
                                    activation=request.activation, caller=caller_of(context),
                                    deadline=deadline_of(context))
        return from_plain(receipt, pb.Receipt)

    @rpc_boundary
    def GetFrame(self, request, context):
        return from_plain(self._core.get_frame(request.context, request.frame_id,
                                               request.at_revision,
                                               reveal_secrets=request.reveal_secrets,
                                               caller=caller_of(context)), pb.Frame)

    @rpc_boundary
    def ListFrames(self, request, context):
        return from_plain(self._core.list_frames(request.context,
                                                 reveal_secrets=request.reveal_secrets,
                                                 max_bytes=request.max_bytes,
                                                 cursor=request.cursor,
                                                 caller=caller_of(context),
                                                 deadline=deadline_of(context)), pb.FrameList)

    @rpc_boundary
    def GetEvent(self, request, context):
        return from_plain(self._core.get_event(request.context, request.ref,
                                               reveal_secrets=request.reveal_secrets,
                                               caller=caller_of(context)), pb.Event)

    @rpc_boundary
    def RebuildProjections(self, request, context):
        report = self._core.rebuild_projections(request.context, caller=caller_of(context),
                                                deadline=deadline_of(context))
        return from_plain(report, pb.RebuildReport)

    @rpc_boundary
    def Audit(self, request, context):
        return from_plain(self._core.audit(request.context, caller=caller_of(context),
                                           deadline=deadline_of(context)), pb.AuditReport)

    @rpc_boundary
    def SetPolicy(self, request, context):
        return from_plain(self._core.set_policy(
            request.context, request.op, request.principal, list(request.rights),
            request.session, caller=caller_of(context)), pb.Policy)

    @rpc_boundary
    def GetPolicy(self, request, context):
        return from_plain(self._core.get_policy(request.context, caller=caller_of(context)),
                          pb.Policy)

    @rpc_boundary
    def ListContexts(self, request, context):
        return from_plain(self._core.list_contexts(caller=caller_of(context)),
                          pb.ContextList)

    # -- server-side jobs (shared/jobs.py) ----------------------------------------------------
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

