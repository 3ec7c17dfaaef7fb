"""One service per process (`morphz serve storage|transaction|recall|encoding`): the
same composition root as the all-in-one server (node.py), running the same cores with
the services it calls reached over gRPC through their clients."""
from __future__ import annotations

from typing import Optional

from opentelemetry.sdk.trace import TracerProvider

from morphz.services.server.config import ServerConfig
from morphz.services.server.deployment import NEEDS, Deployment, check_addresses
from morphz.services.server.node import Node

__all__ = ["NEEDS", "ServiceProcess", "check_addresses"]


class ServiceProcess(Node):
    def __init__(self, role: str, config: ServerConfig,
                 tracer: Optional[TracerProvider] = None) -> None:
        super().__init__(Deployment.of(role, config), tracer)
