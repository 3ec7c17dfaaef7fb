"""The repository of encoding snapshots: each record put once beside a context's
versioned state (a side record: the context's version does not move, so a transaction
computed meanwhile still commits), and read back at a view's version.

The stored form is the repository's: one JSON line for the record's head, then its body's
JSON text (an older form held the body's text under the head's "packed", on one line).
The fields are the encoding service's, which hands the types to decode into (msgspec
Structs, services/encoding/core/record.py); a row that is not such JSON is
SNAPSHOT_CORRUPT, the answer for a record that cannot be read, never a crash.

Each record is put together with its entries in the snapshot index (one write, all or
none), so a context's snapshots are listed newest first a page at a time without reading
their records: under the whole context, its session and its activation, each entry keyed
by when the snapshot was frozen (microseconds since the epoch, UTC) and its id. An entry
holds the encoding service's summary of the record (bytes it decodes itself)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Optional, Type, TypeVar, Union

import msgspec

from morphz.shared.errors import MorphzError
from morphz.shared.mind.view import MindView
from morphz.shared.mind.view_snapshots import snapshot_corrupt
from morphz.shared.storage.api import Key, Store, Write

TABLE = "snapshots"
INDEX = "snapshot_index"
# The index's three listings: a context's, a session's, an activation's.
_WHOLE, _SESSION, _ACTIVATION = "c", "s", "a"
T = TypeVar("T")

_KINDS = {"array": "an array", "null": "null", "str": "a string", "int": "a number",
          "float": "a number", "bool": "a boolean"}


class StoredSnapshot:
    """One stored record, undecoded: its head line and, when it followed the head, the
    body's text."""

    def __init__(self, snapshot_id: str, head: bytes, body: Optional[bytes]) -> None:
        self.snapshot_id, self._head, self._body = snapshot_id, head, body

    @property
    def has_body_line(self) -> bool:
        return self._body is not None

    def head(self, type_: Type[T]) -> T:
        """The head line decoded into `type_` (checked as it is decoded)."""
        return decode(self._head, type_, self.snapshot_id)

    def body(self, type_: Type[T], packed: Optional[str] = None) -> T:
        """The body decoded into `type_`: the line after the head, or `packed` (the
        older form's text under the head)."""
        text = self._body if self._body is not None else packed
        if text is None:
            raise snapshot_corrupt(self.snapshot_id, "no body")
        return decode(text, type_, self.snapshot_id)


@dataclass(frozen=True)
class Listing:
    """Where a record is listed: its session and activation, when it was frozen (the
    order), and the summary its entries hold."""
    session: str
    activation: str
    stamp: int  # microseconds since the epoch, UTC
    summary: bytes


@dataclass(frozen=True)
class Listed:
    """One entry read back from the index."""
    stamp: int
    snapshot_id: str
    summary: bytes

    @property
    def key(self) -> tuple[int, str]:
        """Its place in its listing (what a page continues after)."""
        return self.stamp, self.snapshot_id


