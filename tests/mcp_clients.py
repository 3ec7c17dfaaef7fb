"""`morphz mcp` as the MCP tests meet it: a real `morphz mcp` process, reached with the
SDK's own client (mcp.ClientSession) over stdio (the client starts the process, bound to
one context, acting as the token in its environment) or streamable HTTP (one process for
a test module, bound to no context, each session presenting a principal's bearer token).

Each test opens sessions with `open(token, context)` and calls tools through `Mcp`, which
names the context in every call when the server is not bound to one."""
from __future__ import annotations

import json
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Optional

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.topology import BOUND

STDIO, HTTP = "stdio", "http"
MORPHZ = [sys.executable, "-m", "morphz.services.cli.main", "mcp"]


class Mcp:
    """An initialized MCP session and the context its calls work in."""

    def __init__(self, session: ClientSession, context: str, bound: bool) -> None:
        self.session, self.context, self.bound = session, context, bound

    async def call(self, tool: str, **args: Any) -> tuple[bool, str]:
        """(is_error, the text content) of one tool call."""
        if not self.bound:
            args = {"context": self.context, **args}
        result = await self.session.call_tool(tool, args)
        assert len(result.content) == 1 and result.content[0].type == "text", result
        return bool(result.is_error), result.content[0].text

    async def ok(self, tool: str, **args: Any) -> dict:
        """A call that must succeed: its JSON output."""
        is_error, text = await self.call(tool, **args)
        assert not is_error, f"{tool}: {text}"
        return json.loads(text)

    async def error(self, tool: str, **args: Any) -> tuple[str, dict]:
        """A call that must fail as a tool error: (its reason, its JSON details)."""
        is_error, text = await self.call(tool, **args)
        assert is_error, f"{tool} did not fail: {text[:300]}"
        first, _, rest = text.partition("\n")
        return first.partition(":")[0], json.loads(rest)


class HttpMcp:
    """`morphz mcp --transport http` on a free loopback port, until stop()."""

    def __init__(self, flags: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen([*MORPHZ, "--transport", "http", "--listen",
                                          "127.0.0.1:0", *flags], stdout=subprocess.PIPE,
                                         stderr=err, text=True, env=env)
        line = self.proc.stdout.readline()
        assert line.startswith("morphz mcp: serving on "), \
            f"morphz mcp did not start: {line!r}\n{log.read_text(errors='replace')}"
        self.url = line.split()[-1]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=BOUND)


@asynccontextmanager
async def stdio_session(flags: list[str], env: dict[str, str], context: str,
                        errlog) -> AsyncIterator[Mcp]:
    params = StdioServerParameters(command=MORPHZ[0], args=[*MORPHZ[1:], *flags,
                                                             "--context", context], env=env)
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=BOUND) as session:
            await session.initialize()
            yield Mcp(session, context, bound=True)


@asynccontextmanager
async def http_session(url: str, token: Optional[str], context: str) -> AsyncIterator[Mcp]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers,
                                  timeout=httpx2.Timeout(BOUND, read=300)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=BOUND) as session:
                await session.initialize()
                yield Mcp(session, context, bound=False)
