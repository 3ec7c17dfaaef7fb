"""A client interceptor that lists the unary RPCs made on a channel (method name, and
the table a storage read names), for tests that count round trips."""
from __future__ import annotations

import grpc


class RpcCount(grpc.UnaryUnaryClientInterceptor):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def intercept_unary_unary(self, continuation, details, request):
        method = details.method.rsplit("/", 1)[-1]
        table = getattr(request, "table", "")
        self.calls.append(f"{method}:{table}" if table else method)
        return continuation(details, request)

    def methods(self) -> list[str]:
        """The calls by method only."""
        return [c.split(":", 1)[0] for c in self.calls]


def counted(channel: grpc.Channel) -> tuple[grpc.Channel, RpcCount]:
    count = RpcCount()
    return grpc.intercept_channel(channel, count), count
