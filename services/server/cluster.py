"""A server process's part in a cluster coordinated over etcd (`serve --etcd`): one etcd
client, made on first use, the shards' placement and the transaction instances'
context ownership built on it."""
from __future__ import annotations

from typing import Callable

from morphz.services.transaction.core.ownership import SOLE_OWNER, Ownership
from morphz.services.transaction.runtime.lease import Instance, LeaseOwnership
from morphz.shared.coord.placement import Placement


class Cluster:
    """`on_stop(stopper)`: the process's hook running a stopper when it stops."""

    def __init__(self, etcd: str, lease_ttl: int,
                 on_stop: Callable[[Callable[[], None]], None]) -> None:
        self._etcd, self._ttl, self._on_stop = etcd, lease_ttl, on_stop
        self.coordinator = None

    def _coordinator(self):
        if self.coordinator is None:
            from morphz.shared.coord.etcd import EtcdCoordinator  # etcd3gw loads only when used
            # Each etcd request waits at most a renewal period: a renewal that cannot be
            # made in that time counts as failed (fail closed), and the next is due anyway.
            self.coordinator = EtcdCoordinator(self._etcd, timeout=max(1.0, self._ttl / 3))
            self._on_stop(self.coordinator.close)
        return self.coordinator

    def placement(self) -> Placement:
        return Placement(self._coordinator())

    def ownership(self, instance: str, address: Callable[[], str], process) -> Ownership:
        """With etcd: contexts owned under this instance's lease (named `instance`, else
        its `address()`), commits fenced; without, the sole owner. `process` (node.py
        Node) starts, stops and reports on the lease."""
        if not self._etcd:
            return SOLE_OWNER
        reached = address()
        owners = LeaseOwnership(self._coordinator(), Instance(instance or reached, reached),
                                ttl=self._ttl)
        process.on_start(owners.start)
        process.on_stop(owners.close)  # stoppers run in reverse: the lease is revoked first
        process.serve_only_while(owners.trouble)
        return owners
