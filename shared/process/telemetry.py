"""OpenTelemetry set-up for a composition root: the exporter follows the standard
OTEL_* variables (none when unset: shared/process/otel_env.py), and the tracers cores get."""
from __future__ import annotations

import contextlib
import os
from typing import Iterator, Mapping, Optional, Union

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import Status, StatusCode

from morphz.shared.process.otel_env import service_name, trace_exporters

REASON = "morphz.reason"  # a failed span's attribute: the error's reason, never its message


class NoTracing:
    """The tracer of a core when nothing records spans: unlike the API's NoOpTracer it
    does not even switch the current context (3 spans cost ~3% of a commit's CPU)."""
    _SPAN = contextlib.nullcontext(trace.INVALID_SPAN)  # reusable; its span ignores attributes

    def start_as_current_span(self, name: str, **_: object) -> contextlib.nullcontext:
        return self._SPAN


NO_TRACING = NoTracing()


def mark_failed(span: trace.Span, error: BaseException) -> None:
    """Record why a span failed: the reason (MorphzError's, else the exception's type).
    Not the message, nor the exception event the SDK records by default: a message
    may echo the input it rejects, and spans carry no bodies or texts (DIST-07)."""
    reason = getattr(error, "reason", None) or type(error).__name__
    span.set_attribute(REASON, reason)
    span.set_status(Status(StatusCode.ERROR, reason))


class CoreTracer:
    """The tracer of a core when spans are recorded: a span a core's error passes
    through records the error's reason only (mark_failed)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer

    @contextlib.contextmanager
    def start_as_current_span(self, name: str, **kwargs) -> Iterator[trace.Span]:
        with self._tracer.start_as_current_span(name, record_exception=False,
                                                set_status_on_exception=False,
                                                **kwargs) as span:
            try:
                yield span
            except BaseException as e:
                mark_failed(span, e)
                raise


def is_recording(tp: TracerProvider) -> bool:
    """False when nothing receives spans: a server then skips its tracing interceptors
    and gives its cores NO_TRACING (spans cost ~5% of a commit even when sampled out)."""
    return tp.sampler is not ALWAYS_OFF


def core_tracer(tp: TracerProvider, name: str) -> Union[CoreTracer, NoTracing]:
    """The tracer a composition root hands a core: tp's, or NO_TRACING if it records nothing."""
    return CoreTracer(tp.get_tracer(name)) if is_recording(tp) else NO_TRACING


def tracer_provider(service: str, extra: Optional[SpanProcessor] = None,
                    env: Mapping[str, str] = os.environ) -> TracerProvider:
    """The provider of one process named `service` (OTEL_SERVICE_NAME overrides it),
    exporting through a batch processor to each exporter OTEL_TRACES_EXPORTER names
    (the OTLP exporter reads its OTEL_EXPORTER_OTLP_* variables itself). `extra`: a
    processor tests add (an in-memory exporter)."""
    exporters = trace_exporters(env)
    # Nothing would receive the spans: record none (servers then also skip their
    # interceptors and give their cores NO_TRACING: see is_recording).
    sampler = ALWAYS_OFF if not exporters and extra is None else None
    tp = TracerProvider(resource=Resource.create({"service.name": service_name(service, env)}),
                        sampler=sampler)
    for name in exporters:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        elif name == "console":
            tp.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    if extra is not None:
        tp.add_span_processor(extra)
    return tp
