"""ListFrames a page at a time: the frames in projection order (the placed ones as
`place` left them, then the rest by id: MindView.frame_rows_in_order's order, which
reads every row at once), cut under a byte budget.

A position in the listing is (phase, after). In phase IN_ORDER the next frame is the
placed one ranked past `after` (the rank of the last one listed, "" for the first);
in phase UNPLACED it is the first unplaced frame whose id follows `after` ("" for the
first). So a page reads its own frames (and the rest of the last batch it began) and
the order from where the last page ended: listing a context page by page costs its
frames once, however many pages. Cursors carry the position and are bound to the
Mind's version (shared/cursor.py)."""
from __future__ import annotations

from itertools import islice
from typing import Iterator

from morphz.services.transaction.core.txlang import check_frame_id
from morphz.shared.errors import MorphzError
from morphz.shared.limits import MESSAGE_BYTES, SCAN_MANY_SCANS, TRANSPORT_SLACK, utf8_len
from morphz.shared.mind import records as R
from morphz.shared.mind.view import MindView
from morphz.services.transaction.core.results import FrameResult

MAX_PAGE_BYTES = 32 << 20  # a page's frames: a frame (16 MiB at most) and more fit
# A listing asked for whole (max_bytes 0) must fit in one reply message.
WHOLE_LISTING_BYTES = MESSAGE_BYTES.max - TRANSPORT_SLACK

Position = tuple[int, str]
BATCH = SCAN_MANY_SCANS.max // 2  # frames read together: their relation scans, a ScanMany
READ_AHEAD_BYTES = 8 << 20  # of frame rows read ahead of a batch (a remote store)


IN_ORDER, UNPLACED = 0, 1
START: Position = (IN_ORDER, "")


def check_position(position: Position) -> bool:
    """Whether a decoded cursor's position is one frames_from could give (a cursor's
    check is no secret: one may be made up)."""
    phase, after = position
    if phase == UNPLACED:
        try:
            return after == "" or check_frame_id(after) == after
        except MorphzError:
            return False
    if phase != IN_ORDER:
        return False
    try:  # a rank is a key part: 0 <= rank < 2**64 (keys.encode_in)
        return after == "" or (str(int(after)) == after and 0 <= int(after) < 1 << 64)
    except ValueError:
        return False


def frames_from(m: MindView, position: Position) -> Iterator[tuple[Position, R.Frame]]:
    """Each frame from `position` on, with the position just past it. Frames are read a
    batch at a time, with their edges: over a remote store, a round trip or two per
    batch instead of three per frame. The unplaced ones are found by their keys alone,
    so no placed frame's body is read twice."""
    phase, after = position
    if phase == IN_ORDER:
        ranked = m.order_after(int(after) if after else None)
        while batch := list(islice(ranked, BATCH)):
            _read_batch(m, [fid for _, fid in batch])
            for rank, fid in batch:
                f = m.frame(fid)
                if f is not None:  # the order may name a frame that is gone
                    yield (IN_ORDER, str(rank)), f
        after = ""
    unplaced = m.unplaced_frame_ids(after or None)
    while ids := list(islice(unplaced, BATCH)):
        _read_batch(m, ids)
        for fid in ids:
            yield (UNPLACED, fid), m.frame(fid)


def _read_batch(m: MindView, ids: list[str]) -> None:
    """The frames' rows (up to READ_AHEAD_BYTES) and the relation scans their views
    make, in one read each where the store is remote."""
    m.prefetch_frame_views(ids, max_bytes=READ_AHEAD_BYTES)


def view_bytes(view: FrameResult) -> int:
    """At least what a frame's view takes in a reply (its protobuf encoding): the body's
    UTF-8 bytes, 4 bytes a character of its other strings, and 16 for each other field
    and each string's framing."""
    reason = view.retire.reason if view.retire is not None else ""
    chars = len(view.id) + len(reason) + sum(map(len, view.sources))
    n = utf8_len(view.body) + 4 * chars + 16 * (len(view.sources) + 16)
    for r in view.relations:
        n += 4 * (len(r.subject) + len(r.name) + len(r.object)) + 64
    return n
