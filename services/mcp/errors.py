"""A Morphz error as MCP sees it (MCP-01): a tool error (`isError`) whose text starts with
the stable reason (TX_CONFLICT, FORBIDDEN, ...) and carries its details as JSON, so a
model can branch on the first word and act on the rest; for resources, a JSON-RPC error
whose message starts the same way."""
from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from morphz.client import MorphzError
from morphz.client.errors import input_error

from morphz.services.mcp.views import render

# JSON-RPC codes for a failed resource read: the request itself was wrong, or it could not
# be served (the reason in the message and data says which Morphz rule refused it).
_INVALID_PARAMS, _SERVER_ERROR = types.INVALID_PARAMS, -32000
_CALLER_FAULTS = ("INVALID_ARGUMENT", "NOT_FOUND")


def error_view(e: MorphzError) -> dict[str, Any]:
    view = {"reason": e.reason, "code": e.code, "message": e.message, "details": e.details}
    if e.reason == "TX_CONFLICT":
        # What the model needs to merge, at the top: which boundaries moved, and the
        # revision to reread and base the next transaction on.
        view["boundaries"] = [c.get("boundary") for c in e.details.get("changed") or []
                              if isinstance(c, dict)]
        view["latest_revision"] = e.details.get("latest")
        view["next_step"] = ("reread the changed frames (morphz_frame) and submit one "
                             "transaction merging both changes, with base-version "
                             f"{e.details.get('latest')}")
    return view


def tool_error(e: MorphzError) -> types.CallToolResult:
    text = f"{e.reason}: {e.message}\n{render(error_view(e))}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                is_error=True)


def resource_error(e: MorphzError) -> MCPError:
    code = _INVALID_PARAMS if e.code in _CALLER_FAULTS else _SERVER_ERROR
    return MCPError(code, f"{e.reason}: {e.message}", error_view(e))


def unknown_tool(name: str) -> MorphzError:
    return input_error(f"no tool {name[:80]!r}", field="name")


__all__ = ["MorphzError", "error_view", "resource_error", "tool_error", "unknown_tool"]
