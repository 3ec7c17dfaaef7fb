"""What a service's wiring (services/*/wiring.py) adds to a server, returned to the
composition root (app.py, roles.py), which serves the names, holds the core and runs
the stoppers when it stops: wiring sets nothing on the server object."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Wired:
    names: list[str]  # the gRPC services added to the server
    core: object
    # Background work, stopped in this order (what the others use, a folder's lock say,
    # last).
    stoppers: list[Callable[[], None]] = field(default_factory=list)

    def stop(self) -> None:
        """Run the stoppers in their order (the composition root's on_stop takes this)."""
        for stopper in self.stoppers:
            stopper()
