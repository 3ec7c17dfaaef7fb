"""Shared fixtures: a real all-in-one server (real gRPC on loopback, real LMDB in a
temporary directory) and a TransactionClient talking to it."""
from __future__ import annotations

import itertools

import grpc
import pytest

from morphz.services.server.app import AllInOne, ServerConfig
from morphz.services.transaction.client import TransactionClient

_names = itertools.count(1)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    app = AllInOne(ServerConfig(data_dir=str(tmp_path_factory.mktemp("lmdb")),
                                listen="127.0.0.1:0")).start()
    yield app
    app.stop(grace=1)


@pytest.fixture(scope="session")
def address(server) -> str:
    return f"127.0.0.1:{server.port}"


@pytest.fixture(scope="session")
def client(address):
    channel = grpc.insecure_channel(address)
    yield TransactionClient(channel, timeout=30)
    channel.close()


@pytest.fixture
def ctx(client, request) -> str:
    """A fresh context per test, named after the test for readable failures."""
    name = f"{request.node.name[:60]}-{next(_names)}".replace("[", "-").replace("]", "")
    client.create_context(name)
    return name


class Mind:
    """Test helper bound to one context: write transactions and inputs tersely."""

    def __init__(self, client: TransactionClient, context: str) -> None:
        self.client, self.context = client, context

    def revision(self) -> int:
        return self.client.status(self.context)["revision"]

    def tx(self, ops: str, *, base: int | None = None, reason: str | None = None,
           session: str = "", request_id: str = "") -> dict:
        base = self.revision() if base is None else base
        reason_form = f' (reason "{reason}")' if reason else ""
        text = f"(context-tx (base-version {base}){reason_form} {ops})"
        return self.client.commit(self.context, text, session=session, request_id=request_id)

    def event(self, text: str, kind: str = "user-message", session: str = "s1", **kw) -> dict:
        return self.client.append_event(self.context, session, kind, text, **kw)

    def activate(self, session: str = "s1") -> dict:
        return self.client.activate(self.context, session)

    def tick(self, n: int = 1, session: str = "s1") -> dict:
        """Advance cognitive_tick n times: one external input per claimed batch."""
        act = {}
        for i in range(n):
            self.event(f"tool output {i}", kind="tool-result", session=session)
            act = self.activate(session)
        return act

    def frame(self, frame_id: str, at_revision: int = 0) -> dict:
        return self.client.get_frame(self.context, frame_id, at_revision)

    def status(self) -> dict:
        return self.client.status(self.context)


@pytest.fixture
def mind(client, ctx) -> Mind:
    return Mind(client, ctx)


def rejected(expected_reason: str, fn, *args, **kwargs):
    """Assert fn raises a MorphzError with this reason; return the error."""
    from morphz.shared.errors import MorphzError
    with pytest.raises(MorphzError) as info:
        fn(*args, **kwargs)
    assert info.value.reason == expected_reason, info.value.to_dict()
    return info.value


@pytest.fixture
def expect_rejected():
    return rejected


class ServerProcess:
    """`morphz serve [ARGS]` as a real child process on a data directory that outlives it
    (ARGS: a role and its flags, e.g. ["recall", "--storage", ADDR]; none: all-in-one).
    It listens on `listen`; set that to `address` to restart it on the same port."""

    def __init__(self, data_dir, env: dict | None = None, args: list[str] | None = None,
                 listen: str = "127.0.0.1:0") -> None:
        self.data_dir, self.env = str(data_dir), env or {}
        self.args, self.listen = list(args or []), listen
        self.log_path = self.data_dir + ".stderr.log"  # every start appends its stderr
        self.proc = None
        self.address = ""

    def start(self, **extra_env) -> "ServerProcess":
        import os
        import subprocess
        import sys
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.env, **extra_env)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "morphz.services.cli.main", "serve", *self.args,
                 "--listen", self.listen, "--data", self.data_dir],
                stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        line = self.proc.stdout.readline()
        assert line.startswith("morphz: serving on"), \
            f"server did not start: {line!r}\n{self.stderr()}"
        self.address = line.split()[3]
        return self

    def client(self, timeout: float = 30) -> TransactionClient:
        return TransactionClient(grpc.insecure_channel(self.address), timeout=timeout)

    def kill(self) -> None:
        import signal
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait(timeout=30)

    def stop(self) -> int:
        import signal
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)

    def stderr(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def died(self) -> bool:
        return self.proc.poll() is not None


@pytest.fixture
def server_process(tmp_path):
    procs = []

    def make(env: dict | None = None) -> ServerProcess:
        p = ServerProcess(tmp_path / "data", env)
        procs.append(p)
        return p
    yield make
    for p in procs:
        p.kill()


@pytest.fixture
def etcd(tmp_path):
    """A real etcd on loopback (tests/etcd_server.py), stopped after the test."""
    from tests.etcd_server import EtcdServer
    server = EtcdServer(tmp_path / "etcd")
    yield server.start()
    server.stop()
