"""The all-in-one server: the composition root wiring every core in-process and
serving the public services (transaction, recall, encoding) on one port, with health
checking, reflection, tracing and authentication (services/server/security.py).

The raw storage API (StorageService) is internal: it is not served on the public port
(its methods answer UNIMPLEMENTED there), only on a listener of its own when the
operator names one (`morphz serve --storage-listen ADDR`, ServerConfig.storage_listen),
serving the services' own principal only once authentication is on."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Optional

from opentelemetry.sdk.trace import TracerProvider

from morphz.shared.admission import Admission, Budgets
from morphz.api.storage.v1 import storage_pb2, storage_pb2_grpc
from morphz.services.encoding import wiring as encoding_wiring
from morphz.services.recall import wiring as recall_wiring
from morphz.api.transaction.v1 import transaction_pb2, transaction_pb2_grpc
from morphz.services.storage.backup import STORE, Backups
from morphz.services.storage.lmdb_store import LmdbStore
from morphz.services.storage.servicer import MAX_WATCHES, StorageServicer
from morphz.services.storage.space import DEFAULT_MAX_MAP_SIZE
from morphz.services.storage.snapshots import (MAX_OPEN_SNAPSHOTS, SNAPSHOT_LEASE_SECONDS,
                                               SnapshotRegistry)
from morphz.services.transaction.core.engine import TransactionCore
from morphz.services.transaction.core.ownership import DEFAULT_TTL
from morphz.services.transaction.core import rules as rulebook
from morphz.services.transaction.jobs import transaction_jobs
from morphz.services.transaction.servicer import TransactionServicer
from morphz.services.server.defaults import DEFAULT_LISTEN, RECALL_IDLE_SECONDS
from morphz.services.server.wired import Wired
from morphz.services.server.security import OPEN, Guard, Security
from morphz.services.server.serving import (NOT_SERVING, SERVING, build_server, expose, mark,
                                            report_space)
from morphz.shared.faults import Faults
from morphz.shared.limits import (BYTES_IN_FLIGHT, CONCURRENT_RPCS, REPLY_BYTES,
                                  REPLY_STALL_SECONDS)
from morphz.shared.storage.owner_cache import OwnerCache
from morphz.shared.telemetry import core_tracer
from morphz.shared.telemetry import tracer_provider as make_tracer_provider

_log = logging.getLogger("morphz.server")


@dataclass
class ServerConfig:
    data_dir: str
    listen: str = DEFAULT_LISTEN
    max_workers: int = 16
    # Server-wide limits (shared/limits.py): RPCs held at once, request bytes processed.
    max_concurrent_rpcs: int = CONCURRENT_RPCS.max
    max_bytes_in_flight: int = BYTES_IN_FLIGHT.max
    # Replies: the largest one message carries, and how long one its client does not
    # read is held (shared/stalled_replies.py).
    max_reply_bytes: int = REPLY_BYTES.max
    reply_stall_seconds: float = REPLY_STALL_SECONDS
    # Expensive calls' budgets, server-wide and per principal (shared/admission.py).
    budgets: Budgets = Budgets()
    map_size: int = 8 << 30  # the LMDB map's first size; it doubles up to max_map_size
    # --map-size: the most the map may grow to; --storage-quota: the live bytes the
    # store may hold (0: the disk's size). Past either, writes answer STORAGE_FULL
    # (services/storage/space.py) and health shows SPACE_HEALTH NOT_SERVING.
    max_map_size: int = DEFAULT_MAX_MAP_SIZE
    storage_quota: int = 0
    sync: bool = True
    # Remote readers' snapshots (services/storage/snapshots.py).
    snapshot_lease_seconds: float = SNAPSHOT_LEASE_SECONDS
    max_open_snapshots: int = MAX_OPEN_SNAPSHOTS
    # Following change-feed watches (recall replicas): each holds a worker thread.
    max_watches: int = MAX_WATCHES
    # The rules new transactions are decided under; only tests reproducing histories of
    # an older version set it (replay always follows each event's own version).
    rules_version: int = rulebook.CURRENT
    # The addresses of the services a one-service process calls (roles.py); AllInOne
    # has them in-process.
    storage: str = ""
    transaction: str = ""
    # Context ownership, for transaction instances sharing one storage service: etcd's
    # client address (empty: this is the only transaction instance, commits carry no
    # fencing token), this instance's id (default: its address) and the address its
    # clients reach it at (default: the bound listen address), named in NOT_OWNER
    # errors; the lease TTL in seconds.
    etcd: str = ""
    instance: str = ""
    advertise: str = ""
    lease_ttl: int = DEFAULT_TTL
    # Sharded storage (with etcd): the shard a storage process serves, registered in
    # etcd with its advertised address. Transaction, recall and encoding processes given
    # --etcd and no --storage reach every registered shard, each context on its own.
    shard: str = ""
    # AllInOne only: where to serve the internal storage API (empty: nowhere).
    storage_listen: str = ""
    # Recall's embedder for the vector leg (services/recall/wiring.py embedder_for);
    # empty: $MORPHZ_EMBEDDER, else "default" (the test suite sets `hashing`: e5 costs
    # ~24 ms a text, which every test that appends would pay).
    embedder: str = ""
    # Seconds a context goes unsearched before recall holds its changes back, applied at
    # its next search or inspection or this long after (services/recall/core/holds.py; 0: never held).
    recall_idle_seconds: float = RECALL_IDLE_SECONDS
    # Authentication of callers, and the credentials used to call other services.
    security: Security = OPEN


STORAGE = storage_pb2.DESCRIPTOR.services_by_name["StorageService"].full_name


class AllInOne:
    """Owns the store, the cores and the gRPC servers; `port` is the bound public port,
    `storage_port` the storage listener's (None when there is none)."""

    def __init__(self, config: ServerConfig, tracer: Optional[TracerProvider] = None) -> None:
        self.config = config
        rulebook.rules(config.rules_version)  # an unknown version fails before anything opens
        self.guard = Guard(config.security)  # so do unreadable certificates or tokens
        # Authoritative data in <data>/store; derived data (recall index) lives beside it.
        faults = Faults.from_env()  # crash tests only: MORPHZ_FAULT=point[:n]
        self.store = LmdbStore(os.path.join(config.data_dir, STORE), map_size=config.map_size,
                               max_map_size=config.max_map_size, quota=config.storage_quota,
                               sync=config.sync, faults=faults)
        self.tracer = tracer or make_tracer_provider("morphz-all-in-one")
        # The write path keeps the rows it reads and writes (owner_cache.py), as over a
        # remote store; here what it saves is LMDB calls, each of which lets go of the
        # interpreter's lock: at 64 commits in flight, half the thread switches a commit.
        self.owner_cache = OwnerCache(self.store)
        self.transactions = TransactionCore(
            self.store, faults=faults, rules_version=config.rules_version,
            tracer=core_tracer(self.tracer, "morphz.transaction"), cache=self.owner_cache)
        # LMDB itself recovers by design (copy-on-write); check the projections' ends.
        self.startup_problems = self.transactions.startup_check()
        for problem in self.startup_problems:
            _log.error("startup check: %s (run `morphz context audit`)", problem)
        # One set of expensive-call budgets for the calls and the server-side jobs.
        self.admission = Admission(config.budgets)
        self.server = build_server(config, self.tracer, self.guard.interceptors(),
                                   self.admission)
        self._stoppers: list = []
        jobs = transaction_jobs(self.transactions, self.admission)
        self.on_stop(jobs.close)  # before the store closes: jobs are cancelled, awaited
        transaction_pb2_grpc.add_TransactionServiceServicer_to_server(
            TransactionServicer(self.transactions, jobs), self.server)
        self.snapshots = SnapshotRegistry(self.store, lease=config.snapshot_lease_seconds,
                                          limit=config.max_open_snapshots)
        # Backups are taken through the storage API (its listener); made here anyway, as
        # it clears a copy a server that died left behind.
        self._backups = Backups(self.store, config.data_dir)
        names = [transaction_pb2.DESCRIPTOR.services_by_name["TransactionService"].full_name]
        # Recall and encoding wire themselves: each adds its servicer (built from this
        # app's store, transaction core and tracer) and returns what it added.
        recall = recall_wiring.register(self)
        encoding = encoding_wiring.register(self)
        names += self.adopt(recall) + self.adopt(encoding)
        self.health = expose(self.server, names)
        mark(self.health, names, SERVING)  # its services call each other in-process
        report_space(self.store.space, self.health)
        self._names = names
        self.port = self.guard.listen(self.server, config.listen)
        self._storage, self.storage_server, self.storage_port = None, None, None
        if config.storage_listen:
            self._serve_storage(config)

    def _serve_storage(self, config: ServerConfig) -> None:
        """The internal storage API on a listener of its own (a second gRPC server: gRPC
        registers services per server), with health checking and reflection."""
        self._storage = StorageServicer(self.store, self.snapshots, backups=self._backups,
                                        max_watches=config.max_watches)
        self.storage_server = build_server(config, self.tracer,
                                           self.guard.interceptors(internal=[STORAGE]))
        storage_pb2_grpc.add_StorageServiceServicer_to_server(self._storage,
                                                              self.storage_server)
        self.storage_health = expose(self.storage_server, [STORAGE])
        mark(self.storage_health, [STORAGE], SERVING)
        self.storage_port = self.guard.listen(self.storage_server, config.storage_listen)

    def on_stop(self, stopper) -> None:
        """Run `stopper()` when the server stops (background workers, extra stores)."""
        self._stoppers.append(stopper)

    def adopt(self, wired: Wired) -> list[str]:
        """Take on what a service's wiring added: its stoppers; returns its names."""
        self.on_stop(wired.stop)
        return wired.names

    def start(self) -> "AllInOne":
        if self.storage_server is not None:
            self.storage_server.start()
        self.server.start()
        return self

    def stop(self, grace: float = 5.0) -> None:
        mark(self.health, self._names, NOT_SERVING)  # report NOT_SERVING while draining
        stopped = [self.server.stop(grace)]
        if self.storage_server is not None:
            mark(self.storage_health, [STORAGE], NOT_SERVING)
            self._storage.close()  # feed watchers end now instead of at the grace's end
            stopped.append(self.storage_server.stop(grace))
        for done in stopped:
            done.wait()
        for stopper in reversed(self._stoppers):
            stopper()
        self.tracer.shutdown()
        self.snapshots.close()
        self._backups.close()
        self.store.close()
