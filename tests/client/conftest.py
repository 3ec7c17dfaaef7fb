"""Fixtures of the client library's tests: morphz.client's Client on the session's
servers (either topology: each service at its own address) and a fresh context."""
from __future__ import annotations

import itertools
import socket

import pytest

from morphz.client import Client, Credentials

_names = itertools.count(1)


@pytest.fixture(scope="session")
def mz(endpoints):
    client = Client(endpoints.transaction, recall=endpoints.recall,
                    encoding=endpoints.encoding, credentials=Credentials(), timeout=30)
    yield client
    client.close()


@pytest.fixture
def cx(mz, request) -> str:
    """A fresh context, named after the test."""
    name = f"py-{request.node.name[:50]}-{next(_names)}".replace("[", "-").replace("]", "")
    mz.create_context(name)
    return name


@pytest.fixture
def unused_address() -> str:
    """A loopback address nothing listens on (a port the kernel just handed out)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"
