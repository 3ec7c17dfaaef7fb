"""What every Morphz server process shares, all-in-one or one service: the gRPC server's
options and interceptors (tracing, then authentication: services/server/security.py),
health checking and reflection, channels to the services it depends on (carrying this
process's service credentials), and readiness that follows those dependencies' health."""
from __future__ import annotations

import logging
import threading
from concurrent import futures
from typing import Callable, Optional, Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry.sdk.trace import TracerProvider

from morphz.shared.admission import Admission
from morphz.shared.grpc.auth import PLAINTEXT, ClientAuth
from morphz.shared.limits import MESSAGE_BYTES, TRANSPORT_SLACK
from morphz.shared.process.memory import Trimmer
from morphz.shared.grpc.admission import AdmissionInterceptor
from morphz.shared.grpc.guard import FROM_HEADER, Guard
from morphz.shared.grpc.tracing import client_tracing, server_tracing

MAX_MESSAGE_BYTES = MESSAGE_BYTES.max  # event text is capped at 32 MiB by the core
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
_MESSAGE_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
_log = logging.getLogger("morphz.server")


def build_server(config, tracer: TracerProvider,
                 interceptors: Sequence[grpc.ServerInterceptor] = (),
                 admission: Optional[Admission] = None,
                 trimmer: Optional[Trimmer] = None) -> grpc.Server:
    """A gRPC server with the config's workers and limits, traced if anything records
    (continuing the caller's trace: shared/grpc/tracing.py), then `interceptors`
    (authentication: the trace shows the calls it refuses). Its Guard comes first: every
    request is decoded, bounded and admitted there (shared/grpc/guard.py); gRPC's own
    caps stay above the Guard's, as a backstop. Last, once the caller is known, the
    expensive calls' budgets (shared/grpc/admission.py): they never take the workers
    kept for the cheap calls (`admission`: the budgets, shared with the process's
    server-side jobs; a new one if not given). `trimmer`: the process's malloc trims
    after large requests (shared/process/memory.py; None: none)."""
    config.budgets.check(config.max_workers)
    guard = Guard(max_concurrent_rpcs=config.max_concurrent_rpcs,
                  max_bytes_in_flight=config.max_bytes_in_flight,
                  max_reply_bytes=config.max_reply_bytes,
                  reply_stall_seconds=config.reply_stall_seconds, trimmer=trimmer)
    return grpc.server(
        futures.ThreadPoolExecutor(max_workers=config.max_workers),
        interceptors=[guard, *server_tracing(tracer), *interceptors,
                      AdmissionInterceptor(admission or Admission(config.budgets))],
        maximum_concurrent_rpcs=guard.transport_rpcs,
        options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES + TRANSPORT_SLACK),
                 ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.so_reuseport", 0)])


def expose(server: grpc.Server, names: list[str]) -> health.HealthServicer:
    """Add health checking (every name NOT_SERVING until marked) and reflection."""
    checker = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    mark(checker, names, NOT_SERVING)
    reflection.enable_server_reflection(names + [health.SERVICE_NAME, reflection.SERVICE_NAME],
                                        server)
    return checker


# The health entry of the store's space: NOT_SERVING while writes are refused
# STORAGE_FULL (services/storage/space.py). Reads go on, so the services' own entries
# (and the server's, "") stay SERVING: readiness must not turn reads away.
SPACE_HEALTH = "morphz.storage.space"


def report_space(space, checker: health.HealthServicer) -> None:
    """Keep SPACE_HEALTH as the store's space alarm is (`space`: a storage.space.Space)."""
    space.listen(lambda alarm: checker.set(SPACE_HEALTH,
                                           SERVING if alarm is None else NOT_SERVING))


def mark(checker: health.HealthServicer, names: list[str], status) -> None:
    """Set the status of every name and of the whole server ("")."""
    for name in names + [""]:
        checker.set(name, status)


