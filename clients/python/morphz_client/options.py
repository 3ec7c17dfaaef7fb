"""Connection options: where the services are, the credentials presented (as the CLI's
--tls-ca/--tls-cert/--tls-key/--token and their $MORPHZ_* variables), deadlines and the
retry policy."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping, Optional

import grpc

from morphz.client.calls import ENCODING, RECALL, TRANSACTION
from morphz.client.errors import input_error

DEFAULT_SERVER = "127.0.0.1:7070"  # `morphz serve`'s default listen address
DEFAULT_TIMEOUT = 30.0  # seconds: the deadline of every call (each attempt)
REBUILD_TIMEOUT = 3600.0  # an index rebuild reads the whole context
# A restarted server is found again within about a second, whatever failed before
# (gRPC's own reconnect backoff grows to two minutes). grpc.min_reconnect_backoff_ms is
# left at its default: gRPC takes it as the least time a connection attempt is given (20 s),
# and a busy server's handshake may take more than a fraction of a second (a call that is
# not retried, a one-shot CLI command's, would fail UNAVAILABLE on it).
CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 200),
                   ("grpc.max_reconnect_backoff_ms", 1000),
                   ("grpc.max_receive_message_length", 64 * 1024 * 1024))


@dataclass(frozen=True)
class RetryPolicy:
    """How calls that are safe to repeat are retried: reads, and writes carrying a
    request id (appends and commits always do). Never a call that is not idempotent
    (activate, create_context, a compile that claims inputs, a recall recorded for an
    evaluation). `attempts` counts the first one; the wait between attempts starts at
    `initial_backoff` seconds and grows by `multiplier` up to `max_backoff`."""
    attempts: int = 5
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if not (isinstance(self.attempts, int) and self.attempts >= 1):
            raise input_error("retry attempts must be an integer >= 1", field="attempts")
        if not 0 <= self.initial_backoff <= self.max_backoff or self.multiplier < 1:
            raise input_error("retry backoffs must satisfy 0 <= initial_backoff <= "
                              "max_backoff and multiplier >= 1", field="backoff")

    def backoffs(self):
        wait = self.initial_backoff
        for _ in range(self.attempts - 1):
            yield wait
            wait = min(wait * self.multiplier, self.max_backoff)


NO_RETRY = RetryPolicy(attempts=1)


@dataclass(frozen=True)
class Credentials:
    """TLS (verifying the server with `tls_ca`, else the system roots), a client
    certificate for mutual TLS (`tls_cert` + `tls_key`), and/or a bearer token sent
    as `authorization: Bearer TOKEN`. PEM values are file paths or the PEM bytes.
    Nothing set: plaintext (a development server on loopback)."""
    tls_ca: str | bytes | None = None
    tls_cert: str | bytes | None = None
    tls_key: str | bytes | None = field(default=None, repr=False)
    token: str = field(default="", repr=False)
    tls: bool = False  # TLS with the system roots when no tls_ca is given

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> "Credentials":
        """$MORPHZ_TLS_CA, $MORPHZ_TLS_CERT, $MORPHZ_TLS_KEY and $MORPHZ_TOKEN, as the
        CLI reads them."""
        return cls(tls_ca=env.get("MORPHZ_TLS_CA") or None,
                   tls_cert=env.get("MORPHZ_TLS_CERT") or None,
                   tls_key=env.get("MORPHZ_TLS_KEY") or None,
                   token=env.get("MORPHZ_TOKEN", ""))

    @property
    def uses_tls(self) -> bool:
        return self.tls or bool(self.tls_ca or self.tls_cert)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    def channel_credentials(self) -> grpc.ChannelCredentials:
        if bool(self.tls_cert) != bool(self.tls_key):
            raise input_error("tls_cert and tls_key go together",
                              field="tls_key" if self.tls_cert else "tls_cert")
        return grpc.ssl_channel_credentials(
            root_certificates=_pem(self.tls_ca, "tls_ca"),
            private_key=_pem(self.tls_key, "tls_key"),
            certificate_chain=_pem(self.tls_cert, "tls_cert"))


def _pem(value: str | bytes | None, name: str) -> Optional[bytes]:
    if value is None or isinstance(value, bytes):
        return value
    if "-----BEGIN " in value:  # PEM text given as str: use it, never echo it (a key)
        return value.encode("ascii")
    path = value if len(value) <= 200 else value[:199] + "…"
    try:
        with open(value, "rb") as f:
            data = f.read()
    except OSError as e:
        raise input_error(f"cannot read {path}: {e.strerror or e}", field=name,
                          path=path) from None
    if b"-----BEGIN " not in data:
        raise input_error(f"{path} is not a PEM file", field=name, path=path)
    return data


def target_for(service: str, given: Optional[str], env: Mapping[str, str] = os.environ) \
        -> str:
    """As the CLI: the address given, else $MORPHZ_<SERVICE> (a split deployment),
    else $MORPHZ_SERVER, else the all-in-one server's default address."""
    return given or env.get(f"MORPHZ_{service.upper()}") or env.get("MORPHZ_SERVER") \
        or DEFAULT_SERVER


def service_targets(target: Optional[str], *, recall: Optional[str],
                    encoding: Optional[str], env: Mapping[str, str] = os.environ) \
        -> dict[str, str]:
    """Each service's address: one `target` serves all (an all-in-one server) unless
    recall or encoding are given; without a target, each service's $MORPHZ_* variable."""
    return {TRANSACTION: target_for(TRANSACTION, target, env),
            RECALL: recall or target_for(RECALL, target, env),
            ENCODING: encoding or target_for(ENCODING, target, env)}


def listen_address(listen: str) -> tuple[str, int]:
    """(host, port) of a --listen HOST:PORT for a surface built on the client (`morphz mcp
    --transport http`, `morphz ui`); port 0: any free port. An IPv6 host may be bracketed."""
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise input_error(f"--listen must be HOST:PORT, got {listen[:100]!r}", field="listen")
    return host, int(port)


def check_timeout(timeout: float) -> float:
    if not (isinstance(timeout, (int, float)) and 0 < timeout < float("inf")):
        raise input_error("timeout must be a positive number of seconds", field="timeout")
    return float(timeout)


def long_timeout(timeout: Optional[float]) -> float:
    """The deadline of a call that reads a whole context (an erasure, a deletion, an
    export, a rebuild): the one given, else REBUILD_TIMEOUT."""
    return REBUILD_TIMEOUT if timeout is None else check_timeout(timeout)


def sync_channel(target: str, credentials: Credentials) -> grpc.Channel:
    if credentials.uses_tls:
        return grpc.secure_channel(target, credentials.channel_credentials(),
                                   options=CHANNEL_OPTIONS)
    return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)


def aio_channel(target: str, credentials: Credentials) -> grpc.aio.Channel:
    if credentials.uses_tls:
        return grpc.aio.secure_channel(target, credentials.channel_credentials(),
                                       options=CHANNEL_OPTIONS)
    return grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
