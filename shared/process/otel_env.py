"""What the standard OTEL_* variables ask of tracing. It imports no OpenTelemetry, so a
process with tracing off (the CLI, mostly) loads none of it."""
from __future__ import annotations

import logging
from typing import Mapping

EXPORTERS = ("otlp", "console")  # OTLP over gRPC; the console one prints spans as JSON
_log = logging.getLogger("morphz.telemetry")


def trace_exporters(env: Mapping[str, str]) -> list[str]:
    """The exporters spans go to; [] (the default) exports nothing. Unlike the SDK's
    default (otlp), unset means none; an OTLP endpoint alone means otlp."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = env.get("OTEL_TRACES_EXPORTER", "")
    if not names and (env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                      or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        names = "otlp"
    chosen = []
    for name in (n.strip().lower() for n in names.split(",")):
        if name in EXPORTERS and name not in chosen:
            chosen.append(name)
        elif name and name != "none":
            _log.warning("OTEL_TRACES_EXPORTER: %r is not one of %s; ignored", name,
                         ", ".join(EXPORTERS + ("none",)))
    return chosen


def tracing_configured(env: Mapping[str, str]) -> bool:
    return bool(trace_exporters(env))


def service_name(default: str, env: Mapping[str, str]) -> str:
    """OTEL_SERVICE_NAME if set, else the process's own name (morphz-<role>, morphz-cli)."""
    return env.get("OTEL_SERVICE_NAME", "").strip() or default
