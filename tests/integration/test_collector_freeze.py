"""A started server's long-lived objects are frozen (shared/process/collector.py), so the cycle
collector's full passes visit only what requests made since. Checked in processes of
their own: gc.freeze is the whole process's."""
from __future__ import annotations

import subprocess
import sys

SERVE = r"""
import gc, sys, tempfile
from morphz.services.server import main

def report(done, poll_seconds=0.2):  # instead of waiting for a signal: the server is up
    print(gc.get_freeze_count(), len(gc.get_objects()), flush=True)

main.wait_for = report
main.serve(listen="127.0.0.1:0", data_dir=tempfile.mkdtemp(), role=sys.argv[1])
"""

CYCLE = r"""
import gc, weakref
from morphz.shared.process import collector

class Node:
    pass

gc.disable()  # only the call under test collects
a, b = Node(), Node()
a.other, b.other = b, a
gone = weakref.ref(a)
del a, b
kept = Node()
frozen = collector.freeze_started_heap()
print(gone() is None, frozen == gc.get_freeze_count() > 0, kept not in gc.get_objects())
"""


def _run(script: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split("\n")[-2]


def test_serve_freezes_what_the_started_server_holds():
    for role in ("all", "storage"):
        frozen, tracked = map(int, _run(SERVE, role).split())
        # Tens of thousands at start (about 62,000 for the all-in-one server); what is
        # left for collections to walk is what was made after it.
        assert frozen > 20_000, (role, frozen)
        assert tracked < frozen // 10, (role, frozen, tracked)


def test_freezing_collects_the_garbage_of_starting_first():
    assert _run(CYCLE) == "True True True"
