"""The composition root: one server process, the all-in-one server or one service,
built from its Deployment (deployment.py). Each part it runs here is built by that
service's wiring (services/*/wiring.py), with the same arguments wherever it runs; each
part it calls elsewhere is reached through that service's client. Its services report
NOT_SERVING until the parts it calls answer (serving.py Readiness)."""
from __future__ import annotations

import socket
from dataclasses import replace
from typing import Callable, Optional

import grpc
from opentelemetry.sdk.trace import TracerProvider

from morphz.services.encoding import wiring as encoding_wiring
from morphz.services.recall import wiring as recall_wiring
from morphz.services.server.cluster import Cluster
from morphz.services.server.deployment import Deployment
from morphz.services.server.security import Guard
from morphz.services.server.serving import (NOT_SERVING, SERVING, Readiness, build_server,
                                            dependency_channel, expose, mark, report_space)
from morphz.services.storage import wiring as storage_wiring
from morphz.services.storage.wiring import STORAGE
from morphz.services.transaction import wiring as transaction_wiring
from morphz.services.transaction.core import rules as rulebook
from morphz.services.transaction.wiring import TRANSACTION
from morphz.shared.admission import Admission
from morphz.shared.errors import MorphzError
from morphz.shared.process.faults import Faults
from morphz.shared.process.memory import Trimmer
from morphz.shared.process.telemetry import tracer_provider as make_tracer_provider
from morphz.shared.wired import Host, Wired

Dependencies = list[tuple[grpc.Channel, str]]  # (channel, service) pairs readiness checks


