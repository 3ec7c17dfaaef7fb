"""The resources: `morphz://{context}/mind` (the Mind's frames, as morphz_frames gives
them) and `morphz://{context}/events/{ref}` (an event's text, as morphz_recall_read gives
it). Contents are the same JSON as those tools' first page, under the same byte limit
and redaction; a listing or text that goes on says so with its next_cursor or
next_offset, to be followed with the tool."""
from __future__ import annotations

import re
from typing import Optional

import mcp_types as types

from morphz.client import AsyncClient
from morphz.client.errors import input_error

from morphz.services.mcp.settings import Binding
from morphz.services.mcp.tool_calls import ToolCalls
from morphz.services.mcp.views import render

SCHEME = "morphz://"
MIND = "morphz://{context}/mind"
EVENT = "morphz://{context}/events/{ref}"
_URI = re.compile(r"morphz://(?P<context>[^/]+)/(?:(?P<mind>mind)|events/(?P<ref>[^/]+))\Z")
JSON = "application/json"


def templates() -> list[types.ResourceTemplate]:
    return [
        types.ResourceTemplate(
            name="morphz_mind", uri_template=MIND, mime_type=JSON,
            description="The Mind of a context: every frame (id, revision, state, sources, "
            "body) and the context revision; a long Mind gives next_cursor for "
            "morphz_frames."),
        types.ResourceTemplate(
            name="morphz_event", uri_template=EVENT, mime_type=JSON,
            description="One event by its @eN ref (or id): kind, state, session and text "
            "(secrets as [secret @eN]); a long text gives next_offset for "
            "morphz_recall_read."),
    ]


def listed(binding: Binding) -> list[types.Resource]:
    """The bound context's Mind (a server bound to no context lists only templates)."""
    if not binding.context:
        return []
    return [types.Resource(name="morphz_mind", uri=MIND.format(context=binding.context),
                           mime_type=JSON,
                           description=f"The Mind of context {binding.context}.")]


def parse(uri: str, binding: Binding) -> tuple[str, Optional[str]]:
    """(context, None) for a Mind, (context, ref) for an event."""
    m = _URI.match(uri)
    if m is None:
        raise input_error(f"not a Morphz resource: {uri[:200]!r} (expected {MIND} or "
                          f"{EVENT})", field="uri")
    context = m["context"]
    if binding.context and context != binding.context:
        raise input_error(f"this MCP server is bound to context {binding.context}, not "
                          f"{context[:80]}", field="uri")
    return context, (None if m["mind"] else m["ref"])


async def read(uri: str, client: AsyncClient, calls: ToolCalls,
               binding: Binding) -> types.ReadResourceResult:
    context, ref = parse(uri, binding)
    args = {"context": context}
    if ref is None:
        content = await calls.frames(client, context, args)
    else:
        content = await calls.read(client, context, dict(args, ref=ref))
    return types.ReadResourceResult(contents=[types.TextResourceContents(
        uri=uri, mime_type=JSON, text=render(content))])
