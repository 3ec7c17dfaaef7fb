"""Authentication on the wire: a server interceptor establishing each call's principal
(shared/auth.py Caller) from the client certificate of a mutual-TLS connection or from
a bearer token in the call's metadata (`authorization: Bearer TOKEN`), and the client
side: channels carrying a client certificate and/or a token.

Every RPC but gRPC health checking needs a principal once authentication is on: a
call without one is answered UNAUTHENTICATED (ErrorInfo reason UNAUTHENTICATED) before
any servicer runs. Services named `internal` serve only the services' own principal;
any other principal gets PERMISSION_DENIED. The servicer reads the principal with
`caller_of(context)`.

A client certificate's principal is its subject's common name, else its first subject
alternative name. With mutual TLS the handshake itself refuses a client without a
certificate of the configured CA: such a client never gets as far as a call (its
channel reports UNAVAILABLE). When a server takes both, a bearer token, if the call
carries one, names the principal; a token the server does not know is UNAUTHENTICATED
whatever the certificate."""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Iterable, Optional

import grpc
from grpc_status import rpc_status

from morphz.shared.auth import MTLS, OPEN_CALLER, TOKEN, Caller, Tokens
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.errors import to_status
from morphz.shared.namespaces import Namespaces, in_namespace

AUTHORIZATION = "authorization"  # gRPC metadata keys are lower case
BEARER = "bearer"
UNGUARDED = ("/grpc.health.v1.Health/",)  # health checking needs no principal


# -- server side -----------------------------------------------------------------------------
class Authenticator:
    """Establishes a call's Caller from its connection's client certificate (when the
    server runs mutual TLS) or its bearer token (when it knows tokens)."""

    def __init__(self, *, tokens: Optional[Tokens], mtls: bool,
                 service_principal: str, admins: Iterable[str] = (),
                 namespaces: Optional[Namespaces] = None) -> None:
        """`admins`: the server-wide administrators' principals; `namespaces`: where the
        others' context names live (administrators and the services: the default)."""
        if tokens is None and not mtls:
            raise ValueError("an Authenticator needs tokens or mutual TLS")
        self._tokens, self._mtls = tokens, mtls
        self._service = service_principal
        self._admins = frozenset(admins)
        self._namespaces = namespaces or Namespaces()  # None: one default namespace

    def _caller(self, principal: str, via: str) -> Caller:
        service, admin = principal == self._service, principal in self._admins
        return Caller(principal, via, service=service, admin=admin,
                      namespace="" if service or admin else self._namespaces.of(principal))

    def authenticate(self, context: grpc.ServicerContext) -> Caller:
        """The call's Caller; MorphzError UNAUTHENTICATED when there is none."""
        header = [v for k, v in context.invocation_metadata() or () if k == AUTHORIZATION]
        if header and self._tokens is not None:
            scheme, _, token = str(header[0]).partition(" ")
            principal = self._tokens.principal(token.strip()) \
                if scheme.lower() == BEARER and len(header) == 1 else None
            if principal is None:
                raise MorphzError("UNAUTHENTICATED", "the bearer token is not valid",
                                  credentials="token")
            return self._caller(principal, TOKEN)
        if self._mtls:
            principal = certificate_principal(context.auth_context())
            if principal:
                return self._caller(principal, MTLS)
            raise MorphzError("UNAUTHENTICATED", "the client certificate names no principal "
                              "(no subject common name or alternative name)",
                              credentials="certificate")
        raise MorphzError("UNAUTHENTICATED", "this server needs a bearer token "
                          "(metadata `authorization: Bearer TOKEN`)", credentials="none")


def certificate_principal(auth_context: dict) -> str:
    """The verified client certificate's subject CN, else its first SAN; "" if none."""
    for key in ("x509_common_name", "x509_subject_alternative_name"):
        for value in auth_context.get(key) or ():
            name = value.decode("utf-8", "replace").strip()
            if name:
                return name
    return ""


class _CallContext:
    """The servicer's view of a call: gRPC's context plus the call's `caller`."""
    __slots__ = ("_context", "caller")

    def __init__(self, context: grpc.ServicerContext, caller: Caller) -> None:
        self._context, self.caller = context, caller

    def __getattr__(self, name: str):
        return getattr(self._context, name)


def caller_of(context: grpc.ServicerContext) -> Caller:
    """The principal of the call `context` belongs to; OPEN_CALLER when the server runs
    without authentication (no ServerAuth)."""
    return getattr(context, "caller", OPEN_CALLER)


def _refuse(context: grpc.ServicerContext, err: MorphzError):
    context.abort_with_status(rpc_status.to_status(to_status(err)))


def _resolve_context(request, namespace: str) -> None:
    """A request's `context` as the name the caller means: in its namespace, if it has
    one (shared/namespaces.py); every service resolves it here, before its servicer."""
    if not namespace or not hasattr(request, "DESCRIPTOR"):  # a stream: no context field
        return
    if "context" in request.DESCRIPTOR.fields_by_name and isinstance(request.context, str) \
            and request.context:
        request.context = in_namespace(request.context, namespace)


