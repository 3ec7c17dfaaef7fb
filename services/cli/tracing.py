"""Tracing of one `morphz context` command when the OTEL_* variables ask for it: a root
span named after the command, which every RPC the command makes continues (W3C trace
context, shared/grpc/tracing.py). With tracing off nothing of OpenTelemetry is loaded."""
from __future__ import annotations

import contextlib
import os
from typing import Callable, Iterator, Mapping

import grpc

from morphz.shared.process.otel_env import tracing_configured

Traced = Callable[[grpc.Channel], grpc.Channel]


def _untraced(channel: grpc.Channel) -> grpc.Channel:
    return channel


@contextlib.contextmanager
def command_trace(command: str, context: str, env: Mapping[str, str] = os.environ, *,
                  name: str = "") -> Iterator[Traced]:
    """Run a command inside its root span (`morphz context tx`, say); yields what makes a
    channel's calls continue it. The spans are exported before this returns: the
    process ends right after (an unreachable OTLP endpoint costs its timeout,
    OTEL_EXPORTER_OTLP_TIMEOUT)."""
    if not tracing_configured(env):
        yield _untraced
        return
    from morphz.shared.grpc.tracing import client_tracing
    from morphz.shared.process.telemetry import mark_failed, tracer_provider
    tp = tracer_provider("morphz-cli", env=env)
    try:
        with tp.get_tracer("morphz.cli").start_as_current_span(
                name or f"morphz context {command}", record_exception=False,
                set_status_on_exception=False,
                attributes={"morphz.command": command, "morphz.context": context}) as span:
            try:
                yield lambda channel: client_tracing(channel, tp)
            except BaseException as e:
                mark_failed(span, e)
                raise
    finally:
        tp.shutdown()
