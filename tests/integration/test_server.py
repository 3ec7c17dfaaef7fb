"""The server's operational surface: health, reflection, tracing, limits, process life."""
from __future__ import annotations

import os
import signal

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from morphz.shared.auth import IN_PROCESS_CALLER
from morphz.services.server.app import AllInOne, ServerConfig
from morphz.services.transaction.client import TransactionClient
from morphz.shared.process.telemetry import tracer_provider

TX_SERVICE = "morphz.api.transaction.v1.TransactionService"


def test_health_reports_serving_for_every_service(endpoints):
    for service, address in _services(endpoints):
        with grpc.insecure_channel(address) as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            for name in ("", service):
                resp = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
                assert resp.status == health_pb2.HealthCheckResponse.SERVING, (name, address)


def test_reflection_lists_the_services(endpoints):
    for service, address in _services(endpoints):
        with grpc.insecure_channel(address) as ch:
            stub = reflection_pb2_grpc.ServerReflectionStub(ch)
            req = reflection_pb2.ServerReflectionRequest(list_services="")
            resp = next(stub.ServerReflectionInfo(iter([req]), timeout=5))
            names = {s.name for s in resp.list_services_response.service}
            assert {service, "grpc.health.v1.Health"} <= names, address


def _services(endpoints) -> list[tuple[str, str]]:
    """(full service name, the address serving it) for each of the four services."""
    return [(f"morphz.api.{role}.v1.{role.capitalize()}Service", getattr(endpoints, role))
            for role in ("storage", "transaction", "recall", "encoding")]


ALL_IN_ONE_ITSELF = "starts an all-in-one server of its own"


@pytest.mark.all_in_one(reason=ALL_IN_ONE_ITSELF + " (with an in-memory span exporter)")
def test_every_rpc_and_inner_step_is_traced(tmp_path):
    exporter = InMemorySpanExporter()
    app = AllInOne(ServerConfig(str(tmp_path), "127.0.0.1:0"),
                   tracer=tracer_provider("test", SimpleSpanProcessor(exporter))).start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as ch:
            c = TransactionClient(ch, timeout=10)
            c.create_context("traced")
            c.commit("traced", "(context-tx (base-version 0) (create f (x)))")
        names = [s.name for s in exporter.get_finished_spans()]
        assert f"/{TX_SERVICE}/CreateContext" in names and f"/{TX_SERVICE}/Commit" in names
        assert {"tx.parse", "tx.rebase", "mind.validate_apply", "storage.commit"} <= set(names)
        spans = exporter.get_finished_spans()
        rpc = next(s for s in spans if s.name.endswith("/Commit"))
        inner = {s.name for s in spans if s.parent and s.parent.span_id == rpc.context.span_id}
        assert {"tx.parse", "mind.validate_apply", "storage.commit"} <= inner
    finally:
        app.stop(grace=1)


@pytest.mark.parametrize("text", [
    "(" * 100_000,
    "(context-tx (base-version 0) (create f \"" + "x" * 1000 + "\\q\"))",
    b"\xff\xfe(context-tx)".decode("latin-1"),
    "(context-tx (base-version 99999999999999999999) (create f))",
    "(context-tx (base-version 0) (explode f))",
    ")" * 10,
])
def test_sec_03_hostile_transactions_get_structured_errors_and_server_keeps_serving(
        client, ctx, text):
    from morphz.shared.errors import MorphzError
    client.commit(ctx, "(context-tx (base-version 0) (create kept (v 1)))")
    with pytest.raises(MorphzError) as info:
        client.commit(ctx, text)
    assert info.value.reason in {"TX_PARSE_ERROR", "TX_INVALID", "TX_UNKNOWN_OP"}
    # What was committed before is intact, and the server still commits.
    assert client.status(ctx)["revision"] == 1
    assert client.get_frame(ctx, "kept")["body"] == "(v 1)"
    assert client.commit(ctx, "(context-tx (base-version 1) (revise kept (v 2)))")["revision"] == 2


