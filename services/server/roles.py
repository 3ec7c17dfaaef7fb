"""One service per process (`morphz serve storage|transaction|recall|encoding`): the
composition root of each, running the same cores as the all-in-one server (app.py) with
the services it calls reached over gRPC through their clients."""
from __future__ import annotations

import logging
import os
import re
import socket
from typing import Callable, Optional

import grpc
from opentelemetry.sdk.trace import TracerProvider

from morphz.api.storage.v1 import storage_pb2, storage_pb2_grpc
from morphz.api.transaction.v1 import transaction_pb2, transaction_pb2_grpc
from morphz.services.encoding import wiring as encoding_wiring
from morphz.services.recall import wiring as recall_wiring
from morphz.services.server.app import ServerConfig
from morphz.services.server.defaults import RECALL_IDLE_SECONDS
from morphz.services.server.security import Guard
from morphz.services.server.serving import (NOT_SERVING, SERVING, Readiness, build_server,
                                            dependency_channel, expose, mark, report_space)
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
from morphz.services.transaction.jobs import transaction_jobs
from morphz.services.transaction.servicer import TransactionServicer
from morphz.shared.admission import Admission
from morphz.shared.coord.placement import Placement
from morphz.shared.errors import MorphzError
from morphz.shared.storage.owner_cache import OwnerCache
from morphz.shared.storage.sharded import ShardedStore
from morphz.shared.faults import Faults
from morphz.shared.telemetry import core_tracer
from morphz.shared.telemetry import tracer_provider as make_tracer_provider

STORAGE = storage_pb2.DESCRIPTOR.services_by_name["StorageService"].full_name
TRANSACTION = transaction_pb2.DESCRIPTOR.services_by_name["TransactionService"].full_name
_log = logging.getLogger("morphz.server")
# A shard's name is part of etcd keys and of recall's feed-position file names.
SHARD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\Z")

# A role's builder wires its core into the process and returns (its service names, the
# (channel, service) pairs it depends on, a check to run once they answer, or None).
Built = tuple[list[str], list[tuple[grpc.Channel, str]], Optional[Callable[[], None]]]


def _storage(p: "ServiceProcess") -> Built:
    c = p.config
    p.store = LmdbStore(os.path.join(c.data_dir, STORE), map_size=c.map_size,
                        max_map_size=c.max_map_size, quota=c.storage_quota, sync=c.sync,
                        faults=Faults.from_env())
    p.on_start(lambda: report_space(p.store.space, p.health))  # health is made after
    p.on_stop(p.store.close)
    snapshots = SnapshotRegistry(p.store, lease=c.snapshot_lease_seconds,
                                 limit=c.max_open_snapshots)
    p.on_stop(snapshots.close)  # stoppers run in reverse: snapshots before the store
    backups = Backups(p.store, c.data_dir)
    p.on_stop(backups.close)  # a copy being made finishes before the store closes
    servicer = StorageServicer(p.store, snapshots, backups=backups, max_watches=c.max_watches)
    p.on_drain(servicer.close)  # feed watchers end when draining starts
    storage_pb2_grpc.add_StorageServiceServicer_to_server(servicer, p.server)
    if c.shard:  # announced once it serves: routers may send to it from then on
        p.on_serving(lambda: _placement(p).register(c.shard, c.advertise or p.address))
    return [STORAGE], [], None


def _coordinator(p: "ServiceProcess"):
    """The process's one etcd client (with --etcd), made on first use."""
    if p.coordinator is None:
        from morphz.shared.coord.etcd import EtcdCoordinator  # etcd3gw loads only when used
        # Each etcd request waits at most a renewal period: a renewal that cannot be made
        # in that time counts as failed (fail closed), and the next is due anyway.
        p.coordinator = EtcdCoordinator(p.config.etcd,
                                        timeout=max(1.0, p.config.lease_ttl / 3))
        p.on_stop(p.coordinator.close)
    return p.coordinator


def _placement(p: "ServiceProcess") -> Placement:
    return Placement(_coordinator(p))


def _ownership(p: "ServiceProcess") -> Ownership:
    """With --etcd: contexts owned under this instance's etcd lease, commits fenced."""
    c = p.config
    if not c.etcd:
        return SOLE_OWNER
    address = c.advertise or p.address
    owners = LeaseOwnership(_coordinator(p), Instance(c.instance or address, address),
                            ttl=c.lease_ttl)
    p.on_start(owners.start)
    p.on_stop(owners.close)  # stoppers run in reverse: the lease is revoked first
    p.serve_only_while(owners.trouble)
    return owners


