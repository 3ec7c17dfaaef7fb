"""A synchronous MCP client over stdio for the MCP extension's cases (MCP-01/02): the
kit starts the implementation's MCP server command (it reaches the target on its own)
with the caller's bearer token in `$MORPHZ_TOKEN`, and talks to it with the MCP SDK's
own client. The `mcp` package is optional: `pip install morphz-conformance[mcp]`; without
it the driver has no "mcp" hook and those cases are not applicable."""
from __future__ import annotations

import json
import os
import shlex
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Mapping

from morphz_conformance.driver import NotSupported


def available() -> bool:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True)
class ToolResult:
    is_error: bool
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


class McpSession:
    """One initialized MCP session with a server started by `command`, as the caller
    holding `token` ("" for none); close() ends it and the server process."""

    def __init__(self, command: str, token: str, timeout: float) -> None:
        if not available():
            raise NotSupported("mcp")
        from anyio.from_thread import start_blocking_portal
        self._timeout = timeout
        env = {k: v for k, v in os.environ.items() if k != "MORPHZ_TOKEN"}
        if token:
            env["MORPHZ_TOKEN"] = token
        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        try:
            self._session_cm = self._portal.wrap_async_context_manager(
                self._open(shlex.split(command), env))
            self._session = self._session_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise

    @asynccontextmanager
    async def _open(self, argv: list[str], env: dict[str, str]):
        import anyio
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
        # The server's own log is not echoed: it could carry credentials.
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    with anyio.fail_after(self._timeout):
                        await session.initialize()
                    yield session

    def _call(self, fn, *args):
        import anyio

        async def bounded():
            with anyio.fail_after(self._timeout):
                return await fn(*args)
        return self._portal.call(bounded)

    def list_tools(self) -> list[Tool]:
        listed = self._call(self._session.list_tools)
        return [Tool(t.name, t.description or "", dict(t.input_schema or {}))
                for t in listed.tools]

    def call(self, tool: str, **arguments: Any) -> ToolResult:
        result = self._call(self._session.call_tool, tool, arguments)
        text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
        return ToolResult(bool(result.is_error), text)

    def close(self) -> None:
        try:
            self._session_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)
