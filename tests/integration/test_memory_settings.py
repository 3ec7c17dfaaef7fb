"""The server's malloc settings (shared/process/memory.py) keep what every commit allocates in the
heap: LMDB's nested write transaction mallocs a 2 MiB dirty-page list and a 1 MiB
free-page list per commit, and a threshold below them mapped both afresh at every commit
(their first pages faulted in each time). Measured in processes of their own, as
mallopt's settings are the whole process's: minor page faults per commit of a loop of
5-op revises, run on a thread as the server's commits are, under the server's settings
and under the earlier ones (1 MiB, glibc's default trim threshold)."""
from __future__ import annotations

import subprocess
import sys

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
