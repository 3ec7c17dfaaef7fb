"""TransactionService over gRPC: request shape -> TransactionCore -> reply message (each
reply built field by field by its converter in convert.py)."""
from __future__ import annotations

from morphz.api.transaction.v1 import transaction_pb2_grpc as pb_grpc
from morphz.services.transaction import convert as C
from morphz.services.transaction.core.engine import TransactionCore
from morphz.services.transaction.core.erase_select import Selector
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.auth import caller_of
from morphz.shared.grpc.deadline import deadline_of
from morphz.shared.grpc.errors import rpc_boundary, rpc_stream_boundary
from morphz.shared.grpc.job_messages import JobRpcs
from morphz.shared.jobs import JobRunner
from morphz.shared.values import ContextName


class TransactionServicer(JobRpcs, pb_grpc.TransactionServiceServicer):
    def __init__(self, core: TransactionCore, jobs: JobRunner) -> None:
        """`jobs`: the audits and rebuilds run as server-side jobs (transaction/jobs.py)."""
        self._core = core
        self._jobs = jobs

    @rpc_boundary
    def CreateContext(self, request, context):
        return C.status_to_proto(self._core.create_context(
            _context(request), request.window, caller=caller_of(context)))

    @rpc_boundary
    def GetStatus(self, request, context):
        return C.status_to_proto(self._core.status(_context(request),
                                                   caller=caller_of(context)))

    @rpc_boundary
    def AppendEvent(self, request, context):
        reply = self._core.append_event(_context(request),
                                        **vars(C.append_item_from_proto(request)),
                                        caller=caller_of(context))
        return C.append_to_proto(reply)

    @rpc_boundary
    def AppendEvents(self, request, context):
        for i, e in enumerate(request.events):
            if e.context not in ("", request.context):
                raise MorphzError("CONTEXT_INPUT_INVALID", "an event of the batch names "
                                  "another context", field="events.context", index=i)
        reply = self._core.append_events(_context(request),
                                         [C.append_item_from_proto(e) for e in request.events],
                                         caller=caller_of(context))
        return C.append_batch_to_proto(reply)

    @rpc_boundary
    def Activate(self, request, context):
        return C.activation_to_proto(self._core.activate(_context(request), request.session,
                                                         caller=caller_of(context)))

    @rpc_boundary
    def Deliver(self, request, context):
        return C.activation_to_proto(self._core.deliver(_context(request), request.activation,
                                                        caller=caller_of(context)))

    @rpc_boundary
    def Commit(self, request, context):
        form = request.WhichOneof("tx")
        if form is None:
            raise MorphzError("TX_INVALID", "give the transaction as text or structured")
        tx = request.text if form == "text" else C.tx_from_proto(request.structured)
        receipt = self._core.commit(_context(request), tx, session=request.session,
                                    request_id=request.request_id,
                                    activation=request.activation, caller=caller_of(context),
                                    deadline=deadline_of(context))
        return C.commit_to_proto(receipt)

    @rpc_boundary
    def GetFrame(self, request, context):
        return C.frame_to_proto(self._core.get_frame(
            _context(request), request.frame_id, request.at_revision,
            reveal_secrets=request.reveal_secrets, caller=caller_of(context)))

    @rpc_boundary
    def ListFrames(self, request, context):
        return C.frame_list_to_proto(self._core.list_frames(
            _context(request), reveal_secrets=request.reveal_secrets,
            max_bytes=request.max_bytes, cursor=request.cursor, caller=caller_of(context),
            deadline=deadline_of(context)))

    @rpc_boundary
    def GetEvent(self, request, context):
        return C.event_to_proto(self._core.get_event(
            _context(request), request.ref, reveal_secrets=request.reveal_secrets,
            caller=caller_of(context)))

    @rpc_boundary
    def RebuildProjections(self, request, context):
        return C.rebuild_to_proto(self._core.rebuild_projections(
            _context(request), caller=caller_of(context), deadline=deadline_of(context)))

    @rpc_boundary
    def Audit(self, request, context):
        return C.audit_to_proto(self._core.audit(
            _context(request), caller=caller_of(context), deadline=deadline_of(context)))

    @rpc_boundary
    def SetPolicy(self, request, context):
        return C.policy_to_proto(self._core.set_policy(
            _context(request), request.op, request.principal, list(request.rights),
            request.session, retention_policy=request.retention,
            caller=caller_of(context)))

    @rpc_boundary
    def GetPolicy(self, request, context):
        return C.policy_to_proto(self._core.get_policy(_context(request),
                                                       caller=caller_of(context)))

    @rpc_boundary
    def Erase(self, request, context):
        selector = Selector(refs=tuple(request.refs), session=request.session,
                            actor=request.actor, kinds=tuple(request.kinds),
                            phrase=request.phrase, since=request.since, until=request.until)
        return C.erasure_to_proto(self._core.erase(
            _context(request), selector, request.reason, dry_run=request.dry_run,
            caller=caller_of(context), deadline=deadline_of(context)))

    @rpc_stream_boundary
    def Export(self, request, context):
        for page in self._core.export(_context(request), since=request.since,
                                      until=request.until,
                                      reveal_secrets=request.reveal_secrets,
                                      caller=caller_of(context),
                                      deadline=deadline_of(context)):
            if not context.is_active():
                return
            yield C.export_page_to_proto(page)

    @rpc_boundary
    def DeleteContext(self, request, context):
        done = self._core.delete_context(_context(request), request.reason,
                                         caller=caller_of(context))
        self._jobs.forget_context(done.context)
        return C.deleted_to_proto(done)

    @rpc_boundary
    def ListContexts(self, request, context):
        return C.context_list_to_proto(self._core.list_contexts(caller=caller_of(context)))


def _context(request) -> ContextName:
    """The request's context name, checked here once (the core takes it as checked)."""
    return ContextName.parse(request.context)
