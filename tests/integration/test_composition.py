"""The composition root (services/server/node.py) over real parts: a process that
cannot be built whole lets go of the parts it built."""
from __future__ import annotations

import socket

import pytest

from morphz.services.server.app import AllInOne, ServerConfig
from morphz.shared.errors import MorphzError
from tests.ports import free_port
from tests.topology import SERVING, health

pytestmark = pytest.mark.all_in_one(reason="builds all-in-one servers of its own")


def test_a_server_whose_part_cannot_be_built_lets_go_of_the_store_and_its_port(tmp_path):
    """recall's embedder is chosen after the store opened and the transaction core was
    built: refusing it closes the store (LMDB opens a store once per process) and binds
    no port, so the same server starts at once with a good one."""
    listen = f"127.0.0.1:{free_port()}"
    with pytest.raises(MorphzError) as refused:
        AllInOne(ServerConfig(str(tmp_path), listen, embedder="no-such-embedder"))
    assert (refused.value.reason, refused.value.details["field"]) == \
        ("CONTEXT_INPUT_INVALID", "embedder")
    app = AllInOne(ServerConfig(str(tmp_path), listen, embedder="hashing")).start()
    try:
        assert health(listen) == SERVING
    finally:
        app.stop(grace=1)


def test_a_server_whose_port_is_taken_lets_go_of_the_store(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises((OSError, RuntimeError)):
            AllInOne(ServerConfig(str(tmp_path), f"127.0.0.1:{taken.getsockname()[1]}"))
    app = AllInOne(ServerConfig(str(tmp_path), "127.0.0.1:0")).start()
    try:
        assert health(f"127.0.0.1:{app.port}") == SERVING
    finally:
        app.stop(grace=1)
