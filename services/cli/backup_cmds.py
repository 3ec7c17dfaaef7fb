"""`morphz backup` and `morphz restore`: a storage shard's online backup, streamed from
the storage service (the all-in-one server, or `serve storage`) into a local file, and
its offline restore into an empty data folder (services/storage/backup.py)."""
from __future__ import annotations

import argparse
import time
from typing import Callable, TextIO

import grpc

from morphz.services.cli.common import BACKUP_TIMEOUT
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
    return ["backup", "restore"]


def run_backup(channel: grpc.Channel, args: argparse.Namespace) -> dict:
    from morphz.services.storage.backup import write_backup
    from morphz.services.storage.client import StorageClient
    started = time.monotonic()
    manifest = write_backup(args.to, StorageClient(channel, timeout=args.timeout).backup)
    return {"file": args.to, **manifest.to_dict(),
            "duration_ms": int((time.monotonic() - started) * 1000)}


def run_restore(args: argparse.Namespace) -> dict:
    from morphz.services.storage.backup import restore
    if (args.store == "postgres") != bool(args.dsn):
        raise MorphzError("CONTEXT_INPUT_INVALID", "--dsn goes with --store postgres, and "
                          "--store postgres needs --dsn", field="dsn")
    return restore(args.source, args.data, args.dsn)


def render_backup(r: dict, out: TextIO) -> None:
    print(f"backup {r['file']}: {r['size']} bytes, feed head {r['feed_head']}, "
          f"{r['contexts']} contexts, taken at {r['taken_at']}", file=out)
    print(f"sha256 {r['sha256']}", file=out)


def render_restore(r: dict, out: TextIO) -> None:
    print(f"restored {r['store_dir']}: feed head {r['feed_head']}, {r['contexts']} contexts, "
          f"backup taken at {r['taken_at']}", file=out)
    store = " --store postgres --dsn DSN" if r["store_dir"] == "postgres" else ""
    print(f"serve it: morphz serve --data {r['data']}{store}", file=out)


RENDER: dict[str, Callable[[dict, TextIO], None]] = {"backup": render_backup,
                                                      "restore": render_restore}
