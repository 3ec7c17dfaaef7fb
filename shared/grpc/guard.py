"""What every RPC of a Morphz server passes before its servicer (SEC-03, SEC-06): a server
interceptor (services/server/serving.py puts it first) that

- decodes requests with deserializers that never raise: gRPC's own path for one that
  raises answers INTERNAL, logs a traceback and keeps ~20 KB per request; here bytes
  that are not the request message are answered INVALID_ARGUMENT / REQUEST_UNDECODABLE,
  logged at most once a minute (with the count);
- bounds each request: message_bytes, then every string and list field
  (shared/grpc/field_limits.py);
- and the server: concurrent_rpcs (health checks aside) and bytes_in_flight, the request
  bytes of the RPCs being processed and the bytes of the replies not yet delivered
  (SEC-08): a unary reply until gRPC has delivered it, a streamed one until gRPC asks
  for the next (it does once the previous is sent) or the stream ends; a request that
  does not fit is answered RESOURCE_EXHAUSTED at once (retry later), the others keep
  being served; a reply that does not fit is answered the same, one over reply_bytes
  REPLY_TOO_LARGE (ask for it in pages), and one its client does not read within
  reply_stall_seconds is cancelled (shared/grpc/stalled_replies.py).

Each service's calls to another (metadata FROM_HEADER naming the calling service, which
dependency channels send) have a bytes_in_flight budget of their own, one per calling
service, beside the callers' (everything else): in a split deployment a storage process
holding recall's feed pages or an encoding's reads does not refuse the transaction
service's commit of a caller's large write, admitted already where that call arrived,
for traffic that is not its own (issue 58). The mark chooses a budget, never a right
(authentication does that); a process's memory for requests and replies is bounded by
its budgets together.

Every refusal is the structured error of shared/grpc/errors.py naming its limit.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent import futures
from typing import Callable, Optional

import grpc
from google.protobuf.message import Message

from morphz.shared import limits
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.field_limits import SMALLEST, FieldLimits
from morphz.shared.process.memory import LARGE, Trimmer
from morphz.shared.grpc.stalled_replies import StalledReplies
from morphz.shared.grpc.errors import abort

# A server at its limit still answers probes (a health Watch, a stream, is counted).
UNCOUNTED = ("/grpc.health.v1.Health/Check",)
# Who a service-to-service call comes from, and the services that may say so: each has a
# budget of bytes in flight of its own ("" is the callers').
FROM_HEADER = "morphz-from"
SERVICES = frozenset({"storage", "transaction", "recall", "encoding", "all"})
SMALL_REPLY = 64 << 10  # bytes: a reply that fits a client's first flow-control window
_log = logging.getLogger("morphz.rpc")


class _Refused:
    """What a request decodes to when it is refused: its handler answers `error`."""
    __slots__ = ("error",)

    def __init__(self, error: MorphzError) -> None:
        self.error = error


class _Call:
    """One RPC's holdings: a concurrency slot and the request bytes it reserved (in its
    budget, `account`), given back once when it ends (or, should it never run, when it
    is dropped)."""
    __slots__ = ("_guard", "counted", "size", "account")

    def __init__(self, guard: "Guard", counted: bool, account: str = "") -> None:
        self._guard: Optional[Guard] = guard
        self.counted, self.size, self.account = counted, 0, account

    def release(self) -> None:
        guard, self._guard = self._guard, None
        if guard is not None:
            guard._release(self.counted, self.size, self.account)

    __del__ = release


class _Throttled:
    """A warning at most once per `interval`, with how many it stands for."""

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self._interval, self._clock = interval, clock
        self._lock = threading.Lock()
        self._count, self._next = 0, float("-inf")

    def note(self, method: str, size: int) -> None:
        with self._lock:
            self._count += 1
            now = self._clock()
            if now < self._next:
                return
            count, self._count, self._next = self._count, 0, now + self._interval
        _log.warning("%d undecodable request(s) answered REQUEST_UNDECODABLE (the last: %s, "
                     "%d bytes); logged at most every %.0f s", count, method, size,
                     self._interval)


class Guard(grpc.ServerInterceptor):
    def __init__(self, *, max_concurrent_rpcs: int = limits.CONCURRENT_RPCS.max,
                 max_bytes_in_flight: int = limits.BYTES_IN_FLIGHT.max,
                 max_message_bytes: int = limits.MESSAGE_BYTES.max,
                 max_reply_bytes: int = limits.REPLY_BYTES.max,
                 reply_stall_seconds: float = limits.REPLY_STALL_SECONDS,
                 log_interval: float = 60.0, trimmer: Optional[Trimmer] = None,
                 fields: Optional[FieldLimits] = None) -> None:
        """`trimmer`: the process's, asked for a malloc_trim after a large request (None:
        no trims); `fields`: the field checks (their plans), else a set of its own."""
        self.max_rpcs, self.max_bytes = max_concurrent_rpcs, max_bytes_in_flight
        self._trimmer = trimmer
        self._fields = fields if fields is not None else FieldLimits()
        self.max_message, self.max_reply = max_message_bytes, max_reply_bytes
        self._stalled = StalledReplies(reply_stall_seconds)
        self._lock = threading.Lock()
        self.active_rpcs = 0
        self._in_flight: dict[str, int] = {}  # budget ("" or a calling service) -> bytes
        self._undecodable = _Throttled(log_interval)
        # Refusals at the RPC limit are answered on a thread of their own: the workers
        # may all be busy (that is when the limit is reached).
        self._refusals = futures.ThreadPoolExecutor(1, thread_name_prefix="morphz-refuse")

    @property
    def transport_rpcs(self) -> int:
        """gRPC's own cap (maximum_concurrent_rpcs, answered without details): above
        ours, so that ours is the one met, with room for the refusals and health checks."""
        return 2 * self.max_rpcs + 16

    @property
    def bytes_in_flight(self) -> int:
        """Bytes held now, every budget's."""
        with self._lock:
            return sum(self._in_flight.values())

    def held(self, account: str = "") -> int:
        """Bytes held now in one budget ("": the callers')."""
        with self._lock:
            return self._in_flight.get(account, 0)

    # -- admission ----------------------------------------------------------------------
    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        counted = not method.startswith(UNCOUNTED)
        if counted:
            with self._lock:
                full = self.active_rpcs >= self.max_rpcs
                if not full:
                    self.active_rpcs += 1
            if full:
                return self._refusal(handler, MorphzError(
                    limits.CONCURRENT_RPCS.reason, f"the server is holding its limit of "
                    f"{self.max_rpcs} concurrent RPCs; retry later",
                    **limits.CONCURRENT_RPCS.details(self.max_rpcs)))
        return self._guarded(handler, method, _Call(self, counted, _account(
            handler_call_details.invocation_metadata)))

    def _reserve(self, size: int, account: str = "") -> bool:
        with self._lock:
            held = self._in_flight.get(account, 0)
            if held + size > self.max_bytes:
                return False
            self._in_flight[account] = held + size
            return True

    def _held(self, reply, context, account: str = "") -> Optional[Callable[[], None]]:
        """Count a reply in bytes_in_flight, or refuse it; watch it for a client that
        does not read. Returns what gives it back once delivered (None: not held)."""
        if not isinstance(reply, Message):
            return None
        size = reply.ByteSize()
        if size > self.max_reply:
            abort(context, MorphzError(
                limits.REPLY_BYTES.reason, f"the reply has {size} bytes; at most "
                f"{self.max_reply} go in one: ask for it in pages",
                **limits.REPLY_BYTES.details(self.max_reply, size=size)))
        if size < SMALL_REPLY:
            return None  # fits a client's first window: never held
        if not self._reserve(size, account):
            abort(context, MorphzError(
                limits.BYTES_IN_FLIGHT.reason, f"the server is holding its limit of "
                f"{self.max_bytes} request and reply bytes; retry later",
                **limits.BYTES_IN_FLIGHT.details(self.max_bytes, size=size)))
        delivered = self._stalled.watch(context.cancel)
        released = []

        def release() -> None:
            if not released:
                released.append(True)
                delivered()
                self._release(False, size, account)
        return release

    def _hold_reply(self, reply, context, account: str = "") -> None:
        """A unary reply, held until gRPC has delivered it (the call's callbacks run
        then)."""
        release = self._held(reply, context, account)
        if release is not None and not context.add_callback(release):
            release()

    def _held_stream(self, replies, context, account: str = ""):
        """A stream's replies, each held from when it is handed to gRPC until gRPC asks
        for the next (it has sent this one then) or the stream ends (also when it is
        cancelled: the generator is closed)."""
        release = None
        try:
            for reply in replies:
                release = self._held(reply, context, account)
                yield reply
                if release is not None:
                    release()
                    release = None
        finally:
            if release is not None:
                release()

    def _release(self, counted: bool, size: int, account: str = "") -> None:
        with self._lock:
            self.active_rpcs -= counted
            if size:
                self._in_flight[account] -= size
        if size >= LARGE and self._trimmer is not None:  # its pieces are freed: give
            self._trimmer.trim_soon()  # them back to the system

    def _refusal(self, handler, error: MorphzError):
        def refuse(request, context):
            abort(context, error)
        refuse.experimental_thread_pool = self._refusals
        return _handler(handler, refuse, None)

    # -- each request -------------------------------------------------------------------
    def _decoder(self, decode, method: str, call: _Call, streaming: bool):
        def decoder(raw: bytes):
            size = len(raw)
            if size > self.max_message:
                return _Refused(MorphzError(
                    limits.MESSAGE_BYTES.reason, f"the request message has {size} bytes; at "
                    f"most {self.max_message}",
                    **limits.MESSAGE_BYTES.details(self.max_message, size=size)))
            if not streaming:  # request streams (reflection) are not held to the budget
                if not self._reserve(size, call.account):
                    return _Refused(MorphzError(
                        limits.BYTES_IN_FLIGHT.reason, f"the server is processing its limit "
                        f"of {self.max_bytes} request bytes; retry later",
                        **limits.BYTES_IN_FLIGHT.details(self.max_bytes, size=size)))
                call.size = size
            if decode is None:
                return raw
            try:
                return decode(raw)
            except Exception:  # noqa: BLE001 - any bytes at all: never gRPC's raise path
                self._undecodable.note(method, size)
                return _Refused(MorphzError("REQUEST_UNDECODABLE", "the request bytes are not "
                                            f"a {method.rsplit('/', 1)[-1]} request message",
                                            size=size))
        return decoder

    def _check(self, request, call: _Call, context) -> None:
        if type(request) is _Refused:
            abort(context, request.error)
        if call.size > SMALLEST and isinstance(request, Message):
            try:
                self._fields.check(request)
            except MorphzError as err:
                abort(context, err)

    def _guarded(self, handler, method: str, call: _Call):
        check, hold, hold_stream = self._check, self._hold_reply, self._held_stream
        decode = self._decoder(handler.request_deserializer, method, call,
                               handler.request_streaming)
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            def unary_unary(request, context):
                try:
                    check(request, call, context)
                    reply = inner(request, context)
                    hold(reply, context, call.account)
                    return reply
                finally:
                    call.release()
            return _handler(handler, unary_unary, decode)
        if handler.unary_stream is not None:
            inner = handler.unary_stream

            def unary_stream(request, context):
                try:
                    check(request, call, context)
                    yield from hold_stream(inner(request, context), context, call.account)
                finally:
                    call.release()
            return _handler(handler, unary_stream, decode)

        def checked(requests, context):
            for request in requests:
                if type(request) is _Refused:
                    abort(context, request.error)
                yield request
        if handler.stream_unary is not None:
            inner = handler.stream_unary

            def stream_unary(requests, context):
                try:
                    return inner(checked(requests, context), context)
                finally:
                    call.release()
            return _handler(handler, stream_unary, decode)
        inner = handler.stream_stream

        def stream_stream(requests, context):
            try:
                yield from hold_stream(inner(checked(requests, context), context), context,
                                       call.account)
            finally:
                call.release()
        return _handler(handler, stream_stream, decode)


def _account(metadata) -> str:
    """The budget a call's bytes count in: the calling service it names, else ""."""
    for key, value in metadata or ():
        if key == FROM_HEADER:
            return value if value in SERVICES else ""
    return ""


def _handler(like, behavior, decode) -> grpc.RpcMethodHandler:
    """A handler of `like`'s kind running `behavior`, decoding with `decode`."""
    ser = like.response_serializer
    if like.request_streaming:
        make = grpc.stream_stream_rpc_method_handler if like.response_streaming \
            else grpc.stream_unary_rpc_method_handler
    else:
        make = grpc.unary_stream_rpc_method_handler if like.response_streaming \
            else grpc.unary_unary_rpc_method_handler
    return make(behavior, request_deserializer=decode, response_serializer=ser)
