"""A real etcd server for tests: Debian's `etcd` binary (package etcd-server, installed
by scripts/bootstrap) on loopback ports chosen free, with its data in a temporary
directory. `pause`/`resume` stop and continue the process (SIGSTOP/SIGCONT); `stop` ends
it and `restart` starts it again on the same ports and data."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from morphz.shared.coord.etcd_member import etcd_binary, health, member_argv
from tests.ports import free_port

BOUND = 30.0  # seconds etcd may take to answer after starting


class EtcdServer:
    def __init__(self, workdir) -> None:
        self.workdir = str(workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.address = ""
        self._peer = 0

    def start(self) -> "EtcdServer":
        for _ in range(3):  # a port taken between choosing and binding: choose again
            self.address, self._peer = f"127.0.0.1:{free_port()}", free_port()
            if self._launch():
                return self
        pytest.fail(f"etcd did not start:\n{self.log()[-3000:]}")

    def restart(self) -> "EtcdServer":
        """Start it again after `stop`, on the same address and data."""
        assert self.proc is not None and self.proc.poll() is not None, "still running"
        if not self._launch():
            pytest.fail(f"etcd did not restart:\n{self.log()[-3000:]}")
        return self

    def _launch(self) -> bool:
        try:
            binary = etcd_binary()
        except RuntimeError as e:
            pytest.fail(str(e))
        argv = member_argv(binary, "test", os.path.join(self.workdir, "data"), self.address,
                           f"127.0.0.1:{self._peer}")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
        return self._wait_healthy()

    @property
    def log_path(self) -> str:
        return os.path.join(self.workdir, "etcd.log")

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def healthy(self) -> bool:
        return health(self.address) == "SERVING"

    def _wait_healthy(self) -> bool:
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if self.healthy():
                return True
            time.sleep(0.1)
        self.stop()
        return False

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.resume()  # a stopped process would not act on SIGTERM
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
