"""DIST-07: one trace follows a request across every process it touches, and no body,
text or secret appears in spans. Storage and transaction run as real child processes,
each `morphz context` command as another, all exporting over OTLP/gRPC to a trace
receiver in this test process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent import futures
from dataclasses import dataclass

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from morphz.services.server.app import AllInOne, ServerConfig
from morphz.shared.process.telemetry import is_recording

from tests.conftest import ServerProcess
from tests.integration.test_split import SERVING, wait_health

CONTEXT = "traced"
# Distinctive texts the request carries: none may reach the exported spans.
EVENT_TEXT = "event-text-marker-5b1e the user asked for the secret plan"
FRAME_BODY = "frame-body-marker-9c2d"
TX_REASON = "tx-reason-marker-41aa"
SECRET = "secret-marker-e07f"
MARKERS = (EVENT_TEXT, FRAME_BODY, TX_REASON, SECRET)
TX = (f'(context-tx (base-version 0) (reason "{TX_REASON}") '
      f'(create plan (note "{FRAME_BODY}") (token "{SECRET}")))')
TX_SERVICE = "/morphz.api.transaction.v1.TransactionService"
STORAGE_SERVICE = "/morphz.api.storage.v1.StorageService"
CLI, TRANSACTION, STORAGE = "morphz-cli", "morphz-transaction", "morphz-storage"


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace collector: keeps every export request as it came."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[trace_service_pb2.ExportTraceServiceRequest] = []

    def Export(self, request, context):
        with self._lock:
            self._requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()

    def requests(self) -> list:
        with self._lock:
            return list(self._requests)


@dataclass(frozen=True)
class Span:
    service: str
    trace: str
    id: str
    parent: str
    name: str
    attributes: dict


def _value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def spans_of(requests) -> list[Span]:
    out = []
    for request in requests:
        for rs in request.resource_spans:
            service = {a.key: _value(a.value) for a in rs.resource.attributes}["service.name"]
            for ss in rs.scope_spans:
                for s in ss.spans:
                    out.append(Span(service, s.trace_id.hex(), s.span_id.hex(),
                                    s.parent_span_id.hex(), s.name,
                                    {a.key: _value(a.value) for a in s.attributes}))
    return out


@pytest.fixture(scope="module")
def receiver():
    r = Receiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(r, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield r, f"http://127.0.0.1:{port}"
    server.stop(0)


@pytest.fixture(scope="module")
def traced_run(receiver, tmp_path_factory):
    """Storage and transaction processes and six CLI commands, all tracing to the
    receiver; returns (the spans, the CLI's replies by command). The servers are
    stopped (SIGTERM) before the spans are read: each exports what it holds as it stops,
    as the CLI does as it exits."""
    r, endpoint = receiver
    tmp = tmp_path_factory.mktemp("tracing")
    env = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
           "OTEL_TRACES_SAMPLER": "parentbased_always_on", "OTEL_PROPAGATORS": "tracecontext",
           "OTEL_SERVICE_NAME": "", "OTEL_RESOURCE_ATTRIBUTES": "", "OTEL_SDK_DISABLED": ""}
    storage = ServerProcess(tmp / "storage", env, ["storage"]).start()
    procs = [storage]
    try:
        transaction = ServerProcess(tmp / "transaction", env,
                                    ["transaction", "--storage", storage.address]).start()
        procs.append(transaction)
        wait_health(transaction, SERVING)
        (tmp / "tx").write_text(TX, encoding="utf-8")

        def cli(*argv: str) -> dict:
            done = subprocess.run(
                [sys.executable, "-m", "morphz.services.cli.main", "context", *argv,
                 "--server", transaction.address, "--context", CONTEXT, "--format", "json"],
                capture_output=True, text=True, env=dict(os.environ, **env), timeout=120)
            assert done.returncode in (0, 1), done.stderr
            return json.loads(done.stdout)

        replies = {"create": cli("create", CONTEXT),
                   "event": cli("event", "--session", "s1", "--kind", "user-message",
                                "--text", EVENT_TEXT),
                   "tx": cli("tx", "--file", str(tmp / "tx")),
                   "tx again": cli("tx", "--file", str(tmp / "tx")),
                   "frame": cli("frame", "plan"),
                   "read": cli("read", "@e1")}
    finally:
        for p in reversed(procs):
            assert p.stop() == 0, p.stderr()
    return r.requests(), replies


def roots(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.service == CLI and s.name == name and not s.parent]


def descends(span: Span, root: Span, by_id: dict) -> bool:
    while span.parent:
        span = by_id[span.parent]  # a parent missing from the export fails here
    return span == root


@pytest.mark.split_processes
def test_DIST_07_one_trace_across_processes(traced_run):
    requests, replies = traced_run
    assert replies["tx"]["revision"] == 1, replies["tx"]
    spans = spans_of(requests)
    by_id = {s.id: s for s in spans}
    assert len(by_id) == len(spans)
    assert {s.service for s in spans} == {CLI, TRANSACTION, STORAGE}
    # One trace per command, rooted at the command's span: every span of the servers
    # continues the trace of the command it serves (background calls record none).
    cli_roots = [s for s in spans if not s.parent]
    assert sorted(s.name for s in cli_roots) == sorted(
        f"morphz context {c.split()[0]}" for c in replies)
    assert {s.service for s in cli_roots} == {CLI}
    assert {s.trace for s in spans} == {s.trace for s in cli_roots}
    for s in spans:
        root = next(r for r in cli_roots if r.trace == s.trace)
        assert descends(s, root, by_id), s

    # The committed transaction: its trace reaches both servers, through each step.
    root = next(r for r in roots(spans, "morphz context tx") if "morphz.reason" not in
                r.attributes)
    trace = [s for s in spans if s.trace == root.trace]
    assert {s.service for s in trace} == {CLI, TRANSACTION, STORAGE}
    named = {(s.service, s.name) for s in trace}
    assert {(CLI, f"{TX_SERVICE}/Commit"), (TRANSACTION, f"{TX_SERVICE}/Commit"),
            (TRANSACTION, "tx.parse"), (TRANSACTION, "tx.rebase"),
            (TRANSACTION, "mind.validate_apply"), (TRANSACTION, "storage.commit"),
            (STORAGE, f"{STORAGE_SERVICE}/Commit")} <= named
    server_commit = next(s for s in trace
                         if s.service == STORAGE and s.name == f"{STORAGE_SERVICE}/Commit")
    assert by_id[server_commit.parent].service == TRANSACTION  # its caller's client span
    parse = next(s for s in trace if s.name == "tx.parse")
    assert parse.attributes["morphz.tx.ops"] == 1 and parse.attributes["morphz.tx.chars"] \
        == len(TX)


@pytest.mark.split_processes
def test_DIST_07_a_failed_request_is_traced_with_its_reason(traced_run):
    requests, replies = traced_run
    reason = replies["tx again"]["error"]["reason"]
    spans = spans_of(requests)
    root = next(r for r in roots(spans, "morphz context tx") if "morphz.reason" in
                r.attributes)
    assert root.attributes["morphz.reason"] == reason
    commits = [s for s in spans if s.trace == root.trace and s.name == f"{TX_SERVICE}/Commit"]
    assert {s.service for s in commits} == {CLI, TRANSACTION}
    for s in commits:
        assert s.attributes["morphz.reason"] == reason
        assert s.attributes["rpc.grpc.status_code"] == grpc.StatusCode[
            replies["tx again"]["error"]["code"]].value[0]


@pytest.mark.split_processes
def test_DIST_07_no_body_text_or_secret_in_spans(traced_run):
    requests, replies = traced_run
    # The markers went through every process (stored, then read back by the CLI)...
    assert FRAME_BODY in replies["frame"]["body"] and SECRET in replies["frame"]["body"]
    assert replies["read"]["text"] == EVENT_TEXT
    assert spans_of(requests)
    # ...and none is anywhere in what was exported: attribute values, names, events,
    # statuses, resources.
    for request in requests:
        exported = request.SerializeToString()
        for marker in MARKERS:
            assert marker.encode() not in exported, marker


@pytest.mark.all_in_one(reason="starts all-in-one servers of its own (tracing off and on)")
def test_DIST_07_tracing_off_creates_no_exporter(tmp_path, monkeypatch):
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)

    def exporter_threads() -> set:  # BatchSpanProcessor exports from its own thread
        return {t for t in threading.enumerate() if t.name.startswith("OtelBatch")}

    before = exporter_threads()
    app = AllInOne(ServerConfig(str(tmp_path / "off"), "127.0.0.1:0")).start()
    try:
        assert not is_recording(app.tracer)
        assert exporter_threads() == before
    finally:
        app.stop(grace=1)
    # The same server with an exporter configured does start one (the check above can fail).
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    app = AllInOne(ServerConfig(str(tmp_path / "on"), "127.0.0.1:0")).start()
    try:
        assert is_recording(app.tracer)
        assert exporter_threads() - before
    finally:
        app.stop(grace=1)
