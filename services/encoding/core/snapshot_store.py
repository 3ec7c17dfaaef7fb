"""Where the encoding service keeps its snapshots: written once through the snapshot
repository (shared/mind/snapshots.py: a side record, so the context's version does not
move and a transaction computed meanwhile still commits), read back through it at a
view's version and checked whole as it is decoded (record.py, upcast.py).

Only records freeze() built are written, so a record that does not check was written
some other way (an older server took any JSON from any caller) or damaged since:
every read reports it as SNAPSHOT_CORRUPT."""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

from morphz.shared.errors import MorphzError
from morphz.shared.mind.snapshots import Listing, SnapshotRepository, StoredSnapshot
from morphz.shared.mind.view import MindView
from morphz.shared.mind.view_snapshots import snapshot_corrupt
from morphz.shared.storage.api import Store
from morphz.services.encoding.core import upcast
from morphz.services.encoding.core.record import SnapshotRecord
from morphz.services.encoding.core.snapshot import Frozen, pack


def put(store: Store, context: str, frozen: Frozen, rows: Optional[list[tuple]] = None,
        listing: Optional[Listing] = None) -> None:
    """`rows`: the record's items as pack() stores them, when the renderer made them;
    `listing`: its index entries, written with it (listing.listing_of)."""
    SnapshotRepository(store).put(context, frozen.id, *pack(frozen, rows), listing)


def not_found(snapshot_id: str) -> MorphzError:
    """The answer for a snapshot id that names nothing the caller may see."""
    return MorphzError("SNAPSHOT_NOT_FOUND", f"no snapshot {snapshot_id[:80]}",
                       snapshot=snapshot_id[:80])


def _stored(view: MindView, context: str, snapshot_id: str) -> StoredSnapshot:
    view.require_meta(context)
    stored = SnapshotRepository.get(view, snapshot_id)
    if stored is None:
        raise not_found(snapshot_id)
    return stored


def head(view: MindView, context: str, snapshot_id: str) -> SnapshotRecord:
    """The record's head only (id, session, scope, budget...), body left undecoded: what
    a scoped read or a compile narrowing the snapshot's scope needs."""
    return SnapshotRecord(upcast.head(_stored(view, context, snapshot_id), context)[0])


def load(view: MindView, context: str, snapshot_id: str) -> SnapshotRecord:
    """The whole record, decoded, checked and upcast to the current form."""
    return upcast.whole(_stored(view, context, snapshot_id), context)


@contextlib.contextmanager
def reading(snapshot_id: str) -> Iterator[None]:
    """Around lookups by the ids a record names (never the caller's): one the store
    could never have held as a key (STORAGE_KEY_INVALID) means the record is corrupt."""
    try:
        yield
    except MorphzError as e:
        if e.reason != "STORAGE_KEY_INVALID":
            raise
        raise snapshot_corrupt(snapshot_id, "it names an id no store can hold") from None
