"""What one `morphz mcp` process is bound to."""
from __future__ import annotations

from dataclasses import dataclass

from morphz.client.errors import input_error

DEFAULT_SESSION = "main"
DEFAULT_MAX_OUTPUT_BYTES = 64 << 10  # a tool output's JSON; more is paged with a cursor
MIN_OUTPUT_BYTES = 1024  # room for a page's envelope and at least some content
DEFAULT_HTTP_LISTEN = "127.0.0.1:7080"  # loopback: nothing off the machine unless asked
HTTP_PATH = "/mcp"


@dataclass(frozen=True)
class Binding:
    """`context`: the one context every tool works in ("" when each tool call names its
    own, as a `context` argument); `session`: the session its observations, encodings
    and transactions belong to; `max_output_bytes`: the most one tool output (its JSON,
    UTF-8) may take before it is paged."""
    context: str = ""
    session: str = DEFAULT_SESSION
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES

    def __post_init__(self) -> None:
        if not self.session:
            raise input_error("--session must not be empty", field="session")
        if self.max_output_bytes < MIN_OUTPUT_BYTES:
            raise input_error(f"--max-output-bytes must be at least {MIN_OUTPUT_BYTES}",
                              field="max_output_bytes", minimum=MIN_OUTPUT_BYTES)

    def context_of(self, args: dict) -> str:
        """The context a call works in: the bound one, else its `context` argument."""
        if self.context:
            return self.context
        name = args.get("context")
        if not isinstance(name, str) or not name:
            raise input_error("this MCP server is bound to no context: name one in the "
                              "`context` argument", field="context")
        return name

