"""`morphz backup` and `morphz restore`: a storage shard's online backup, streamed from
the storage service (the all-in-one server, or `serve storage`) into a local file, and
its offline restore into an empty data folder (services/storage/backup.py)."""
from __future__ import annotations

import argparse
import time
from typing import Callable, TextIO

import grpc

from morphz.services.cli.common import BACKUP_TIMEOUT, print_json
from morphz.services.cli.connect import channel as connect_to, client_auth, server_for
from morphz.services.cli.tracing import command_trace
from morphz.shared.errors import MorphzError


def add_commands(top, common: argparse.ArgumentParser,
                 credentials: argparse.ArgumentParser) -> list[str]:
    """`credentials`: the client's TLS/token options (the storage API serves the
    services' principal only once authentication is on)."""
    p = top.add_parser("backup", parents=[common, credentials],
                       help="copy a storage shard while it serves, into a local file",
                       description="Stream a consistent, compacted copy of the store served "
                       "at --server ($MORPHZ_STORAGE, else $MORPHZ_SERVER: `serve storage`, or the "
                       "all-in-one server's --storage-listen address) into FILE, which "
                       f"must not exist. Its deadline is --timeout (default {BACKUP_TIMEOUT:g}).")
    p.add_argument("--to", required=True, metavar="FILE", help="the backup file to write")

    p = top.add_parser("restore", help="restore a backup into an empty data folder (offline)",
                       description="Unpack FILE into DIR (missing or empty) and check it; then "
                       "`morphz serve --data DIR` (or `serve storage --data DIR`) serves it.")
    # Offline: it takes no --server, --timeout or --context.
    p.add_argument("--format", choices=("json", "text"), default=argparse.SUPPRESS,
                   help="output format (default: text)")
    p.add_argument("--from", dest="source", required=True, metavar="FILE")
    p.add_argument("--data", required=True, metavar="DIR", help="the data folder to restore into")
    p.add_argument("--store", choices=("lmdb", "postgres"), default="lmdb",
                   help="lmdb (default): the store goes into DIR; postgres: into the empty "
                   "PostgreSQL store at --dsn, DIR left empty for the server's derived data")
    p.add_argument("--dsn", metavar="DSN", default="",
                   help="with --store postgres: the database's libpq connection string")
    log = p.add_mutually_exclusive_group()
    log.add_argument("--erasures", metavar="LOG", default="",
                     help="the erasure log of the store the backup was taken from "
                     "(DATA/store/erasures.jsonl; PostgreSQL: DATA/erasures.jsonl): each "
                     "erasure it names is applied again to what the backup holds "
                     "(docs/privacy.md); a restore needs it or --without-erasures")
    log.add_argument("--without-erasures", action="store_true",
                     help="restore the backup as it was taken, though erasures made since "
                     "would come back (a store that never erased)")
    return ["backup", "restore"]


def run_backup(channel: grpc.Channel, args: argparse.Namespace) -> dict:
    from morphz.services.storage.backup import write_backup
    from morphz.services.storage.client import StorageClient
    started = time.monotonic()
    manifest = write_backup(args.to, StorageClient(channel, timeout=args.timeout).backup)
    return {"file": args.to, **manifest.to_dict(),
            "duration_ms": int((time.monotonic() - started) * 1000)}


def run_restore(args: argparse.Namespace) -> dict:
    from morphz.services.storage import erasure_log
    from morphz.services.storage.backup import restore
    if (args.store == "postgres") != bool(args.dsn):
        raise MorphzError("CONTEXT_INPUT_INVALID", "--dsn goes with --store postgres, and "
                          "--store postgres needs --dsn", field="dsn")
    if not args.erasures and not args.without_erasures:
        raise MorphzError("ERASURE_LOG_REQUIRED", "a backup holds what was erased after it "
                          "was taken: give --erasures LOG, the erasure log of the store it "
                          "was taken from (DATA/store/erasures.jsonl), so those erasures are "
                          "applied again; or --without-erasures to restore it as taken",
                          field="erasures")
    lines = erasure_log.read(args.erasures) if args.erasures else []  # checked first
    reply = restore(args.source, args.data, args.dsn)
    if args.without_erasures:
        return dict(reply, erasure_log="", erasures_reapplied=[])
    return dict(reply, erasure_log=args.erasures,
                erasures_reapplied=_reapply(reply, args, args.erasures, lines))


def _reapply(restored: dict, args: argparse.Namespace, log: str, lines: list) -> list[dict]:
    """The erasures of `lines` applied again to the restored store, whose own erasure log
    starts as a copy of `log` (a later restore of an older backup of it needs those)."""
    import shutil
    from morphz.services.storage.lmdb import LmdbStore
    from morphz.services.transaction.core.reapply import reapply
    if args.dsn:
        from morphz.services.storage.postgres import PostgresStore  # only here: psycopg
        store = PostgresStore(args.dsn, data_dir=restored["data"])
    else:
        store = LmdbStore(restored["store_dir"])
    try:
        shutil.copyfile(log, store.erasure_log.path)
        return [r.plain() for r in reapply(store, lines)]
    finally:
        store.close()


def render_backup(r: dict, out: TextIO) -> None:
    print(f"backup {r['file']}: {r['size']} bytes, feed head {r['feed_head']}, "
          f"{r['contexts']} contexts, taken at {r['taken_at']}", file=out)
    print(f"sha256 {r['sha256']}", file=out)


def render_restore(r: dict, out: TextIO) -> None:
    print(f"restored {r['store_dir']}: feed head {r['feed_head']}, {r['contexts']} contexts, "
          f"backup taken at {r['taken_at']}", file=out)
    if not r.get("erasure_log"):
        print("restored as taken (--without-erasures): erasures made since, if any, are "
              "not applied", file=out)
    for e in r.get("erasures_reapplied", []):
        print(f"re-applied in {e['context']} the erasure of {e['logged_at']}: "
              f"{len(e['events'])} events ({' '.join(e['erasures'])})", file=out)
    store = " --store postgres --dsn DSN" if r["store_dir"] == "postgres" else ""
    print(f"serve it: morphz serve --data {r['data']}{store}", file=out)


RENDER: dict[str, Callable[[dict, TextIO], None]] = {"backup": render_backup,
                                                      "restore": render_restore}


def run_command(args: argparse.Namespace, out: TextIO) -> int:
    """`morphz backup` (over gRPC, to the storage service) and `morphz restore` (local)."""
    if args.command == "restore":
        reply = run_restore(args)
    else:
        server = server_for("storage", args.server)
        with command_trace("backup", "", name="morphz backup") as traced:
            channel = traced(connect_to(client_auth(args), server))
            try:
                reply = run_backup(channel, args)
            finally:
                channel.close()
    if args.format == "json":
        print_json(reply, out)
    else:
        RENDER[args.command](reply, out)
    return 0

