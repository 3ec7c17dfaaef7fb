"""Stored snapshot records of every form, read as the current typed record (record.py).

Forms written before, each upcast here on read: schema 1's item rows (every offset
absolute); a body stored as text under the head's "packed" (one line); a body's fields in
the head itself; and fields added since (record.py gives them the values an older
server meant by leaving them out). A schema this server does not know is
SNAPSHOT_INVALID, not corrupt: a newer server wrote it."""
from __future__ import annotations

from typing import Any, Optional

import msgspec
from msgspec import Raw, Struct

from morphz.shared.errors import MorphzError
from morphz.shared.mind.snapshots import StoredSnapshot, validation_why
from morphz.shared.mind.view_snapshots import snapshot_corrupt
from morphz.services.encoding.core.record import (
    SCHEMAS, Body, Head, Item, PackedBody, SnapshotRecord)

# An item's structured fields (parts aside), as the record's items hold them.
ITEM_FIELDS = ("region", "kind", "key", "start", "end", "bytes", "residency", "shown_bytes",
               "total_bytes", "revision", "state", "remaining_ticks", "protected")
# Schema 2 stores an item as [start, row], the row these fields (items.stored_row):
# "length" is end - start, "parts" the parts flattened to owner, start, end relative
# to the item's start. The row is the item's own wherever it lands, so an item shown
# again is serialized once.
ITEM_ROW_FIELDS = ("region", "kind", "key", "length") + ITEM_FIELDS[5:] + ("parts",)
BODY_FIELDS = ("inputs", "omitted", "regions", "items")


class _Form(Struct):
    """What tells the forms apart, read before the record is checked whole."""
    schema: Raw = Raw(b"")
    items: Raw = Raw(b"")  # the body's fields in the head: the oldest form


def head(stored: StoredSnapshot, context: str) -> tuple[Head, Optional[dict]]:
    """The record's head, checked; and, for the oldest form only, its body's fields."""
    sid = stored.snapshot_id
    form = stored.head(_Form)
    _check_schema(bytes(form.schema), sid)
    old_body = None
    if form.items and not stored.has_body_line:
        whole = stored.head(dict)
        old_body = {k: whole.pop(k, None) for k in BODY_FIELDS}
        found = _convert(whole, Head, sid)
    else:
        found = stored.head(Head)
    if found.packed is not None and stored.has_body_line:
        raise snapshot_corrupt(sid, "a body both in its head and after it")
    if (found.id, found.context) != (sid, context):
        raise snapshot_corrupt(sid, "the record names another snapshot or context")
    return found, old_body


def whole(stored: StoredSnapshot, context: str) -> SnapshotRecord:
    """The record with its body, checked and upcast to the current form."""
    h, old_body = head(stored, context)
    sid = stored.snapshot_id
    if old_body is not None:  # the oldest form: items as items, offsets absolute
        return SnapshotRecord(h, _convert(old_body, Body, sid))
    packed = stored.body(PackedBody, h.packed)
    rows = packed.item_rows
    if type(rows) is not list:
        raise snapshot_corrupt(sid, "the packed items are not a list of rows")
    items = _items_1(rows, sid) if h.schema == 1 else _items_2(rows, sid)
    return SnapshotRecord(h, Body(packed.inputs, packed.omitted, packed.regions,
                                  _convert(items, list[Item], sid, "items")))


def _check_schema(raw: bytes, sid: str) -> None:
    """An integer schema this server does not read is a newer one: SNAPSHOT_INVALID
    (anything else that is not a schema is the checks' to call corrupt)."""
    text = raw.decode("ascii", "replace")
    if not text.lstrip("-").isdigit():
        return
    schema = int(text) if len(text) < 30 else None  # never parse thousands of digits
    if schema in SCHEMAS:
        return
    shown = schema if schema is not None and abs(schema) < 1 << 63 else "past 64 bits"
    raise MorphzError("SNAPSHOT_INVALID", f"snapshot {sid[:80]} has record schema {shown}; "
                      f"this server reads schemas {', '.join(map(str, SCHEMAS))}",
                      snapshot=sid[:80])


def _convert(value: Any, type_, sid: str, where: str = ""):
    try:
        return msgspec.convert(value, type_)
    except msgspec.ValidationError as e:
        why = validation_why(e)
        raise snapshot_corrupt(sid, f"{where}{why}" if why[:1] == "[" or not where
                               else f"{where}.{why}") from None


def _items_1(rows: list, sid: str) -> list[dict]:
    """Schema 1's rows: [ITEM_FIELDS..., flat parts], offsets absolute."""
    width = len(ITEM_FIELDS) + 1
    if any(type(r) is not list or len(r) != width or type(r[-1]) is not list or len(r[-1]) % 3
           for r in rows):
        raise snapshot_corrupt(sid, f"the packed items are not rows of {width} fields")
    return [{**dict(zip(ITEM_FIELDS, row)), "parts": _parts(row[-1], 0)} for row in rows]


def _readable_2(r: object) -> bool:
    """Whether `r` is a schema-2 row whose offsets can be added up: [start, row of
    ITEM_ROW_FIELDS], the start, length and parts' offsets integers (the Item type
    checks the other fields of the items made)."""
    if type(r) is not list or len(r) != 2 or type(r[0]) is not int:
        return False
    row = r[1]
    if type(row) is not list or len(row) != len(ITEM_ROW_FIELDS) or type(row[3]) is not int:
        return False
    flat = row[-1]
    return (type(flat) is list and len(flat) % 3 == 0 and
            all(type(x) is int for x in flat[1::3] + flat[2::3]))


def _items_2(rows: list, sid: str) -> list[dict]:
    """Schema 2's rows: [start, ITEM_ROW_FIELDS], offsets past the start relative to it."""
    if not all(_readable_2(r) for r in rows):
        raise snapshot_corrupt(sid, f"the packed items are not [start, "
                               f"{len(ITEM_ROW_FIELDS)} fields]")
    items = []
    for start, row in rows:
        region, kind, key, length, *fields, flat = row
        items.append({"region": region, "kind": kind, "key": key, "start": start,
                      "end": start + length, **dict(zip(ITEM_FIELDS[5:], fields)),
                      "parts": _parts(flat, start)})
    return items


def _parts(flat: list, start: int) -> list[dict]:
    """Parts flattened to owner, start, end..., their offsets `start` on."""
    return [{"owner": flat[i], "start": start + flat[i + 1], "end": start + flat[i + 2]}
            for i in range(0, len(flat), 3)]
