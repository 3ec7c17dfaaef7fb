"""One service per process (`morphz serve storage|transaction|recall|encoding`): the
composition root of each, running the same cores as the all-in-one server (app.py) with
the services it calls reached over gRPC through their clients."""
from __future__ import annotations

import logging
import os
import socket
from typing import Callable, Optional

import grpc
from opentelemetry.sdk.trace import TracerProvider

from morphz.api.storage.v1 import storage_pb2, storage_pb2_grpc
from morphz.api.transaction.v1 import transaction_pb2, transaction_pb2_grpc
from morphz.services.encoding import wiring as encoding_wiring
from morphz.services.recall import wiring as recall_wiring
from morphz.services.server.app import ServerConfig
from morphz.services.server.serving import (NOT_SERVING, SERVING, Readiness, build_server,
                                            dependency_channel, expose, listen, mark)
from morphz.services.server.wired import Wired
from morphz.services.storage.client import StorageClient
from morphz.services.storage.backup import STORE, Backups
from morphz.services.storage.lmdb_store import LmdbStore
from morphz.services.storage.servicer import StorageServicer
from morphz.services.storage.snapshots import SnapshotRegistry
from morphz.services.transaction.client import TransactionClient
from morphz.services.transaction.core import rules as rulebook
from morphz.services.transaction.core.engine import TransactionCore
from morphz.services.transaction.core.ownership import (SOLE_OWNER, Instance, LeaseOwnership,
                                                        Ownership)
from morphz.services.transaction.servicer import TransactionServicer
from morphz.shared.errors import MorphzError
from morphz.shared.faults import Faults
from morphz.shared.telemetry import core_tracer
from morphz.shared.telemetry import tracer_provider as make_tracer_provider

STORAGE = storage_pb2.DESCRIPTOR.services_by_name["StorageService"].full_name
TRANSACTION = transaction_pb2.DESCRIPTOR.services_by_name["TransactionService"].full_name
_log = logging.getLogger("morphz.server")

# A role's builder wires its core into the process and returns (its service names, the
# (channel, service) pairs it depends on, a check to run once they answer, or None).
Built = tuple[list[str], list[tuple[grpc.Channel, str]], Optional[Callable[[], None]]]


def _storage(p: "ServiceProcess") -> Built:
    c = p.config
    p.store = LmdbStore(os.path.join(c.data_dir, STORE), map_size=c.map_size, sync=c.sync,
                        faults=Faults.from_env())
    p.on_stop(p.store.close)
    snapshots = SnapshotRegistry(p.store, lease=c.snapshot_lease_seconds,
                                 limit=c.max_open_snapshots)
    p.on_stop(snapshots.close)  # stoppers run in reverse: snapshots before the store
    backups = Backups(p.store, c.data_dir)
    p.on_stop(backups.close)  # a copy being made finishes before the store closes
    servicer = StorageServicer(p.store, snapshots, backups=backups, max_watches=c.max_watches)
    p.on_drain(servicer.close)  # feed watchers end when draining starts
    storage_pb2_grpc.add_StorageServiceServicer_to_server(servicer, p.server)
    return [STORAGE], [], None


def _ownership(p: "ServiceProcess") -> Ownership:
    """With --etcd: contexts owned under this instance's etcd lease, commits fenced."""
    c = p.config
    if not c.etcd:
        return SOLE_OWNER
    from morphz.shared.coord.etcd import EtcdCoordinator  # etcd3gw loads only when used
    # Each etcd request waits at most a renewal period: a renewal that cannot be made
    # in that time counts as failed (fail closed), and the next is due anyway.
    coordinator = EtcdCoordinator(c.etcd, timeout=max(1.0, c.lease_ttl / 3))
    p.on_stop(coordinator.close)
    address = c.advertise or p.address
    owners = LeaseOwnership(coordinator, Instance(c.instance or address, address),
                            ttl=c.lease_ttl)
    p.on_start(owners.start)
    p.on_stop(owners.close)  # stoppers run in reverse: the lease is revoked first
    return owners


def _transaction(p: "ServiceProcess") -> Built:
    storage = p.channel(p.config.storage)
    p.store = StorageClient(storage)
    p.transactions = TransactionCore(p.store, faults=Faults.from_env(),
                                     rules_version=p.config.rules_version,
                                     tracer=core_tracer(p.tracer, "morphz.transaction"),
                                     owners=_ownership(p))
    transaction_pb2_grpc.add_TransactionServiceServicer_to_server(
        TransactionServicer(p.transactions), p.server)

    def startup_check() -> None:  # as AllInOne does, once the storage service answers
        for problem in p.transactions.startup_check():
            _log.error("startup check: %s (run `morphz context audit`)", problem)
    return [TRANSACTION], [(storage, STORAGE)], startup_check


def _remote_cores(p: "ServiceProcess") -> list[tuple[grpc.Channel, str]]:
    """Recall and encoding read through the storage service and write through the
    transaction service, as in-process they use the store and TransactionCore."""
    storage, transaction = p.channel(p.config.storage), p.channel(p.config.transaction)
    p.store = StorageClient(storage)
    p.transactions = TransactionClient(transaction)
    return [(storage, STORAGE), (transaction, TRANSACTION)]


