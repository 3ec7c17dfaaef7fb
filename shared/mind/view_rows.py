"""The read model's rows (view.py): one context's rows at one version, read through a
storage Reader, with what a request reads ahead and the context's meta.

Every read of MindView's small views (view_events.py, view_frames.py, view_sessions.py,
view_snapshots.py) comes through the raw access here; MindState (state.py) lays its
candidate writes over it by overriding `_get`, `_scan`, `_scan_keys`, `_exists` and
`_scan_values`, and so every read sees them.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Optional

from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.storage.api import Key, Reader

UNREAD = object()  # _get: no prefetched row for this key (and a cache's miss)


class ViewRows:
    """The raw access and the caches of one view; the small views build on it."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._meta: Optional[R.Meta] = None
        # Decoded frames of this request (MindState changes them only through put_frame).
        self._frames: dict[str, Optional[R.Frame]] = {}
        # Decoded events: immutable, and asked for again and again within one request.
        self._events: dict[int, R.Event] = {}
        self._event_bytes = 0  # their stored size
        # Observation rows repeat byte for byte (most say active): each form decoded once.
        self._states: dict[bytes, R.Observation] = {}
        # Rows read ahead by prefetch (what the snapshot holds; MindState's own writes
        # lie over them).
        self._rows: dict[tuple[str, Key], Optional[bytes]] = {}
        # Whole scans read ahead by prefetch_scans: (table, prefix) -> rows. MindState
        # scans through its overlay and never reads these.
        self._scans: dict[tuple[str, Key], list[tuple[Key, bytes]]] = {}
        self._grants: dict[str, frozenset[tuple[str, str]]] = {}  # principal -> grants

    @property
    def commit_seq(self) -> int:
        """The context's storage version read (0: nothing was ever committed to it)."""
        return self._reader.commit_seq

    # -- raw access (MindState lays its overlay over these two) ---------------------------
    def _get(self, table: str, key: Key) -> Optional[bytes]:
        row = self._rows.get((table, key), UNREAD)
        return self._reader.get(table, key) if row is UNREAD else row

    def prefetch(self, table: str, keys: Iterable[Key]) -> None:
        """Read these rows now, in one round trip where the reader is remote (GetMany),
        for the gets that follow (the hot loops over a page of hits or an inbox)."""
        self.prefetch_tables({table: keys})

    def prefetch_tables(self, wanted: dict[str, Iterable[Key]], *, last: bool = False,
                        max_bytes: Optional[int] = None) -> None:
        """prefetch() of each table's keys, all in one round trip where the reader is
        remote (a page of hits reads its observations, frames and events together).
        `last`: no other read is expected (Reader.get_tables' `release`). `max_bytes`:
        read ahead about that much at most; the rest is read when asked for."""
        if max_bytes is not None and not self._reader.remote:
            return  # a local reader reads them when asked, as cheaply, holding none ahead
        asked = [(table, [k for k in dict.fromkeys(keys) if (table, k) not in self._rows])
                 for table, keys in wanted.items()]
        asked = [(table, keys) for table, keys in asked if keys]
        if asked:
            for (table, keys), rows in zip(asked, self._reader.get_tables(
                    asked, release=last, max_bytes=max_bytes)):
                for k, row in zip(keys, rows):
                    self._rows[(table, k)] = row

    def prefetch_scans(self, wanted: Iterable[tuple[str, Key]]) -> None:
        """Whole scans of these (table, prefix) read now in one round trip (ScanMany),
        for the scans that follow (an encoding's first reads: frames, order, relations,
        sessions...), when the reader is remote; a local one scans when asked (holding
        every row first cost an in-process compile of 1,000 frames 8% more)."""
        if not self._reader.remote:
            return
        asked = [w for w in dict.fromkeys(wanted) if w not in self._scans]
        if asked:
            self._scans.update(zip(asked, self._reader.scan_tables(asked)))

    def forget_prefetched(self) -> None:
        """Drop the rows read ahead and the events decoded (a long pass over a backlog
        reads ahead a chunk at a time)."""
        self._rows.clear()
        self._scans.clear()
        self._events.clear()
        self._event_bytes = 0

    def _scan(self, table: str, prefix: Key = (),
              after: Optional[Key] = None) -> Iterator[tuple[Key, bytes]]:
        rows = self._scans.get((table, prefix)) if after is None else None
        return iter(rows) if rows is not None else self._reader.scan(table, prefix, after)

    def _scan_keys(self, table: str, after: Optional[Key] = None) -> Iterator[Key]:
        return self._reader.scan_keys(table, (), after)

    def _exists(self, table: str) -> bool:
        """Whether the table has a row (one read of one row at most)."""
        rows = self._scans.get((table, ()))
        if rows is not None:
            return bool(rows)
        return next(iter(self._reader.scan(table, limit=1)), None) is not None

    def _scan_values(self, table: str, prefix: Key = ()) -> Iterable[bytes]:
        """_scan's values only (the store need not decode keys nobody reads)."""
        rows = self._scans.get((table, prefix))
        if rows is not None:
            return [v for _, v in rows]
        return self._reader.scan_values(table, prefix)

    # -- meta -------------------------------------------------------------------
    def meta(self) -> Optional[R.Meta]:
        if self._meta is None:
            self._meta = R.loads(R.Meta, self._get("meta", ()))
        return self._meta

    def require_meta(self, context: str) -> R.Meta:
        """The context's meta, or CONTEXT_NOT_FOUND: every service's first check."""
        meta = self.meta()
        if meta is None:
            raise MorphzError("CONTEXT_NOT_FOUND", f"context {context} does not exist",
                              context=context)
        return meta
