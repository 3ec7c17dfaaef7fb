"""`morphz context ACTION`: the commands of every service on one context (context_cmds.py
for the transaction service's, recall_cmds.py, encoding_cmds.py, import_cmds.py,
privacy_cmds.py), each run
as one call to its service, printed as text or JSON."""
from __future__ import annotations

import argparse
import sys
from typing import TextIO

from morphz.client import Credentials
from morphz.client.options import sync_channel
from morphz.services.cli import (context_cmds, encoding_cmds, import_cmds, job_cmds,
                                 privacy_cmds, recall_cmds, space)
from morphz.services.cli.common import always_ok, print_json
from morphz.services.cli.connect import check_server, open_client, server_for
from morphz.services.cli.tracing import command_trace

# Modules adding `context` subcommands, each of one service. Each has SERVICE (the service
# its commands call), add_commands(add) -> names it added (add(name, help) returns a
# subparser) and COMMANDS: name -> (call, text renderer, exit status of a reply); a call
# takes morphz.client's Client and the arguments.
AREAS = (context_cmds, recall_cmds, encoding_cmds, import_cmds, privacy_cmds)


def add_command(top, common: argparse.ArgumentParser,
                credentials: argparse.ArgumentParser) -> None:
    context = top.add_parser("context", parents=[common, credentials],
                             help="work with a context")
    sub = context.add_subparsers(dest="action", required=True, metavar="ACTION")

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common, credentials], help=help_,
                              description=help_)

    added: set[str] = set()
    for area in AREAS:
        for name in area.add_commands(add):
            if name in added:
                raise RuntimeError(f"CLI command {name} defined twice")
            added.add(name)


def run(args: argparse.Namespace, out: TextIO) -> int:
    area = next(e for e in AREAS if args.action in e.COMMANDS)
    call, render, exit_status = area.COMMANDS[args.action]
    context = getattr(args, "context_name", None) or args.context
    with command_trace(args.action, context[:200]) as traced:
        with open_client(args, (area.SERVICE,), traced) as client:
            reply = call(client, args)
            if args.action == "status":  # and the store's space alarm (DUR-07)
                reply = dict(reply, storage_space=_space(args, client.credentials))
    if getattr(args, "detach", False):  # a job's first look, whatever the command
        render, exit_status = job_cmds.render, always_ok
    if args.action == "export":  # its stdout is the exported file: the summary goes aside
        out = sys.stderr
    if args.format == "json":
        print_json(reply, out)
    else:
        render(reply, out)
    return exit_status(reply)


SPACE_TIMEOUT = 5.0  # seconds for the space alarm's health check beside a status


def _space(args: argparse.Namespace, credentials: Credentials) -> str:
    """The alarm of the server holding the store (health checks need no principal)."""
    channel = sync_channel(check_server(server_for("storage", args.server)), credentials)
    try:
        return space.storage_space(channel, min(args.timeout, SPACE_TIMEOUT))
    finally:
        channel.close()
