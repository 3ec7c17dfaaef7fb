"""Deliberately broken targets for the conformance kit (KIT-03): a gRPC proxy in front of a
real server that forwards every unary call byte for byte, except where a `Fault` bends
one behaviour the way a broken implementation would. The kit talks to the proxy and
must fail exactly the cases named for that behaviour.

A proxy, not a switch inside the server: the server stays as it ships, and each fault is
stated in a few lines here, next to the cases it must break."""
from __future__ import annotations

import re
import threading
import uuid
from concurrent import futures
from typing import Callable, Optional

import grpc

from morphz.api.storage.v1 import storage_pb2
from morphz.api.transaction.v1 import transaction_pb2 as txn

TX = "/morphz.api.transaction.v1.TransactionService/"
STORAGE = "/morphz.api.storage.v1.StorageService/"
_STATUS_KEY = "grpc-status-details-bin"
_BACKOFF = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 500),
            ("grpc.max_receive_message_length", 64 << 20)]

Forward = Callable[[str, bytes], bytes]  # (method, request) -> reply; raises grpc.RpcError


class Refusal(Exception):
    """A fault's own structured error (google.rpc.Status with an ErrorInfo reason)."""

    def __init__(self, code: grpc.StatusCode, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self):
        from google.rpc import error_details_pb2, status_pb2
        from grpc_status import rpc_status
        st = status_pb2.Status(code=self.code.value[0], message=self.message)
        st.details.add().Pack(error_details_pb2.ErrorInfo(reason=self.reason, domain="morphz"))
        return rpc_status.to_status(st)


class Fault:
    """Forwards unchanged; a subclass bends `call` for the methods it breaks."""

    def call(self, method: str, request: bytes, forward: Forward) -> bytes:
        return forward(method, request)


def _info(e: grpc.RpcError):
    """The ErrorInfo a structured error carries (None for a transport failure)."""
    from google.rpc import error_details_pb2, status_pb2
    for key, value in e.trailing_metadata() or ():
        if key == _STATUS_KEY:
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info
    return None


def _reason(e: grpc.RpcError) -> str:
    info = _info(e)
    return info.reason if info is not None else ""


class StaleLastWriterWins(Fault):
    """A transaction rejected because its boundaries changed since its base (TX_CONFLICT)
    is applied anyway over the latest version: last writer wins."""

    def call(self, method, request, forward):
        try:
            return forward(method, request)
        except grpc.RpcError as e:
            if method != TX + "Commit" or _reason(e) != "TX_CONFLICT":
                raise
        commit = txn.CommitRequest.FromString(request)
        status = txn.ContextStatus.FromString(forward(
            TX + "GetStatus", txn.GetStatusRequest(context=commit.context).SerializeToString()))
        commit.text = re.sub(r"\(base-version \d+\)", f"(base-version {status.revision})",
                             commit.text, count=1)
        return forward(method, commit.SerializeToString())


class RetryAnsweredTwice(Fault):
    """A retried write (a request id already seen) is applied a second time instead of
    being answered with the first receipt."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def _fresh(self, rid: str) -> str:
        with self._lock:
            if not rid or rid not in self._seen:
                self._seen.add(rid)
                return rid
        return f"{rid}-again-{uuid.uuid4().hex[:8]}"

    def call(self, method, request, forward):
        if method in (TX + "Commit", TX + "AppendEvent"):
            msg = (txn.CommitRequest if method.endswith("Commit")
                   else txn.AppendEventRequest).FromString(request)
            msg.request_id = self._fresh(msg.request_id)
            request = msg.SerializeToString()
        elif method == TX + "AppendEvents":
            batch = txn.AppendEventsRequest.FromString(request)
            for e in batch.events:
                e.request_id = self._fresh(e.request_id)
            request = batch.SerializeToString()
        return forward(method, request)


class LeaksOtherSessions(Fault):
    """A session's commit is checked as an operator's (the session dropped): the causal
    scope is not enforced, so another session's private evidence may be cited."""

    def call(self, method, request, forward):
        if method == TX + "Commit":
            commit = txn.CommitRequest.FromString(request)
            commit.session = ""
            request = commit.SerializeToString()
        return forward(method, request)


