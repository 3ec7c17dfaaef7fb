"""A server's memory over time, for finding what grows (off unless asked for).

`MORPHZ_HEAP_TRACE=DIR[:SECONDS][:tracemalloc]` in a server's environment writes, every
SECONDS (60), one line to DIR/<pid>.malloc (beside <pid>.argv, which process it is):

  s  rss  malloc_system  malloc_in_use  malloc_free  mmapped  python_traced   (bytes)

from glibc's mallinfo2: what malloc holds from the system, of that what is in use and
what is free but kept (in its arenas: one per thread that allocated, up to 8 a core), and
what it serves by mmap. With `tracemalloc` it also traces Python's allocations (16
frames; some 2x slower) and dumps a snapshot each time (<pid>-<n>.tm): compare two with
`scripts/soaking/heapdiff.py`. RSS beyond malloc and Python is the interpreter's object
arenas, libraries and stacks. A measurement, not a production setting.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Optional

ENV = "MORPHZ_HEAP_TRACE"
FRAMES = 16
EVERY = 60.0
PAGE = os.sysconf("SC_PAGE_SIZE")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


def mallinfo() -> Optional[tuple[int, int, int, int]]:
    """(bytes malloc holds from the system in its arenas, in use, free, mmapped); None
    where this is not glibc 2.33 or later."""
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    m = fn()
    return m.arena, m.uordblks, m.fordblks, m.hblkhd


def start_from_env(environ: Optional[dict] = None) -> Optional[threading.Thread]:
    """Start the trace's thread if the environment asks; else nothing."""
    spec = (os.environ if environ is None else environ).get(ENV, "")
    if not spec:
        return None
    where, _, rest = spec.partition(":")
    every, _, mode = rest.partition(":")
    out = Path(where)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{os.getpid()}.argv").write_text(" ".join(sys.argv))
    if mode == "tracemalloc":
        tracemalloc.start(FRAMES)
    thread = threading.Thread(target=_run, args=(out, float(every or EVERY)),
                              name="heap-trace", daemon=True)
    thread.start()
    return thread


def _run(out: Path, every: float) -> None:
    t0, n = time.monotonic(), 0
    stop = threading.Event()  # never set: the thread lives as long as the process
    while not stop.wait(every):
        rss = int(Path("/proc/self/statm").read_text().split()[1]) * PAGE
        traced = tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0
        figures = [round(time.monotonic() - t0), rss, *(mallinfo() or (0, 0, 0, 0)), traced]
        with open(out / f"{os.getpid()}.malloc", "a") as f:
            f.write(" ".join(map(str, figures)) + "\n")
        if tracemalloc.is_tracing():
            path = out / f"{os.getpid()}-{n:03d}.tm"
            tracemalloc.take_snapshot().dump(str(path) + ".part")
            os.replace(str(path) + ".part", path)  # a reader never sees half a snapshot
            n += 1
