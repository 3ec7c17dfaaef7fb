"""The reference driver: Morphz's public gRPC API (transaction and encoding services)
through stubs the kit generates from protos/ (scripts/gen.py). Nothing of the server's
code is imported; a rejection's reason is read from the google.rpc.Status + ErrorInfo the
API documents (protos/morphz/api/common/v1/common.proto)."""
from __future__ import annotations

import json
import time
from typing import Any, Mapping, Optional, Sequence

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

from morphz_conformance.control import Commands, ProcessControl, run_command, wait_until
from morphz_conformance.grpc_privacy import PrivacyCalls, erased_mark
from morphz_conformance.h2_stall import StalledCall
from morphz_conformance.inspector_client import InspectorClient
from morphz_conformance.mcp_client import McpSession
from morphz_conformance.mcp_client import available as mcp_available
from morphz_conformance.otlp_receiver import Receiver
from morphz_conformance.driver import (Activation, Appended, AuditResult, DeadlineExceeded,
                                       Driver, Encoding,
                                       Evaluation, Event, Frame, GraphEdge, Hit,
                                       Implementation, IndexState, Item, Node, NotSupported,
                                       OpResult, Part, Pressure, Receipt, Rejected, Relation,
                                       ReadPage, RetireRequest, Scope, SearchPage,
                                       SessionState, SnapshotCheck, SnapshotEntry, SnapshotList,
                                       SnapshotReplay,
                                       SnapshotSearch, Span, Status, Traversal, Unreachable)
from morphz_conformance.stubs.morphz.api.encoding.v1 import encoding_pb2 as enc
from morphz_conformance.stubs.morphz.api.encoding.v1 import encoding_pb2_grpc as enc_grpc
from morphz_conformance.stubs.morphz.api.common.v1 import common_pb2 as common
from morphz_conformance.stubs.morphz.api.recall.v1 import recall_pb2 as rec
from morphz_conformance.stubs.morphz.api.recall.v1 import recall_pb2_grpc as rec_grpc
from morphz_conformance.stubs.morphz.api.storage.v1 import storage_pb2 as storage
from morphz_conformance.stubs.morphz.api.storage.v1 import storage_pb2_grpc as storage_grpc
from morphz_conformance.stubs.morphz.api.transaction.v1 import transaction_pb2 as txn
from morphz_conformance.stubs.morphz.api.transaction.v1 import transaction_pb2_grpc as txn_grpc

MORPHZ = Implementation("morphz", "")
NO_COMMANDS = Commands()  # no control hooks
MAX_REDIRECTS = 2  # an owner can change once more while a redirect is followed
_STATUS_KEY = "grpc-status-details-bin"
# Reconnect soon after a restart the kit made (gRPC's default backoff grows to minutes);
# replies as large as an encoding can be.
_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 1000),
            ("grpc.max_receive_message_length", 64 << 20)]
_TRANSPORT = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


def rejection(e: grpc.RpcError) -> Exception:
    """The Rejected a structured gRPC error carries, or Unreachable for transport ones. A
    passed deadline is DeadlineExceeded whether the client saw it pass or the target
    noticed first and said so with its own structured error."""
    code = e.code() if callable(getattr(e, "code", None)) else grpc.StatusCode.UNKNOWN
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceeded(f"{code.name}: {e.details() if hasattr(e, 'details') else ''}")
    for key, value in (e.trailing_metadata() or ()) if hasattr(e, "trailing_metadata") else ():
        if key != _STATUS_KEY:
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except DecodeError:
            break
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                return Rejected(info.reason, status.message, code=code.name,
                                details={k: _json(v) for k, v in info.metadata.items()})
    if code in _TRANSPORT:
        return Unreachable(f"{code.name}: {e.details() if hasattr(e, 'details') else ''}")
    return Rejected(code.name, e.details() if hasattr(e, "details") else "", code=code.name)


