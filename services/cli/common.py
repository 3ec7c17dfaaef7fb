"""What every `morphz` command module shares: argument types, the global options, the
JSON printer and the exit status of a command whose reply is never a failure."""
from __future__ import annotations

import argparse
import json
from typing import Callable, Mapping, Optional, TextIO

from morphz.client.options import DEFAULT_TIMEOUT

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


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text[:40]!r}") from None


def positive_seconds(text: str) -> float:
    value = _number(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(
            f"must be a positive number of seconds, got {text[:40]!r}")
    return value


def seconds_up_to_a_day(text: str) -> float:
    """0 (off) to 86,400 seconds: a waiting time a flag may also switch off."""
    value = _number(text)
    if not 0 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"expected seconds from 0 to 86400, got {text[:40]!r}")
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


def client_auth_options(parser: argparse.ArgumentParser, defaults: Optional[dict]) -> None:
    """The credentials a `context` command presents (each also read from $MORPHZ_TLS_CA,
    $MORPHZ_TLS_CERT, $MORPHZ_TLS_KEY, $MORPHZ_TOKEN; the option wins); defaults=None
    SUPPRESSes them as global_options does."""
    d = defaults or {}
    sup = argparse.SUPPRESS
    parser.add_argument("--tls-ca", metavar="PEM", default=d.get("tls_ca", sup),
                        help="TLS: the CA verifying the server's certificate "
                        "($MORPHZ_TLS_CA)")
    parser.add_argument("--tls-cert", metavar="PEM", default=d.get("tls_cert", sup),
                        help="TLS: this client's certificate, for a server requiring mutual "
                        "TLS ($MORPHZ_TLS_CERT; with --tls-key)")
    parser.add_argument("--tls-key", metavar="PEM", default=d.get("tls_key", sup),
                        help="the private key of --tls-cert ($MORPHZ_TLS_KEY)")
    parser.add_argument("--token", metavar="TOKEN", default=d.get("token", sup),
                        help="a bearer token, sent as `authorization: Bearer TOKEN` "
                        "($MORPHZ_TOKEN, which keeps it out of the process list)")


def option_or_env(args: argparse.Namespace, name: str, env: Mapping[str, str]) -> str:
    """A credentials option as given, else its $MORPHZ_<NAME> variable, else ""."""
    given = getattr(args, name, None)
    return given if given is not None else env.get(f"MORPHZ_{name.upper()}", "")


def always_ok(_: dict) -> int:
    return 0


def print_json(obj: object, out: TextIO) -> None:
    print(json.dumps(obj, ensure_ascii=False, indent=2), file=out)
