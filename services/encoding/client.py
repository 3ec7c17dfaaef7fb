"""EncodingClient: EncodingCore's interface over gRPC (same arguments, same dict
replies, same MorphzError reasons), with a deadline on every call."""
from __future__ import annotations

import json
from typing import Optional

import grpc

from morphz.api.encoding.v1 import encoding_pb2 as pb
from morphz.api.encoding.v1 import encoding_pb2_grpc as pb_grpc
from morphz.shared.grpc.client import DEFAULT_TIMEOUT, build_request
from morphz.shared.grpc.errors import call
from morphz.shared.grpc.protojson import to_plain


class EncodingClient:
    def __init__(self, channel: grpc.Channel, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._stub = pb_grpc.EncodingServiceStub(channel)
        self._timeout = timeout

    def _call(self, method: str, request_cls, **fields) -> dict:
        request = build_request(request_cls, **fields)
        return to_plain(call(getattr(self._stub, method), request, timeout=self._timeout))

    def compile(self, context: str, session: str, *, activation: str = "",
                budget_bytes: int = 0, budget_tokens: int = 0, preview_bytes: int = 0,
                must_read=(), scope: Optional[dict] = None, parent_snapshot: str = "",
                model: str = "", evaluation_profile: str = "",
                bindings: Optional[dict] = None, capabilities: bool = False) -> dict:
        scope_msg = build_request(pb.Scope, **{k: v for k, v in (scope or {}).items() if v})
        return self._call("Compile", pb.CompileRequest, context=context, session=session,
                          activation=activation, budget_bytes=budget_bytes,
                          budget_tokens=budget_tokens, preview_bytes=preview_bytes,
                          must_read=list(must_read), scope=scope_msg,
                          parent_snapshot=parent_snapshot, model=model,
                          evaluation_profile=evaluation_profile, bindings=dict(bindings or {}),
                          capabilities=capabilities)

    def show(self, context: str, snapshot: str) -> dict:
        request = build_request(pb.SnapshotRequest, context=context, snapshot=snapshot)
        reply = call(self._stub.ShowSnapshot, request, timeout=self._timeout)
        return json.loads(reply.record_json)

    def replay(self, context: str, snapshot: str) -> dict:
        return self._call("Replay", pb.SnapshotRequest, context=context, snapshot=snapshot)

    def check(self, context: str, snapshot: str) -> dict:
        return self._call("Check", pb.SnapshotRequest, context=context, snapshot=snapshot)

    def read(self, context: str, snapshot: str, ref: str, offset: int = 0,
             limit: int = 0) -> dict:
        return self._call("Read", pb.ReadRequest, context=context, snapshot=snapshot, ref=ref,
                          offset=offset, limit=limit)

    def search(self, context: str, snapshot: str, query: str, limit: int = 0) -> dict:
        return self._call("Search", pb.SearchRequest, context=context, snapshot=snapshot,
                          query=query, limit=limit)

    def list_snapshots(self, context: str, *, session: str = "", activation: str = "",
                       since: str = "", until: str = "", limit: int = 0,
                       cursor: str = "") -> dict:
        return self._call("ListSnapshots", pb.ListSnapshotsRequest, context=context,
                          session=session, activation=activation, since=since, until=until,
                          limit=limit, cursor=cursor)

    def evaluation(self, context: str, activation: str) -> dict:
        return self._call("ShowEvaluation", pb.EvaluationRequest, context=context,
                          activation=activation)
