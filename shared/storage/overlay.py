"""Reading through writes not yet in the store: a Reader's rows with an Overlay of
(table, key) -> value (None: deleted) applied, in the store's key order."""
from __future__ import annotations

from bisect import bisect_left, insort
from itertools import islice
from typing import Iterable, Iterator, Optional

from morphz.shared.storage import keys as keycodec
from morphz.shared.storage.api import Key, Reader, Write

_MISSING = object()


class Overlay:
    """Pending writes by table. A table's keys are put in encoded (store) order the first
    time it is scanned and kept in order after that, so a prefix scan costs what lies
    under the prefix, not every write pending: a transaction of n ops stays linear in n
    although each op scans."""

    def __init__(self, writes: Iterable[Write] = ()) -> None:
        self._tables: dict[str, dict[Key, Optional[bytes]]] = {}
        self._ordered: dict[str, list[tuple[bytes, Key]]] = {}
        for w in writes:
            self.put(w.table, w.key, w.value)

    def put(self, table: str, key: Key, value: Optional[bytes]) -> None:
        rows = self._tables.get(table)
        if rows is None:  # a table's first write: it was never scanned in order either
            self._tables[table] = {key: value}
            return
        if key not in rows and table in self._ordered:
            insort(self._ordered[table], (keycodec.encode(key), key))
        rows[key] = value

    def put_all(self, table: str, keys: Iterable[Key], value: Optional[bytes]) -> None:
        """put() of each key, all with one value (a transaction's boundary stamps)."""
        rows = self._tables.get(table)
        if rows is None:
            new = dict.fromkeys(keys, value)
            if new:  # as put: a table is first written by its first write
                self._tables[table] = new
        elif table not in self._ordered:
            rows.update(dict.fromkeys(keys, value))
        else:
            for key in keys:
                self.put(table, key, value)

    def update(self, other: "Overlay") -> None:
        """Lay `other`'s writes over these, as putting each of them would."""
        for table, theirs in other._tables.items():
            rows = self._tables.get(table)
            if rows is None:
                self._tables[table] = dict(theirs)
                continue
            ordered = self._ordered.get(table)
            if ordered is not None:
                for key in theirs:
                    if key not in rows:
                        insort(ordered, (keycodec.encode(key), key))
            rows.update(theirs)

    def get(self, table: str, key: Key, default=_MISSING):
        """The pending value (None: deleted), or `default` when nothing is pending."""
        rows = self._tables.get(table)
        if rows is None:
            return default
        return rows.get(key, default)

    def present(self, table: str) -> dict[Key, bytes]:
        """The table's rows as a store would hold them after these writes alone (deleted
        ones left out), in no particular order."""
        rows = self._tables.get(table, {})
        if None not in rows.values():  # no deletion: a copy, made in C
            return dict(rows)
        return {k: v for k, v in rows.items() if v is not None}

    def written(self, table: str) -> bool:
        """Whether any write (a delete too) is pending in `table`."""
        return bool(self._tables.get(table))

    def has(self, table: str, key: Key) -> bool:
        rows = self._tables.get(table)
        return rows is not None and key in rows

    def table_items(self, table: str) -> Iterable[tuple[Key, Optional[bytes]]]:
        """The pending writes of one table (key, value), in the order first written."""
        return self._tables.get(table, {}).items()

    def items(self) -> Iterator[tuple[str, Key, Optional[bytes]]]:
        """Every pending write, table by table in the order first written."""
        for table, rows in self._tables.items():
            for key, value in rows.items():
                yield table, key, value

    def writes(self) -> list[Write]:
        return [Write(t, k, v) for t, k, v in self.items()]

    def under(self, table: str, prefix: Key) -> list[tuple[Key, Optional[bytes]]]:
        """The pending writes of `table` whose key starts with `prefix`, in key order."""
        return [(k, v) for _, k, v in self.under_encoded(table, prefix)]

    def under_encoded(self, table: str,
                      prefix: Key) -> list[tuple[bytes, Key, Optional[bytes]]]:
        """under(), each write with its key's encoding (the store's order)."""
        rows = self._tables.get(table)
        if not rows:
            return []
        ordered = self._ordered.get(table)
        if ordered is None:
            ordered = self._ordered[table] = sorted((keycodec.encode(k), k) for k in rows)
        if not prefix:
            return [(e, k, rows[k]) for e, k in ordered]
        low = keycodec.encode(prefix)
        # A prefix tuple encodes to a byte prefix, and the byte after it in a longer key
        # is a part tag (below 0xff), so the matching keys lie in [low, low + 0xff).
        start = bisect_left(ordered, (low,))
        end = bisect_left(ordered, (low + b"\xff",), start)
        return [(e, k, rows[k]) for e, k in ordered[start:end]]


