"""Outputs over the byte limit, in pages (MCP-02): never cut silently.

- A list (search hits, frames) keeps the items that fit and gives a cursor naming where
  the next page starts: the Morphz page it came from (that service's own cursor) and how
  many of its items were already shown.
- A text (a read, an encoding) keeps the characters that fit and says where the rest
  starts (`next_offset`, or a cursor).
- An item whose own text alone passes the limit is shortened with a `truncated` marker
  naming how to read the rest (morphz_recall_read at an offset): marked, never silent.
Cursors are opaque to the model; they carry no content, only positions."""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Optional

from morphz.client.errors import input_error

from morphz.services.mcp.views import render, size

CURSOR_PREFIX = "mz1."
CURSOR_ROOM = 512  # bytes kept free for the page's next_cursor
LONG_FIELDS = ("text", "body", "preview")  # what `shorten` may cut, longest first


@dataclass(frozen=True)
class Position:
    """Where a page starts: `tool`'s, the Morphz cursor of the page (`server`; "" the
    first), `skip` items of it already shown; or `snapshot`/`offset` for an encoding."""
    tool: str
    server: str = ""
    skip: int = 0
    snapshot: str = ""
    hash: str = ""
    offset: int = 0


def encode(p: Position) -> str:
    raw = json.dumps({"t": p.tool, "s": p.server, "k": p.skip, "n": p.snapshot,
                      "h": p.hash, "o": p.offset}, separators=(",", ":")).encode()
    return CURSOR_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: Optional[str], tool: str) -> Position:
    """The position a `cursor` argument names ("" or None: the first page)."""
    if not cursor:
        return Position(tool)
    try:
        if not cursor.startswith(CURSOR_PREFIX):
            raise ValueError("prefix")
        body = cursor[len(CURSOR_PREFIX):]
        d = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        p = Position(d["t"], str(d["s"]), int(d["k"]), str(d["n"]), str(d["h"]), int(d["o"]))
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise input_error("cursor is not a next_cursor this server gave", field="cursor") \
            from None
    if p.tool != tool or p.skip < 0 or p.offset < 0:
        raise input_error(f"cursor was given by another tool ({p.tool[:40]}), not {tool}",
                          field="cursor")
    return p


def fit_list(page: dict, key: str, limit: int, at_least_one: bool = True) -> int:
    """Keep in page[key] the leading items that fit `limit` with the rest of the page and
    a cursor (at_least_one: one even if it alone is too long, then shortened); return how
    many."""
    items = page[key]
    page[key] = []
    used = size(page) + CURSOR_ROOM
    kept = 0
    for item in items:
        n = size(item) + 1  # its separating comma
        if used + n > limit:
            break
        used += n
        kept += 1
    if kept == 0 and items and at_least_one:
        shorten(items[0], limit - used)
        kept = 1
    page[key] = items[:kept]
    return kept


def fit_text(page: dict, key: str, limit: int) -> int:
    """Keep the leading characters of page[key] that fit `limit` with the rest of the page
    and a cursor; return how many (the whole text when it fits)."""
    text = page[key]
    page[key] = text
    if size(page) + CURSOR_ROOM <= limit:
        return len(text)
    lo, hi = 0, len(text)  # the most characters that fit: binary search on the rendering
    while lo < hi:
        mid = (lo + hi + 1) // 2
        page[key] = text[:mid]
        if size(page) + CURSOR_ROOM <= limit:
            lo = mid
        else:
            hi = mid - 1
    page[key] = text[:lo]
    return lo


def shorten(item: dict, room: int) -> None:
    """Cut the longest of an item's long text fields to fit `room` bytes, marking it."""
    field = max((f for f in LONG_FIELDS if isinstance(item.get(f), str)),
                key=lambda f: len(item[f]), default=None)
    if field is None:
        return
    whole = item[field]
    ref = item.get("ref") or item.get("id") or ""
    item["truncated"] = {"field": field, "shown_chars": len(whole), "total_chars": len(whole),
                         "read_rest_with": "morphz_recall_read", "ref": ref,
                         "offset": len(whole)}
    shown = fit_text(item, field, max(room, 0) + CURSOR_ROOM)
    item["truncated"].update(shown_chars=shown, offset=shown)


def shorten_to_fit(page: dict, key: Optional[str], limit: int) -> None:
    """A page that still passes the limit (one long item): shorten its items' long fields
    (page[key] items, or the page itself when key is None), longest first, until it fits."""
    items = page[key] if key else [page]
    for item in sorted(items, key=size, reverse=True):
        over = size(page) + CURSOR_ROOM - limit
        if over <= 0:
            return
        shorten(item, max(size(item) - over, 0))


__all__ = ["Position", "decode", "encode", "fit_list", "fit_text", "render", "shorten",
           "shorten_to_fit", "size"]
