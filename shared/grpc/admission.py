"""Admission of expensive calls on a gRPC server (shared/admission.py, SEC-07): a server
interceptor placed after authentication (services/server/serving.py), which knows each
call's principal. An expensive call is one of EXPENSIVE_METHODS, or any request of at
least LARGE_REQUEST_BYTES (a large write); the services' own principal calling another
service is not counted again (the user's call was, where it arrived). Every other unary
call is a cheap one, whose being served paces the expensive calls (health checks and
reflection aside)."""
from __future__ import annotations

import grpc
from google.protobuf.message import Message

from morphz.shared.admission import Admission
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.auth import caller_of
from morphz.shared.grpc.errors import abort

EXPENSIVE_METHODS = frozenset({
    "/morphz.api.transaction.v1.TransactionService/Audit",
    "/morphz.api.transaction.v1.TransactionService/RebuildProjections",
    "/morphz.api.transaction.v1.TransactionService/Erase",
    "/morphz.api.transaction.v1.TransactionService/ListFrames",
    "/morphz.api.recall.v1.RecallService/Traverse",
    "/morphz.api.recall.v1.RecallService/RebuildIndex",
    "/morphz.api.encoding.v1.EncodingService/Compile",
})
LARGE_REQUEST_BYTES = 1 << 20
NOT_CHEAP = ("/grpc.health.v1.Health/", "/grpc.reflection.")  # probes pace nothing


class _PacedContext:
    """An expensive call's context: gRPC's (or authentication's) plus its ticket's pace,
    which the servicer's Deadline calls at each check (shared/grpc/deadline.py)."""
    __slots__ = ("_context", "pace")

    def __init__(self, context, pace) -> None:
        self._context, self.pace = context, pace

    def __getattr__(self, name: str):
        return getattr(self._context, name)


class AdmissionInterceptor(grpc.ServerInterceptor):
    def __init__(self, admission: Admission) -> None:
        self.admission = admission

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.request_streaming:
            return handler  # request streams (reflection) are not work of this kind
        method = handler_call_details.method
        always = method in EXPENSIVE_METHODS
        probe = method.startswith(NOT_CHEAP)
        admission = self.admission

        def ticket(request, context):
            """The call's hold on the budgets, or None for a call that takes none."""
            caller = caller_of(context)
            if caller.service or not (always or _large(request)):
                return None
            try:
                return admission.admit(caller.principal if caller.authenticated else None,
                                       _who(context))
            except MorphzError as err:
                abort(context, err)

        if handler.unary_unary is not None:
            behavior = handler.unary_unary

            def unary(request, context):
                held = ticket(request, context)
                if held is None:
                    if probe:
                        return behavior(request, context)
                    who = _who(context)
                    admission.cheap_started(who)
                    try:
                        return behavior(request, context)
                    finally:
                        admission.cheap_ended(who)
                with held:
                    return behavior(request, _PacedContext(context, held.pace))
            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        behavior = handler.unary_stream

        def streaming(request, context):
            held = ticket(request, context)
            if held is None:
                yield from behavior(request, context)
                return
            with held:
                yield from behavior(request, _PacedContext(context, held.pace))
        return grpc.unary_stream_rpc_method_handler(
            streaming, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def _who(context) -> str:
    """Who a call is for pacing: its principal, else (no authentication) its connection."""
    caller = caller_of(context)
    return f"principal:{caller.principal}" if caller.authenticated else \
        f"peer:{context.peer()}"


def _large(request) -> bool:
    return isinstance(request, Message) and request.ByteSize() >= LARGE_REQUEST_BYTES
