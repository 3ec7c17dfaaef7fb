"""MCP-02 at the unit level: services/mcp/paging.py keeps every page within the byte limit,
names where the next one starts, and marks (never hides) what it shortens; cursors are
checked where they enter."""
from __future__ import annotations

import pytest

from morphz.client import MorphzError
from morphz.services.mcp import paging
from morphz.services.mcp.paging import Position
from morphz.services.mcp.views import size

LIMIT = 2048


def test_mcp_02_cursor_round_trips_and_foreign_cursors_are_refused():
    at = Position("morphz_frames", server="abc", skip=7)
    assert paging.decode(paging.encode(at), "morphz_frames") == at
    assert paging.decode("", "morphz_frames") == Position("morphz_frames")
    for bad in ("nonsense", "mz1.!!!", paging.encode(at)[:-3]):
        with pytest.raises(MorphzError) as info:
            paging.decode(bad, "morphz_frames")
        assert info.value.reason == "CONTEXT_INPUT_INVALID"
    with pytest.raises(MorphzError) as info:
        paging.decode(paging.encode(at), "morphz_recall_search")
    assert info.value.details["field"] == "cursor"


def test_mcp_02_list_keeps_what_fits_and_every_item_is_shown_once():
    items = [{"id": f"f{i}", "body": "x" * (i * 13 % 200)} for i in range(60)]
    shown, rest = [], list(items)
    while rest:
        page = {"revision": 3, "frames": [dict(f) for f in rest]}
        kept = paging.fit_list(page, "frames", LIMIT)
        assert kept >= 1 and size(page) + paging.CURSOR_ROOM <= LIMIT
        shown += page["frames"]
        rest = rest[kept:]
    assert shown == items


def test_mcp_02_a_too_long_item_is_shortened_with_a_marker_never_silently():
    page = {"frames": [{"id": "big", "body": "測" * 5000}]}
    assert paging.fit_list(page, "frames", LIMIT) == 1
    item = page["frames"][0]
    assert size(page) + paging.CURSOR_ROOM <= LIMIT
    marker = item["truncated"]
    assert marker["field"] == "body" and marker["total_chars"] == 5000
    assert marker["shown_chars"] == len(item["body"]) == marker["offset"] > 0
    assert marker["read_rest_with"] == "morphz_recall_read" and marker["ref"] == "big"


def test_mcp_02_text_keeps_the_most_characters_that_fit():
    text = "".join(chr(0x4e00 + i % 500) if i % 3 else "\n" for i in range(4000))
    page = {"ref": "@e9", "text": text}
    n = paging.fit_text(page, "text", LIMIT)
    assert 0 < n < len(text) and page["text"] == text[:n]
    assert size(page) + paging.CURSOR_ROOM <= LIMIT
    page["text"] = text[:n + 1]
    assert size(page) + paging.CURSOR_ROOM > LIMIT  # one more character would not fit