def dependency_channel(address: str, tracer: TracerProvider,
                       auth: ClientAuth = PLAINTEXT, caller: str = "") -> grpc.Channel:
    """A channel to a service this process calls, with this process's service
    credentials (`auth`), passing on the trace of the request it serves, its calls
    marked as the calling service's (`caller`: its role), whose bytes in flight the
    callee keeps in a budget of their own (shared/grpc/guard.py). Reconnect backoff is
    capped at 1 s (gRPC's default grows to 120 s), so a dependency that comes back is
    seen soon."""
    channel = auth.channel(address, options=_MESSAGE_OPTIONS + [
        ("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
        ("grpc.max_reconnect_backoff_ms", 1000)])
    if caller:
        channel = grpc.intercept_channel(channel, _From(caller))
    return client_tracing(channel, tracer)


class _Details(grpc.ClientCallDetails):
    def __init__(self, d: grpc.ClientCallDetails, metadata: list) -> None:
        self.method, self.timeout, self.metadata = d.method, d.timeout, metadata
        self.credentials, self.wait_for_ready = d.credentials, d.wait_for_ready
        self.compression = d.compression


class _From(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
            grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Names the calling service on every call (FROM_HEADER)."""

    def __init__(self, caller: str) -> None:
        self._mark = (FROM_HEADER, caller)

    def _details(self, d: grpc.ClientCallDetails) -> _Details:
        return _Details(d, [*(d.metadata or ()), self._mark])

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, requests):
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation, details, requests):
        return continuation(self._details(details), requests)


class Readiness:
    """Keeps this process's services NOT_SERVING until every dependency's health check
    answers SERVING, and again while one does not: polled, each check with a deadline.
    A local condition (a transaction instance's etcd lease) that does not hold makes
    the whole server ("") NOT_SERVING and leaves its services' own names as they are.
    `on_ready` runs once, before the first SERVING (a start-up check, say); if it fails
    the process stays NOT_SERVING and it is retried at the next poll."""

    def __init__(self, checker: health.HealthServicer, names: list[str],
                 dependencies: list[tuple[grpc.Channel, str]], *,
                 conditions: Sequence[Callable[[], str]] = (),
                 on_ready: Optional[Callable[[], None]] = None,
                 interval: float = 0.5, check_timeout: float = 2.0) -> None:
        self._checker, self._names = checker, names
        self._deps = [(health_pb2_grpc.HealthStub(ch), name) for ch, name in dependencies]
        self._conditions = list(conditions)  # each says why not to serve ("" when fine)
        self._on_ready = on_ready
        self._interval, self._timeout = interval, check_timeout
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="readiness", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop following the dependencies (before a drain marks everything NOT_SERVING)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _answers(self, stub, name: str) -> bool:
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=self._timeout)
        except grpc.RpcError:
            return False
        return reply.status == SERVING

    def _run(self) -> None:
        fired = False
        serving = (False, False)  # (its services, the whole server "")
        while not self._stop.is_set():
            ready = all(self._answers(stub, name) for stub, name in self._deps)
            if ready and not fired and self._on_ready is not None:
                try:
                    self._on_ready()
                    fired = True
                except Exception:  # noqa: BLE001 - a dependency dropped meanwhile: retry
                    _log.exception("start-up check failed; retrying")
                    ready = False
            # A local condition (the etcd lease) takes the whole server out of the
            # probes' and balancers' rotation, but not its services: the processes that
            # depend on them check the service's name and keep serving what needs no lease.
            why_not = next((w for w in (c() for c in self._conditions) if w), "")
            now = (ready, ready and not why_not)
            if now != serving and not self._stop.is_set():
                _log.info("%s: %s", "SERVING" if now[1] else "NOT_SERVING",
                          why_not or ("dependencies answer" if ready
                                      else "dependencies do not answer"))
                for name in self._names:
                    self._checker.set(name, SERVING if now[0] else NOT_SERVING)
                self._checker.set("", SERVING if now[1] else NOT_SERVING)
                serving = now
            self._stop.wait(self._interval)
