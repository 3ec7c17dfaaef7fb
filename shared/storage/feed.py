"""The store's change feed: one entry per commit (Change), naming the keys the batch wrote
in the tables recall follows (api.FEED_TABLES) and those an erasure rewrote; derived by
every store the same way (change_of), kept as a compact record (pack_change), and read
in pages (FeedPage, Store.changes and Store.watch in api.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:  # api.py imports this module: its Store reads the feed in pages
    from morphz.shared.storage.api import Write

FEED_PAGE = 500  # changes per page of the change feed


@dataclass(frozen=True)
class Change:
    """One committed batch in the change feed. `position` orders all commits of the
    store (1, 2, ...); `commit_seq` is the context's version the batch made. `events` and
    `frames` are the keys it wrote (put or deleted) in those tables; `erased` and
    `erased_frames` those an erasure rewrote (of a frame: any of its versions), whose
    earlier content derived data must drop wherever it kept it."""
    position: int
    context: str
    commit_seq: int
    events: tuple[int, ...] = ()
    frames: tuple[str, ...] = ()
    erased: tuple[int, ...] = ()
    erased_frames: tuple[str, ...] = ()
    # The context was deleted (Store.delete_context): derived data drops all of it. Its
    # commit_seq is 0; a context made again under the name starts at 1.
    deleted: bool = False


@dataclass(frozen=True)
class FeedPage:
    """Changes after a position, and the feed's head when they were read. `store`
    identifies the store (empty: a store without one, the in-memory one): a restored
    copy gets a new identity, since its positions past the backup mean other commits."""
    changes: list[Change]
    head: int
    store: str = ""


def change_of(position: int, context: str, commit_seq: int, writes: list[Write]) -> Change:
    """The feed entry of one batch of writes (every store derives it the same way)."""
    events, frames = set(), set()
    erased: set[int] = set()
    erased_frames: set[str] = set()
    for w in writes:  # one pass: a large transaction's writes are many
        table = w.table
        if table == "events":
            events.add(w.key[0])
        elif table == "frames":
            frames.add(w.key[0])
        if w.erase:
            if table == "events":
                erased.add(w.key[0])
            elif table in ("frames", "frame_versions"):
                erased_frames.add(w.key[0])
    return Change(position, context, commit_seq, tuple(sorted(events)), tuple(sorted(frames)),
                  tuple(sorted(erased)), tuple(sorted(erased_frames)))


# A feed record as stores keep it: compact JSON, {"c": context, "s": commit_seq, "e":
# events, "f": frames}, keys in that order, and "x"/"y" (erased events / frames) only when
# the commit erased some. msgspec writes the bytes json.dumps(ensure_ascii=False,
# compact) wrote (ints and strings only), at a fraction of the cost: one per commit.
_encode_feed = msgspec.json.Encoder().encode
_decode_feed = msgspec.json.Decoder().decode


# What a deleted context's commits become in the feed (Store.delete_context): a change of
# no context, so feed positions stay consecutive (followers read a hole as a stale
# stream) and nothing of the context is left. Followers skip it.
FILLER = Change(0, "", 0)


def pack_change(c: Change) -> bytes:
    d = {"c": c.context, "s": c.commit_seq, "e": c.events, "f": c.frames}
    if c.erased or c.erased_frames:
        d.update(x=c.erased, y=c.erased_frames)
    if c.deleted:
        d["d"] = 1
    return _encode_feed(d)


def unpack_change(position: int, raw: bytes) -> Change:
    d = _decode_feed(raw)
    return Change(position, d["c"], d["s"], tuple(d["e"]), tuple(d["f"]),
                  tuple(d.get("x", ())), tuple(d.get("y", ())), bool(d.get("d")))
