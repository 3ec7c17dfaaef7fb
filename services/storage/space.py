"""Disk full, and the storage quota (etcd's space quota and NOSPACE alarm are the model).

A write transaction is checked before it commits: if it grows the store's live pages
past `quota - reserve`, or leaves less than `reserve` bytes free on the disk, the whole
transaction is dropped (nothing written) and its writes answer STORAGE_FULL with the
bytes still free. A commit the disk refuses anyway (ENOSPC shows as LMDB's
"Input/output error") and a map at its maximum size answer the same. The reserve is
kept for the writes that do not grow the store (deletions, quarantines: the writes that
free space), which are always let through.

While writes are refused the store's alarm is raised: its listeners (health) hear of
it, and one log line per interval counts the refusals instead of one per failure. Every
write is checked afresh, so writes resume by themselves once space returns (the alarm
clears with the first that commits)."""
from __future__ import annotations

import errno
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from morphz.shared.errors import MorphzError

_log = logging.getLogger("morphz.storage")

# Kept free for the writes that free space, and for LMDB's own pages (freelist, meta).
DEFAULT_RESERVE = 2 << 20
LOG_INTERVAL_SECONDS = 60.0
# The largest map LMDB may grow to (--map-size); the file grows only as pages are used.
DEFAULT_MAX_MAP_SIZE = 1 << 40
# Beyond four times what a transaction writes: what its page splits may cost besides.
_MARGIN = 1 << 20

# LMDB reports a failed write of its pages as the errno of the failed write(2).
_DISK_ERRORS = (os.strerror(errno.ENOSPC), os.strerror(errno.EIO), os.strerror(errno.EDQUOT))


@dataclass(frozen=True)
class SpaceAlarm:
    """Why writes are refused: cause "quota" (--storage-quota), "disk" (the file system)
    or "map" (the LMDB map at --map-size); `free_bytes` what was left for writes."""
    cause: str
    free_bytes: int
    used_bytes: int
    quota: int
    since: float


def disk_full(error: Exception) -> bool:
    """Whether an LMDB error is the disk refusing a write (not a bug)."""
    return any(text in str(error) for text in _DISK_ERRORS)


class Space:
    """Admits or refuses a write transaction's growth; holds the alarm."""

    def __init__(self, path: str, *, quota: int = 0, reserve: Optional[int] = None,
                 log_interval: float = LOG_INTERVAL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._path = path
        self.quota = quota
        # A small quota keeps most of itself for writes: at most an eighth is reserve.
        default = DEFAULT_RESERVE if not quota else min(DEFAULT_RESERVE, quota // 8)
        self.reserve = default if reserve is None else reserve
        self._interval = log_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._alarm: Optional[SpaceAlarm] = None
        self._refused = 0  # since the last log line
        self._logged_at = 0.0
        self._listeners: list[Callable[[Optional[SpaceAlarm]], None]] = []

    @property
    def alarm(self) -> Optional[SpaceAlarm]:
        return self._alarm

    def listen(self, listener: Callable[[Optional[SpaceAlarm]], None]) -> None:
        """Call `listener(alarm)` when the alarm is raised, and `listener(None)` when it
        clears; at once with the current state."""
        with self._lock:
            self._listeners.append(listener)
            current = self._alarm
        listener(current)

    def disk_free(self) -> int:
        st = os.statvfs(self._path)
        return st.f_bavail * st.f_frsize

    def near(self, used: int, written: int) -> bool:
        """Whether a transaction writing about `written` bytes onto `used` live bytes
        may reach the quota or the disk's reserve (a page split or a new overflow run
        costs pages beyond the bytes: the margin covers it), so must be measured."""
        margin = 4 * written + _MARGIN  # 4: as LmdbStore._estimate
        if self.quota and used + margin > self.quota - self.reserve:
            return True
        return self._alarm is not None or self.disk_free() - margin < self.reserve

    def check(self, used_before: int, used_after: int, adds: bool) -> None:
        """Raise STORAGE_FULL if a transaction taking the live bytes from `used_before`
        to `used_after` may not commit. One that `adds` no row (deletions, quarantines:
        the writes that free space) always may, in the reserve."""
        if not adds:
            return
        grows = max(used_after - used_before, 0)
        # Once refusing, every write that adds is refused until twice the reserve is
        # free (etcd's alarm stays until disarmed): a store at the brim does not refuse
        # big writes and take small ones (that fit in pages it has) by turns.
        keep = self.reserve * (2 if self._alarm is not None else 1)
        if self.quota:
            left = self.quota - self.reserve - used_before
            if grows > left - (keep - self.reserve):
                raise self.refuse("quota", max(left, 0), used_before)
        free = self.disk_free()
        if free - grows < keep:
            raise self.refuse("disk", max(free - self.reserve, 0), used_before)

    def refuse(self, cause: str, free: int, used: int) -> MorphzError:
        """The STORAGE_FULL to answer (the alarm raised, the refusal counted)."""
        with self._lock:
            now = self._clock()
            raised = self._alarm is None or self._alarm.cause != cause
            if raised:
                self._alarm = SpaceAlarm(cause, free, used, self.quota, time.time())
            else:
                self._alarm = SpaceAlarm(cause, free, used, self.quota, self._alarm.since)
            self._refused += 1
            if raised or now - self._logged_at >= self._interval:
                _log.warning("storage full (%s): %d write transaction(s) refused since the "
                             "last report; %d bytes free for writes, %d used, quota %d",
                             cause, self._refused, free, used, self.quota)
                self._refused, self._logged_at = 0, now
            listeners = list(self._listeners) if raised else []
        for listener in listeners:
            listener(self._alarm)
        return MorphzError("STORAGE_FULL", _MESSAGES[cause], cause=cause, free_bytes=free,
                           used_bytes=used, quota=self.quota or None)

    def committed(self, adds: bool) -> None:
        """A write transaction committed: if it added rows, space is back (if it was
        gone); one that freed space leaves the alarm to the next write that adds."""
        if self._alarm is None or not adds:
            return
        with self._lock:
            if self._alarm is None:
                return
            _log.warning("storage writes resumed (%s alarm cleared; %d refused since the "
                         "last report)", self._alarm.cause, self._refused)
            self._alarm, self._refused = None, 0
            listeners = list(self._listeners)
        for listener in listeners:
            listener(None)


_MESSAGES = {
    "quota": "the storage quota is reached; nothing was written (writes resume once "
             "space is freed or the quota raised)",
    "disk": "the disk is full; nothing was written (writes resume once space is freed)",
    "map": "the storage map is full and at its maximum size (--map-size); nothing was "
           "written",
}
