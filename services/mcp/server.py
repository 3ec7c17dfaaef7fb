"""The MCP server: the SDK's low-level Server (mcp.server.lowlevel), whose tools are
listed with tool_specs' hand-written schemas exactly, every call's arguments validated
against them, and every Morphz error returned as a tool error (errors.py).

The low-level server rather than MCPServer: MCPServer derives each schema from a Python
signature, while these schemas are a published contract (names, enums, bounds) kept in
one place and checked as written."""
from __future__ import annotations

from typing import Any, Protocol

import jsonschema
from jsonschema.exceptions import best_match
import mcp_types as types
from mcp.server.lowlevel import Server

from morphz.client import AsyncClient, MorphzError
from morphz.client.errors import input_error, make_error

from morphz.services.mcp import prompt, resources
from morphz.services.mcp import tool_specs as T
from morphz.services.mcp.errors import resource_error, tool_error, unknown_tool
from morphz.services.mcp.settings import Binding
from morphz.services.mcp.tool_calls import ToolCalls
from morphz.services.mcp.views import render

NAME = "morphz"
INSTRUCTIONS = ("Morphz keeps this agent's memory: record observations (morphz_observe), "
                "change the Mind only with context-tx transactions (morphz_transact), "
                "recall anything kept (morphz_recall_*), and compile what to see each turn "
                "(morphz_encoding). The prompt morphz_memory_guide teaches the "
                "transaction language with a worked example.")


class Callers(Protocol):
    async def client_for(self, request: Any) -> AsyncClient: ...


def build(binding: Binding, callers: Callers, version: str = "") -> Server:
    bound = bool(binding.context)
    tools = [types.Tool(name=s.name, description=s.description,
                        input_schema=s.input_schema(bound),
                        annotations=types.ToolAnnotations(read_only_hint=s.read_only))
             for s in T.TOOLS]
    validators = {t.name: jsonschema.Draft202012Validator(t.input_schema) for t in tools}
    calls = ToolCalls(binding)

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        try:
            if params.name not in validators:
                raise unknown_tool(params.name)
            check(validators[params.name], args)
            client = await callers.client_for(ctx.request)
            text = render(await calls.call(params.name, client, args))
            if len(text.encode()) > binding.max_output_bytes:  # a tool that could not page
                raise make_error("REPLY_TOO_LARGE", f"{params.name}'s output passes "
                                 f"--max-output-bytes ({binding.max_output_bytes})",
                                 "RESOURCE_EXHAUSTED", {"limit": binding.max_output_bytes,
                                                        "bytes": len(text.encode())})
        except MorphzError as e:
            return tool_error(e)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=resources.listed(binding))

    async def list_templates(ctx, params) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=resources.templates())

    async def read_resource(ctx, params: types.ReadResourceRequestParams) \
            -> types.ReadResourceResult:
        try:
            client = await callers.client_for(ctx.request)
            return await resources.read(str(params.uri), client, calls, binding)
        except MorphzError as e:
            raise resource_error(e) from None

    async def list_prompts(ctx, params) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[prompt.prompt()])

    async def get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != prompt.NAME:
            raise resource_error(input_error(f"no prompt {params.name[:80]!r}",
                                             field="name"))
        return prompt.messages()

    return Server(NAME, version=version, instructions=INSTRUCTIONS,
                  get_tool_input_schema=lambda name: next(
                      (t.input_schema for t in tools if t.name == name), None),
                  on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources,
                  on_list_resource_templates=list_templates,
                  on_read_resource=read_resource, on_list_prompts=list_prompts,
                  on_get_prompt=get_prompt)


# The bad argument's path in a schema error ("must_read/3"), at most this many characters:
# a deeply nested or huge-keyed argument would otherwise echo itself into the error.
FIELD_PATH_CHARS = 200
ELLIPSIS = "…"  # where a shortened path lost its middle


def check(validator: jsonschema.Draft202012Validator, args: dict) -> None:
    """Arguments against the tool's schema: the first violation, as CONTEXT_INPUT_INVALID."""
    error = best_match(validator.iter_errors(args))
    if error is not None:
        where = field_path(error.absolute_path)
        raise input_error(f"{where}: {error.message[:300]}", field=where)


def field_path(parts) -> str:
    """The path as `a/0/b` ("arguments": the whole), past FIELD_PATH_CHARS its start and
    end kept (the argument's name, the part that failed) with ELLIPSIS between."""
    where = "/".join(str(p) for p in parts) or "arguments"
    if len(where) <= FIELD_PATH_CHARS:
        return where
    head = FIELD_PATH_CHARS * 2 // 3
    return where[:head] + ELLIPSIS + where[-(FIELD_PATH_CHARS - head - len(ELLIPSIS)):]
