"""The servers a test talks to, in either topology (`pytest --topology`): the all-in-one
server in this process, or storage, transaction, recall and encoding as four
`morphz serve ROLE` child processes on loopback, each SERVING on grpc health. Their store
is LMDB in their data directory, or with MORPHZ_TEST_STORE=postgres a database of its own
on a real PostgreSQL the session starts (tests/pg.py; a StoreChoice)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from morphz.services.server.app import AllInOne, ServerConfig
from morphz.services.server.roles import NEEDS
from morphz.services.transaction.client import TransactionClient
from morphz.shared.grpc.auth import PLAINTEXT, ClientAuth

ALL_IN_ONE, SPLIT = "all-in-one", "split"
STORE_ENV = "MORPHZ_TEST_STORE"  # lmdb (default) or postgres: the session servers' store


def test_store() -> str:
    """The store the session's servers keep their data in (MORPHZ_TEST_STORE)."""
    return os.environ.get(STORE_ENV, "lmdb")


@dataclass(frozen=True)
class StoreChoice:
    """Where servers keep their store: `kind` lmdb (their data directory) or postgres
    (the database at `dsn`)."""
    kind: str = "lmdb"
    dsn: str = ""

    def flags(self) -> list[str]:
        """`morphz serve` flags of a process that runs storage."""
        return [] if self.kind == "lmdb" else ["--store", self.kind, "--dsn", self.dsn]


LMDB = StoreChoice()
ROLES = ("storage", "transaction", "recall", "encoding")  # each after what it calls
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
STACK_END = "most recent call first"  # faulthandler's heading of each thread's stack
BOUND = 60.0  # seconds a start or a health wait may take before the test fails


@dataclass(frozen=True)
class Endpoints:
    """Where each service answers (in the all-in-one topology, one public address for
    all but storage, which only its internal --storage-listen listener serves)."""
    storage: str
    transaction: str
    recall: str
    encoding: str

    def cli_env(self) -> dict[str, str]:
        """What the `morphz` CLI reads to reach each service (services/cli/connect.py)."""
        return {"MORPHZ_SERVER": self.transaction, "MORPHZ_TRANSACTION": self.transaction,
                "MORPHZ_RECALL": self.recall, "MORPHZ_ENCODING": self.encoding}


class ServerProcess:
    """`morphz serve [ARGS]` as a real child process on a data directory that outlives it
    (ARGS: a role and its flags, e.g. ["recall", "--storage", ADDR]; none: all-in-one).
    It listens on `listen`; set that to `address` to restart it on the same port.
    `auth`: the credentials this test's clients and health checks present to it;
    `storage_address`: its storage listener's (all-in-one with --storage-listen).
    `command`: the `morphz` to run (default: this venv's CLI module), in folder `cwd`."""

    def __init__(self, data_dir, env: dict | None = None, args: list[str] | None = None,
                 listen: str = "127.0.0.1:0", auth: ClientAuth = PLAINTEXT,
                 command: list[str] | None = None, cwd: str | None = None) -> None:
        self.data_dir, self.env = str(data_dir), env or {}
        self.args, self.listen, self.auth = list(args or []), listen, auth
        self.command = command or [sys.executable, "-m", "morphz.services.cli.main"]
        self.cwd = cwd
        self.log_path = self.data_dir + ".stderr.log"  # every start appends its stderr
        self.proc = None
        self.address = self.storage_address = ""

    def start(self, **extra_env) -> "ServerProcess":
        env = dict(os.environ, PYTHONUNBUFFERED="1", **self.env, **extra_env)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [*self.command, "serve", *self.args, "--listen", self.listen,
                 "--data", self.data_dir],
                stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=self.cwd)
        line = self.proc.stdout.readline()
        assert line.startswith("morphz: serving on"), \
            f"server did not start: {line!r}\n{self.stderr()}"
        self.address = line.split()[3]
        self.storage_address = next((w.partition("=")[2] for w in line.split()
                                     if w.startswith("storage=")), "")
        return self

    def channel(self, auth: ClientAuth | None = None) -> grpc.Channel:
        return (self.auth if auth is None else auth).channel(self.address)

    def client(self, timeout: float = 30) -> TransactionClient:
        return TransactionClient(self.channel(), timeout=timeout)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 30) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stacks = self.stacks()
            self.kill()
            raise AssertionError(f"the server did not stop {timeout:.0f} s after SIGTERM; "
                                 f"its stderr, ending with its threads:\n{stacks}") from None

    def stacks(self, wait: float = 10) -> str:
        """The process's stderr after it printed every thread's stack (SIGUSR1, which
        `morphz serve` hands to faulthandler), or as it is when `wait` s pass first."""
        before = seen = self.stderr().count(STACK_END)
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:  # until the stacks came and stopped coming
            time.sleep(0.2)
            now = self.stderr().count(STACK_END)
            if before < seen == now:
                break
            seen = now
        return self.stderr()[-20000:]

    def stderr(self) -> str:
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def died(self) -> bool:
        return self.proc.poll() is not None


