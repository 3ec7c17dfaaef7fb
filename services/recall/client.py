"""RecallClient: RecallCore's interface over gRPC (same arguments, same dict replies,
same MorphzError reasons), with a deadline on every call."""
from __future__ import annotations

from typing import Optional

import grpc

from morphz.api.common.v1 import common_pb2 as common
from morphz.api.recall.v1 import recall_pb2 as pb
from morphz.api.recall.v1 import recall_pb2_grpc as pb_grpc
from morphz.services.recall.convert import evaluation_to_proto
from morphz.shared.grpc.client import DEFAULT_TIMEOUT, build_request
from morphz.shared.grpc.errors import call
from morphz.shared.grpc.job_messages import job_reply
from morphz.shared.grpc.protojson import to_plain

REBUILD_TIMEOUT = 3600.0  # a rebuild reads the whole context


class RecallClient:
    def __init__(self, channel: grpc.Channel, *, timeout: float = DEFAULT_TIMEOUT,
                 rebuild_timeout: float = REBUILD_TIMEOUT) -> None:
        self._stub = pb_grpc.RecallServiceStub(channel)
        self._timeout = timeout
        self._rebuild_timeout = rebuild_timeout

    def _call(self, method: str, request, timeout: Optional[float] = None) -> dict:
        return to_plain(call(getattr(self._stub, method), request,
                             timeout=timeout or self._timeout))

    def search(self, context: str, query: str = "", *, since: str = "", until: str = "",
               limit: int = 0, kinds=(), states=(), sessions=(), cursor: str = "",
               mode: str = "", evaluation: Optional[dict] = None,
               min_commit_seq: int = 0) -> dict:
        req = build_request(pb.SearchRequest, context=context, query=query, since=since,
                       until=until, limit=limit, kinds=list(kinds), states=list(states),
                       sessions=list(sessions), cursor=cursor, mode=mode,
                       evaluation=evaluation_to_proto(evaluation), min_commit_seq=min_commit_seq)
        reply = call(self._stub.Search, req, timeout=self._timeout)
        # Spelled out: the hot path (to_plain's reflection costs more than the search).
        return {"results": [{"kind": h.kind, "ref": h.ref, "id": h.id, "state": h.state,
                             "score": h.score, "time": h.time, "session": h.session,
                             "event_kind": h.event_kind, "preview": h.preview,
                             "revision": h.revision, "occurred_at": h.occurred_at,
                             "time_basis": h.time_basis,
                             # each leg's rank: only where there are legs (as the core)
                             **({"lexical_rank": h.lexical_rank,
                                 "vector_rank": h.vector_rank}
                                if mode != "lexical" else {})}
                            for h in reply.results],
                "next_cursor": reply.next_cursor, "index_position": reply.index_position,
                "lag": reply.lag, "empty": reply.empty,
                "observation_ref": reply.observation_ref, "unclosed_lag": reply.unclosed_lag,
                **({"vector_position": reply.vector_position,
                    "vector_lag": reply.vector_lag} if mode != "lexical" else {})}

    def read(self, context: str, ref: str, *, offset: int = 0, limit: int = 0,
             evaluation: Optional[dict] = None) -> dict:
        req = build_request(pb.ReadRequest, context=context, ref=ref, offset=offset, limit=limit,
                       evaluation=evaluation_to_proto(evaluation))
        return self._call("Read", req)

    def traverse(self, context: str, frame_id: str, *, depth: Optional[int] = None,
                 direction: str = "", include_bodies: bool = False,
                 include_events: bool = False, max_nodes: int = 0, max_bytes: int = 0,
                 cursor: str = "", evaluation: Optional[dict] = None) -> dict:
        req = build_request(pb.TraverseRequest, context=context, frame_id=frame_id, depth=depth,
                       direction=direction, include_bodies=include_bodies,
                       include_events=include_events, max_nodes=max_nodes,
                       max_bytes=max_bytes, cursor=cursor,
                       evaluation=evaluation_to_proto(evaluation))
        return self._call("Traverse", req)

    def inspect(self, context: str) -> dict:
        return self._call("InspectIndex", build_request(pb.InspectIndexRequest, context=context))

    def rebuild(self, context: str) -> dict:
        return self._call("RebuildIndex", build_request(pb.RebuildIndexRequest, context=context),
                          timeout=self._rebuild_timeout)

    # -- server-side jobs: kind "rebuild-index" (shared/jobs.py) ------------------------------
    def start_job(self, context: str, kind: str = "rebuild-index") -> dict:
        return job_reply(self._call("StartJob", build_request(
            common.StartJobRequest, context=context, kind=kind)))

    def get_job(self, id: str) -> dict:
        return job_reply(self._call("GetJob", build_request(common.JobRequest, id=id)))

    def list_jobs(self, context: str = "") -> dict:
        return {"jobs": [job_reply(j) for j in self._call("ListJobs", build_request(
            common.ListJobsRequest, context=context)).get("jobs", [])]}

    def cancel_job(self, id: str) -> dict:
        return job_reply(self._call("CancelJob", build_request(common.JobRequest, id=id)))
