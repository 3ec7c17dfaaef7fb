"""Frames read (TransactionCore.get_frame, list_frames): one frame, now or at a past
revision, and the frames in projection order a page at a time (frame_pages.py)."""
from __future__ import annotations

from morphz.services.transaction.core import frame_pages, read_views
from morphz.services.transaction.core.results import FrameListResult, FrameResult
from morphz.shared import cursor as cursors, policy
from morphz.shared.auth import Caller
from morphz.shared.deadline import Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.limits import MESSAGE_BYTES
from morphz.shared.mind.state import MindState
from morphz.shared.mind.view import MindView


def get_frame(m: MindState, context: str, frame_id: str, at_revision: int,
              reveal_secrets: bool, caller: Caller) -> FrameResult:
    policy.check_any(m, context, caller, policy.READ)  # frames: the shared Mind
    if reveal_secrets:
        policy.check_any(m, context, caller, policy.REVEAL)
    meta = m.require_meta(context)
    if at_revision:
        if at_revision > meta.revision:
            raise MorphzError("REVISION_NOT_FOUND", f"revision {at_revision} is after the "
                              f"latest {meta.revision}", revision=at_revision)
        f = m.frame_at(frame_id, at_revision)
    else:
        f = m.frame(frame_id)
    if f is None:
        raise MorphzError("FRAME_NOT_FOUND", f"frame {frame_id[:80]} does not exist"
                          + (f" at revision {at_revision}" if at_revision else ""),
                          ref=frame_id[:80])
    return read_views.frame_view(m, meta, f, at_revision or meta.revision,
                                 with_relations=not at_revision, reveal=reveal_secrets)


def check_page_bytes(max_bytes: int) -> None:
    if not 0 <= max_bytes <= frame_pages.MAX_PAGE_BYTES:
        raise MorphzError("CONTEXT_INPUT_INVALID", f"max_bytes must be 0..."
                          f"{frame_pages.MAX_PAGE_BYTES}, got {max_bytes}",
                          field="max_bytes", maximum=frame_pages.MAX_PAGE_BYTES)


def list_frames(m: MindView, context: str, reveal_secrets: bool, max_bytes: int,
                cursor: str, caller: Caller, deadline: Deadline) -> FrameListResult:
    """Frames in projection order: all of them (max_bytes 0), or a page of about
    max_bytes and the cursor of the next (frame_pages.py)."""
    params = {"context": context, "reveal": reveal_secrets, "max_bytes": max_bytes}
    policy.check_any(m, context, caller, policy.READ)
    if reveal_secrets:
        policy.check_any(m, context, caller, policy.REVEAL)
    meta = m.require_meta(context)
    # Transactions move the revision; matured retirements move the tick.
    # (-k: positions are ranks and ids; a cursor from before, an offset, is stale)
    version = f"r{meta.revision}-t{meta.tick}-k"
    position = cursors.decode_position(cursor, "frames", params, version,
                                       service="FRAMES") if cursor \
        else frame_pages.START
    if not frame_pages.check_position(position):
        raise cursors.invalid("FRAMES")
    budget = max_bytes or frame_pages.WHOLE_LISTING_BYTES
    frames, size, next_cursor = [], 0, ""
    for past, f in frame_pages.frames_from(m, position):
        deadline.check("the listing")  # SEC-07
        view = read_views.frame_view(m, meta, f, meta.revision, reveal=reveal_secrets)
        n = frame_pages.view_bytes(view)
        if frames and size + n > budget:
            if not max_bytes:
                raise MorphzError(
                    "REPLY_TOO_LARGE", f"the frames of {context} pass what one reply "
                    f"holds ({budget} bytes): list them in pages (max_bytes, cursor)",
                    **MESSAGE_BYTES.details())
            next_cursor = cursors.encode("frames", params, version, *position)
            break
        frames.append(view)
        size += n
        position = past
    return FrameListResult(meta.revision, tuple(frames), next_cursor)