def _storage_of(p: "ServiceProcess", watch: Callable[[grpc.Channel], None] = lambda ch: None
                ) -> list[tuple[grpc.Channel, str]]:
    """p.store: the storage service at --storage, or (--etcd without it) every shard
    registered in etcd, each context routed to its own; the shards registered now are
    the dependencies readiness waits for. `watch` is given each channel p.store uses."""
    c = p.config
    if c.storage:
        storage = p.channel(c.storage)
        watch(storage)
        p.store = StorageClient(storage)
        return [(storage, STORAGE)]
    placement = _placement(p)
    shards = placement.shards()
    if not shards:
        raise MorphzError("CONTEXT_INPUT_INVALID", "no storage shard is registered in etcd "
                          f"at {c.etcd}: start `serve storage --etcd ... --shard NAME` first",
                          field="etcd", role=p.role)
    def client(address: str) -> StorageClient:
        channel = p.channel(address)
        watch(channel)
        return StorageClient(channel)
    p.store = ShardedStore(placement, client)
    p.shard_of = p.store.shard_of
    return [(p.channel(address), STORAGE) for _, address in sorted(shards.items())]


def _transaction(p: "ServiceProcess") -> Built:
    # The write path keeps the rows it reads and writes (owner_cache.py): a commit is
    # then one round trip to storage, not one per row read. A storage connection that
    # leaves READY may mean another store behind the address: the cache starts over.
    caches: list[OwnerCache] = []

    def forget_on_disconnect(channel: grpc.Channel) -> None:
        def changed(state: grpc.ChannelConnectivity) -> None:
            if state is not grpc.ChannelConnectivity.READY:
                for cache in caches:
                    cache.forget()
        channel.subscribe(changed)
    deps = _storage_of(p, forget_on_disconnect)
    caches.append(OwnerCache(p.store))
    p.transactions = TransactionCore(p.store, faults=Faults.from_env(),
                                     rules_version=p.config.rules_version,
                                     tracer=core_tracer(p.tracer, "morphz.transaction"),
                                     owners=_ownership(p), shard_of=p.shard_of,
                                     cache=caches[0])
    jobs = transaction_jobs(p.transactions, p.admission)
    p.on_stop(jobs.close)
    transaction_pb2_grpc.add_TransactionServiceServicer_to_server(
        TransactionServicer(p.transactions, jobs), p.server)

    def startup_check() -> None:  # as AllInOne does, once the storage service answers
        for problem in p.transactions.startup_check():
            _log.error("startup check: %s (run `morphz context audit`)", problem)
    return [TRANSACTION], deps, startup_check


def _remote_cores(p: "ServiceProcess") -> list[tuple[grpc.Channel, str]]:
    """Recall and encoding read through the storage service (or its shards) and write
    through the transaction service, as in-process they use the store and
    TransactionCore. Writes follow NOT_OWNER redirects to the context's owner."""
    deps = _storage_of(p)
    transaction = p.channel(p.config.transaction)
    p.transactions = TransactionClient(transaction, connect=p.channel)
    return deps + [(transaction, TRANSACTION)]


