"""ListFrames a page at a time: the frames in projection order (the placed ones as
`place` left them, then the rest by id), cut under a byte budget.

A position in the listing is (offset, after): while `offset` is inside the order, the
next frame is the placed one there; past it, the next is the first unplaced frame whose
id follows `after` ("" for the first), read from the frames table in key order. So a
page reads only its own frames, however far into the listing it starts; cursors carry
the position and are bound to the Mind's version (shared/cursor.py)."""
from __future__ import annotations

import json
from typing import Iterator

from morphz.shared.limits import MESSAGE_BYTES, TRANSPORT_SLACK
from morphz.shared.mind import records as R
from morphz.shared.mind.view import MindView

MAX_PAGE_BYTES = 32 << 20  # a page's frames: a frame (16 MiB at most) and more fit
# A listing asked for whole (max_bytes 0) must fit in one reply message.
WHOLE_LISTING_BYTES = MESSAGE_BYTES.max - TRANSPORT_SLACK

Position = tuple[int, str]


def frames_from(m: MindView, position: Position) -> Iterator[tuple[Position, R.Frame]]:
    """Each frame from `position` on, with the position just past it."""
    offset, after = position
    order = m.order()
    for i in range(offset, len(order)):
        f = m.frame(order[i])
        if f is not None:  # the order may name a frame that is gone
            yield (i + 1, ""), f
    placed = set(order)
    for f in m.frames(after=after or None):
        if f.id not in placed:
            yield (len(order), f.id), f


def view_bytes(view: dict) -> int:
    """About what a frame's view takes in a reply: its body's UTF-8 bytes and the rest as
    JSON (more than its protobuf encoding)."""
    rest = {k: v for k, v in view.items() if k != "body"}
    return len(view.get("body", "").encode("utf-8")) + \
        len(json.dumps(rest, ensure_ascii=False).encode("utf-8"))
