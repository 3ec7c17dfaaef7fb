"""A server's authentication, as configured (`morphz serve --tls-cert --tls-key
--tls-client-ca --tls-ca --tokens --service-token-file --admin --namespace
--private-namespaces`): what its listeners
require of callers and what it presents to the services it calls.

- mutual TLS: --tls-cert/--tls-key (its certificate) with --tls-client-ca (the CA whose
  client certificates it accepts; the certificate's CN, else SAN, is the principal);
- bearer tokens: --tokens FILE (token -> principal, shared/auth.py), over TLS when
  --tls-cert/--tls-key are given, else in plaintext (loopback development only);
- neither: no authentication (development mode, `scripts/serve`).

The services call each other as the services' principal (`service_principal`, by
default morphz-service): with its own certificate (--tls-cert/--tls-key, which a
service's certificate issues for both server and client use) and/or its token
(--service-token-file, or $MORPHZ_SERVICE_TOKEN), verifying the called service's
certificate with --tls-ca (default: --tls-client-ca). The raw storage API serves that
principal only.

Server-wide administrators (--admin PRINCIPAL, repeatable) may do anything in every
context and list every context; everyone else is bound by each context's policy
(shared/policy.py). Namespaces (--namespace PRINCIPAL=NAMESPACE, --private-namespaces)
place principals' context names apart (shared/namespaces.py). In a split cluster give
every service the same --admin and namespace options."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable, Optional

import grpc

from morphz.shared.auth import DEFAULT_SERVICE_PRINCIPAL, Tokens, check_principal
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.auth import (Authenticator, ClientAuth, ServerAuth, read_pem,
                                     server_credentials)
from morphz.shared.namespaces import Namespaces

_log = logging.getLogger("morphz.server")


@dataclass(frozen=True)
class Security:
    """File paths, as given on the command line (services/cli/serve_cmd.py)."""
    tls_cert: str = ""
    tls_key: str = ""
    tls_client_ca: str = ""  # mutual TLS: the CA of the client certificates accepted
    tls_ca: str = ""         # the CA verifying the services this process calls
    tokens: str = ""         # the token file
    service_token: str = field(default="", repr=False)  # sent to the services it calls
    service_principal: str = DEFAULT_SERVICE_PRINCIPAL
    admins: tuple[str, ...] = ()  # server-wide administrators' principals
    namespaces: tuple[str, ...] = ()  # PRINCIPAL=NAMESPACE
    private_namespaces: bool = False  # the others: a namespace of their own

    @property
    def authenticates(self) -> bool:
        return bool(self.tls_client_ca or self.tokens)


def check_security(s: Security) -> None:
    """Options that go together are given together (a CONTEXT_INPUT_INVALID naming
    the missing one otherwise)."""
    def missing(name: str, why: str) -> MorphzError:
        return MorphzError("CONTEXT_INPUT_INVALID", f"--{name.replace('_', '-')} {why}",
                           field=name)
    if bool(s.tls_cert) != bool(s.tls_key):
        raise missing("tls_key" if s.tls_cert else "tls_cert",
                      "is needed with --tls-cert/--tls-key")
    if s.tls_client_ca and not s.tls_cert:
        raise missing("tls_cert", "is needed with --tls-client-ca (mutual TLS)")
    if not s.service_principal:
        raise missing("service_principal", "must not be empty")
    for name in s.admins:
        check_principal(name, "admin")
    if s.admins and not s.authenticates:
        raise missing("admin", "needs authentication (--tls-client-ca or --tokens): "
                      "without it every caller may do anything")
    if (s.namespaces or s.private_namespaces) and not s.authenticates:
        raise missing("namespace", "needs authentication (--tls-client-ca or --tokens): "
                      "without it there is one namespace")
    Namespaces.parse(s.namespaces, s.private_namespaces)


class Guard:
    """What a server process built from Security uses: its listeners' credentials and
    interceptors, and the credentials of its channels to other services. Files are
    read once, here: a bad one fails start-up."""

    def __init__(self, s: Security) -> None:
        check_security(s)
        self.security = s
        cert, key = read_pem(s.tls_cert, "tls_cert"), read_pem(s.tls_key, "tls_key")
        client_ca = read_pem(s.tls_client_ca, "tls_client_ca")
        self._credentials: Optional[grpc.ServerCredentials] = \
            server_credentials(cert, key, client_ca) if cert else None
        tokens = Tokens.load(s.tokens) if s.tokens else None
        self._authenticator = Authenticator(
            tokens=tokens, mtls=client_ca is not None,
            service_principal=s.service_principal,
            admins=s.admins,
            namespaces=Namespaces.parse(s.namespaces, s.private_namespaces)) \
            if s.authenticates else None
        ca = read_pem(s.tls_ca, "tls_ca") if s.tls_ca else client_ca
        self.client = ClientAuth(ca=ca, cert=cert if ca else None, key=key if ca else None,
                                 token=s.service_token, tls=ca is not None)
        if not s.authenticates:
            _log.warning("authentication is off: every caller is served (development mode)")
        elif tokens is not None and cert is None:
            _log.warning("bearer tokens travel in plaintext (no --tls-cert): loopback only")

    def interceptors(self, internal: Iterable[str] = ()) -> list[grpc.ServerInterceptor]:
        """The interceptors of a listener; `internal`: its services that serve the
        services' principal only."""
        if self._authenticator is None:
            return []
        return [ServerAuth(self._authenticator, internal)]

    def listen(self, server: grpc.Server, address: str) -> int:
        port = server.add_secure_port(address, self._credentials) if self._credentials \
            else server.add_insecure_port(address)
        if port == 0:
            raise OSError(f"cannot listen on {address}")
        return port


OPEN = Security()
