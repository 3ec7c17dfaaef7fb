"""EncodingService over gRPC: request -> EncodingCore -> reply message (convert.py)."""
from __future__ import annotations

from morphz.api.encoding.v1 import encoding_pb2_grpc as pb_grpc
from morphz.services.encoding import convert
from morphz.services.encoding.convert import scope_of
from morphz.services.encoding.core.engine import EncodingCore
from morphz.shared.grpc.auth import caller_of
from morphz.shared.grpc.deadline import deadline_of
from morphz.shared.grpc.errors import rpc_boundary


class EncodingServicer(pb_grpc.EncodingServiceServicer):
    def __init__(self, core: EncodingCore) -> None:
        self._core = core

    @rpc_boundary
    def Compile(self, request, context):
        return convert.encoding(self._core.compile(
            request.context, request.session, activation=request.activation,
            budget_bytes=request.budget_bytes, budget_tokens=request.budget_tokens,
            preview_bytes=request.preview_bytes, must_read=list(request.must_read),
            scope=scope_of(request.scope), parent_snapshot=request.parent_snapshot,
            model=request.model, evaluation_profile=request.evaluation_profile,
            bindings=dict(request.bindings), capabilities=request.capabilities,
            caller=caller_of(context), deadline=deadline_of(context)))

    @rpc_boundary
    def ShowSnapshot(self, request, context):
        return convert.snapshot_record(
            self._core.show(request.context, request.snapshot, caller=caller_of(context)))

    @rpc_boundary
    def Replay(self, request, context):
        return convert.replay_report(
            self._core.replay(request.context, request.snapshot, caller=caller_of(context)))

    @rpc_boundary
    def Check(self, request, context):
        return convert.check_report(
            self._core.check(request.context, request.snapshot, caller=caller_of(context)))

    @rpc_boundary
    def Read(self, request, context):
        return convert.read_result(
            self._core.read(request.context, request.snapshot, request.ref, request.offset,
                            request.limit, caller=caller_of(context)))

    @rpc_boundary
    def Search(self, request, context):
        return convert.search_result(
            self._core.search(request.context, request.snapshot, request.query,
                              request.limit, caller=caller_of(context)))

    @rpc_boundary
    def ListSnapshots(self, request, context):
        return convert.snapshot_list(self._core.list_snapshots(
            request.context, convert.snapshot_query(request), caller=caller_of(context)))

    @rpc_boundary
    def ShowEvaluation(self, request, context):
        return convert.evaluation_view(self._core.evaluation(
            request.context, request.activation, caller=caller_of(context)))