class OverlayReader(Reader):
    """An Overlay read as a store of its own (a deleted row reads as absent): what a
    replay folds each event's writes into, without a store's versions and checks."""

    commit_seq = 0

    def __init__(self, rows: Overlay) -> None:
        self._rows = rows

    def get(self, table: str, key: Key) -> Optional[bytes]:
        return self._rows.get(table, key, None)

    def scan(self, table: str, prefix: Key = (), after: Optional[Key] = None,
             limit: int = 0, reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
        if not self._rows.written(table):
            return iter(())
        rows = [(k, v) for k, v in self._rows.under(table, prefix) if v is not None]
        if reverse:
            rows.reverse()
        if after is not None:
            bound = keycodec.encode(after)
            rows = [(k, v) for k, v in rows
                    if (keycodec.encode(k) < bound if reverse else keycodec.encode(k) > bound)]
        return iter(rows[:limit] if limit else rows)


def overlay_scan(base: Reader, overlay: Overlay, table: str, prefix: Key = (),
                 after: Optional[Key] = None, limit: int = 0,
                 reverse: bool = False) -> Iterator[tuple[Key, bytes]]:
    """base.scan(table, prefix, after, limit, reverse) as if the overlay were written:
    the store's rows merged, as they are read, with the pending writes in the same order
    (a pending write replaces or deletes the store's row of its key). It holds the
    pending writes under the prefix, never the store's rows: a scan of the events table
    with one write pending read the whole table into memory when it was a dict."""
    mine = overlay.under_encoded(table, prefix)
    if not mine:  # nothing written here: the store's own scan is already right
        return base.scan(table, prefix, after, limit, reverse)
    return _merged_scan(base, mine, table, prefix, after, limit, reverse)


def _merged_scan(base: Reader, mine: list[tuple[bytes, Key, Optional[bytes]]], table: str,
                 prefix: Key, after: Optional[Key], limit: int,
                 reverse: bool) -> Iterator[tuple[Key, bytes]]:
    """overlay_scan() where `mine`, the pending writes under the prefix, are some."""
    if reverse:
        mine.reverse()
    if after is not None:
        bound = keycodec.encode(after)
        mine = [w for w in mine if (w[0] < bound if reverse else w[0] > bound)]
    # Encoded keys compare as the store orders them (reversed for a reverse scan).
    def sooner(a: bytes, b: bytes) -> bool:
        return a > b if reverse else a < b

    def merged() -> Iterator[tuple[Key, Optional[bytes]]]:
        i = 0
        for key, value in base.scan(table, prefix, after, 0, reverse):
            encoded = keycodec.encode(key)
            while i < len(mine) and sooner(mine[i][0], encoded):
                yield mine[i][1:]
                i += 1
            if i < len(mine) and mine[i][0] == encoded:  # written over (or deleted)
                key, value = mine[i][1:]
                i += 1
            yield key, value
        for _, key, value in mine[i:]:
            yield key, value

    yield from islice(((k, v) for k, v in merged() if v is not None), limit or None)