class Node:
    """`port`: the bound public port; `storage_port`: the storage listener's (None when
    there is none). `store`, `transactions`, `snapshots`: the parts the others were built
    on (an in-process store's snapshots; None where storage runs elsewhere)."""

    def __init__(self, deployment: Deployment, tracer: Optional[TracerProvider] = None) -> None:
        d = self.deployment = deployment
        c = self.config = d.options
        self.role = d.role
        rulebook.rules(c.rules_version)  # an unknown version fails before anything opens
        self.guard = Guard(c.security)  # so do unreadable certificates or tokens
        self.tracer = tracer or make_tracer_provider(d.service_name)
        self._starters: list = []
        self._serving: list = []
        self._stoppers: list = []
        self._drainers: list = []
        self._conditions: list = []
        self._channels: list[grpc.Channel] = []
        self._store_changed: list[Callable[[], None]] = []
        self.cluster = Cluster(c.etcd, c.lease_ttl, self.on_stop)
        self.shard_of: Callable[[str], str] = lambda context: ""  # "": one store
        self.store = self.snapshots = self.transactions = None
        self.startup_problems: list[str] = []
        self.storage_server, self.storage_port = None, None
        # One set of expensive-call budgets for the calls and the server-side jobs.
        self.admission = Admission(c.budgets)
        # Its servers' malloc trims after large requests (one thread, at the first).
        self.trimmer = Trimmer()
        # The storage API serves the services' own principal only (once authentication
        # is on): the services reach it with their credentials (channel()), no one else.
        self.server = build_server(c, self.tracer, self.guard.interceptors(
            internal=[STORAGE] if "storage" in d.public else []), self.admission, self.trimmer)
        self.port: Optional[int] = None  # bound once a part asks its address, else after
        try:
            self._names, deps, on_ready = self._build(Faults.from_env())
            self._bind()
            if d.storage_listen:
                self.storage_port = self.guard.listen(self.storage_server, d.storage_listen)
        except BaseException:  # a part that cannot be built, a port taken: close the parts
            self._release()
            if tracer is None:  # its own; a caller's is the caller's
                self.tracer.shutdown()
            raise
        self.health = expose(self.server, self._names)
        if d.runs("storage"):
            report_space(self.store.space, self.health)
        self.readiness = Readiness(self.health, self._names, deps, on_ready=on_ready,
                                   conditions=self._conditions) \
            if deps or self._conditions else None

    def _build(self, faults: Faults) -> tuple[list[str], Dependencies, Optional[Callable]]:
        """Each part, local or remote, after what it calls: (the names served on the
        public port, the dependencies, a check to run once they answer)."""
        d, names, deps, on_ready = self.deployment, [], [], None
        local = None
        if d.runs("storage"):
            # faults (MORPHZ_FAULT=point[:n], crash tests only): one count per process
            local = self.adopt(storage_wiring.open_local(self.config, faults)).core
            self.store, self.snapshots = local.store, local.snapshots
        else:
            deps += self._reach_storage()
        host = Host(self.server, self.store, None, self.tracer, self.admission, self.config)
        if "storage" in d.public:
            names += self.adopt(storage_wiring.register(host, local)).names
            if self.config.shard:  # announced once it serves: routers send to it from then on
                self.on_serving(lambda: self.cluster.placement().register(
                    self.config.shard, self.config.advertise or self.address))
        if d.storage_listen:
            self._serve_storage(host, local)
        if d.runs("transaction"):
            core = self.adopt(transaction_wiring.register(
                host, faults=faults, owners=self.cluster.ownership(
                    self.config.instance, lambda: self.config.advertise or self.address, self),
                shard_of=self.shard_of,
                on_store_change=None if local else self._store_changed.append)).core
            self.transactions, names = core, names + [TRANSACTION]
            if local:
                self.startup_problems = transaction_wiring.startup_check(core)
            else:  # once the storage service answers
                on_ready = lambda: transaction_wiring.startup_check(core)  # noqa: E731
        elif d.runs("recall") or d.runs("encoding"):
            # Writes go through the transaction service, as in-process through its core.
            channel = self.channel(d.address_of("transaction"))
            self.transactions = transaction_wiring.connect(channel, self.channel)
            deps.append((channel, TRANSACTION))
        host = replace(host, transactions=self.transactions)
        for part, wiring in (("recall", recall_wiring), ("encoding", encoding_wiring)):
            if d.runs(part):
                # recall's index: <data>/recall, following the store's change feed (each
                # shard's, with a position of its own)
                names += self.adopt(wiring.register(host)).names
        return names, deps, on_ready

    def _reach_storage(self) -> Dependencies:
        """self.store: the storage service at its address, or (--etcd without one) every
        shard registered in etcd, each context routed to its own; the shards registered
        now are the dependencies readiness waits for."""
        address = self.deployment.address_of("storage")
        if address:
            channel = self._storage_channel(address)
            self.store = storage_wiring.connect(channel)
            return [(channel, STORAGE)]
        placement = self.cluster.placement()
        shards = placement.shards()
        if not shards:
            raise MorphzError("CONTEXT_INPUT_INVALID", "no storage shard is registered in "
                              f"etcd at {self.config.etcd}: start `serve storage --etcd ... "
                              "--shard NAME` first", field="etcd", role=self.role)
        self.store = storage_wiring.connect_shards(placement, self._storage_channel)
        self.shard_of = self.store.shard_of
        return [(self.channel(a), STORAGE) for _, a in sorted(shards.items())]

    def _storage_channel(self, address: str) -> grpc.Channel:
        """A channel to storage; where a transaction core keeps rows of the store (its
        owner cache), one that leaves READY may mean another store behind the address:
        the cache starts over."""
        channel = self.channel(address)
        if self.deployment.runs("transaction"):
            def changed(state: grpc.ChannelConnectivity) -> None:
                if state is not grpc.ChannelConnectivity.READY:
                    for forget in self._store_changed:
                        forget()
            channel.subscribe(changed)
        return channel

    def _serve_storage(self, host: Host, local) -> None:
        """The internal storage API on a listener of its own (a second gRPC server: gRPC
        registers services per server), with health checking and reflection; bound
        once every part is built."""
        self.storage_server = build_server(self.config, self.tracer,
                                           self.guard.interceptors(internal=[STORAGE]),
                                           trimmer=self.trimmer)
        self.adopt(storage_wiring.register(replace(host, server=self.storage_server), local))
        self.storage_health = expose(self.storage_server, [STORAGE])

    def _bind(self) -> None:
        if self.port is None:
            self.port = self.guard.listen(self.server, self.config.listen)

    @property
    def address(self) -> str:
        """HOST:PORT this process is reached at (the host's name if it listens on all);
        asked before the parts are built (etcd's records name it), the port binds then:
        --listen may say :0."""
        self._bind()
        host = self.config.listen.rsplit(":", 1)[0]
        if host in ("", "0.0.0.0", "[::]", "::"):
            host = socket.gethostname()
        return f"{host}:{self.port}"

    def channel(self, address: str) -> grpc.Channel:
        """A channel to a service this one calls, with the services' credentials."""
        ch = dependency_channel(address, self.tracer, self.guard.client, caller=self.role)
        self._channels.append(ch)
        return ch

    def adopt(self, wired: Wired) -> Wired:
        """Take on what a service's wiring added: its drainers and stoppers."""
        self.on_drain(wired.drain)
        self.on_stop(wired.stop)
        return wired

    def on_start(self, starter) -> None:
        """Run `starter()` when the server starts, before it serves."""
        self._starters.append(starter)

    def on_serving(self, hook) -> None:
        """Run `hook()` once the server has started serving."""
        self._serving.append(hook)

    def on_stop(self, stopper) -> None:
        """Run `stopper()` when the server stops; stoppers run in reverse, so what was
        built first (the store) stops last."""
        self._stoppers.append(stopper)

    def serve_only_while(self, trouble) -> None:
        """Report NOT_SERVING while `trouble()` says why not ("" when fine)."""
        self._conditions.append(trouble)

    def on_drain(self, drainer) -> None:
        """Run `drainer()` when draining starts (to end streams the drain would await)."""
        self._drainers.append(drainer)

    def _servers(self) -> list[grpc.Server]:
        return [self.server] + ([] if self.storage_server is None else [self.storage_server])

    def _healths(self) -> list:
        listener = [] if self.storage_server is None else [(self.storage_health, [STORAGE])]
        return [(self.health, self._names)] + listener

    def start(self) -> "Node":
        for starter in self._starters:
            starter()
        if self.storage_server is not None:
            mark(self.storage_health, [STORAGE], SERVING)
            self.storage_server.start()
        if self.readiness is None:  # nothing to wait for
            mark(self.health, self._names, SERVING)
        self.server.start()
        if self.readiness is not None:
            self.readiness.start()
        for hook in self._serving:
            hook()
        return self

    def stop(self, grace: float = 5.0) -> None:
        if self.readiness is not None:
            self.readiness.stop()
        for health, names in self._healths():  # NOT_SERVING while draining
            mark(health, names, NOT_SERVING)
        for drainer in self._drainers:
            drainer()
        for done in [server.stop(grace) for server in self._servers()]:
            done.wait()
        self._release()
        self.tracer.shutdown()

    def _release(self) -> None:
        for stopper in reversed(self._stoppers):
            stopper()
        for ch in self._channels:
            ch.close()
        self.trimmer.close()
