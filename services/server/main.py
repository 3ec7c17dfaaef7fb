"""`morphz serve [ROLE]`: run the all-in-one server, or one service, until SIGINT/SIGTERM."""
from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
import threading

from morphz.services.server.config import ServerConfig
from morphz.services.server.defaults import DEFAULT_LISTEN
from morphz.services.server.deployment import ALL, Deployment
from morphz.services.server.node import Node
from morphz.shared.process import collector, heap_trace, memory


def wait_for(done: threading.Event, poll_seconds: float = 0.2) -> None:
    """Block until `done` is set by a signal handler. Python runs handlers only in the
    main thread; when the kernel hands the signal to another thread (gRPC's, say), an
    untimed wait would never return to run it (seen: 1 SIGTERM in 10 ignored)."""
    while not done.wait(poll_seconds):
        pass


def serve(listen: str = DEFAULT_LISTEN, data_dir: str = "data", role: str = ALL,
          storage: str = "", transaction: str = "", **options) -> int:
    """`options`: ServerConfig's etcd, instance, advertise, lease_ttl, storage_listen,
    embedder, recall_idle_seconds and security; its max_concurrent_rpcs,
    max_bytes_in_flight and budgets."""
    logging.basicConfig(level=os.environ.get("MORPHZ_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = ServerConfig(data_dir=os.path.abspath(data_dir), listen=listen, storage=storage,
                          transaction=transaction, **options)
    deployment = Deployment.of(role, config)  # options that do not go with the role fail here
    memory.limit_arenas()  # before any thread: 2 malloc arenas, not 16 (process/memory.py)
    heap_trace.start_from_env()  # off unless MORPHZ_HEAP_TRACE asks (process/heap_trace.py)
    # a large request's buffers go back after it (shared/process/memory.py)
    memory.mmap_large_blocks()
    app = Node(deployment).start()
    collector.freeze_started_heap()  # full collections skip what lives as long as the process
    host = listen.rsplit(":", 1)[0]
    # Handled before the line below says it serves: a SIGTERM sent as soon as it is read
    # stops the server cleanly (before, it could kill it: the default action).
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    # `kill -USR1` prints every thread's stack to stderr: where a stuck stop or call waits.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # One line a supervisor (or a test) can wait for.
    data = f" data={os.path.abspath(data_dir)}" if role in (ALL, "storage", "recall") else ""
    internal = "" if app.storage_port is None else \
        f" storage={config.storage_listen.rsplit(':', 1)[0]}:{app.storage_port}"
    print(f"morphz: serving on {host}:{app.port}{data}{internal}"
          + ("" if role == ALL else f" role={role}"), flush=True)
    wait_for(done)
    app.stop()
    print("morphz: stopped", file=sys.stderr, flush=True)
    return 0
