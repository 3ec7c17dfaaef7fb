"""The MCP tools' contract: names, JSON input schemas (JSON Schema, validated before any
call) and the one-paragraph descriptions a model reads to choose and call them.

Every tool also takes a required `context` argument when `morphz mcp` runs without
--context (specs(bound=False)); bound to a context, none does."""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

OBSERVATION_KINDS = ("user-message", "tool-result", "approval", "external")
SEARCH_MODES = ("hybrid", "lexical", "vector")
DIRECTIONS = ("ancestors", "descendants", "both")
MAX_SEARCH_LIMIT = 100  # the recall service's own bound
MAX_DEPTH = 4
MAX_READ_CHARS = 1 << 20  # the recall service's own bound on one read

PAGING = ("Outputs over this server's byte limit come in pages: pass the returned "
          "`next_cursor` back as `cursor` for the next one; nothing is ever cut silently.")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    properties: Mapping[str, Any]
    required: tuple[str, ...] = ()
    read_only: bool = True

    def input_schema(self, bound: bool) -> dict[str, Any]:
        properties = dict(self.properties)
        required = list(self.required)
        if not bound:
            properties = {"context": CONTEXT, **properties}
            required = ["context", *required]
        schema: dict[str, Any] = {"type": "object", "properties": properties,
                                  "additionalProperties": False}
        if required:
            schema["required"] = required
        return schema


CONTEXT = {"type": "string", "minLength": 1,
           "description": "The Morphz context (an agent's memory) to work in."}
CURSOR = {"type": "string", "description": "`next_cursor` of the previous page; omit for "
          "the first page (keep the other arguments unchanged)."}
TIME = {"type": "string", "description": "ISO 8601 with an explicit UTC offset, e.g. "
        "2026-12-04T09:30:00+00:00."}


def _tool(name: str, description: str, properties: dict, required: tuple = (),
          read_only: bool = True) -> ToolSpec:
    return ToolSpec(name, description, MappingProxyType(properties), required, read_only)


OBSERVE = _tool(
    "morphz_observe",
    "Record an observation in Morphz's immutable event history: something the user said, a "
    "tool's result, an approval or an external fact, appended to this server's session. It "
    "returns the event's short reference `@eN` (use it in `context-tx` sources, retire, "
    "search and read). Mark credentials and other sensitive text `secret`: Morphz then shows "
    "it only as `[secret @eN]` to anyone without the reveal right. `occurred_at` says when "
    "it happened at its source (time-range search filters on it); omit it for now.",
    {"text": {"type": "string", "minLength": 1, "description": "The observation's text."},
     "kind": {"type": "string", "enum": list(OBSERVATION_KINDS), "default": "tool-result",
              "description": "What it is: user-message, tool-result (default), approval or "
              "external."},
     "secret": {"type": "boolean", "default": False,
                "description": "The text is secret: redacted for readers without the "
                "reveal right."},
     "occurred_at": TIME},
    ("text",), read_only=False)

SEARCH = _tool(
    "morphz_recall_search",
    "Search the whole memory, retired content included: events (`@eN`) and Mind frames, by "
    "words in any language (lexical), by meaning (vector), or both fused (hybrid, the "
    "default); `since`/`until` narrow to a time range (a query may then be empty). Each hit "
    "gives its ref (`@eN` for events) or frame id, kind, state (active, retiring, retired), a "
    "short preview with matches marked «like this», its score and its rank in each leg "
    "(lexical_rank, vector_rank; 0: that leg did not find it). Read a hit whole with "
    "morphz_recall_read. " + PAGING,
    {"query": {"type": "string", "description": "Words to look for, or an @eN ref or frame "
               "id to find that item first."},
     "mode": {"type": "string", "enum": list(SEARCH_MODES), "default": "hybrid",
              "description": "lexical, vector or hybrid (default)."},
     "since": dict(TIME, description="Inclusive start of a time range (ISO 8601 with an "
                   "offset)."),
     "until": dict(TIME, description="Exclusive end of a time range (ISO 8601 with an "
                   "offset)."),
     "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT, "default": 20,
               "description": "Hits per page, 1 to 100 (default 20)."},
     "cursor": CURSOR})

READ = _tool(
    "morphz_recall_read",
    "Read the full text of one event (`@eN` or its id) or one frame (its id) from the "
    "authoritative history, retired ones included, in pages of characters: start at `offset` "
    "0 and, while `has_more` is true, call again with `offset` set to the returned "
    "`next_offset`. Secrets read as `[secret @eN]`.",
    {"ref": {"type": "string", "minLength": 1,
             "description": "An event's @eN ref or id, or a frame id."},
     "offset": {"type": "integer", "minimum": 0, "default": 0,
                "description": "Where the page starts, in characters (default 0)."},
     "limit": {"type": "integer", "minimum": 1, "maximum": MAX_READ_CHARS,
               "description": "At most this many characters (default: the server's page, "
               "and never more than this server's output limit holds)."}},
    ("ref",))