def _json(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


class GrpcDriver(PrivacyCalls, Driver):
    """`target`: HOST:PORT of the all-in-one server (or of the transaction service, with
    `encoding_target` and `recall_target` for those services). `storage_target`: the
    internal storage API (`morphz serve --storage-listen`), used only by the tamper hook
    (AUDIT-01). `token`: a bearer token sent as `authorization: Bearer ...` (never
    logged, never in a report); `tls_ca`: PEM bytes of the CA to trust (TLS on);
    `timeout`: every call's deadline in seconds; `commands`: how to start, stop and
    kill the target (the control hooks), `target_log`: where a target the kit starts
    writes its output. SC-Distributed: `second_target` is another transaction instance
    over the same store (the second runtime); `follow_owner`: send a write an instance
    refuses as NOT_OWNER on to the owner it names; `storage_shards`: shard name -> the
    storage address serving it, where contexts are placed on several shards (a context's
    status names its shard; the storage hooks go there, else to `storage_target`);
    `second_recall_target`: a second recall replica (DIST-06); `otlp_receiver`: HOST:PORT
    where the driver receives the spans the target exports over OTLP/gRPC (DIST-07).
    SEC-01: `second_token` is a second principal's (holding no grant on the kit's
    contexts). PRIV-03: `data_dir` is the folder the target keeps its data in, on this
    machine (searched as bytes)."""

    def __init__(self, target: str, *, encoding_target: str = "", recall_target: str = "",
                 storage_target: str = "", token: str = "", tls_ca: Optional[bytes] = None,
                 timeout: float = 30.0, commands: Commands = NO_COMMANDS,
                 target_log: Optional[str] = None, second_target: str = "",
                 follow_owner: bool = True, second_token: str = "", mcp_command: str = "",
                 inspector_url: str = "", inspector_tokens: Optional[dict[str, str]] = None,
                 implementation: Implementation = MORPHZ,
                 storage_shards: Optional[Mapping[str, str]] = None,
                 second_recall_target: str = "", otlp_receiver: str = "",
                 receiver: Optional[Receiver] = None, traceparent: str = "",
                 data_dir: str = "") -> None:
        self._targets = (target, encoding_target or target, recall_target or target,
                         storage_target)
        self._shards, self._second_recall = dict(storage_shards or {}), second_recall_target
        # The receiver is this driver's when it starts it; a view (traced()) shares it.
        self._own_receiver = receiver is None and bool(otlp_receiver)
        self._receiver = Receiver(otlp_receiver).start() if self._own_receiver else receiver
        self._traceparent = traceparent
        self._token, self._tls_ca, self._timeout = token, tls_ca, timeout
        self._control = ProcessControl(commands, self.answers, target_log)
        # PRIV-01/03: the target's log (when the kit starts it) and data folder
        self._log_path = target_log if commands.start else None
        self._data_dir = data_dir
        self._impl, self._second, self._follow_owner = implementation, second_target, follow_owner
        self._second_token, self._mcp_command = second_token, mcp_command
        # UI: the inspector's address and each caller's inspector token ("self", "other")
        self._inspector_url, self._inspector_tokens = inspector_url, dict(inspector_tokens or {})
        self._channels: list[grpc.Channel] = []
        self._owners: dict[str, grpc.Channel] = {}
        self._connect()

    def _connect(self) -> None:
        for ch in self._channels:
            ch.close()
        self._channels = [self._channel(t) for t in self._targets if t]
        self._tx = txn_grpc.TransactionServiceStub(self._channels[0])
        self._enc = enc_grpc.EncodingServiceStub(self._channels[1])
        self._rec = rec_grpc.RecallServiceStub(self._channels[2])
        self._storage = (storage_grpc.StorageServiceStub(self._channels[3])
                         if len(self._channels) > 3 else None)

    def _channel(self, target: str) -> grpc.Channel:
        if self._tls_ca is None:
            return grpc.insecure_channel(target, options=_OPTIONS)
        return grpc.secure_channel(target, grpc.ssl_channel_credentials(self._tls_ca),
                                   options=_OPTIONS)

    def _metadata(self) -> tuple:
        auth = (("authorization", f"Bearer {self._token}"),) if self._token else ()
        return auth + ((("traceparent", self._traceparent),) if self._traceparent else ())

    def _call(self, method, request):
        try:
            return method(request, timeout=self._timeout, metadata=self._metadata())
        except grpc.RpcError as e:
            raise rejection(e) from None

    def _txcall(self, name: str, request):
        """A transaction-service call; with several instances, a NOT_OWNER refusal names
        the owner's address, and the call goes there (unless `follow_owner` is off). An
        instance restarted under its old id is refused by its own former lease until that
        expires: a refusal naming the instance just asked is waited out (within the
        call's deadline)."""
        stub, asked, redirects = self._tx, self._targets[0], 0
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return self._call(getattr(stub, name), request)
            except Rejected as e:
                owner = str(e.details.get("owner_address") or "")
                if e.reason != "NOT_OWNER" or not self._follow_owner or not owner:
                    raise
                if owner == asked:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
                    continue
                redirects += 1
                if redirects > MAX_REDIRECTS:
                    raise
                stub, asked = self._owner_stub(owner), owner

    _rejection = staticmethod(lambda e: rejection(e))

    def _owner_stub(self, address: str):
        if address not in self._owners:
            self._owners[address] = self._channel(address)
        return txn_grpc.TransactionServiceStub(self._owners[address])

    # -- model operations -----------------------------------------------------------------
    def implementation(self) -> Implementation:
        return self._impl

    def answers(self) -> bool:
        """Whether the target answers now (the control hooks wait on it): the transaction
        service answers a call, and each other service at an address of its own reports
        SERVING on gRPC health, which such a service does only once what it calls (the
        transaction service, after a restart too) answers it."""
        try:
            self._tx.ListContexts(txn.ListContextsRequest(), timeout=2,
                                  metadata=self._metadata())
        except grpc.RpcError as e:
            if e.code() in _TRANSPORT:
                return False
        return all(_serving(ch) for ch, t in zip(self._channels[1:3], self._targets[1:3])
                   if t != self._targets[0])

    def create_context(self, context: str, *, window: int = 0) -> Status:
        return _status(self._txcall("CreateContext",
                                    txn.CreateContextRequest(context=context, window=window)))

    def status(self, context: str) -> Status:
        return _status(self._txcall("GetStatus", txn.GetStatusRequest(context=context)))

    def append(self, context: str, session: str, kind: str, text: str, *,
               request_id: str = "", actor: str = "", causal_refs: Sequence[str] = (),
               activation: str = "", target_session: str = "",
               secret: bool = False, occurred_at: str = "") -> Appended:
        r = self._txcall("AppendEvent", txn.AppendEventRequest(
            context=context, session=session, kind=kind, text=text, request_id=request_id,
            actor=actor, causal_refs=list(causal_refs), activation=activation,
            target_session=target_session, secret=secret, occurred_at=occurred_at))
        return _appended(r)

    def activate(self, context: str, session: str) -> Activation:
        return _activation(self._txcall("Activate",
                                        txn.ActivateRequest(context=context, session=session)))

    def deliver(self, context: str, activation: str) -> Activation:
        return _activation(self._txcall("Deliver", txn.DeliverRequest(
            context=context, activation=activation)))

    def commit(self, context: str, text: str, *, session: str = "", request_id: str = "",
               activation: str = "") -> Receipt:
        r = self._txcall("Commit", txn.CommitRequest(
            context=context, session=session, request_id=request_id, text=text,
            activation=activation))
        return Receipt(
            revision=r.revision, base_version=r.base_version,
            results=tuple(OpResult(x.index, x.op, x.target, x.outcome, x.frame_revision,
                                   x.due_tick) for x in r.results),
            released_now=tuple(r.capacity.released_now),
            released_now_bytes=r.capacity.released_now_bytes,
            released_after_window=tuple(r.capacity.released_after_window),
            released_after_window_bytes=r.capacity.released_after_window_bytes,
            cognitive_tick=r.cognitive_tick, event_ref=r.event_ref, replayed=r.replayed,
            rebased=r.rebased, commit_seq=r.commit_seq)

    def frame(self, context: str, frame_id: str, *, at_revision: int = 0) -> Frame:
        return _frame(self._txcall("GetFrame", txn.GetFrameRequest(
            context=context, frame_id=frame_id, at_revision=at_revision)))

    def frames(self, context: str) -> list[Frame]:
        frames, cursor = [], ""
        while True:
            page = self._txcall("ListFrames", txn.ListFramesRequest(
                context=context, max_bytes=1 << 20, cursor=cursor))
            frames.extend(_frame(f) for f in page.frames)
            if not page.next_cursor:
                return frames
            cursor = page.next_cursor

    def event(self, context: str, ref: str) -> Event:
        e = self._txcall("GetEvent", txn.GetEventRequest(context=context, ref=ref))
        return Event(id=e.id, seq=e.seq, ref=e.ref, kind=e.kind, actor=e.actor,
                     session=e.session, causal_refs=tuple(e.causal_refs), time=e.time,
                     text=e.text, state=e.state, protected=e.protected, context=e.context,
                     secret=e.secret, occurred_at=e.occurred_at, erased=erased_mark(e))

    def encoding(self, context: str, session: str, *, activation: str = "",
                 budget_bytes: int = 0, preview_bytes: int = 0,
                 capabilities: bool = False, scope: Optional[Scope] = None,
                 parent_snapshot: str = "", must_read: Sequence[str] = ()) -> Encoding:
        e = self._call(self._enc.Compile, enc.CompileRequest(
            context=context, session=session, activation=activation,
            budget_bytes=budget_bytes, preview_bytes=preview_bytes,
            capabilities=capabilities, parent_snapshot=parent_snapshot,
            must_read=list(must_read),
            scope=enc.Scope(sessions=list(scope.sessions), kinds=list(scope.kinds),
                            frames=list(scope.frames)) if scope else None))
        return Encoding(
            text=e.text, activation=e.activation, revision=e.revision, tick=e.tick,
            regions=tuple(r.name for r in sorted(e.regions, key=lambda r: r.start)),
            items=tuple(Item(region=i.region, kind=i.kind, key=i.key, start=i.start,
                             end=i.end, parts=tuple(Part(p.owner, p.start, p.end)
                                                    for p in i.parts),
                             residency=i.residency, state=i.state,
                             remaining_ticks=i.remaining_ticks, shown_bytes=i.shown_bytes,
                             total_bytes=i.total_bytes, revision=i.revision)
                        for i in e.items),
            pressure=Pressure(e.pressure.level, e.pressure.used_bytes, e.pressure.limit_bytes,
                              e.pressure.external_actions_deferred),
            bytes=e.bytes, snapshot=e.snapshot, hash=e.hash,
            omitted=tuple((o.key, o.reason) for o in e.omitted))

    def list_snapshots(self, context: str, *, session: str = "", activation: str = "",
                       limit: int = 0, cursor: str = "") -> SnapshotList:
        r = self._call(self._enc.ListSnapshots, enc.ListSnapshotsRequest(
            context=context, session=session, activation=activation, limit=limit,
            cursor=cursor))
        return SnapshotList(tuple(SnapshotEntry(
            e.snapshot, e.hash, e.session, e.activation, e.time, e.bytes, e.limit_bytes,
            e.level) for e in r.snapshots), r.next_cursor)

    def snapshot_read(self, context: str, snapshot: str, ref: str) -> str:
        parts, offset = [], 0
        while True:
            r = self._call(self._enc.Read, enc.ReadRequest(context=context, snapshot=snapshot,
                                                           ref=ref, offset=offset))
            parts.append(r.text)
            if not r.has_more:
                return "".join(parts)
            offset = r.next_offset

    def snapshot_search(self, context: str, snapshot: str, query: str) -> SnapshotSearch:
        r = self._call(self._enc.Search, enc.SearchRequest(context=context, snapshot=snapshot,
                                                           query=query))
        return SnapshotSearch(tuple(h.key for h in r.hits), r.empty_reason)

    def replay_snapshot(self, context: str, snapshot: str) -> SnapshotReplay:
        r = self._call(self._enc.Replay, enc.SnapshotRequest(context=context,
                                                             snapshot=snapshot))
        return SnapshotReplay(r.hash, r.replay_hash, r.match, r.ranges_match)

    def check_snapshot(self, context: str, snapshot: str) -> SnapshotCheck:
        r = self._call(self._enc.Check, enc.SnapshotRequest(context=context, snapshot=snapshot))
        return SnapshotCheck(r.current, r.valid_for_new_use,
                             tuple((d.key, d.reason) for d in r.changed))

    def audit(self, context: str) -> AuditResult:
        r = self._txcall("Audit", txn.AuditRequest(context=context))
        problems = [f"{p.projection}: {d}" for p in r.projections if not p.match
                    for d in p.differences]
        if not r.chain.match and r.chain.first_broken:
            problems.append(f"chain broken at {r.chain.first_broken}: {r.chain.problem}")
        if r.replay_error:
            problems.append(f"replay: {r.replay_error}")
        return AuditResult(match=r.match, problems=tuple(problems), erased=r.chain.erased)

    # -- recall ---------------------------------------------------------------------------
    def search(self, context, query="", *, since="", until="", limit=0, kinds=(), states=(),
               sessions=(), cursor="", mode="lexical", evaluation=None, min_commit_seq=0):
        r = self._call(self._rec.Search, rec.SearchRequest(
            context=context, query=query, since=since, until=until, limit=limit,
            kinds=list(kinds), states=list(states), sessions=list(sessions), cursor=cursor,
            mode=mode, evaluation=_evaluation(evaluation), min_commit_seq=min_commit_seq))
        return SearchPage(
            hits=tuple(Hit(h.kind, h.ref, h.id, h.state, h.preview, h.revision, h.time,
                           h.time_basis, h.lexical_rank, h.vector_rank) for h in r.results),
            next_cursor=r.next_cursor, empty=r.empty, observation_ref=r.observation_ref,
            unclosed_lag=r.unclosed_lag, vector_lag=r.vector_lag)

    def read(self, context, ref, *, offset=0, limit=0, evaluation=None):
        r = self._call(self._rec.Read, rec.ReadRequest(
            context=context, ref=ref, offset=offset, limit=limit,
            evaluation=_evaluation(evaluation)))
        return ReadPage(kind=r.kind, ref=r.ref, id=r.id, text=r.text, offset=r.offset,
                        next_offset=r.next_offset, total_chars=r.total_chars,
                        has_more=r.has_more, state=r.state, event_kind=r.event_kind,
                        observation_ref=r.observation_ref)

    def traverse(self, context, frame_id, *, depth=None, direction="", include_bodies=False,
                 include_events=False, max_nodes=0, max_bytes=0, cursor="", evaluation=None):
        r = self._call(self._rec.Traverse, rec.TraverseRequest(
            context=context, frame_id=frame_id, depth=depth, direction=direction,
            include_bodies=include_bodies, include_events=include_events,
            max_nodes=max_nodes, max_bytes=max_bytes, cursor=cursor,
            evaluation=_evaluation(evaluation)))
        return Traversal(
            nodes=tuple(Node(n.kind, n.id, n.ref, n.depth, n.state, n.revision,
                             tuple(n.sources), n.body, n.preview, n.text, n.event_kind)
                        for n in r.nodes),
            edges=tuple(GraphEdge(e.kind, getattr(e, "from"), e.to, e.name) for e in r.edges),
            next_cursor=r.next_cursor, version=r.version, page_bytes=r.page_bytes,
            observation_ref=r.observation_ref)

    def index_status(self, context):
        return _index(self._call(self._rec.InspectIndex,
                                 rec.InspectIndexRequest(context=context)))

    def _storage_for(self, context: str):
        """The storage API serving `context`: its shard's, when shards are named."""
        shard = self.status(context).shard if self._shards else ""
        if shard in self._shards:
            address = self._shards[shard]
            if address not in self._owners:  # channels by address, the owners' too
                self._owners[address] = self._channel(address)
            return storage_grpc.StorageServiceStub(self._owners[address])
        if self._storage is None:
            raise NotSupported("fence")
        return self._storage

    def rebuild_index(self, context):
        return _index(self._call(self._rec.RebuildIndex,
                                 rec.RebuildIndexRequest(context=context)))

    def rebuild(self, context: str) -> None:
        self._txcall("RebuildProjections", txn.RebuildProjectionsRequest(context=context))

    def import_events(self, context: str, events) -> list[Appended]:
        r = self._txcall("AppendEvents", txn.AppendEventsRequest(
            context=context, events=[txn.AppendEventRequest(context=context, **e)
                                     for e in events]))
        return [_appended(a) for a in r.events]

    # -- control hooks --------------------------------------------------------------------
    def capabilities(self) -> frozenset[str]:
        return self._control.capabilities() | (
            {"tamper", "fence", "raw_store"} if self._targets[3] else frozenset()) | (
            {"second_runtime"} if self._second else frozenset()) | (
            {"recall_replica"} if self._second_recall else frozenset()) | (
            {"tracing"} if self._receiver is not None else frozenset()) | (
            {"principals"} if self._token and self._second_token else frozenset()) | {
            "deadline"} | ({"stall"} if self._tls_ca is None else frozenset()) | (  # h2c
            {"mcp"} if self._mcp_command and mcp_available() else frozenset()) | (
            {"inspector"} if self._inspector_url else frozenset()) | (
            self.privacy_capabilities())

    def raw_store_attempts(self, context: str) -> dict[str, str]:
        """The storage API's Get and Commit, with the kit's credentials, on the public port
        and on the internal storage listener."""
        if not self._targets[3]:
            raise NotSupported("raw_store")
        key = [common.KeyPart(text="kit-raw-write")]
        read = storage.GetRequest(context=context, table="frames", key=key)
        write = storage.CommitRequest(context=context, writes=[
            storage.Write(table="frames", key=key, value=b"{}")])
        outcomes = {}
        for where, channel in (("public port", self._channels[0]),
                               ("storage listener", self._channels[3])):
            stub = storage_grpc.StorageServiceStub(channel)
            for what, method, request in (("read", stub.Get, read),
                                          ("write", stub.Commit, write)):
                try:
                    self._call(method, request)
                    outcomes[f"{what} on the {where}"] = ""
                except Rejected as e:
                    outcomes[f"{what} on the {where}"] = e.reason
                except Unreachable:
                    outcomes[f"{what} on the {where}"] = "UNAVAILABLE"
        return outcomes

    def stalled_reads(self, context: str, ref: str, count: int) -> list[StalledCall]:
        if "stall" not in self.capabilities():
            raise NotSupported("stall")
        request = txn.GetEventRequest(context=context, ref=ref).SerializeToString()
        path = "/morphz.api.transaction.v1.TransactionService/GetEvent"
        calls: list[StalledCall] = []
        try:
            for _ in range(count):
                calls.append(StalledCall(self._targets[0], path, request, self._metadata()))
        except BaseException:
            for c in calls:
                c.close()
            raise
        return calls

    def target_memory(self) -> int:
        return self._control.memory()

    def traced(self, trace_id: str, parent_span: str) -> "GrpcDriver":
        if self._receiver is None:
            raise NotSupported("tracing")
        return self._view(traceparent=f"00-{trace_id}-{parent_span}-01")

    def exported_spans(self) -> list[Span]:
        if self._receiver is None:
            raise NotSupported("tracing")
        return self._receiver.spans()

    def second_recall(self) -> "GrpcDriver":
        if not self._second_recall:
            raise NotSupported("recall_replica")
        return self._view(recall_target=self._second_recall)

    def kill_second_recall(self) -> None:
        self._second_recall_hook(self._control.commands.second_recall_kill, serving=False)

    def start_second_recall(self) -> None:
        self._second_recall_hook(self._control.commands.second_recall_start, serving=True)

    def _second_recall_hook(self, command: str, serving: bool) -> None:
        if "recall_replica_restart" not in self.capabilities():
            raise NotSupported("recall_replica_restart")
        run_command(command)
        channel = self._channel(self._second_recall)
        try:
            wait_until(lambda: _serving(channel) == serving,
                       f"{'answer' if serving else 'stop answering'} (the second recall "
                       f"replica)")
        finally:
            channel.close()

    def _view(self, **changes) -> "GrpcDriver":
        """This target as it is, with `changes` to the constructor's arguments (no control
        hooks: those stay with this driver)."""
        args = dict(encoding_target=self._targets[1], recall_target=self._targets[2],
                    storage_target=self._targets[3], token=self._token, tls_ca=self._tls_ca,
                    timeout=self._timeout, second_target=self._second,
                    follow_owner=self._follow_owner, implementation=self._impl,
                    storage_shards=self._shards, receiver=self._receiver,
                    traceparent=self._traceparent)
        args.update(changes)
        return GrpcDriver(self._targets[0], **args)

    def with_deadline(self, seconds: float) -> "GrpcDriver":
        return GrpcDriver(self._targets[0], encoding_target=self._targets[1],
                          recall_target=self._targets[2], token=self._token,
                          tls_ca=self._tls_ca, timeout=seconds, implementation=self._impl)

    def mcp_session(self, who: str = "self") -> McpSession:
        if "mcp" not in self.capabilities():
            raise NotSupported("mcp")
        if who != "self" and "principals" not in self.capabilities():
            raise NotSupported("principals")
        token = {"self": self._token, "other": self._second_token, "anonymous": ""}[who]
        return McpSession(self._mcp_command, token, self._timeout)

    def inspector(self, who: str = "self") -> InspectorClient:
        if "inspector" not in self.capabilities():
            raise NotSupported("inspector")
        if who == "other" and "other" not in self._inspector_tokens:
            raise NotSupported("inspector principals")
        token = "" if who == "anonymous" else self._inspector_tokens.get(who, "")
        return InspectorClient(self._inspector_url, token, self._timeout)

    def as_principal(self, who: str) -> "GrpcDriver":
        if "principals" not in self.capabilities():
            raise NotSupported("principals")
        token = {"other": self._second_token, "anonymous": ""}[who]
        return GrpcDriver(self._targets[0], encoding_target=self._targets[1],
                          recall_target=self._targets[2], token=token, tls_ca=self._tls_ca,
                          timeout=self._timeout, implementation=self._impl)

    def limit_space(self) -> None:
        self._control.limit_space()
        self._connect()

    def free_space(self) -> None:
        self._control.free_space()
        self._connect()

    def restart_with_other_embedder(self) -> None:
        self._control.restart_with_other_embedder()
        self._connect()

    def restart_with_default_embedder(self) -> None:
        self._control.restart_with_default_embedder()
        self._connect()

    def restart_with_older_rules(self) -> None:
        self._control.restart_with_older_rules()
        self._connect()

    def backup(self) -> None:
        self._control.backup()

    def restore_backup(self) -> None:
        self._control.restore_backup()
        self._connect()

    def promote_standby(self) -> None:
        self._control.promote_standby()
        self._connect()

    def lose_leases(self) -> None:
        self._control.lose_leases()

    def restore_leases(self) -> None:
        self._control.restore_leases()

    def fenced_write(self, context: str, token: int) -> None:
        """A harmless row (`frames`/kit-fenced-write) committed straight to storage with
        `token` as its fence."""
        store = self._storage_for(context)
        got = self._call(store.Get, storage.GetRequest(
            context=context, table="frames", key=[common.KeyPart(text="kit-fenced-write")]))
        self._call(store.Commit, storage.CommitRequest(
            context=context, expect_commit_seq=got.commit_seq, fence=token,
            writes=[storage.Write(table="frames", key=[common.KeyPart(text="kit-fenced-write")],
                                  value=b"{}")]))

    def second_runtime(self) -> "GrpcDriver":
        """The second instance, as it is: a write it does not own is refused, not sent on."""
        if not self._second:
            raise NotSupported("second_runtime")
        return GrpcDriver(self._second, encoding_target=self._targets[1],
                          recall_target=self._targets[2], token=self._token,
                          tls_ca=self._tls_ca, timeout=self._timeout, follow_owner=False,
                          implementation=self._impl)

    def tamper_frame(self, context: str, frame_id: str, body: str) -> None:
        """Rewrites the frame's row in the store's `frames` table (JSON with a `body`)
        through the internal storage API, as only the services themselves could."""
        if self._storage is None:
            raise NotSupported("tamper")
        store = self._storage_for(context)
        key = [common.KeyPart(text=frame_id)]
        got = self._call(store.Get, storage.GetRequest(context=context, table="frames",
                                                       key=key))
        if not got.found:
            raise Rejected("FRAME_NOT_FOUND", f"no stored row for {frame_id}")
        row = json.loads(got.value)
        row["body"] = body
        # With owners (etcd), the store takes writes carrying the owner's fencing token only.
        fence = self.status(context).fencing_token
        self._call(store.Commit, storage.CommitRequest(
            context=context, expect_commit_seq=got.commit_seq, fence=fence,
            writes=[storage.Write(table="frames", key=key, value=json.dumps(row).encode())]))

    def _hooks(self, name: str) -> ProcessControl:
        if name not in self._control.capabilities():
            raise NotSupported(name)
        return self._control

    def stop(self) -> None:
        self._hooks("stop").stop()

    def start(self) -> None:
        self._hooks("start").start()
        self._connect()  # a fresh channel: no backoff left over from the outage

    def kill(self) -> None:
        self._hooks("kill").kill()

    def close(self) -> None:
        self._control.close()
        if self._own_receiver and self._receiver is not None:
            self._receiver.stop()
        for ch in [*self._channels, *self._owners.values()]:
            ch.close()
        self._channels, self._owners = [], {}


def _status(s) -> Status:
    return Status(context=s.context, revision=s.revision, cognitive_tick=s.cognitive_tick,
                  window=s.window, event_count=s.event_count,
                  frames_by_state=dict(s.frames_by_state), commit_seq=s.commit_seq,
                  owner=s.owner, owner_address=s.owner_address, fencing_token=s.fencing_token,
                  shard=s.shard,
                  sessions=tuple(SessionState(x.id, x.state, x.pending, x.messages_waiting,
                                              x.outstanding_calls) for x in s.sessions))


def _serving(channel: grpc.Channel) -> bool:
    """gRPC health (grpc.health.v1, the whole server): the request is an empty
    HealthCheckRequest, the reply SERVING is field 1 = 1."""
    try:
        reply = channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=2)
    except grpc.RpcError:
        return False
    return reply == b"\x08\x01"


