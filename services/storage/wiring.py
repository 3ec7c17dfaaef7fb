"""Wires the storage service (built by services/server/node.py): where storage runs in
the process, its store (LMDB, with remote readers' snapshots and the backups) and, where
it is served, its servicer; where it runs elsewhere, a client of it, or of every shard
registered in etcd."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import grpc

from morphz.api.storage.v1 import storage_pb2, storage_pb2_grpc
from morphz.services.storage.backup import STORE, Backups
from morphz.services.storage.client import StorageClient
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.storage.postgres import PostgresStore
from morphz.services.storage.servicer import StorageServicer
from morphz.services.storage.snapshots import SnapshotRegistry
from morphz.shared.process.faults import NO_FAULTS, Faults
from morphz.shared.storage.api import Store
from morphz.shared.storage.sharded import Locator, ShardedStore
from morphz.shared.wired import Host, Wired

STORAGE = storage_pb2.DESCRIPTOR.services_by_name["StorageService"].full_name


@dataclass(frozen=True)
class LocalStorage:
    store: Store  # LmdbStore or PostgresStore
    snapshots: SnapshotRegistry
    backups: Backups


def open_local(config, faults: Faults = NO_FAULTS) -> Wired:
    """The store in <data>/store, or (--store postgres) in the database at --dsn (derived
    data, the recall index, lives in <data> either way), its snapshots and backups;
    Wired.core is a LocalStorage. `config`: a ServerConfig."""
    if config.store == "postgres":
        os.makedirs(config.data_dir, exist_ok=True)
        store = PostgresStore(config.dsn, data_dir=config.data_dir, faults=faults)
    else:
        store = LmdbStore(os.path.join(config.data_dir, STORE), map_size=config.map_size,
                          max_map_size=config.max_map_size, quota=config.storage_quota,
                          sync=config.sync, faults=faults)
    capacity = store.snapshot_capacity
    snapshots = SnapshotRegistry(store, lease=config.snapshot_lease_seconds,
                                 limit=config.max_open_snapshots if capacity is None
                                 else min(config.max_open_snapshots, capacity))
    # Made even where the storage API is not served: it clears a copy a server that
    # died left behind. A copy being made finishes before the store closes.
    backups = Backups(store, config.data_dir)
    return Wired([], LocalStorage(store, snapshots, backups),
                 [backups.close, snapshots.close, store.close])


def register(host: Host, local: LocalStorage) -> Wired:
    """Serve `local` on host.server; its following watches end when draining starts."""
    servicer = StorageServicer(local.store, local.snapshots, backups=local.backups,
                               max_watches=host.config.max_watches)
    storage_pb2_grpc.add_StorageServiceServicer_to_server(servicer, host.server)
    return Wired([STORAGE], servicer, drainers=[servicer.close])


def connect(channel: grpc.Channel) -> StorageClient:
    """The storage service at the other end of `channel`, as a Store."""
    return StorageClient(channel)


def connect_shards(placement: Locator, channel: Callable[[str], grpc.Channel]) -> ShardedStore:
    """Every storage shard `placement` knows, each context routed to its own; `channel`
    makes the channel to a shard's address."""
    return ShardedStore(placement, lambda address: StorageClient(channel(address)))