TRAVERSE = _tool(
    "morphz_recall_traverse",
    "Walk the Mind graph from one frame to see where a belief came from or what builds on "
    "it: `ancestors` (the default) follows its sources and its relations from subject to "
    "object, `descendants` the frames that cite or relate to it, `both` merges them; "
    "`depth` hops (0 to 4, default 2). Retired frames and events stay reachable. Returns "
    "nodes (frames with body, revision, state and sources; events as leaves with their ref "
    "and a preview, or their whole text with `include_events`) and edges (source or named "
    "relation). " + PAGING,
    {"frame": {"type": "string", "minLength": 1, "description": "The frame id to start "
               "from."},
     "direction": {"type": "string", "enum": list(DIRECTIONS), "default": "ancestors",
                   "description": "ancestors (default), descendants or both."},
     "depth": {"type": "integer", "minimum": 0, "maximum": MAX_DEPTH, "default": 2,
               "description": "Hops from the frame, 0 to 4 (default 2)."},
     "include_events": {"type": "boolean", "default": False,
                        "description": "Give event leaves' whole text, not a preview."},
     "cursor": CURSOR},
    ("frame",))

FRAMES = _tool(
    "morphz_frames",
    "List every frame of the Mind (the agent's current beliefs, plans and notes) in "
    "projection order, each with its id, revision, state (active, retiring, retired), "
    "protection, sources and body, and the context's revision (the `base-version` a "
    "`context-tx` written from this listing must declare). " + PAGING,
    {"cursor": CURSOR,
     "reveal_secrets": {"type": "boolean", "default": False,
                        "description": "Show `(secret ...)` parts as stored; refused "
                        "FORBIDDEN without the reveal right."}})

FRAME = _tool(
    "morphz_frame",
    "Show one frame: its body, revision, state (with the retire reason and remaining ticks "
    "while it is retiring), protection, sources and relations; `at_revision` gives the frame "
    "as it was at that context revision (0: now), to see what a change replaced.",
    {"id": {"type": "string", "minLength": 1, "description": "The frame id."},
     "at_revision": {"type": "integer", "minimum": 0, "default": 0,
                     "description": "A context revision to look back to (0: current)."},
     "reveal_secrets": {"type": "boolean", "default": False,
                        "description": "Show `(secret ...)` parts as stored; refused "
                        "FORBIDDEN without the reveal right."}},
    ("id",))

TRANSACT = _tool(
    "morphz_transact",
    "Change the Mind with one atomic `context-tx` transaction (see the morphz_memory_guide "
    "prompt): `(context-tx (base-version N) (reason \"...\") OPS...)` with create, derive "
    "(from @eN or frame sources), revise (replaces the whole body), relate/unrelate, retire/"
    "restore, protect/unprotect, place, checkpoint/rollback. N is the revision you read "
    "(morphz_frames, morphz_encoding, morphz_status). Every step is checked before anything "
    "changes. Returns the receipt (new revision, each op's outcome). If what it touches "
    "changed after N, it fails as a tool error starting `TX_CONFLICT` with the changed "
    "boundaries and the latest revision: reread those frames and submit a merged "
    "transaction based on the latest revision.",
    {"tx": {"type": "string", "minLength": 1,
            "description": "The transaction, in the context-tx S-expression text."},
     "activation": {"type": "string", "description": "The activation id morphz_encoding "
                    "returned, when the transaction answers that encoding (its tick is the "
                    "read tick)."}},
    ("tx",), read_only=False)

ENCODING = _tool(
    "morphz_encoding",
    "Compile the Context Encoding for this server's session: what the model should see now "
    "(protocol, session state, the inbox of new observations, the Mind's active frames), "
    "frozen as a replayable snapshot whose id and hash it returns with the text, the "
    "context revision (your next `base-version`) and the activation id (pass it to "
    "morphz_transact). It claims the session's pending inputs, so call it once per "
    "model turn. Nothing is dropped to fit a budget: over budget it fails "
    "ENCODING_BUDGET_EXCEEDED naming the largest items. " + PAGING,
    {"budget_bytes": {"type": "integer", "minimum": 0, "description": "The most bytes the "
                      "encoding may take (0 or omitted: the server's default)."},
     "budget_tokens": {"type": "integer", "minimum": 0, "description": "The most tokens "
                       "(estimated) it may take (0 or omitted: no token budget)."},
     "preview_bytes": {"type": "integer", "minimum": 0, "description": "Observations over "
                       "this show as previews (0 or omitted: the server's default)."},
     "must_read": {"type": "array", "items": {"type": "string", "minLength": 1},
                   "description": "@eN refs or frame ids that must appear whole (it fails "
                   "MUST_READ_MISSING naming any that cannot)."},
     "cursor": CURSOR})

STATUS = _tool(
    "morphz_status",
    "The context's state: its revision (the `base-version` for the next transaction), "
    "cognitive tick, organizing window, frame counts by state, event count and sessions "
    "(pending inputs, waiting messages), with the context and session this server is "
    "bound to.",
    {})

TOOLS: tuple[ToolSpec, ...] = (OBSERVE, SEARCH, READ, TRAVERSE, FRAMES, FRAME, TRANSACT,
                               ENCODING, STATUS)
BY_NAME: Mapping[str, ToolSpec] = MappingProxyType({t.name: t for t in TOOLS})
