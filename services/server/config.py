"""A server process's options, all-in-one or one service (`morphz serve` flags): the
"with which options" of its Deployment (deployment.py). Built once (server/main.py, from
the flags) and never changed after: frozen, so every part the composition root hands it
to reads the same options; a variant is a new one (dataclasses.replace)."""
from __future__ import annotations

from dataclasses import dataclass

from morphz.services.encoding.core.row_cache import MAX_BYTES as ROW_CACHE_BYTES
from morphz.services.server.defaults import DEFAULT_LISTEN, RECALL_IDLE_SECONDS
from morphz.services.server.security import OPEN, Security
from morphz.services.storage.servicer import MAX_WATCHES
from morphz.services.storage.snapshots import MAX_OPEN_SNAPSHOTS, SNAPSHOT_LEASE_SECONDS
from morphz.services.storage.space import DEFAULT_MAX_MAP_SIZE
from morphz.services.transaction.core import rules as rulebook
from morphz.services.transaction.runtime.lease import DEFAULT_TTL
from morphz.services.transaction.core.retention import RETENTION_EVERY
from morphz.shared.admission import Budgets
from morphz.shared.limits import (BYTES_IN_FLIGHT, CONCURRENT_RPCS, REPLY_BYTES,
                                  REPLY_STALL_SECONDS)


@dataclass(frozen=True)
class ServerConfig:
    data_dir: str
    listen: str = DEFAULT_LISTEN
    max_workers: int = 16
    # Server-wide limits (shared/limits.py): RPCs held at once, request bytes processed.
    max_concurrent_rpcs: int = CONCURRENT_RPCS.max
    max_bytes_in_flight: int = BYTES_IN_FLIGHT.max
    # Replies: the largest one message carries, and how long one its client does not
    # read is held (shared/grpc/stalled_replies.py).
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
    # --store: "lmdb" (in the data directory) or "postgres" (the database at --dsn,
    # services/storage/postgres/); all-in-one and storage processes only.
    store: str = "lmdb"
    dsn: str = ""
    # Remote readers' snapshots (services/storage/snapshots.py).
    snapshot_lease_seconds: float = SNAPSHOT_LEASE_SECONDS
    max_open_snapshots: int = MAX_OPEN_SNAPSHOTS
    # Following change-feed watches (recall replicas): each holds a worker thread.
    max_watches: int = MAX_WATCHES
    # The rules new transactions are decided under; only tests reproducing histories of
    # an older version set it (replay always follows each event's own version).
    rules_version: int = rulebook.CURRENT
    # The addresses of the services a one-service process calls (deployment.py); the
    # all-in-one server runs them in-process.
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
    # All-in-one only: where to serve the internal storage API (empty: nowhere).
    storage_listen: str = ""
    # Recall's embedder for the vector leg (services/recall/wiring.py embedder_for);
    # empty: $MORPHZ_EMBEDDER, else "default" (the test suite sets `hashing`: e5 costs
    # milliseconds a text, which every test that appends would pay).
    embedder: str = ""
    # Processes the vector leg embeds in (services/recall/runtime/embedworkers.py; 0: one
    # per core the process may use).
    embed_workers: int = 0
    # Seconds a context goes unsearched before recall holds its changes back, applied at
    # its next search or inspection or this long after (services/recall/runtime/holds.py; 0: never held).
    recall_idle_seconds: float = RECALL_IDLE_SECONDS
    # The retention timer's period in seconds: each context's retention policy is applied
    # at every multiple of it (services/transaction/retention_timer.py; 0: on demand only).
    retention_every: float = RETENTION_EVERY
    # The bytes, by its own estimate, encoding's RowCache keeps of decoded and rendered
    # rows between compiles (services/encoding/core/row_cache.py; 0: none kept).
    row_cache_bytes: int = ROW_CACHE_BYTES
    # Authentication of callers, and the credentials used to call other services.
    security: Security = OPEN
