"""A hook command (what the conformance kit runs for a fault) whose action runs in the test
process: the command connects to a Unix socket the test serves, the test runs the action
and answers `ok` or the error, and the command exits 0 or 1 with it. For state only the
test holds, such as a replicated PostgreSQL pair (tests/pg_replication.py)."""
from __future__ import annotations

import os
import shlex
import shutil
import socket
import sys
import tempfile
import threading
from typing import Callable

# The command's side: connect, wait for the one line the test answers, exit with it.
_CLIENT = ("import socket, sys\n"
           "s = socket.socket(socket.AF_UNIX)\n"
           "s.connect(sys.argv[1])\n"
           "line = s.makefile().readline().strip()\n"
           "print(line)\n"
           "sys.exit(0 if line == 'ok' else 1)\n")


class SocketHook:
    """Serves `action` until close(); `command` is the hook command line. Its socket is
    in a short temporary folder of its own: a Unix socket's path may be at most 107
    bytes, and pytest's tmp_path under a long test name comes close."""

    def __init__(self, action: Callable[[], None]) -> None:
        self._folder = tempfile.mkdtemp(prefix="mzhook-")
        self.path, self._action = os.path.join(self._folder, "hook.sock"), action
        self.calls, self.errors = 0, []
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(self.path)
        self._listener.listen(1)
        self.command = shlex.join([sys.executable, "-c", _CLIENT, self.path])
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed
                return
            with conn:
                self.calls += 1
                try:
                    self._action()
                    answer = "ok"
                except Exception as e:  # noqa: BLE001 - told to the command, kept for the test
                    self.errors.append(e)
                    answer = f"error: {e!r}"[:500]
                conn.sendall(answer.encode() + b"\n")

    def close(self) -> None:
        # shutdown wakes the accept() the serving thread waits in (close alone does not).
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=10)
        shutil.rmtree(self._folder, ignore_errors=True)
        assert not self._thread.is_alive(), "the hook's thread did not stop"
