"""Leased read snapshots: a store Reader held open between RPCs, so a remote reader's
gets and scans all see one commit position.

An open LMDB read transaction pins the pages it sees and keeps the map from growing
(LmdbStore._grow waits for every reader), so each snapshot lives only until its lease
runs out: `lease` seconds after its last use. A background reaper closes forgotten
ones; a use after the lease is refused (STORAGE_SNAPSHOT_EXPIRED), as is an unknown
id or one of another context. At most `limit` are open per server.
"""
from __future__ import annotations

import secrets
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

from morphz.shared.errors import MorphzError
from morphz.shared.limits import OPEN_SNAPSHOTS
from morphz.shared.storage.api import Reader, Store

SNAPSHOT_LEASE_SECONDS = 5.0
MAX_OPEN_SNAPSHOTS = OPEN_SNAPSHOTS.max  # well under LmdbStore's 512 reader slots


@dataclass
class _Snapshot:
    context: str
    reader: Reader
    expires: float
    # py-lmdb transactions may move between threads but are not safe to use concurrently.
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False


class SnapshotRegistry:
    def __init__(self, store: Store, *, lease: float = SNAPSHOT_LEASE_SECONDS,
                 limit: int = MAX_OPEN_SNAPSHOTS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self.lease = lease
        self.limit = limit
        self._clock = clock
        self._open: dict[str, _Snapshot] = {}
        self._opening = 0  # slots reserved by opens in progress
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reaper = threading.Thread(target=self._reap_loop, name="snapshot-reaper",
                                        daemon=True)
        self._reaper.start()

    def __len__(self) -> int:
        return len(self._open)

    def open(self, context: str) -> tuple[str, int]:
        """A new snapshot of context: (id, commit_seq)."""
        with self._lock:
            if len(self._open) + self._opening >= self.limit:
                self._reap_locked()
            if len(self._open) + self._opening >= self.limit:
                raise MorphzError("STORAGE_SNAPSHOT_LIMIT",
                                  f"{self.limit} read snapshots are open on this server; "
                                  "close some or retry later",
                                  **OPEN_SNAPSHOTS.details(self.limit))
            self._opening += 1
        try:
            # Outside the lock: opening waits while the map grows, and the grow waits
            # for snapshots to be closed, which takes the lock.
            reader = self._store.reader(context)
        finally:
            with self._lock:
                self._opening -= 1
        snap_id = secrets.token_hex(16)
        with self._lock:
            self._open[snap_id] = _Snapshot(context, reader, self._clock() + self.lease)
        return snap_id, reader.commit_seq

    @contextmanager
    def use(self, snap_id: str, context: str) -> Iterator[Reader]:
        """The snapshot's reader, exclusively, its lease renewed."""
        with self._lock:
            snap = self._open.get(snap_id)
        if snap is None or snap.context != context:  # a foreign id reads as unknown
            raise _expired(snap_id)
        with snap.lock:
            if snap.closed:
                raise _expired(snap_id)
            if self._clock() >= snap.expires:
                self._discard(snap_id, snap)
                raise _expired(snap_id)
            snap.expires = self._clock() + self.lease
            try:
                yield snap.reader
            finally:
                snap.expires = self._clock() + self.lease

    def close_snapshot(self, snap_id: str) -> None:
        """Release a snapshot; an unknown or expired one is already released."""
        with self._lock:
            snap = self._open.get(snap_id)
        if snap is not None:
            with snap.lock:
                if not snap.closed:
                    self._discard(snap_id, snap)

    def _discard(self, snap_id: str, snap: _Snapshot) -> None:
        """Close a snapshot whose lock the caller holds."""
        snap.closed = True
        with self._lock:
            self._open.pop(snap_id, None)
        snap.reader.close()

    def _reap_locked(self) -> int:
        """Close expired snapshots not in use; the caller holds self._lock."""
        now = self._clock()
        reaped = []
        for snap_id, snap in list(self._open.items()):
            if now >= snap.expires and snap.lock.acquire(blocking=False):
                snap.closed = True
                del self._open[snap_id]
                reaped.append(snap)
        for snap in reaped:
            snap.reader.close()
            snap.lock.release()
        return len(reaped)

    def reap(self) -> int:
        with self._lock:
            return self._reap_locked()

    def _reap_loop(self) -> None:
        while not self._stop.wait(max(self.lease / 4, 0.05)):
            self.reap()

    def close(self) -> None:
        """Stop the reaper and release every snapshot (before the store closes)."""
        self._stop.set()
        self._reaper.join()
        with self._lock:
            snaps, self._open = list(self._open.items()), {}
        for _, snap in snaps:
            with snap.lock:
                if not snap.closed:
                    snap.closed = True
                    snap.reader.close()


def _expired(snap_id: str) -> MorphzError:
    return MorphzError("STORAGE_SNAPSHOT_EXPIRED",
                       "the read snapshot is unknown or its lease ran out; redo the whole read",
                       snapshot=snap_id[:64])  # the caller's bytes, bounded