def test_sec_03_oversized_event_rejected_with_structured_error(client, ctx):
    from morphz.shared.errors import MorphzError
    with pytest.raises(MorphzError) as info:
        client.append_event(ctx, "s1", "tool-result", "x" * (33 << 20))
    assert info.value.reason == "CONTEXT_INPUT_INVALID"
    assert client.status(ctx)["event_count"] == 1


@pytest.mark.all_in_one(reason=ALL_IN_ONE_ITSELF + " (`morphz serve`, SIGTERM)")
def test_morphz_serve_starts_answers_and_stops_on_sigterm(server_process):
    server = server_process().start()
    with grpc.insecure_channel(server.address) as ch:
        c = TransactionClient(ch, timeout=10)
        c.create_context("served")
        assert c.status("served")["revision"] == 0
    assert server.stop() == 0
    assert "morphz: stopped" in server.stderr()
    assert os.path.exists(os.path.join(server.data_dir, "store", "data.mdb"))


def _signal_thread(pid: int, tid: int, sig: int) -> None:
    """tgkill(2): deliver `sig` to one thread of another process (the kernel otherwise
    picks the thread, usually the main one)."""
    import ctypes
    numbers = {"x86_64": 234, "aarch64": 131}
    machine = os.uname().machine
    if machine not in numbers:
        pytest.fail(f"no tgkill syscall number known for {machine}")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(numbers[machine], pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), "tgkill failed")


@pytest.mark.all_in_one(reason=ALL_IN_ONE_ITSELF + " (`morphz serve`, SIGTERM)")
def test_morphz_serve_stops_when_a_non_main_thread_receives_sigterm(server_process):
    """A process-directed signal may land on any thread; the server must stop anyway."""
    server = server_process().start()
    pid = server.proc.pid
    others = [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]
    assert others, "the server runs no thread besides the main one"
    _signal_thread(pid, others[-1], signal.SIGTERM)
    assert server.proc.wait(timeout=20) == 0
    assert "morphz: stopped" in server.stderr()


def test_wiring_returns_what_it_adds_and_sets_nothing_on_the_server(tmp_path):
    """recall and encoding wiring hand the composition root their service names, core and
    stoppers; the object they were given gains no attribute."""
    from concurrent import futures
    from types import SimpleNamespace

    from morphz.services.encoding import wiring as encoding_wiring
    from morphz.services.encoding.core.engine import EncodingCore
    from morphz.services.recall import wiring as recall_wiring
    from morphz.services.recall.core.engine import RecallCore
    from morphz.services.storage.lmdb import LmdbStore
    from morphz.services.transaction.core.engine import TransactionCore
    from morphz.shared.admission import Admission

    store = LmdbStore(str(tmp_path / "store"))
    app = SimpleNamespace(server=grpc.server(futures.ThreadPoolExecutor(max_workers=2)),
                          store=store, transactions=TransactionCore(store),
                          tracer=tracer_provider("wiring-test"), admission=Admission(),
                          config=ServerConfig(str(tmp_path), "127.0.0.1:0"))
    given = set(vars(app))
    recall = recall_wiring.register(app)
    encoding = encoding_wiring.register(app)
    try:
        assert set(vars(app)) == given
        assert recall.names == ["morphz.api.recall.v1.RecallService"]
        assert encoding.names == ["morphz.api.encoding.v1.EncodingService"]
        assert isinstance(recall.core, RecallCore) and isinstance(encoding.core, EncodingCore)
        # the index rebuild jobs, the hybrid search's helpers, the followers, the opener
        # of the indexes at start, the vector follower (told, then the embedding worker,
        # then joined), the fit worker, the vector cache, the folder lock
        assert len(recall.stoppers) == 10 and encoding.stoppers == []
        app.transactions.create_context("c", caller=IN_PROCESS_CALLER)
        assert recall.core.inspect("c",
                                   caller=IN_PROCESS_CALLER).context == "c"  # the core it handed back serves
    finally:
        recall.stop()
        app.tracer.shutdown()
        store.close()
