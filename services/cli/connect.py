"""Where a command goes and with which credentials: --server, else $MORPHZ_<SERVICE> or
$MORPHZ_SERVER; the client's TLS and token from its options or the environment. The
`context` and `job` commands call the services through morphz.client (open_client), as
`morphz mcp` and `morphz ui` do; `morphz backup` calls the storage service on a channel."""
from __future__ import annotations

import argparse
import os
from typing import Callable, Iterable, Optional

import grpc

from morphz.client import NO_RETRY, Client, Credentials
from morphz.services.cli.common import option_or_env
from morphz.services.cli.inputs import input_error
from morphz.services.server.defaults import DEFAULT_LISTEN
from morphz.shared.grpc.auth import ClientAuth
from morphz.shared.limits import MESSAGE_BYTES

MAX_MESSAGE_BYTES = MESSAGE_BYTES.max


def default_server() -> str:
    """$MORPHZ_SERVER, else the all-in-one server's default address."""
    return os.environ.get("MORPHZ_SERVER") or DEFAULT_LISTEN


def server_for(service: str, given: Optional[str]) -> str:
    """Where a command of `service` goes: --server if given (one server for all), else
    $MORPHZ_<SERVICE> (a split cluster: MORPHZ_TRANSACTION, MORPHZ_RECALL,
    MORPHZ_ENCODING, MORPHZ_STORAGE), else default_server()."""
    if given is not None:
        return given
    return os.environ.get(f"MORPHZ_{service.upper()}") or default_server()


def check_server(server: str) -> str:
    """HOST:PORT (or an explicit gRPC target such as unix:/path or dns:///host:port)."""
    if server.startswith("unix:") or "://" in server:
        return server
    host, sep, port = server.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise input_error(f"--server must be HOST:PORT, got {server[:100]!r}", field="server",
                          value=server[:200])
    return server


def client_auth(args: argparse.Namespace, env=os.environ) -> ClientAuth:
    """The credentials of a `context` command: its options, else $MORPHZ_TLS_*/$MORPHZ_TOKEN."""
    def pick(name: str) -> str:
        given = getattr(args, name, None)
        return given if given is not None else env.get(f"MORPHZ_{name.upper()}", "")
    return ClientAuth.from_files(ca=pick("tls_ca"), cert=pick("tls_cert"),
                                 key=pick("tls_key"), token=pick("token"))


def credentials(args: argparse.Namespace, env=os.environ) -> Credentials:
    """The credentials of a `context` or `job` command: its options, else
    $MORPHZ_TLS_*/$MORPHZ_TOKEN (the PEM files are read when the client opens its channels);
    a certificate without its key, or a key alone, is refused before anything is read."""
    cert, key = option_or_env(args, "tls_cert", env), option_or_env(args, "tls_key", env)
    if bool(cert) != bool(key):
        raise input_error("--tls-cert and --tls-key go together",
                          field="tls_cert" if not cert else "tls_key")
    return Credentials(tls_ca=option_or_env(args, "tls_ca", env) or None,
                       tls_cert=cert or None, tls_key=key or None,
                       token=option_or_env(args, "token", env))


def open_client(args: argparse.Namespace, services: Iterable[str],
                wrap: Optional[Callable[[grpc.Channel], grpc.Channel]] = None) -> Client:
    """A morphz.client Client on each service's server (server_for), with the command's
    credentials and --timeout on every call, `wrap` applied to its channels (the command's
    trace). `services`: those the command calls, whose addresses are checked. Each call is
    sent once: a command is one call, and its failure is printed, not retried."""
    for service in services:
        check_server(server_for(service, args.server))
    return Client(server_for("transaction", args.server),
                  recall=server_for("recall", args.server),
                  encoding=server_for("encoding", args.server),
                  credentials=credentials(args), timeout=args.timeout, retry=NO_RETRY,
                  wrap_channel=wrap)


def channel(auth: ClientAuth, address: str, *, sends: bool = False) -> grpc.Channel:
    """A channel to `address` that receives messages up to the largest one (and sends
    them, for a command whose request may be that large)."""
    options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    if sends:
        options.insert(0, ("grpc.max_send_message_length", MAX_MESSAGE_BYTES))
    return auth.channel(check_server(address), options=options)
