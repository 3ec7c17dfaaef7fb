"""The server's malloc settings (shared/process/memory.py) keep what every commit allocates in the
heap: LMDB's nested write transaction mallocs a 2 MiB dirty-page list and a 1 MiB
free-page list per commit, and a threshold below them mapped both afresh at every commit
(their first pages faulted in each time). Measured in processes of their own, as
mallopt's settings are the whole process's: minor page faults per commit of a loop of
5-op revises, run on a thread as the server's commits are, under the server's settings
and under the earlier ones (1 MiB, glibc's default trim threshold). And a server's threads
share two malloc arenas, not one each (up to 8 a core), each keeping its own free memory."""
from __future__ import annotations

import os
import subprocess
import sys

from morphz.shared.process import memory

LOOP = r"""
import resource, sys, tempfile, threading
from morphz.shared.process import memory
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as CALLER

# No arguments: the server's own call (services/server/main.py).
assert memory.mmap_large_blocks(*map(int, sys.argv[1:]))
store = LmdbStore(tempfile.mkdtemp(), sync=False)
core = TransactionCore(store)
core.create_context("c", caller=CALLER)

def tx(base, op, n):
    body = " ".join(f"({op} f{j} (v {n}))" for j in range(5))
    return f"(context-tx (base-version {base}) {body})"

def loop():
    base = core.commit("c", tx(0, "create", 0), caller=CALLER).revision
    for i in range(100):  # warm: caches, heaps
        base = core.commit("c", tx(base, "revise", i), caller=CALLER).revision
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for i in range(200):
        base = core.commit("c", tx(base, "revise", 1000 + i), caller=CALLER).revision
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 200)

t = threading.Thread(target=loop)
t.start()
t.join()
"""


def faults_per_commit(*settings: int) -> float:
    out = subprocess.run([sys.executable, "-c", LOOP, *map(str, settings)],
                         capture_output=True, text=True, timeout=120, check=True)
    return float(out.stdout.strip())


def test_commits_reuse_lmdbs_write_lists_under_the_servers_malloc_settings():
    now = faults_per_commit()  # as the server sets them
    before = faults_per_commit(1 << 20, 128 << 10)
    print(f"minor faults per commit: {now:.2f} (1 MiB threshold: {before:.2f})")
    # Measured: 0.6 against 2.6 (the two lists' first pages, faulted in at every commit).
    assert now <= before - 1.5
    assert now < 1.5


THREADS = r"""
import ctypes, sys, threading
from morphz.shared.process import memory

print(memory.limit_arenas() if sys.argv[1] == "server" else None, flush=True)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
together = threading.Barrier(16)

def work():  # each thread holds a block while all the others hold theirs
    block = libc.malloc(100_000)
    together.wait()
    libc.free(ctypes.c_void_p(block))

threads = [threading.Thread(target=work) for _ in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc.malloc_stats()  # to stderr: a line "Arena N:" per arena
"""


def arenas(how: str, **env: str) -> tuple[str, int]:
    """(what limit_arenas answered, or None if not called; how many arenas malloc made)."""
    out = subprocess.run([sys.executable, "-c", THREADS, how], capture_output=True, text=True,
                         timeout=120, check=True, env={**os.environ, **env})
    return out.stdout.strip(), sum(1 for line in out.stderr.splitlines()
                                   if line.startswith("Arena "))


def test_a_server_mallocs_from_two_arenas_however_many_threads_allocate():
    # glibc's default: an arena for each thread that allocates, up to 8 a core; each one
    # keeps its free top and fragments (shared/process/memory.py limit_arenas).
    assert arenas("server") == ("True", memory.ARENAS)
    assert arenas("default")[1] > memory.ARENAS
    # An operator's MALLOC_ARENA_MAX wins.
    assert arenas("server", MALLOC_ARENA_MAX="3") == ("False", 3)


def test_serve_row_cache_bounds_the_encoding_row_cache(tmp_path, monkeypatch):
    """`morphz serve --row-cache BYTES` is the byte bound of encoding's RowCache (the soak
    sizes it so the cache is full within its warm-up); 0 keeps no rows at all."""
    from morphz.services.cli.main import build_parser
    from morphz.services.encoding import wiring
    from morphz.services.encoding.core.row_cache import RowCache
    from morphz.services.server.app import AllInOne, ServerConfig

    made = []

    class Recorded(RowCache):
        def __init__(self, **bounds):
            made.append(bounds)
            super().__init__(**bounds)

    monkeypatch.setattr(wiring, "RowCache", Recorded)
    args = build_parser().parse_args(["serve", "--row-cache", "16MiB"])
    assert args.row_cache == 16 << 20
    for given, expected in ((16 << 20, [{"max_bytes": 16 << 20}]), (0, [])):
        made.clear()
        server = AllInOne(ServerConfig(str(tmp_path / str(given)), "127.0.0.1:0",
                                       row_cache_bytes=given)).start()
        server.stop(grace=1)
        assert made == expected
