"""`morphz mcp`: Morphz as a Model Context Protocol server, on the official `mcp` SDK.

It talks to Morphz only through the Python client (morphz.client), acting as one Morphz
principal per caller (stdio: its own credentials; streamable HTTP: the bearer token each
MCP client presents), so Morphz's own authorization decides every call.

- settings.py: what one `morphz mcp` is bound to (context, session, output byte limit);
- tool_specs.py: the tools' names, JSON input schemas and descriptions (the contract);
- tool_calls.py: what each tool does through the client;
- paging.py: outputs over the byte limit, in pages with a cursor;
- errors.py: a Morphz error as an MCP tool error (its text starts with the reason);
- resources.py, prompt.py: the `morphz://` resources and the `morphz_memory_guide` prompt;
- callers.py: the Morphz client a request acts through;
- server.py, transports.py: the SDK's low-level server, over stdio or streamable HTTP.
"""
