"""A client interceptor that lists the unary RPCs made on a channel (method name, and
the table a storage read names), for tests that count round trips; and a storage
service to count them on."""
from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

import grpc

if TYPE_CHECKING:
    from morphz.services.server.app import AllInOne


class RpcCount(grpc.UnaryUnaryClientInterceptor):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def intercept_unary_unary(self, continuation, details, request):
        method = details.method.rsplit("/", 1)[-1]
        table = getattr(request, "table", "")
        if getattr(request, "keys_only", False):
            table += "(keys)"
        self.calls.append(f"{method}:{table}" if table else method)
        return continuation(details, request)

    def methods(self) -> list[str]:
        """The calls by method only."""
        return [c.split(":", 1)[0] for c in self.calls]


def counted(channel: grpc.Channel) -> tuple[grpc.Channel, RpcCount]:
    count = RpcCount()
    return grpc.intercept_channel(channel, count), count


@contextmanager
def storage_service(directory, **config) -> Iterator[tuple["AllInOne", grpc.Channel, RpcCount]]:
    """An all-in-one server in `directory` with its storage listener on loopback, and a
    channel to that listener whose RPCs are counted: (app, channel, count)."""
    from morphz.services.server.app import AllInOne, ServerConfig

    app = AllInOne(ServerConfig(str(directory), "127.0.0.1:0", storage_listen="127.0.0.1:0",
                                **config)).start()
    channel, count = counted(grpc.insecure_channel(f"127.0.0.1:{app.storage_port}"))
    try:
        yield app, channel, count
    finally:
        channel.close()
        app.stop(grace=1)
