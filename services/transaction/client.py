"""TransactionClient: TransactionCore's interface over gRPC (same arguments, same
dict replies, same MorphzError reasons), with a deadline on every call.

With several transaction instances (`serve transaction --etcd`), a write sent to an
instance that does not own the context is refused before anything happens (NOT_OWNER,
naming the owner's address); a client given `connect` follows that redirect.

The service authenticates the principal of the channel's credentials (a user's, or
the services' own when recall or encoding call it) and authorizes it against the
context's policy. The `caller` that recall and encoding pass on (SERVICE_CALLER, once
they have authorized the user themselves) is not sent: over the wire the channel's
principal, the services' own, says the same. No service acts for a user at another, so
no acting-for principal travels in metadata."""
from __future__ import annotations

from typing import Callable, Iterator, Optional, Union

import grpc

from morphz.api.transaction.v1 import transaction_pb2 as pb
from morphz.api.transaction.v1 import transaction_pb2_grpc as pb_grpc
from morphz.services.transaction.convert import tx_to_proto
from morphz.services.transaction.core.erase_select import Selector
from morphz.services.transaction.core.txlang import Tx
from morphz.api.common.v1 import common_pb2 as common
from morphz.shared.auth import Caller
from morphz.shared.grpc.job_messages import job_reply
from morphz.shared.grpc.client import DEFAULT_TIMEOUT, build_request
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.errors import call, from_rpc_error
from morphz.shared.grpc.protojson import to_plain


MAX_REDIRECTS = 2  # an owner can change once more while a redirect is followed


