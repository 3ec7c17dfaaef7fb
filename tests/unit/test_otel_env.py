"""DIST-07: which exporter the standard OTEL_* variables choose (none unless asked)."""
from __future__ import annotations

import pytest

from morphz.shared.process.otel_env import service_name, trace_exporters, tracing_configured

ENDPOINT = "http://127.0.0.1:4317"


@pytest.mark.parametrize("env, chosen", [
    ({}, []),
    ({"OTEL_TRACES_EXPORTER": "none"}, []),
    ({"OTEL_TRACES_EXPORTER": "otlp"}, ["otlp"]),
    ({"OTEL_TRACES_EXPORTER": " Console , otlp,console"}, ["console", "otlp"]),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, ["otlp"]),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ENDPOINT}, ["otlp"]),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, []),
    ({"OTEL_TRACES_EXPORTER": "zipkin"}, []),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, []),
])
def test_DIST_07_exporters_follow_the_otel_variables(env, chosen):
    assert trace_exporters(env) == chosen
    assert tracing_configured(env) == bool(chosen)


def test_DIST_07_otel_service_name_overrides_the_process_name():
    assert service_name("morphz-storage", {}) == "morphz-storage"
    assert service_name("morphz-storage", {"OTEL_SERVICE_NAME": ""}) == "morphz-storage"
    assert service_name("morphz-storage", {"OTEL_SERVICE_NAME": "store-eu1"}) == "store-eu1"