def health(address: str, service: str = "", auth: ClientAuth = PLAINTEXT):
    """The address's health status for `service`, or None if it does not answer."""
    with auth.channel(address) as ch:
        try:
            return health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=5).status
        except grpc.RpcError:
            return None


def wait_health(proc: ServerProcess, want) -> None:
    deadline = time.monotonic() + BOUND
    while (status := health(proc.address, auth=proc.auth)) != want:
        assert not proc.died(), proc.stderr()
        assert time.monotonic() < deadline, f"health {status}, not {want}\n{proc.stderr()}"
        time.sleep(0.1)


class InProcessServers:
    """The all-in-one topology: AllInOne in this process; `app` is it, for the tests that
    need its objects (marked all_in_one)."""

    def __init__(self, data_dir: Path, store: StoreChoice = LMDB) -> None:
        self.data_dir = Path(data_dir)
        self.store = store
        self.app: AllInOne | None = None
        self._running = False

    def start(self) -> "InProcessServers":
        # The tests that read or tamper with the store over gRPC reach it on the
        # internal storage listener (the public port does not serve it).
        self.app = AllInOne(ServerConfig(data_dir=str(self.data_dir), listen="127.0.0.1:0",
                                         storage_listen="127.0.0.1:0", store=self.store.kind,
                                         dsn=self.store.dsn)).start()
        self._running = True
        return self

    @property
    def endpoints(self) -> Endpoints:
        address = f"127.0.0.1:{self.app.port}"
        return Endpoints(f"127.0.0.1:{self.app.storage_port}", address, address, address)

    def stop(self) -> None:
        self._running = False
        self.app.stop(grace=1)

    def close(self) -> None:
        """Stop it if still running (a test that failed midway)."""
        if self._running:
            self.stop()


class SplitServers:
    """The split topology: one child process per role under `root`/ROLE, started in
    dependency order and stopped callers first; `start` after `stop` restarts them on
    the same data (storage on a new port, the others told it). `args`: flags every
    role gets (authentication, say), `auth`: what health checks present, `env`: what
    every process's environment adds (log level, tracing), `role_args`: flags of one
    role (recall's --recall-idle, say), `store`: where storage keeps its store."""

    def __init__(self, root: Path, args: list[str] | None = None,
                 auth: ClientAuth = PLAINTEXT, env: dict | None = None,
                 role_args: dict[str, list[str]] | None = None,
                 store: StoreChoice = LMDB) -> None:
        self.root = Path(root)
        self.args, self.auth, self.env = list(args or []), auth, dict(env or {})
        self.role_args = dict(role_args or {})
        if store.kind != "lmdb":
            self.role_args["storage"] = [*self.role_args.get("storage", []), *store.flags()]
        self.procs: dict[str, ServerProcess] = {}

    def start(self) -> "SplitServers":
        self.root.mkdir(parents=True, exist_ok=True)
        self.procs = {}
        try:
            for role in ROLES:
                self.procs[role] = ServerProcess(
                    self.root / role, self.env,
                    args=[role, *self._calls(role), *self.args, *self.role_args.get(role, [])],
                    auth=self.auth).start()
            for proc in self.procs.values():
                wait_health(proc, SERVING)
        except BaseException:
            self.kill()
            raise
        return self

    def _calls(self, role: str) -> list[str]:
        """The flags naming the services `role` calls."""
        return [arg for name in NEEDS[role] for arg in (f"--{name}", self.procs[name].address)]

    @property
    def endpoints(self) -> Endpoints:
        return Endpoints(*(self.procs[role].address for role in ROLES))

    def stop(self) -> None:
        for role in reversed(ROLES):  # callers first: none loses a dependency mid-call
            code = self.procs[role].stop()
            assert code == 0, f"{role} exited {code}\n{self.procs[role].stderr()}"

    def kill(self) -> None:
        for role in reversed(list(self.procs)):  # callers first, as stop does
            self.procs[role].kill()

    close = kill  # whatever still runs after a test (one that failed midway)


def servers(topology: str, data_dir: Path,
            store: StoreChoice = LMDB) -> InProcessServers | SplitServers:
    """New (not yet started) servers of `topology` keeping their data under `data_dir`
    (and `store`)."""
    return SplitServers(data_dir, store=store) if topology == SPLIT \
        else InProcessServers(data_dir, store)