def _appended(r) -> Appended:
    return Appended(ref=r.ref, seq=r.seq, id=r.id, replayed=r.replayed, session=r.session,
                    activation=r.activation, call=r.call, returned_to=r.returned_to,
                    commit_seq=r.commit_seq)


def _evaluation(e: Optional[Evaluation]):
    return rec.Evaluation(session=e.session, activation=e.activation) if e else None


def _index(s) -> IndexState:
    return IndexState(documents=s.documents, position=s.position, head=s.head, lag=s.lag,
                      vector_lag=s.vectors.lag, embedder=s.embedder,
                      embedded=s.vectors.cache_misses, events=s.events, frames=s.frames,
                      feed_position=s.feed_position, embed_workers=s.vectors.embed_workers,
                      documents_per_second=s.vectors.documents_per_second,
                      eta_seconds=s.vectors.eta_seconds)


def _activation(a) -> Activation:
    return Activation(id=a.id, session=a.session, claimed=tuple(a.claimed), root=a.root,
                      tick=a.tick, tick_advanced=a.tick_advanced,
                      retired_frames=tuple(a.retired_frames), delivered=a.delivered,
                      results=tuple(a.results))


def _frame(f) -> Frame:
    retire = None
    if f.HasField("retire"):
        r = f.retire
        retire = RetireRequest(r.generation, r.requested_tick, r.due_tick, r.remaining_ticks,
                               r.reason, r.frame_revision)
    return Frame(id=f.id, revision=f.revision, state=f.state, protected=f.protected,
                 sources=tuple(f.sources), body=f.body, retire=retire,
                 generation=f.generation,
                 relations=tuple(Relation(x.subject, x.name, x.object) for x in f.relations),
                 secret=f.secret, erased=erased_mark(f))


__all__ = ["GrpcDriver", "NotSupported", "rejection"]