def _recall(p: "ServiceProcess") -> Built:
    deps = _remote_cores(p)
    # Its index: <data>/recall, following the storage service's change feed (each
    # shard's, with a position of its own).
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
    """A role gets exactly the addresses of the services it calls (with --etcd, storage
    shards are found in etcd instead of --storage); what goes with --etcd per role."""
    sharded = bool(config.etcd) and role in ("transaction", "recall", "encoding") \
        and not config.storage
    for name in ("storage", "transaction"):
        given = bool(getattr(config, name))
        needed = name in NEEDS[role] and not (name == "storage" and sharded)
        if given != needed:
            raise MorphzError("CONTEXT_INPUT_INVALID",
                              f"serve {role} {'needs' if not given else 'takes no'} --{name}",
                              field=name, role=role)
    if config.embedder not in ("", "default") and role not in ("all", "recall"):
        raise MorphzError("CONTEXT_INPUT_INVALID", f"serve {role} takes no --embedder: "
                          "only recall embeds", field="embedder", role=role)
    if config.recall_idle_seconds != RECALL_IDLE_SECONDS and role not in ("all", "recall"):
        raise MorphzError("CONTEXT_INPUT_INVALID", f"serve {role} takes no --recall-idle: "
                          "only recall indexes", field="recall_idle", role=role)
    if config.storage_listen and role != "all":
        raise MorphzError("CONTEXT_INPUT_INVALID", f"serve {role} takes no --storage-listen: "
                          "`serve storage` serves the storage API on --listen",
                          field="storage_listen", role=role)
    if config.etcd and role == "storage" and not config.shard:
        raise MorphzError("CONTEXT_INPUT_INVALID", "serve storage takes --etcd with --shard "
                          "NAME: the shard it registers", field="etcd", role=role)
    if config.etcd and role == "all":
        raise MorphzError("CONTEXT_INPUT_INVALID", "serve all takes no --etcd: one process "
                          "owns and stores every context", field="etcd", role=role)
    if config.shard and (role != "storage" or not config.etcd):
        raise MorphzError("CONTEXT_INPUT_INVALID", "--shard goes with `serve storage --etcd`",
                          field="shard", role=role)
    if config.shard and not SHARD_NAME.match(config.shard):
        raise MorphzError("CONTEXT_INPUT_INVALID", "--shard must be 1-63 letters, digits, "
                          f"'.', '_' or '-', got {config.shard[:100]!r}", field="shard",
                          role=role)
    for name, roles in (("instance", ("transaction",)), ("advertise", ("transaction", "storage"))):
        if getattr(config, name) and (not config.etcd or role not in roles):
            raise MorphzError("CONTEXT_INPUT_INVALID", f"--{name} goes with --etcd "
                              f"(serve {' or '.join(roles)})", field=name, role=role)
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
        self.guard = Guard(config.security)
        self.tracer = tracer or make_tracer_provider(f"morphz-{role}")
        # The storage API serves the services' own principal only (once authentication
        # is on): the services reach it with their credentials (channel()), no one else.
        # One set of expensive-call budgets for the calls and the server-side jobs.
        self.admission = Admission(config.budgets)
        self.server = build_server(config, self.tracer, self.guard.interceptors(
            internal=[STORAGE] if role == "storage" else []), self.admission)
        self.coordinator = None  # the etcd client, made by the role if it uses one
        self.shard_of = lambda context: ""  # a context's storage shard ("": one store)
        self._starters: list = []
        self._serving: list = []
        self._stoppers: list = []
        self._drainers: list = []
        self._conditions: list = []
        self._channels: list[grpc.Channel] = []
        # Bound before the role is wired, so it knows its address (--listen may say :0).
        self.port = self.guard.listen(self.server, config.listen)
        self._names, deps, on_ready = ROLES[role](self)
        self.health = expose(self.server, self._names)
        self.readiness = Readiness(self.health, self._names, deps, on_ready=on_ready,
                                   conditions=self._conditions) \
            if deps or self._conditions else None

    @property
    def address(self) -> str:
        """HOST:PORT this process is reached at (the host's name if it listens on all)."""
        host = self.config.listen.rsplit(":", 1)[0]
        if host in ("", "0.0.0.0", "[::]", "::"):
            host = socket.gethostname()
        return f"{host}:{self.port}"

    def channel(self, address: str) -> grpc.Channel:
        """A channel to a service this one calls, with the services' credentials."""
        ch = dependency_channel(address, self.tracer, self.guard.client)
        self._channels.append(ch)
        return ch

    def on_start(self, starter) -> None:
        """Run `starter()` when the server starts, before it serves."""
        self._starters.append(starter)

    def on_serving(self, hook) -> None:
        """Run `hook()` once the server has started serving."""
        self._serving.append(hook)

    def on_stop(self, stopper) -> None:
        """Run `stopper()` when the server stops (background workers, the store)."""
        self._stoppers.append(stopper)

    def serve_only_while(self, trouble) -> None:
        """Report NOT_SERVING while `trouble()` says why not ("" when fine)."""
        self._conditions.append(trouble)

    def on_drain(self, drainer) -> None:
        """Run `drainer()` when draining starts (to end streams the drain would await)."""
        self._drainers.append(drainer)

    def adopt(self, wired: Wired) -> list[str]:
        """Take on what a service's wiring added: its stoppers; returns its names."""
        self.on_stop(wired.stop)
        return wired.names

    def start(self) -> "ServiceProcess":
        for starter in self._starters:
            starter()
        self.server.start()
        if self.readiness is None:
            mark(self.health, self._names, SERVING)
        else:
            self.readiness.start()
        for hook in self._serving:
            hook()
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
