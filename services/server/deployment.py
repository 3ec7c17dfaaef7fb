"""The description of a deployment: which parts a server process runs, which it calls
in other processes and at which address, with which options; `Deployment.of` derives it
from `morphz serve [ROLE]` (the all-in-one server, or one service) and checks that the
options go with the role. node.py builds whatever it describes."""
from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType

from morphz.services.server.config import ServerConfig
from morphz.services.encoding.core.row_cache import MAX_BYTES as ROW_CACHE_BYTES
from morphz.services.server.defaults import RECALL_IDLE_SECONDS
from morphz.services.transaction.core.retention import RETENTION_EVERY
from morphz.shared.errors import MorphzError

ALL = "all"  # `morphz serve` with no role: every part in one process
PARTS = ("storage", "transaction", "recall", "encoding")  # each after what it calls
# The parts each role calls in other processes: the addresses (ServerConfig fields) it
# needs (with --etcd, storage shards are found in etcd instead of --storage).
NEEDS = MappingProxyType({
    ALL: (), "storage": (), "transaction": ("storage",), "recall": ("storage", "transaction"),
    "encoding": ("storage", "transaction")})
# A shard's name is part of etcd keys and of recall's feed-position file names.
SHARD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\Z")


@dataclass(frozen=True)
class Remote:
    """A part this process calls in another: at `address`, or (storage, with --etcd and
    no --storage: address "") on every shard registered in etcd."""
    part: str
    address: str


@dataclass(frozen=True)
class Deployment:
    role: str  # ALL or one part: what the process is called in logs, traces and errors
    here: tuple[str, ...]  # the parts this process runs, each after what it calls
    remote: tuple[Remote, ...]  # the parts it calls in other processes
    public: tuple[str, ...]  # the parts served on options.listen
    # Where the storage API is served on a listener of its own ("": nowhere); the
    # all-in-one server's, which keeps it off the public port.
    storage_listen: str
    options: ServerConfig

    @classmethod
    def of(cls, role: str, options: ServerConfig) -> "Deployment":
        check_addresses(role, options)
        here = PARTS if role == ALL else (role,)
        remote = tuple(Remote(part, getattr(options, part)) for part in NEEDS[role])
        public = tuple(p for p in here if p != "storage") if role == ALL else here
        return cls(role, here, remote, public, options.storage_listen, options)

    def runs(self, part: str) -> bool:
        return part in self.here

    def address_of(self, part: str) -> str:
        """Where a part run elsewhere answers ("": storage's shards, found in etcd)."""
        return next(r.address for r in self.remote if r.part == part)

    @property
    def service_name(self) -> str:
        """The process's name in its traces."""
        return "morphz-all-in-one" if self.role == ALL else f"morphz-{self.role}"


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
    if config.embed_workers and role not in ("all", "recall"):
        raise MorphzError("CONTEXT_INPUT_INVALID", f"serve {role} takes no --embed-workers: "
                          "only recall embeds", field="embed_workers", role=role)
    if config.recall_idle_seconds != RECALL_IDLE_SECONDS and role not in ("all", "recall"):
        raise MorphzError("CONTEXT_INPUT_INVALID", f"serve {role} takes no --recall-idle: "
                          "only recall indexes", field="recall_idle", role=role)
    if config.retention_every != RETENTION_EVERY and role not in ("all", "transaction"):
        raise MorphzError("CONTEXT_INPUT_INVALID", f"serve {role} takes no --retention-every: "
                          "the transaction service applies retention policies",
                          field="retention_every", role=role)
    if config.row_cache_bytes != ROW_CACHE_BYTES and role not in ("all", "encoding"):
        raise MorphzError("CONTEXT_INPUT_INVALID", f"serve {role} takes no --row-cache: "
                          "only encoding compiles", field="row_cache", role=role)
    if config.store not in ("lmdb", "postgres"):
        raise MorphzError("CONTEXT_INPUT_INVALID", "--store is lmdb or postgres, got "
                          f"{config.store[:100]!r}", field="store", role=role)
    if config.store != "lmdb" and role not in ("all", "storage"):
        raise MorphzError("CONTEXT_INPUT_INVALID", f"serve {role} takes no --store: only "
                          "storage keeps the store", field="store", role=role)
    if bool(config.dsn) != (config.store == "postgres"):
        raise MorphzError("CONTEXT_INPUT_INVALID", "--dsn goes with --store postgres, and "
                          "--store postgres needs --dsn", field="dsn", role=role)
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