class TransactionClient:
    def __init__(self, channel: grpc.Channel, *, timeout: float = DEFAULT_TIMEOUT,
                 connect: Optional[Callable[[str], grpc.Channel]] = None) -> None:
        """`connect(address)` opens a channel (with this client's credentials) to the
        owner a NOT_OWNER refusal names; without it the refusal reaches the caller."""
        self._stub = pb_grpc.TransactionServiceStub(channel)
        self._timeout = timeout
        self._connect = connect
        self._owners: dict[str, pb_grpc.TransactionServiceStub] = {}  # address -> stub
        self._channels: list[grpc.Channel] = []

    def close(self) -> None:
        """Close the channels opened to follow redirects (not the one given)."""
        for ch in self._channels:
            ch.close()
        self._channels, self._owners = [], {}

    def _call(self, method: str, request_cls, **fields) -> dict:
        request = build_request(request_cls, **fields)
        stub = self._stub
        for hop in range(MAX_REDIRECTS + 1):
            try:
                return to_plain(call(getattr(stub, method), request, timeout=self._timeout))
            except MorphzError as e:
                address = e.details.get("owner_address") if e.reason == "NOT_OWNER" else None
                if not address or self._connect is None or hop == MAX_REDIRECTS:
                    raise
                stub = self._owner(address)  # refused unread there: safe to send again

    def _owner(self, address: str) -> pb_grpc.TransactionServiceStub:
        stub = self._owners.get(address)
        if stub is None:
            channel = self._connect(address)
            self._channels.append(channel)
            stub = self._owners[address] = pb_grpc.TransactionServiceStub(channel)
        return stub

    def create_context(self, context: str, window: int = 0) -> dict:
        return self._call("CreateContext", pb.CreateContextRequest, context=context, window=window)

    def status(self, context: str) -> dict:
        return self._call("GetStatus", pb.GetStatusRequest, context=context)

    def append_event(self, context: str, session: str, kind: str, text: str, *,
                     request_id: str = "", actor: str = "", causal_refs=(),
                     activation: str = "", target_session: str = "", secret: bool = False,
                     occurred_at: str = "", caller: Optional[Caller] = None) -> dict:
        return self._call("AppendEvent", pb.AppendEventRequest, context=context,
                          session=session, kind=kind, text=text, request_id=request_id,
                          actor=actor, causal_refs=list(causal_refs), activation=activation,
                          target_session=target_session, secret=secret,
                          occurred_at=occurred_at)

    def append_events(self, context: str, events: list[dict], *,
                      caller: Optional[Caller] = None) -> dict:
        """`events`: append_event's keywords (session, kind, text, ...) per event."""
        items = [build_request(pb.AppendEventRequest, **dict(
            e, causal_refs=list(e.get("causal_refs", ())))) for e in events]
        return self._call("AppendEvents", pb.AppendEventsRequest, context=context,
                          events=items)

    def activate(self, context: str, session: str, *,
                 caller: Optional[Caller] = None) -> dict:
        return self._call("Activate", pb.ActivateRequest, context=context, session=session)

    def deliver(self, context: str, activation: str) -> dict:
        return self._call("Deliver", pb.DeliverRequest, context=context, activation=activation)

    def commit(self, context: str, tx: Union[str, Tx], *, session: str = "",
               request_id: str = "", activation: str = "") -> dict:
        form = {"text": tx} if isinstance(tx, str) else {"structured": tx_to_proto(tx)}
        return self._call("Commit", pb.CommitRequest, context=context, session=session,
                          request_id=request_id, activation=activation, **form)

    def get_frame(self, context: str, frame_id: str, at_revision: int = 0, *,
                  reveal_secrets: bool = False) -> dict:
        return self._call("GetFrame", pb.GetFrameRequest, context=context, frame_id=frame_id,
                          at_revision=at_revision, reveal_secrets=reveal_secrets)

    def list_frames(self, context: str, *, reveal_secrets: bool = False, max_bytes: int = 0,
                    cursor: str = "") -> dict:
        """Every frame (max_bytes 0), or a page of them and its next_cursor."""
        return self._call("ListFrames", pb.ListFramesRequest, context=context,
                          reveal_secrets=reveal_secrets, max_bytes=max_bytes, cursor=cursor)

    def get_event(self, context: str, ref_or_id: str, *, reveal_secrets: bool = False) -> dict:
        return self._call("GetEvent", pb.GetEventRequest, context=context, ref=ref_or_id,
                          reveal_secrets=reveal_secrets)

    def rebuild_projections(self, context: str) -> dict:
        return self._call("RebuildProjections", pb.RebuildProjectionsRequest, context=context)

    def audit(self, context: str) -> dict:
        return self._call("Audit", pb.AuditRequest, context=context)

    def set_policy(self, context: str, op: str, principal: str, rights: list[str],
                   session: str = "") -> dict:
        return self._call("SetPolicy", pb.SetPolicyRequest, context=context, op=op,
                          principal=principal, rights=list(rights), session=session)

    def set_retention(self, context: str, policy: str) -> dict:
        """Set the context's retention policy ("(retention (kinds ...) (days N))"), or
        remove it ("none")."""
        return self._call("SetPolicy", pb.SetPolicyRequest, context=context, op="retention",
                          retention=policy)

    def get_policy(self, context: str) -> dict:
        return self._call("GetPolicy", pb.GetPolicyRequest, context=context)

    def list_contexts(self) -> dict:
        return self._call("ListContexts", pb.ListContextsRequest)

    def export(self, context: str, *, since: str = "", until: str = "",
               reveal_secrets: bool = False) -> Iterator[dict]:
        """The export's pages (TransactionCore.export), as they come: the whole stream
        has this client's deadline."""
        request = build_request(pb.ExportRequest, context=context, since=since, until=until,
                                reveal_secrets=reveal_secrets)
        try:
            for page in self._stub.Export(request, timeout=self._timeout):
                yield to_plain(page)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def delete_context(self, context: str, reason: str) -> dict:
        return self._call("DeleteContext", pb.DeleteContextRequest, context=context,
                          reason=reason)

    def erase(self, context: str, selector: Selector, reason: str, *,
              dry_run: bool = False) -> dict:
        return self._call("Erase", pb.EraseRequest, context=context, refs=list(selector.refs),
                          session=selector.session, actor=selector.actor,
                          kinds=list(selector.kinds), phrase=selector.phrase,
                          since=selector.since, until=selector.until, reason=reason,
                          dry_run=dry_run)

    # -- server-side jobs: kind "audit", "rebuild-projections" or "retention" (shared/jobs.py)
    def start_job(self, context: str, kind: str) -> dict:
        return job_reply(self._call("StartJob", common.StartJobRequest, context=context,
                                    kind=kind))

    def get_job(self, id: str) -> dict:
        return job_reply(self._call("GetJob", common.JobRequest, id=id))

    def list_jobs(self, context: str = "") -> dict:
        return {"jobs": [job_reply(j) for j in self._call(
            "ListJobs", common.ListJobsRequest, context=context).get("jobs", [])]}

    def cancel_job(self, id: str) -> dict:
        return job_reply(self._call("CancelJob", common.JobRequest, id=id))
