"""The all-in-one server: every part in one process (node.py builds it), serving the
public services (transaction, recall, encoding) on one port, with health checking,
reflection, tracing and authentication (services/server/security.py).

The raw storage API (StorageService) is internal: it is not served on the public port
(its methods answer UNIMPLEMENTED there), only on a listener of its own when the
operator names one (`morphz serve --storage-listen ADDR`, ServerConfig.storage_listen),
serving the services' own principal only once authentication is on."""
from __future__ import annotations

from typing import Optional

from opentelemetry.sdk.trace import TracerProvider

from morphz.services.server.config import ServerConfig
from morphz.services.server.deployment import ALL, Deployment
from morphz.services.server.node import Node

__all__ = ["AllInOne", "ServerConfig"]


class AllInOne(Node):
    def __init__(self, config: ServerConfig, tracer: Optional[TracerProvider] = None) -> None:
        super().__init__(Deployment.of(ALL, config), tracer)
