"""The soak's topologies: real processes on loopback, each one a Proc that can be SIGKILLed
and started again on its data, paused (SIGSTOP) and resumed, and sampled (RSS, open
files).

  lmdb      the all-in-one `morphz serve` on LMDB (its data on a small tmpfs where the
            machine allows one, so the disk can be filled for real)
  split-pg  a split cluster: PostgreSQL primary and synchronous standby
            (tests/pg_replication.py), etcd, one storage process on PostgreSQL, two
            transaction instances owning contexts through etcd leases, recall and
            encoding, each its own process

Every morphz process embeds with the hashing embedder (--embedder hashing): the soak
measures the store under faults, and the default embedder's worker processes would take
most of two shared cores (scripts/bench recall measures those). Callers authenticate
with bearer tokens (Principals): the normal principal's agents, an abusive principal
whose expensive calls draw on budgets of its own, and a server-wide administrator that
checks every context at the end; in the split cluster the services call each other as
the services' principal."""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from morphz.shared.coord.etcd_member import etcd_binary, member_argv
from morphz.shared.coord.etcd_member import health as etcd_health
from morphz.shared.grpc.auth import AUTHORIZATION, ClientAuth

from tests.pg_replication import ReplicatedPostgres
from tests.ports import free_port

BOUND = 90.0  # seconds a start may take on a loaded machine
SERVING_LINE = "morphz: serving on "
MORPHZ = [sys.executable, "-m", "morphz.services.cli.main"]
PAGE = os.sysconf("SC_PAGE_SIZE")
# Encoding's row cache bounded so that it is full within the soak's warm-up: at the soak's
# rate the default 128 MiB fills for some 35 minutes, growth memory judging would see
# (docs/soak.md); 16 MiB fills in about 5. A fill is not growth; the bound is tested apart.
ENCODING_FLAGS = ("--row-cache", "16MiB")


def health(address: str) -> str:
    with grpc.insecure_channel(address) as ch:
        try:
            return health_pb2.HealthCheckResponse.ServingStatus.Name(
                health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(),
                                                     timeout=3).status)
        except grpc.RpcError as e:
            return e.code().name


