"""What every `morphz` command module shares: argument types, the global options, the
JSON printer and the exit status of a command whose reply is never a failure."""
from __future__ import annotations

import argparse
import json
from typing import Callable, Optional, TextIO

from morphz.shared.grpc_client import DEFAULT_TIMEOUT

DEFAULT_CONTEXT = "context-default"
BACKUP_TIMEOUT = 3600.0  # `morphz backup`: the deadline of its whole stream


def unsigned(bits: int) -> Callable[[str], int]:
    """An argparse type: an integer that fits the request's uint field."""
    limit = (1 << bits) - 1

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not 0 <= value <= limit:
            raise argparse.ArgumentTypeError(f"must be 0..{limit}, got {value}")
        return value
    parse.__name__ = f"uint{bits}"
    return parse


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def global_options(parser: argparse.ArgumentParser, defaults: Optional[dict]) -> None:
    """--format/--server/--timeout/--context; with defaults=None they are SUPPRESSed so a
    subcommand's copy only overrides the top-level value when actually given."""
    d = defaults or {}
    sup = argparse.SUPPRESS
    parser.add_argument("--format", choices=("json", "text"),
                        default=d.get("format", sup), help="output format (default: text)")
    parser.add_argument("--server", metavar="HOST:PORT", default=d.get("server", sup),
                        help="server address (default: the command's service's "
                        "$MORPHZ_TRANSACTION/$MORPHZ_RECALL/$MORPHZ_ENCODING/$MORPHZ_STORAGE, "
                        "else $MORPHZ_SERVER, else the server's default listen address)")
    parser.add_argument("--timeout", metavar="SECONDS", type=positive_seconds,
                        default=d.get("timeout", sup),
                        help=f"deadline for every RPC (default: {DEFAULT_TIMEOUT:g}; a "
                        f"backup's whole stream: {BACKUP_TIMEOUT:g})")
    parser.add_argument("--context", metavar="CONTEXT", default=d.get("context", sup),
                        help=f"context name (default: {DEFAULT_CONTEXT})")


def always_ok(_: dict) -> int:
    return 0


def print_json(obj: object, out: TextIO) -> None:
    print(json.dumps(obj, ensure_ascii=False, indent=2), file=out)
