"""The read model's encoding snapshots (view.py): the stored records and their index,
read as the bytes or the JSON object a record must be. The repository that writes them
and owns their keys is snapshots.py; the fields are the encoding service's.
"""
from __future__ import annotations

import json
from typing import Iterator, Optional, Union

from morphz.shared.errors import MorphzError
from morphz.shared.mind.view_rows import ViewRows
from morphz.shared.storage.api import Key


class SnapshotReads(ViewRows):
    def snapshot_rows(self) -> Iterator[tuple[str, bytes]]:
        """Every encoding snapshot's id and stored bytes (shared/mind/snapshots.py)."""
        for (snapshot_id,), raw in self._scan("snapshots"):
            yield snapshot_id, raw

    def snapshot_row(self, snapshot_id: str) -> Optional[bytes]:
        """An encoding snapshot's stored bytes (shared/mind/snapshots.py reads them)."""
        return self._get("snapshots", (snapshot_id,))

    def snapshot_index_rows(self, prefix: Key, bound: Optional[Key], limit: int, *,
                            newest_first: bool = True) -> Iterator[tuple[Key, bytes]]:
        """Up to `limit` rows of the snapshot index under `prefix`, past `bound` (None:
        from the end, or the start), last key first (or first first): one bounded range
        read (shared/mind/snapshots.py owns the keys and the rows)."""
        return self._reader.scan("snapshot_index", prefix, bound, limit,
                                 reverse=newest_first)

    def snapshot(self, snapshot_id: str) -> Optional[dict]:
        """A stored snapshot record as the JSON object it must be (its fields belong to
        the encoding service, which checks them); SNAPSHOT_CORRUPT when it is not one."""
        raw = self._get("snapshots", (snapshot_id,))
        if raw is None:
            return None
        return snapshot_json(raw, snapshot_id)


def snapshot_corrupt(snapshot_id: str, why: str) -> MorphzError:
    """A stored snapshot record that cannot be read: an answer, never a crash."""
    return MorphzError("SNAPSHOT_CORRUPT", f"snapshot {snapshot_id[:80]} is corrupt ({why}): "
                       "it cannot be shown, replayed, checked or read",
                       snapshot=snapshot_id[:80], why=why)


_JSON_KINDS = {type(None): "null", list: "an array", str: "a string", int: "a number",
               float: "a number", bool: "a boolean"}


def snapshot_json(text: Union[bytes, str], snapshot_id: str) -> dict:
    """A snapshot record's JSON object, or SNAPSHOT_CORRUPT: text that is not UTF-8 JSON,
    nests past the decoder's recursion limit, or holds anything but an object. Stored
    bytes of two lines are the head's JSON and the body's (the encoding service's
    snapshot.pack): the head is parsed, the body's text is kept under "packed" for the
    service to parse when it needs the body (a record of one line has it there already)."""
    body = None
    if isinstance(text, bytes):
        cut = text.find(b"\n")
        if cut >= 0:
            text, body = text[:cut], text[cut + 1:]
    try:
        value = json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
        if body is not None:
            body = body.decode("utf-8")
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise snapshot_corrupt(snapshot_id, f"not JSON: {type(e).__name__}") from None
    if not isinstance(value, dict):
        raise snapshot_corrupt(snapshot_id, f"{_JSON_KINDS.get(type(value), 'a value')}, "
                               "not an object")
    if body is not None:
        if "packed" in value:
            raise snapshot_corrupt(snapshot_id, "a body both in its head and after it")
        value["packed"] = body
    return value
