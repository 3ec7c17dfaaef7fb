"""Where the encoding service keeps its snapshots: written once with Store.put_record
(a side record: the context's version does not move, so a transaction computed
meanwhile still commits), read back through the read model and checked whole.

Only records freeze() built are written, so a record that does not check was written
some other way (an older server took any JSON from any caller) or damaged since:
every read reports it as SNAPSHOT_CORRUPT."""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

from morphz.shared.errors import MorphzError
from morphz.shared.mind.view import MindView, snapshot_corrupt
from morphz.shared.storage.api import Store
from morphz.services.encoding.core import record_shape
from morphz.services.encoding.core.snapshot import SCHEMAS, pack, unpack

TABLE = "snapshots"


def put(store: Store, context: str, record: dict,
        rows: Optional[list[tuple]] = None) -> None:
    """`rows`: the record's items as pack() stores them, when the renderer made them."""
    store.put_record(context, TABLE, (record["id"],), pack(record, rows))


def not_found(snapshot_id: str) -> MorphzError:
    """The answer for a snapshot id that names nothing the caller may see."""
    return MorphzError("SNAPSHOT_NOT_FOUND", f"no snapshot {snapshot_id[:80]}",
                       snapshot=snapshot_id[:80])


def _stored(view: MindView, context: str, snapshot_id: str) -> dict:
    view.require_meta(context)
    try:
        stored = view.snapshot(snapshot_id)
    except MorphzError as e:  # an id too long to be a key names no snapshot
        if e.reason != "STORAGE_KEY_INVALID":
            raise
        stored = None
    if stored is None:
        raise not_found(snapshot_id)
    schema = stored.get("schema")
    if type(schema) is int and schema not in SCHEMAS:
        shown = schema if abs(schema) < 1 << 63 else "past 64 bits"  # a stored value
        raise MorphzError("SNAPSHOT_INVALID", f"snapshot {snapshot_id[:80]} has record "
                          f"schema {shown}; this server reads schemas "
                          f"{', '.join(map(str, SCHEMAS))}",
                          snapshot=snapshot_id[:80])
    record_shape.check_head(stored, snapshot_id, context)
    return stored


def head(view: MindView, context: str, snapshot_id: str) -> dict:
    """The record's head only (id, session, scope, budget...), body left packed: what a
    scoped read or a compile narrowing the snapshot's scope needs."""
    return _stored(view, context, snapshot_id)


def load(view: MindView, context: str, snapshot_id: str) -> dict:
    """The whole record, unpacked and checked."""
    record = unpack(_stored(view, context, snapshot_id))
    record_shape.check_body(record, snapshot_id)
    return record


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