class ServerAuth(grpc.ServerInterceptor):
    """Authenticates every call but health checks; `internal`: the gRPC services (full
    names) that serve the services' own principal only."""

    def __init__(self, authenticator: Authenticator, internal: Iterable[str] = ()) -> None:
        self._authenticator = authenticator
        self._internal = frozenset(internal)

    def _admit(self, method: str, context: grpc.ServicerContext) -> _CallContext:
        try:
            caller = self._authenticator.authenticate(context)
        except MorphzError as err:
            _refuse(context, err)
        service = method.lstrip("/").partition("/")[0]
        if service in self._internal and not caller.service:
            _refuse(context, MorphzError(
                "PERMISSION_DENIED", f"{service} serves the services' own principal only",
                principal=caller.principal, service=service))
        return _CallContext(context, caller)

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(UNGUARDED):
            return handler
        admit = self._admit

        def guarded(behavior):
            def call(request_or_iterator, context):
                admitted = admit(method, context)
                _resolve_context(request_or_iterator, admitted.caller.namespace)
                return behavior(request_or_iterator, admitted)
            return call

        kind = (handler.request_streaming, handler.response_streaming)
        make, behavior = {
            (False, False): (grpc.unary_unary_rpc_method_handler, handler.unary_unary),
            (False, True): (grpc.unary_stream_rpc_method_handler, handler.unary_stream),
            (True, False): (grpc.stream_unary_rpc_method_handler, handler.stream_unary),
            (True, True): (grpc.stream_stream_rpc_method_handler, handler.stream_stream),
        }[kind]
        return make(guarded(behavior), request_deserializer=handler.request_deserializer,
                    response_serializer=handler.response_serializer)


def server_credentials(cert: bytes, key: bytes,
                       client_ca: Optional[bytes]) -> grpc.ServerCredentials:
    """TLS with this certificate; with `client_ca`, mutual TLS: a client certificate
    issued by that CA is required."""
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=client_ca,
                                       require_client_auth=client_ca is not None)


# -- client side -----------------------------------------------------------------------------
class _Details(collections.namedtuple(
        "_Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready",
                     "compression")), grpc.ClientCallDetails):
    pass


class _BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                   grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds `authorization: Bearer TOKEN` to every call (on plaintext channels too, where
    gRPC's call credentials are refused: loopback development set-ups)."""

    def __init__(self, token: str) -> None:
        self._header = (AUTHORIZATION, f"Bearer {token}")

    def _details(self, d: grpc.ClientCallDetails) -> _Details:
        metadata = [m for m in d.metadata or () if m[0] != AUTHORIZATION] + [self._header]
        return _Details(d.method, d.timeout, metadata, d.credentials, d.wait_for_ready,
                        d.compression)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, requests):
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation, details, requests):
        return continuation(self._details(details), requests)

    def __repr__(self) -> str:  # never the token
        return "_BearerToken(...)"


@dataclass(frozen=True)
class ClientAuth:
    """The credentials a client presents: TLS (verifying the server with `ca`, or the
    system's roots when None) with an optional client certificate, and/or a bearer
    token. Nothing set: a plaintext channel (development mode)."""
    ca: Optional[bytes] = None
    cert: Optional[bytes] = None
    key: Optional[bytes] = field(default=None, repr=False)
    token: str = field(default="", repr=False)
    tls: bool = False

    @classmethod
    def from_files(cls, *, ca: str = "", cert: str = "", key: str = "",
                   token: str = "") -> "ClientAuth":
        """Read the PEM files; TLS when any is given. A MorphzError names a bad one."""
        if bool(cert) != bool(key):
            raise MorphzError("CONTEXT_INPUT_INVALID", "--tls-cert and --tls-key go together",
                              field="tls_cert" if not cert else "tls_key")
        return cls(ca=read_pem(ca, "tls_ca"), cert=read_pem(cert, "tls_cert"),
                   key=read_pem(key, "tls_key"), token=token, tls=bool(ca or cert))

    def channel(self, target: str, options: Optional[list] = None) -> grpc.Channel:
        options = list(options or [])
        if self.tls:
            channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(
                root_certificates=self.ca, private_key=self.key,
                certificate_chain=self.cert), options=options)
        else:
            channel = grpc.insecure_channel(target, options=options)
        if self.token:
            channel = grpc.intercept_channel(channel, _BearerToken(self.token))
        return channel


PLAINTEXT = ClientAuth()


def read_pem(path: str, field_name: str) -> Optional[bytes]:
    """A PEM file's bytes (None for no path); CONTEXT_INPUT_INVALID if unreadable."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"cannot read {path}: "
                          f"{e.strerror or e}", field=field_name, path=path) from None
    if b"-----BEGIN " not in data:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"{path} is not a PEM file",
                          field=field_name, path=path)
    return data
