"""Tracing of gRPC hops: a client interceptor sending each call's W3C trace context (the
`traceparent` metadata, through the configured OTEL_PROPAGATORS) in a CLIENT span, and
a server interceptor continuing it in a SERVER span, so one trace follows a request
across processes.

Why not opentelemetry-instrumentation-grpc's interceptors: its server span misses
every failure answered with abort_with_status (shared/grpc/errors.py's rpc_boundary
answers all of them so), reporting status 0; and its client span copies the error's
message into the span status and an exception event, where a message may echo the
input it rejects. Here a span carries the method, the status code and the ErrorInfo
reason: never a request, reply or message.

Only unary-unary calls are traced (every Morphz RPC is one). Health checks and
reflection are not traced (readiness polls every 0.5 s). A call made outside any
trace (a background poll: readiness, the recall worker) gets no span, and sends an
unsampled context so the callee records none either."""
from __future__ import annotations

import collections
import random
from typing import Optional, Sequence

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

from morphz.shared.process.telemetry import REASON, is_recording

UNTRACED = ("/grpc.health.v1.Health/", "/grpc.reflection.")
STATUS_CODE = "rpc.grpc.status_code"
_DETAILS_KEY = "grpc-status-details-bin"
# A server span is an error only when the server failed, not its caller (OpenTelemetry's
# gRPC semantic conventions); a client span is one for any code but OK.
_SERVER_FAULTS = frozenset({grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED,
                            grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INTERNAL,
                            grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DATA_LOSS})
_CLIENT_FAULTS = frozenset(grpc.StatusCode) - {grpc.StatusCode.OK}


def _attributes(method: str) -> dict:
    service, _, name = method.lstrip("/").partition("/")
    return {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}


def _reason(code: grpc.StatusCode, metadata: Optional[Sequence]) -> str:
    """The ErrorInfo reason in the status details (shared/grpc/errors.py), else the code."""
    for key, value in metadata or ():
        if key == _DETAILS_KEY:
            try:
                details = status_pb2.Status.FromString(value).details
            except (DecodeError, TypeError):
                break
            for detail in details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    return info.reason
    return code.name


def _finish(span: trace.Span, code: grpc.StatusCode, metadata, error_codes) -> None:
    span.set_attribute(STATUS_CODE, code.value[0])
    if code != grpc.StatusCode.OK:
        reason = _reason(code, metadata)
        span.set_attribute(REASON, reason)
        if code in error_codes:
            span.set_status(Status(StatusCode.ERROR, reason))
    span.end()


# -- client side -----------------------------------------------------------------------------
class _CallDetails(collections.namedtuple(
        "_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready",
                         "compression")), grpc.ClientCallDetails):
    pass


def _with_metadata(details: grpc.ClientCallDetails, carrier: dict) -> _CallDetails:
    metadata = [m for m in details.metadata or () if m[0] not in carrier]
    return _CallDetails(details.method, details.timeout, metadata + list(carrier.items()),
                        details.credentials, details.wait_for_ready, details.compression)


class _ClientTracing(grpc.UnaryUnaryClientInterceptor):
    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def intercept_unary_unary(self, continuation, details, request):
        if details.method.startswith(UNTRACED):
            return continuation(details, request)
        carrier: dict = {}
        if not trace.get_current_span().get_span_context().is_valid:
            propagate.inject(carrier, context=_unsampled())
            return continuation(_with_metadata(details, carrier), request)
        span = self._tracer.start_span(details.method, kind=SpanKind.CLIENT,
                                       attributes=_attributes(details.method),
                                       record_exception=False, set_status_on_exception=False)
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        try:
            outcome = continuation(_with_metadata(details, carrier), request)
        except BaseException as e:  # gRPC answers failures as outcomes; this is a bug
            span.set_attribute(REASON, type(e).__name__)
            span.set_status(Status(StatusCode.ERROR, type(e).__name__))
            span.end()
            raise
        outcome.add_done_callback(lambda done: self._done(span, done))  # now, if blocking
        return outcome

    @staticmethod
    def _done(span: trace.Span, done) -> None:
        error = done.exception()
        if error is None:
            _finish(span, grpc.StatusCode.OK, None, _CLIENT_FAULTS)
        elif isinstance(error, grpc.RpcError):
            _finish(span, error.code(), error.trailing_metadata(), _CLIENT_FAULTS)
        else:
            _finish(span, grpc.StatusCode.UNKNOWN, None, _CLIENT_FAULTS)


def _unsampled():
    """A context whose trace is not sampled: the callee's parent-based sampler then
    records nothing for the call (fresh ids, so no two calls share a trace)."""
    ctx = trace.SpanContext(random.getrandbits(128) or 1, random.getrandbits(64) or 1,
                            is_remote=False, trace_flags=trace.TraceFlags(0))
    return trace.set_span_in_context(trace.NonRecordingSpan(ctx))


def client_tracing(channel: grpc.Channel, tp: TracerProvider) -> grpc.Channel:
    """`channel` with its calls traced under tp, or as it is when tp records nothing."""
    if not is_recording(tp):
        return channel
    return grpc.intercept_channel(channel, _ClientTracing(tp.get_tracer("morphz.rpc")))


# -- server side -----------------------------------------------------------------------------
class _ServerTracing(grpc.ServerInterceptor):
    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or handler.unary_unary is None or method.startswith(UNTRACED):
            return handler
        behavior, tracer = handler.unary_unary, self._tracer

        def traced(request, context: grpc.ServicerContext):
            parent = propagate.extract(dict(context.invocation_metadata()))
            with tracer.start_as_current_span(method, context=parent, kind=SpanKind.SERVER,
                                              attributes=_attributes(method),
                                              end_on_exit=False, record_exception=False,
                                              set_status_on_exception=False) as span:
                failed = True
                try:
                    reply = behavior(request, context)
                    failed = False
                    return reply
                finally:
                    # An abort raised and set the code; a crash leaves none (gRPC: UNKNOWN).
                    code = context.code() or (grpc.StatusCode.UNKNOWN if failed
                                              else grpc.StatusCode.OK)
                    _finish(span, code, context.trailing_metadata(), _SERVER_FAULTS)

        return grpc.unary_unary_rpc_method_handler(
            traced, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def server_tracing(tp: TracerProvider) -> list[grpc.ServerInterceptor]:
    """The interceptors a server traces its RPCs with: none when tp records nothing."""
    return [_ServerTracing(tp.get_tracer("morphz.rpc"))] if is_recording(tp) else []
