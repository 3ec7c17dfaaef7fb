"""Whom a request acts as in Morphz, and the client it goes through.

Over stdio the MCP server is one principal: its own credentials (--token, --tls-* or
$MORPHZ_*). Over streamable HTTP each MCP client is its own principal: the bearer token
it presents is forwarded to Morphz, which authenticates and authorizes every call with
it; the server's own token is never used for them, so an MCP client can do no more than
its token's principal. A client certificate (mutual TLS) would speak for every HTTP
caller alike, so `morphz mcp --transport http` refuses one (settings in cli/mcp_cmds.py).
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Optional

from morphz.client import AsyncClient, Credentials
from morphz.client.errors import AuthError

MAX_CLIENTS = 64  # HTTP: clients kept open, one per recent bearer token


@dataclass(frozen=True)
class Connection:
    """Where Morphz is and how to reach it: targets as morphz.client takes them, the
    credentials (stdio: the principal's; HTTP: TLS only, tokens come per caller) and
    each call's deadline."""
    server: Optional[str]
    recall: Optional[str]
    encoding: Optional[str]
    credentials: Credentials
    timeout: float

    def client(self, credentials: Credentials) -> AsyncClient:
        return AsyncClient(self.server, recall=self.recall, encoding=self.encoding,
                           credentials=credentials, timeout=self.timeout)


class OwnPrincipal:
    """stdio: every request acts as the server's own credentials."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._client: Optional[AsyncClient] = None  # made inside the serving event loop

    async def client_for(self, request: Any) -> AsyncClient:
        if self._client is None:
            self._client = self._connection.client(self._connection.credentials)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


class BearerPrincipals:
    """Streamable HTTP: each request acts as the bearer token its HTTP request carried
    (checked present by the SDK's bearer middleware; Morphz decides what it may do)."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._clients: "OrderedDict[str, AsyncClient]" = OrderedDict()

    async def client_for(self, request: Any) -> AsyncClient:
        token = bearer_token(request)
        if not token:  # the middleware lets none through; never fall back to our own
            raise AuthError("UNAUTHENTICATED", "this MCP server needs a bearer token",
                            code="UNAUTHENTICATED", details={"credentials": "token"})
        key = hashlib.sha256(token.encode()).hexdigest()
        client = self._clients.pop(key, None)
        if client is None:
            client = self._connection.client(replace(self._connection.credentials,
                                                     token=token))
        self._clients[key] = client
        while len(self._clients) > MAX_CLIENTS:
            _, oldest = self._clients.popitem(last=False)
            await oldest.close()
        return client

    async def close(self) -> None:
        while self._clients:
            await self._clients.popitem()[1].close()


def bearer_token(request: Any) -> str:
    """The bearer token of a Starlette request (None on stdio: "")."""
    if request is None:
        return ""
    user = request.scope.get("user")
    access = getattr(user, "access_token", None)
    if access is not None:
        return access.token
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""
