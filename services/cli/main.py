"""`morphz`: the command-line interface.

`morphz serve` runs the all-in-one server (or one service: `serve storage|transaction|
recall|encoding`); `morphz context ...` calls a service over gRPC, one client call per
command, at --server, else at $MORPHZ_<SERVICE> or $MORPHZ_SERVER (server_for), as
`morphz backup` calls the storage service; `morphz restore` works offline; `morphz mcp`
serves Morphz to MCP clients (mcp_cmds.py); `morphz ui` serves the web inspector
(ui_cmds.py). JSON
output (`--format=json`) is the core's reply dict as is; text output is a readable
rendering of the same dict.

Every failure the caller can act on - a MorphzError from the server, a transport
error (UNAVAILABLE, DEADLINE_EXCEEDED) or a bad local input (missing file, invalid
UTF-8, bad --server) - prints `{"error": {code, reason, message, details}}` as JSON on
stdout in both formats and exits 1. argparse usage errors keep exit status 2.
"""
from __future__ import annotations

import argparse
import sys
from importlib import metadata
from typing import Optional

from morphz.client import MorphzError as CallError
from morphz.client.options import DEFAULT_TIMEOUT
from morphz.services.cli import (backup_cmds, context_run, job_cmds, mcp_cmds, serve_cmd,
                                 ui_cmds)
from morphz.services.cli.common import (DEFAULT_CONTEXT, client_auth_options, global_options,
                                        print_json)
from morphz.services.cli.inputs import check_encodable
from morphz.shared.errors import MorphzError


def _version() -> str:
    """The installed distribution's version (VERSION, when it was built)."""
    try:
        return metadata.version("morphz")
    except metadata.PackageNotFoundError:  # run from a source tree never installed
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="morphz", description="Morphz: a context store for AI agents.")
    parser.add_argument("--version", action="version", version=_version())
    global_options(parser, {"format": "text",
                             "server": None,  # resolved by default_server()
                             "timeout": None,  # resolved by main(): a backup's is longer
                             "context": DEFAULT_CONTEXT})
    client_auth_options(parser, {"tls_ca": None, "tls_cert": None, "tls_key": None,
                                 "token": None})  # resolved by connect.credentials()
    common = argparse.ArgumentParser(add_help=False)
    global_options(common, None)
    credentials = argparse.ArgumentParser(add_help=False)
    client_auth_options(credentials, None)

    top = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve_cmd.add_command(top, common)
    backup_cmds.add_commands(top, common, credentials)
    mcp_cmds.add_command(top, credentials)
    ui_cmds.add_command(top, credentials)
    job_cmds.add_commands(top, common, credentials)
    context_run.add_command(top, common, credentials)
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.timeout is None:
        args.timeout = backup_cmds.BACKUP_TIMEOUT if args.command == "backup" \
            else DEFAULT_TIMEOUT
    out = sys.stdout
    try:
        check_encodable(args)
        if args.command == "serve":
            return serve_cmd.run(args)
        if args.command in ("backup", "restore"):
            return backup_cmds.run_command(args, out)
        if args.command == "mcp":
            return mcp_cmds.run(args)
        if args.command == "ui":
            return ui_cmds.run(args)
        if args.command == "job":
            return job_cmds.run_command(args, out)
        return context_run.run(args, out)
    except (MorphzError, CallError) as e:  # refused here, or by a service the client called
        print_json({"error": e.to_dict()}, out)
        return 1


if __name__ == "__main__":
    sys.exit(main())
