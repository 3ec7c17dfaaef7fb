"""OpenTelemetry set-up for a composition root: the exporter follows the standard
OTEL_* variables (none when unset), and gRPC interceptors trace every RPC."""
from __future__ import annotations

import os
from typing import Optional

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter


def tracer_provider(service: str, extra: Optional[SpanProcessor] = None) -> TracerProvider:
    tp = TracerProvider(resource=Resource.create({"service.name": service}))
    exporters = os.environ.get("OTEL_TRACES_EXPORTER", "")
    if not exporters and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        exporters = "otlp"
    for name in filter(None, (e.strip() for e in exporters.split(","))):
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
            tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        elif name == "console":
            tp.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    if extra is not None:
        tp.add_span_processor(extra)
    return tp
