"""Shared fixtures: the session's real servers (real gRPC on loopback, real LMDB in a
temporary directory) in the topology `--topology` names, and a TransactionClient
talking to the transaction service.

all-in-one (the default): every service in this process, on one port. split: storage,
transaction, recall and encoding as `morphz serve ROLE` child processes (tests/topology.py);
tests marked `all_in_one` are deselected then, as they need the all-in-one server itself."""
from __future__ import annotations

import itertools
import os

import grpc
import pytest

from morphz.services.transaction.client import TransactionClient
from tests.topology import (ALL_IN_ONE, LMDB, SPLIT, Endpoints, ServerProcess, StoreChoice,
                            servers, test_store)

__all__ = ["ServerProcess"]  # tests import it from here
# The authenticated servers the security tests share (one per mode, for the session);
# the PostgreSQL server of the PostgreSQL store's tests (tests/pg.py).
pytest_plugins = ("tests.security_servers", "tests.pg")
_names = itertools.count(1)
# Servers the tests start (in this process or as children) embed with the hashing
# embedder unless a test names another: the default (e5, ~24 ms a text) would slow
# every test that appends. The quality tests and HYB-04/05 use the default explicitly.
os.environ.setdefault("MORPHZ_EMBEDDER", "hashing")


def pytest_addoption(parser):
    parser.addoption("--topology", choices=(ALL_IN_ONE, SPLIT), default=ALL_IN_ONE,
                     help="the session's servers: all-in-one (one process, the default) or "
                     "split (storage, transaction, recall, encoding: one process each)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "all_in_one(reason): needs the all-in-one server itself (its in-process "
        "objects, or an all-in-one process of its own); deselected under --topology split")
    config.addinivalue_line(
        "markers", "split_processes: starts split service processes of its own, so it runs "
        "the same under either --topology (.ci/run's split pass leaves it out: -m 'not "
        "split_processes')")


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("all_in_one")
        if marker is not None and not marker.kwargs.get("reason"):
            raise pytest.UsageError(f"{item.nodeid}: all_in_one needs reason=...")
        (drop if marker is not None and config.getoption("--topology") == SPLIT
         else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def topology(request) -> str:
    return request.config.getoption("--topology")


@pytest.fixture(scope="session")
def new_store():
    """Where each new set of servers keeps its store: LMDB in its data directory, or
    (MORPHZ_TEST_STORE=postgres) a new database on the session's PostgreSQL."""
    if test_store() != "postgres":
        yield lambda: LMDB
        return
    from tests.pg import new_database, require, start_postgres
    require()
    pg = start_postgres()
    yield lambda: StoreChoice("postgres", pg.dsn(new_database(pg)))
    pg.remove()


@pytest.fixture(scope="session")
def session_servers(topology, tmp_path_factory, new_store):
    running = servers(topology, tmp_path_factory.mktemp("servers"), new_store()).start()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def endpoints(session_servers) -> Endpoints:
    return session_servers.endpoints


@pytest.fixture(scope="session")
def storage(endpoints):
    """The storage service's internal API (how tests read or plant raw records)."""
    from morphz.services.storage.client import StorageClient
    channel = grpc.insecure_channel(endpoints.storage)
    yield StorageClient(channel, timeout=30)
    channel.close()


@pytest.fixture(scope="session")
def server(session_servers):
    """The in-process AllInOne (tests that use it are marked all_in_one)."""
    app = getattr(session_servers, "app", None)
    if app is None:
        pytest.fail("the in-process server exists only with --topology all-in-one: mark the "
                    "test that uses it all_in_one")
    return app


@pytest.fixture(scope="session")
def address(endpoints) -> str:
    """The transaction service's address (all-in-one: every service's)."""
    return endpoints.transaction


@pytest.fixture
def fresh_servers(topology, tmp_path, new_store):
    """New servers of the session's topology, each on data of its own: make(name)."""
    made = []

    def make(name: str = "servers"):
        made.append(servers(topology, tmp_path / name, new_store()))
        return made[-1]
    yield make
    for s in made:
        s.close()


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


# -- morphz.client, the agent runtimes' client (tests/client/) ---------------------------------
@pytest.fixture(scope="session")
def mz(endpoints):
    """morphz.client's Client on the session's servers (each service at its address)."""
    from morphz.client import Client, Credentials
    client = Client(endpoints.transaction, recall=endpoints.recall,
                    encoding=endpoints.encoding, credentials=Credentials(), timeout=30)
    yield client
    client.close()


@pytest.fixture
def cx(mz, request) -> str:
    """A fresh context made through morphz.client, named after the test."""
    name = f"py-{request.node.name[:50]}-{next(_names)}".replace("[", "-").replace("]", "")
    mz.create_context(name)
    return name


@pytest.fixture
def unused_address() -> str:
    """A loopback address nothing listens on (a port the kernel just handed out)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"