class SnapshotRepository:
    def __init__(self, store: Store) -> None:
        self._store = store

    def put(self, context: str, snapshot_id: str, head: bytes, body: bytes,
            listing: Optional[Listing] = None) -> None:
        """Store a record: `head` and `body` are compact JSON (no raw newline); with
        `listing`, its index entries in the same write."""
        records = [Write(TABLE, (snapshot_id,), head + b"\n" + body)]
        if listing is not None:
            at = (listing.stamp, snapshot_id)
            records += [Write(INDEX, (*prefix, *at), listing.summary) for prefix in (
                (_WHOLE,), (_SESSION, listing.session), (_ACTIVATION, listing.activation))]
        self._store.put_records(context, records)

    @staticmethod
    def listed(view: MindView, *, session: str = "", activation: str = "",
               after: Optional[tuple[int, str]] = None, until: Optional[int] = None,
               since: Optional[int] = None, limit: int,
               oldest_first: bool = False) -> list[Listed]:
        """Up to `limit` entries of the activation's listing (else the session's, else
        the whole context's), newest first (or oldest first): those past `after` (the
        stamp and id of the last one a page gave), frozen before `until` and at or after
        `since` (newest first only). One range read of at most `limit` rows, however
        many the listing holds."""
        prefix: Key = ((_ACTIVATION, activation) if activation else
                       (_SESSION, session) if session else (_WHOLE,))
        bound: Optional[Key] = None
        if after is not None:
            bound = (*prefix, *after)
        elif until is not None and not oldest_first:
            bound = (*prefix, until)  # below every key frozen at `until` or later
        out = []
        for key, value in view.snapshot_index_rows(prefix, bound, limit,
                                                   newest_first=not oldest_first):
            stamp, snapshot_id = key[-2], key[-1]
            if since is not None and not oldest_first and stamp < since:
                break
            out.append(Listed(stamp, snapshot_id, bytes(value)))
        return out

    @staticmethod
    def get(view: MindView, snapshot_id: str) -> Optional[StoredSnapshot]:
        """The record `snapshot_id` names at the view's version; None when there is none
        (an id too long to be a key names none)."""
        try:
            raw = view.snapshot_row(snapshot_id)
        except MorphzError as e:
            if e.reason != "STORAGE_KEY_INVALID":
                raise
            return None
        if raw is None:
            return None
        head, newline, body = bytes(raw).partition(b"\n")
        if newline:
            try:  # text whatever part of it is read (a scoped read decodes the head only)
                body.decode("utf-8")
            except UnicodeDecodeError:
                raise snapshot_corrupt(snapshot_id, "not JSON: the body is not UTF-8") from None
        return StoredSnapshot(snapshot_id, head, body if newline else None)


_REF = re.compile(rb'"@e([0-9]{1,18})"')
_FRAME_INPUT = re.compile(rb'\{"id":("(?:[^"\\]|\\.)*"),"revision":([0-9]{1,18})[,}]')


def showing(view: MindView, seqs: set[int], frames: set[tuple[str, int]]) -> list[str]:
    """The snapshots that showed an event of `seqs` or a frame at a frame revision of
    `frames` ((id, frame revision)): what an erasure lists of the encodings that showed
    what it takes. Read as text (every ref a record holds, every frame input's id and
    revision), not decoded: a record is the encoding service's to decode."""
    out = []
    for snapshot_id, raw in view.snapshot_rows():
        raw = bytes(raw)
        if any(int(s) in seqs for s in _REF.findall(raw)) or any(
                (json.loads(i), int(r)) in frames for i, r in _FRAME_INPUT.findall(raw)):
            out.append(snapshot_id)
    return out


def decode(text: Union[bytes, str], type_: Type[T], snapshot_id: str) -> T:
    """`text` as `type_`, or SNAPSHOT_CORRUPT saying where it is not."""
    try:
        return msgspec.json.decode(text, type=type_)
    except msgspec.ValidationError as e:
        raise snapshot_corrupt(snapshot_id, validation_why(e)) from None
    except (msgspec.DecodeError, RecursionError) as e:
        raise snapshot_corrupt(snapshot_id, f"not JSON: {str(e)[:120]}") from None


def validation_why(e: msgspec.ValidationError) -> str:
    """`where: what` of a validation error (`$.inputs.frames[0].revision` becomes
    `inputs.frames[0].revision`); a check naming a field below the one msgspec names
    (`.bindings.k: ...`) adds it to the path; a value that is no object says so."""
    text = str(e)
    what, sep, where = text.rpartition(" - at `$")
    if not sep:
        got = text.rpartition("got `")[2].rstrip("`")
        if text.startswith("Expected `object`") and got in _KINDS:
            return f"{_KINDS[got]}, not an object"
        return text[:200]
    where = where.rstrip("`")
    if what.startswith("."):
        sub, _, what = what.partition(": ")
        where += sub
    return f"{where.lstrip('.')[:160]}: {what[:200]}"
