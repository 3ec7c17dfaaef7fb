"""Where a command goes and with which credentials: --server, else $MORPHZ_<SERVICE> or
$MORPHZ_SERVER; the client's TLS and token from its options or the environment."""
from __future__ import annotations

import argparse
import os
from typing import Optional

import grpc

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




def channel(auth: ClientAuth, address: str, *, sends: bool = False) -> grpc.Channel:
    """A channel to `address` that receives messages up to the largest one (and sends
    them, for a command whose request may be that large)."""
    options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    if sends:
        options.insert(0, ("grpc.max_send_message_length", MAX_MESSAGE_BYTES))
    return auth.channel(check_server(address), options=options)