class Proc:
    """One server process: `argv` run with its log in `log`, at a fixed address (a
    restart listens where it did). `kind`: what the soak calls it in faults and reports."""

    def __init__(self, name: str, kind: str, argv: list[str], address: str, log: Path,
                 etcd: bool = False) -> None:
        self.name, self.kind, self.argv, self.address = name, kind, argv, address
        self.log, self.etcd = log, etcd
        self.proc: Optional[subprocess.Popen] = None
        self.paused = False
        self.starts = 0
        self.started = 0.0

    def start(self) -> "Proc":
        # Counted before the process exists: the sampler files its first sample under it.
        self.starts += 1
        self.started = time.monotonic()  # its birth: memory is judged from its own warm-up
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log, start_new_session=True,
                                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.paused = False
        self.wait_serving()
        return self

    def wait_serving(self) -> None:
        deadline = time.monotonic() + BOUND
        while True:
            state = etcd_health(self.address, timeout=3) if self.etcd else health(self.address)
            if state == "SERVING":
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode} (log {self.log})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} is {state} after {BOUND:g} s (log {self.log})")
            time.sleep(0.2)

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else 0

    def kill(self) -> None:
        if self.pid:
            self.resume()
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(BOUND)

    def pause(self) -> None:
        if self.pid:
            os.kill(self.pid, signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.pid and self.paused:
            os.kill(self.pid, signal.SIGCONT)
        self.paused = False

    def stop(self) -> None:
        """SIGTERM (it drains), SIGKILL if it does not end."""
        if not self.pid:
            return
        self.resume()
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(BOUND)

    def sample(self) -> Optional[tuple[int, int, int]]:
        """(resident bytes, open files, anonymous resident bytes) of the process now, or
        None if it is not running. The anonymous part is the process's own memory: the
        rest is mapped files (LMDB's data, on tmpfs in the soak, and the indexes), which
        grow with the data whoever maps them."""
        pid = self.pid
        if not pid or self.paused:
            return None
        try:
            rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            status = Path(f"/proc/{pid}/status").read_text()
            anon = int(status.split("RssAnon:", 1)[1].split()[0]) << 10
        except (OSError, ValueError, IndexError):
            return None
        return rss, fds, anon


class Principals:
    """The tokens of the soak's principals, in a tokens file every morphz process reads."""
    NAMES = ("agent", "abuser", "checker", "morphz-service")

    def __init__(self, root: Path) -> None:
        self.tokens = {name: secrets.token_hex(16) for name in self.NAMES}
        self.file = root / "tokens"
        self.file.write_text("".join(f"{t} {n}\n" for n, t in self.tokens.items()))
        self.service_file = root / "service.token"
        self.service_file.write_text(self.tokens["morphz-service"])

    def auth(self, who: str) -> ClientAuth:
        return ClientAuth(token=self.tokens[who])

    def header(self, who: str) -> tuple[str, str]:
        return AUTHORIZATION, f"Bearer {self.tokens[who]}"

    def flags(self) -> list[str]:
        return ["--tokens", str(self.file), "--service-token-file", str(self.service_file),
                "--admin", "checker"]


def serve(name: str, role: list[str], root: Path, principals: Principals, *flags: str) -> Proc:
    address = f"127.0.0.1:{free_port()}"
    data = root / name
    data.mkdir(parents=True, exist_ok=True)
    argv = [*MORPHZ, "serve", *role, "--listen", address, "--data", str(data),
            *principals.flags(), *flags]
    return Proc(name, name.rstrip("-0123456789") or name, argv, address,
                root / f"{name}.log")


class Topology:
    """What the load and the faults see: the processes by name, where to send each kind of
    call, and the fault kinds this topology offers."""
    name = ""
    procs: dict[str, Proc]
    transaction: list[str]  # transaction service addresses (first: the usual one)
    recall = encoding = ""
    data_dir: Path  # where a disk fault fills the file system (None: not offered)
    pg: Optional[ReplicatedPostgres] = None
    principals: Principals

    def close(self) -> None:
        for p in reversed(list(self.procs.values())):
            p.stop()


class AllInOne(Topology):
    name = "lmdb"

    def __init__(self, root: Path, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.principals = Principals(root)
        server = serve("server", [], root, self.principals, "--embedder", "hashing",
                       "--reply-stall-seconds", "15", *ENCODING_FLAGS)
        server.argv[server.argv.index("--data") + 1] = str(data_dir / "server")
        server.kind = "server"
        self.procs = {"server": server.start()}
        self.transaction = [server.address]
        self.recall = self.encoding = server.address


class SplitPostgres(Topology):
    name = "split-pg"

    def __init__(self, root: Path) -> None:
        self.data_dir = None
        self.procs = {}
        self.principals = Principals(root)
        self.pg = ReplicatedPostgres().start()
        try:
            self._start(root)
        except BaseException:
            self.close()
            raise

    def _start(self, root: Path) -> None:
        client, peer = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
        etcd = Proc("etcd", "etcd", member_argv(etcd_binary(), "soak", str(root / "etcd"),
                                                client, peer), client, root / "etcd.log",
                    etcd=True)
        self.procs["etcd"] = etcd.start()
        e, p = ["--etcd", client], self.principals
        self.procs["storage"] = serve("storage", ["storage"], root, p, "--store", "postgres",
                                      "--dsn", self.pg.dsn(), *e, "--shard", "shard-1",
                                      "--reply-stall-seconds", "15").start()
        for n in (1, 2):
            self.procs[f"transaction-{n}"] = serve(
                f"transaction-{n}", ["transaction"], root, p, *e, "--instance",
                f"transaction-{n}", "--lease-ttl", "4", "--reply-stall-seconds", "15").start()
        tx = self.procs["transaction-1"].address
        self.procs["recall"] = serve("recall", ["recall"], root, p, "--transaction", tx, *e,
                                     "--embedder", "hashing").start()
        self.procs["encoding"] = serve("encoding", ["encoding"], root, p, "--transaction", tx,
                                       *e, *ENCODING_FLAGS).start()
        self.transaction = [tx, self.procs["transaction-2"].address]
        self.recall = self.procs["recall"].address
        self.encoding = self.procs["encoding"].address

    def close(self) -> None:
        super().close()
        if self.pg is not None:
            self.pg.remove()
