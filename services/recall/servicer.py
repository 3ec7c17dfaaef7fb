"""RecallService over gRPC: request shape -> RecallCore -> reply message. The core's
replies are frozen values (core/results.py), made protobuf here and in convert.py."""
from __future__ import annotations

from morphz.api.recall.v1 import recall_pb2_grpc as pb_grpc
from morphz.services.recall.convert import (
    evaluation_from_proto, read_to_proto, search_from_proto, search_to_proto,
    status_to_proto, traverse_to_proto)
from morphz.services.recall.core.engine import RecallCore
from morphz.shared.grpc.auth import caller_of
from morphz.shared.grpc.deadline import deadline_of
from morphz.shared.grpc.errors import rpc_boundary
from morphz.shared.grpc.job_messages import JobRpcs
from morphz.shared.jobs import JobRunner


class RecallServicer(JobRpcs, pb_grpc.RecallServiceServicer):
    def __init__(self, core: RecallCore, jobs: JobRunner) -> None:
        """`jobs`: index rebuilds run as server-side jobs (recall/jobs.py)."""
        self._core = core
        self._jobs = jobs

    @rpc_boundary
    def Search(self, request, context):
        req = search_from_proto(request, vectors_off=self._core.vectors_off)
        return search_to_proto(self._core.search(req, caller=caller_of(context),
                                                 deadline=deadline_of(context)))

    @rpc_boundary
    def Read(self, request, context):
        reply = self._core.read(request.context, request.ref, offset=request.offset,
                                limit=request.limit,
                                evaluation=evaluation_from_proto(request.evaluation),
                                caller=caller_of(context))
        return read_to_proto(reply)

    @rpc_boundary
    def Traverse(self, request, context):
        reply = self._core.traverse(
            request.context, request.frame_id,
            depth=request.depth if request.HasField("depth") else None,
            direction=request.direction, include_bodies=request.include_bodies,
            include_events=request.include_events, max_nodes=request.max_nodes,
            max_bytes=request.max_bytes, cursor=request.cursor,
            evaluation=evaluation_from_proto(request.evaluation), caller=caller_of(context),
            deadline=deadline_of(context))
        return traverse_to_proto(reply)

    @rpc_boundary
    def InspectIndex(self, request, context):
        return status_to_proto(self._core.inspect(request.context, caller=caller_of(context)))

    @rpc_boundary
    def RebuildIndex(self, request, context):
        return status_to_proto(self._core.rebuild(request.context, caller=caller_of(context),
                                                  deadline=deadline_of(context)))
