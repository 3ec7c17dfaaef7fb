"""What the composition root (services/server/node.py) gives a service's wiring
(services/*/wiring.py), and what the wiring hands back: the root serves the names, holds
the core and runs the drainers and stoppers; wiring sets nothing on what it is given.
Below the services, so that none of them imports the server that composes them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import grpc
from opentelemetry.sdk.trace import TracerProvider

from morphz.shared.admission import Admission
from morphz.shared.storage.api import Store


@dataclass(frozen=True)
class Host:
    """The parts a service's wiring builds on: the gRPC server to add its servicer to,
    the authoritative store (in-process, or a client of the storage service), the
    transaction service's interface (its core in-process, else its client), the tracer
    provider, the process's expensive-call budgets (its calls' and its server-side
    jobs') and the server's options (services/server/config.py ServerConfig)."""
    server: grpc.Server
    store: Store
    transactions: Any
    tracer: TracerProvider
    admission: Admission
    config: Any


@dataclass(frozen=True)
class Wired:
    names: list[str]  # the gRPC services added to the server
    core: object
    # Background work, stopped in this order (what the others use, a folder's lock say,
    # last).
    stoppers: list[Callable[[], None]] = field(default_factory=list)
    # Run when draining starts, before the server stops (streams it would wait out).
    drainers: list[Callable[[], None]] = field(default_factory=list)

    def stop(self) -> None:
        """Run the stoppers in their order (the composition root's on_stop takes this)."""
        for stopper in self.stoppers:
            stopper()

    def drain(self) -> None:
        for drainer in self.drainers:
            drainer()