def _recall(p: "ServiceProcess") -> Built:
    deps = _remote_cores(p)
    # Its index: <data>/recall, following the storage service's change feed.
    return p.adopt(recall_wiring.register(p)), deps, None


def _encoding(p: "ServiceProcess") -> Built:
    deps = _remote_cores(p)
    return p.adopt(encoding_wiring.register(p)), deps, None


ROLES = {"storage": _storage, "transaction": _transaction, "recall": _recall,
         "encoding": _encoding}
# The addresses each role needs (ServerConfig fields): the services it calls.
NEEDS = {"all": (), "storage": (), "transaction": ("storage",),
         "recall": ("storage", "transaction"), "encoding": ("storage", "transaction")}


def check_addresses(role: str, config: ServerConfig) -> None:
    """A role gets exactly the addresses of the services it calls; only transaction
    instances take --etcd (and what goes with it)."""
    for name in ("storage", "transaction"):
        given = bool(getattr(config, name))
        if given != (name in NEEDS[role]):
            raise MorphzError("CONTEXT_INPUT_INVALID",
                              f"serve {role} {'needs' if not given else 'takes no'} --{name}",
                              field=name, role=role)
    if config.etcd and role != "transaction":
        raise MorphzError("CONTEXT_INPUT_INVALID", f"serve {role} takes no --etcd: only "
                          "transaction instances own contexts", field="etcd", role=role)
    for name in ("instance", "advertise"):
        if getattr(config, name) and not config.etcd:
            raise MorphzError("CONTEXT_INPUT_INVALID", f"--{name} goes with --etcd",
                              field=name, role=role)
    host, _, port = config.etcd.rpartition(":")
    if config.etcd and not (host and port.isdigit() and 0 < int(port) < 65536):
        raise MorphzError("CONTEXT_INPUT_INVALID", f"--etcd must be HOST:PORT, got "
                          f"{config.etcd[:200]!r}", field="etcd", role=role)
    if config.etcd and config.lease_ttl < 2:
        raise MorphzError("CONTEXT_INPUT_INVALID", "--lease-ttl must be at least 2 seconds",
                          field="lease_ttl", role=role)


class ServiceProcess:
    """One role's server: offers recall/encoding wiring the same attributes AllInOne does
    (server, store, transactions, tracer, config); `port` is the bound port.
    Its services report NOT_SERVING until the services it calls answer (Readiness)."""

    def __init__(self, role: str, config: ServerConfig,
                 tracer: Optional[TracerProvider] = None) -> None:
        check_addresses(role, config)
        rulebook.rules(config.rules_version)  # an unknown version fails before anything opens
        self.role, self.config = role, config
        self.tracer = tracer or make_tracer_provider(f"morphz-{role}")
        self.server = build_server(config, self.tracer)
        self._starters: list = []
        self._stoppers: list = []
        self._drainers: list = []
        self._channels: list[grpc.Channel] = []
        # Bound before the role is wired, so it knows its address (--listen may say :0).
        self.port = listen(self.server, config.listen)
        self._names, deps, on_ready = ROLES[role](self)
        self.health = expose(self.server, self._names)
        self.readiness = Readiness(self.health, self._names, deps, on_ready=on_ready) \
            if deps else None

    @property
    def address(self) -> str:
        """HOST:PORT this process is reached at (the host's name if it listens on all)."""
        host = self.config.listen.rsplit(":", 1)[0]
        if host in ("", "0.0.0.0", "[::]", "::"):
            host = socket.gethostname()
        return f"{host}:{self.port}"

    def channel(self, address: str) -> grpc.Channel:
        ch = dependency_channel(address, self.tracer)
        self._channels.append(ch)
        return ch

    def on_start(self, starter) -> None:
        """Run `starter()` when the server starts, before it serves."""
        self._starters.append(starter)

    def on_stop(self, stopper) -> None:
        """Run `stopper()` when the server stops (background workers, the store)."""
        self._stoppers.append(stopper)

    def on_drain(self, drainer) -> None:
        """Run `drainer()` when draining starts (to end streams the drain would await)."""
        self._drainers.append(drainer)

    def adopt(self, wired: Wired) -> list[str]:
        """Take on what a service's wiring added: its stoppers; returns its names."""
        for stopper in wired.stoppers:
            self.on_stop(stopper)
        return wired.names

    def start(self) -> "ServiceProcess":
        for starter in self._starters:
            starter()
        self.server.start()
        if self.readiness is None:
            mark(self.health, self._names, SERVING)
        else:
            self.readiness.start()
        return self

    def stop(self, grace: float = 5.0) -> None:
        if self.readiness is not None:
            self.readiness.stop()
        mark(self.health, self._names, NOT_SERVING)  # report NOT_SERVING while draining
        for drainer in self._drainers:
            drainer()
        self.server.stop(grace).wait()
        for stopper in reversed(self._stoppers):
            stopper()
        for ch in self._channels:
            ch.close()
        self.tracer.shutdown()
