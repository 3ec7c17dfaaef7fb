"""Giving a server's freed memory back to the system (glibc's malloc; elsewhere, and
without ctypes, these do nothing).

glibc keeps freed memory in its heaps: a large request's pieces (gRPC's receive buffers,
a decoded message, a 30 MB text and its JSON) stay in the process after the request,
~1 GB after 8 concurrent 30 MB appends. Two remedies: blocks of MMAP_THRESHOLD or more
are always served by mmap (glibc otherwise raises that threshold to 32 MiB after freeing
a large block), so freeing one unmaps it; and after a large request the heaps are
trimmed (malloc_trim), on a thread of their own, at most every `interval` seconds: one
Trimmer a server process, built by the composition root (services/server/node.py) and
handed to its servers' Guards.

The threshold sits above what every commit allocates: LMDB's nested write transaction
(one per commit in a group) mallocs a 2 MiB dirty-page list and a 1 MiB free-page list.
At 1 MiB both were mapped and unmapped at every commit (four system calls, two page
faults, a TLB shootdown across the server's threads). Setting it also fixes glibc's
trim threshold at its 128 KiB default, which would give those lists' pages back at every
commit instead (an madvise each): TRIM_THRESHOLD keeps them; the trims after large
requests give back the rest.

And a server mallocs from ARENAS arenas, not one for each of its threads (limit_arenas).
"""
from __future__ import annotations

import os
import threading
from typing import Optional

LARGE = 1 << 20  # bytes: a request that gets a trim after it
ARENAS = 2  # malloc arenas at most (M_ARENA_MAX), unless MALLOC_ARENA_MAX says otherwise
MMAP_THRESHOLD = 4 << 20  # bytes: a block served by mmap
TRIM_THRESHOLD = 8 << 20  # bytes free at a heap's top before free() gives them back
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8


def _libc():
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        libc.mallopt, libc.malloc_trim  # noqa: B018 - glibc has both
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


def mmap_large_blocks(threshold: int = MMAP_THRESHOLD, trim: int = TRIM_THRESHOLD) -> bool:
    """Serve every block of `threshold` bytes or more by mmap; keep up to `trim` bytes
    free at a heap's top. False: not glibc."""
    return bool(_LIBC and _LIBC.mallopt(_M_TRIM_THRESHOLD, trim)
                and _LIBC.mallopt(_M_MMAP_THRESHOLD, threshold))


def limit_arenas(arenas: int = ARENAS, environ: Optional[dict] = None) -> bool:
    """At most `arenas` malloc arenas, unless the environment sets MALLOC_ARENA_MAX (or
    glibc.malloc.arena_max in GLIBC_TUNABLES): glibc gives each thread that allocates an
    arena of its own, up to 8 a core, and every arena keeps up to TRIM_THRESHOLD free at
    its top and its own fragments. A server has some 30 threads (gRPC's pollers and
    handlers, the store's writer, jobs), so each arena grew to its own peak and the RSS
    kept climbing: 10 minutes into a split soak (scripts/soak, MORPHZ_HEAP_TRACE) a
    transaction process's malloc held 110 MB, 25 MB of it in use (RSS 201 MiB); with two
    arenas 48 MB, 25 MB in use (RSS 157 MiB). Called before the server starts threads
    (an arena made before stays). False: not glibc, or the environment decides."""
    env = os.environ if environ is None else environ
    if "MALLOC_ARENA_MAX" in env or "arena_max" in env.get("GLIBC_TUNABLES", ""):
        return False
    return bool(_LIBC and _LIBC.mallopt(_M_ARENA_MAX, arenas))


class Trimmer:
    """trim_soon() asks for a malloc_trim; requests that arrive meanwhile share it. Its
    thread starts at the first ask and ends at close()."""

    def __init__(self, interval: float = 0.2) -> None:
        self._interval = interval
        self._wanted = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self._closed = threading.Event()

    def trim_soon(self) -> None:
        if _LIBC is None or self._closed.is_set():
            return
        self._wanted.set()
        if self._thread is None:
            with self._lock:
                if self._thread is None and not self._closed.is_set():
                    self._thread = threading.Thread(target=self._run, name="malloc-trim",
                                                    daemon=True)
                    self._thread.start()

    def close(self) -> None:
        """End the thread (after the trim it may be doing); later asks do nothing."""
        with self._lock:
            self._closed.set()
            thread = self._thread
        self._wanted.set()
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            if self._closed.is_set():
                return
            self._wanted.clear()
            _LIBC.malloc_trim(0)
            if self._closed.wait(self._interval):
                return