class ForgetsAcrossRestart(Fault):
    """The last acknowledged commit of each context is gone once the server has been down
    (as a server acknowledging before its write is durable would lose it to a SIGKILL):
    the frames it created read as missing. The proxy cannot tell a stop from a kill, so
    it forgets across either."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._down = False
        self._last: dict[str, set[str]] = {}       # context -> frames its last commit made
        self._forgotten: dict[str, set[str]] = {}

    def call(self, method, request, forward):
        try:
            reply = forward(method, request)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                with self._lock:
                    self._down = True
            raise
        with self._lock:
            if self._down:  # back after an outage: the last commits are "lost"
                self._down = False
                for ctx, ids in self._last.items():
                    self._forgotten.setdefault(ctx, set()).update(ids)
                self._last.clear()
        if method == TX + "Commit":
            ctx = txn.CommitRequest.FromString(request).context
            made = {r.target for r in txn.Receipt.FromString(reply).results
                    if r.outcome in ("created", "derived")}
            with self._lock:
                self._last[ctx] = made
        elif method == TX + "GetFrame":
            asked = txn.GetFrameRequest.FromString(request)
            if asked.frame_id in self._forgotten.get(asked.context, ()):
                raise Refusal(grpc.StatusCode.NOT_FOUND, "FRAME_NOT_FOUND",
                              f"no frame {asked.frame_id}")
        elif method == TX + "ListFrames":
            gone = self._forgotten.get(txn.ListFramesRequest.FromString(request).context, set())
            listed = txn.FrameList.FromString(reply)
            kept = [f for f in listed.frames if f.id not in gone]
            del listed.frames[:]
            listed.frames.extend(kept)
            reply = listed.SerializeToString()
        return reply


class FencedOwnerWrites(Fault):
    """In front of storage: a write refused because its fencing token is lower than the
    highest seen (FENCED) is applied anyway, under the highest token."""

    def call(self, method, request, forward):
        try:
            return forward(method, request)
        except grpc.RpcError as e:
            info = _info(e)
            if method != STORAGE + "Commit" or info is None or info.reason != "FENCED":
                raise
        commit = storage_pb2.CommitRequest.FromString(request)
        commit.fence = int(info.metadata["highest"])
        return forward(method, commit.SerializeToString())


class Proxy:
    """Listens on loopback (`address`) and forwards to `backend` through `fault`."""

    def __init__(self, backend: str, fault: Optional[Fault] = None) -> None:
        self._fault = fault or Fault()
        self._channel = grpc.insecure_channel(backend, options=_BACKOFF)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                                   options=_BACKOFF[2:])
        self._server.add_generic_rpc_handlers([_Handler(self)])
        self.address = f"127.0.0.1:{self._server.add_insecure_port('127.0.0.1:0')}"

    def start(self) -> "Proxy":
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(grace=1).wait()
        self._channel.close()

    def handle(self, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        metadata = tuple((k, v) for k, v in context.invocation_metadata()
                         if not k.startswith((":", "grpc-")) and k != "user-agent")
        remaining = context.time_remaining()

        def forward(m: str, body: bytes) -> bytes:
            return self._channel.unary_unary(m)(body, metadata=metadata,
                                                timeout=min(remaining or 30.0, 60.0))
        try:
            return self._fault.call(method, request, forward)
        except Refusal as r:
            context.abort_with_status(r.status())
        except grpc.RpcError as e:
            context.set_trailing_metadata(tuple(
                (k, v) for k, v in (e.trailing_metadata() or ()) if k == _STATUS_KEY))
            context.abort(e.code(), e.details() or "")


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, proxy: Proxy) -> None:
        self._proxy = proxy

    def service(self, details):
        method = details.method
        return grpc.unary_unary_rpc_method_handler(
            lambda request, context: self._proxy.handle(method, request, context))
