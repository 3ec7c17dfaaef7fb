"""Serving the MCP server: over stdio (the SDK's stdio_server) or streamable HTTP (the
SDK's Starlette app under uvicorn, behind the SDK's bearer-token middleware).

Over HTTP every MCP client must present `Authorization: Bearer TOKEN` (else 401 before
any MCP message is read); the token is forwarded to Morphz as that client's credentials
(callers.BearerPrincipals), and the SDK binds each MCP session to the token that opened
it. The token verifier accepts any non-empty token: Morphz, which knows the tokens,
authenticates each call and answers UNAUTHENTICATED for one it does not know."""
from __future__ import annotations

import hashlib
import ipaddress
import socket
import sys
from typing import Callable, Optional, TextIO

import anyio
import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from morphz.client.errors import input_error
from morphz.client.options import listen_address

from morphz.services.mcp.settings import HTTP_PATH


class ForwardedToken:
    """The SDK's TokenVerifier: a bearer token is taken as given (Morphz checks it on
    every call); its client_id, a digest of it, binds the MCP session to it."""

    async def verify_token(self, token: str) -> Optional[AccessToken]:
        token = token.strip()
        if not token:
            return None
        return AccessToken(token=token, scopes=[],
                           client_id=hashlib.sha256(token.encode()).hexdigest()[:32])


async def serve_stdio(server: Server, close: Callable) -> None:
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await close()


def bind(listen: str) -> socket.socket:
    """The HTTP listener, bound before serving so port 0 yields a real port to announce."""
    host, port = listen_address(listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise input_error(f"cannot listen on {listen[:100]}: {e.strerror or e}",
                          field="listen") from None
    sock.listen(128)
    return sock


async def serve_http(server: Server, sock: socket.socket, close: Callable,
                     announce: TextIO = sys.stdout) -> None:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}{HTTP_PATH}"
    app = server.streamable_http_app(
        streamable_http_path=HTTP_PATH, host=host, token_verifier=ForwardedToken(),
        # No OAuth authorization server: the issuer is only a required field here, named
        # nowhere (no metadata routes are served without a resource server URL).
        auth=AuthSettings(issuer_url=url, resource_server_url=None))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    if not ipaddress.ip_address(host).is_loopback:
        print(f"morphz mcp: warning: bearer tokens reach {url} in plaintext: serve it on "
              "loopback or behind a TLS-terminating proxy", file=sys.stderr, flush=True)
    print(f"morphz mcp: serving on {url}", file=announce, flush=True)
    try:
        await uvicorn.Server(config).serve(sockets=[sock])
    finally:
        await close()


def run(main: Callable) -> None:
    """Run a transport's coroutine on asyncio (grpc.aio, which the client uses, needs it)."""
    anyio.run(main, backend="asyncio")
