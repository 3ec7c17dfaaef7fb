"""A real PostgreSQL 15 for tests: Debian's postgresql-15 (installed by scripts/bootstrap),
its `initdb` and `pg_ctl` run on a data directory in a temporary folder, listening on a
free loopback port and on a Unix socket in that folder. PostgreSQL refuses to run as
root, so where the tests do its programs run as the `postgres` user (runuser) and the
folder is made theirs. One class for a primary or a standby: the data directory, port
and extra postgresql.conf lines are parameters (a standby's folder is filled by
pg_basebackup instead of `init`). `kill` is a crash: SIGKILL to the postmaster and every
process it started."""
from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Optional, Sequence

import pytest
from tests.ports import free_port

PG_BIN = "/usr/lib/postgresql/15/bin"
SUPERUSER = "postgres"
BOUND = 60.0  # seconds a start or stop may take on a loaded machine
# Small and quick: tests make many short-lived servers on a shared machine.
BASE_CONF = (
    "shared_buffers = 32MB",
    "max_connections = 200",
    "max_wal_size = 256MB",
    "log_min_messages = warning",
    "logging_collector = off",
)


def available() -> bool:
    """Whether PostgreSQL 15's server programs are installed here."""
    return os.access(os.path.join(PG_BIN, "pg_ctl"), os.X_OK)


def as_postgres(argv: list[str]) -> list[str]:
    """argv run as the postgres user where the tests run as root (initdb, postgres and
    pg_basebackup's files must be that user's)."""
    return ["runuser", "-u", SUPERUSER, "--", *argv] if os.geteuid() == 0 else argv


def _hand_over(path: str) -> None:
    """Make `path` the postgres user's (only where the tests run as root)."""
    if os.geteuid() == 0:
        shutil.chown(path, SUPERUSER, SUPERUSER)


def make_folder(prefix: str = "morphz-pg-") -> str:
    """A temporary folder PostgreSQL may write (pytest's tmp_path is private to root):
    traversable by all, owned by postgres where the tests run as root."""
    folder = tempfile.mkdtemp(prefix=prefix)
    os.chmod(folder, 0o755)
    _hand_over(folder)
    return folder


class PostgresServer:
    """One PostgreSQL server. `folder`: a make_folder() (the data directory, its log and
    its socket go there); `port`: 0 chooses a free one; `conf`: postgresql.conf lines
    added to BASE_CONF (a primary's replication settings, a standby's primary_conninfo)."""

    def __init__(self, folder: Optional[str] = None, *, port: int = 0,
                 conf: Sequence[str] = (), name: str = "data") -> None:
        self.folder = folder or make_folder()
        self.data_dir = os.path.join(self.folder, name)
        self.port = port or free_port()
        self.conf = list(conf)
        self.log_path = os.path.join(self.folder, f"{name}.log")

    # -- addresses ----------------------------------------------------------------------
    def dsn(self, dbname: str = "postgres", **extra: str) -> str:
        """A libpq connection string over the server's Unix socket."""
        parts = {"host": self.folder, "port": str(self.port), "user": SUPERUSER,
                 "dbname": dbname, **extra}
        return " ".join(f"{k}={v}" for k, v in parts.items())

    def tcp_dsn(self, dbname: str = "postgres", **extra: str) -> str:
        """The same over loopback TCP (replication, multi-host strings)."""
        parts = {"host": "127.0.0.1", "port": str(self.port), "user": SUPERUSER,
                 "dbname": dbname, **extra}
        return " ".join(f"{k}={v}" for k, v in parts.items())

    # -- life cycle ---------------------------------------------------------------------
    def init(self) -> "PostgresServer":
        """initdb a new data directory (trust authentication: loopback and the socket
        only), with local replication connections allowed for a standby."""
        self.run([os.path.join(PG_BIN, "initdb"), "-D", self.data_dir, "-U", SUPERUSER,
                   "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"])
        with open(os.path.join(self.data_dir, "pg_hba.conf"), "a") as f:
            f.write("host replication all 127.0.0.1/32 trust\n")
        return self

    def write_conf(self) -> None:
        """BASE_CONF, the port, the socket's folder and `conf`, after what initdb wrote
        (a later line wins)."""
        lines = [*BASE_CONF, f"port = {self.port}", "listen_addresses = '127.0.0.1'",
                 f"unix_socket_directories = '{self.folder}'", *self.conf]
        with open(os.path.join(self.data_dir, "postgresql.conf"), "a") as f:
            f.write("\n# tests/pg.py\n" + "\n".join(lines) + "\n")

    def start(self) -> "PostgresServer":
        """Start on the data directory (init() first for a new one) and wait until it
        accepts connections."""
        self.write_conf()
        self.run([os.path.join(PG_BIN, "pg_ctl"), "start", "-w", "-t", str(int(BOUND)),
                   "-D", self.data_dir, "-l", self.log_path])
        return self

    def stop(self, mode: str = "fast") -> None:
        """A clean shutdown (nothing if it is not running)."""
        if self.pid() is None:
            return
        subprocess.run(as_postgres([os.path.join(PG_BIN, "pg_ctl"), "stop", "-w", "-t",
                               str(int(BOUND)), "-m", mode, "-D", self.data_dir]),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

    def kill(self) -> None:
        """Crash it: SIGKILL the postmaster and every process it started, and wait until
        they are gone (a restart then runs crash recovery)."""
        pid = self.pid()
        if pid is None:
            return
        victims = [pid, *_children(pid)]
        for p in victims:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + BOUND
        while any(_alive(p) for p in victims):
            if time.monotonic() > deadline:
                pytest.fail(f"postgres processes {victims} outlived SIGKILL")
            time.sleep(0.05)
        # A dead postmaster not yet reaped (pg_ctl left it to init) still answers kill(pid,
        # 0), which a new postmaster would take for a live one: its lock files go, as an
        # operator restarting after a crash would remove them.
        for lock in (os.path.join(self.data_dir, "postmaster.pid"),
                     os.path.join(self.folder, f".s.PGSQL.{self.port}.lock")):
            try:
                os.unlink(lock)
            except FileNotFoundError:
                pass

    def pid(self) -> Optional[int]:
        """The running postmaster's pid, or None."""
        try:
            with open(os.path.join(self.data_dir, "postmaster.pid")) as f:
                pid = int(f.readline())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def remove(self) -> None:
        """Stop it and delete its folder."""
        self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        """Run SQL with psql (as a client: no driver of the code under test)."""
        out = subprocess.run([os.path.join(PG_BIN, "psql"), "-X", "-q", "-A", "-t", "-v",
                              "ON_ERROR_STOP=1", "-d", self.dsn(dbname), "-c", sql],
                             capture_output=True, text=True, timeout=BOUND)
        if out.returncode:
            raise RuntimeError(f"psql failed: {out.stderr}")
        return out.stdout.strip()

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def run(self, argv: list[str]) -> None:
        """Run a PostgreSQL program as the server's user (pg_basebackup into a standby's
        data directory, say); fails the test with its output if it fails."""
        out = subprocess.run(as_postgres(argv), capture_output=True, text=True,
                             timeout=BOUND * 2)
        if out.returncode:
            pytest.fail(f"{' '.join(argv[:2])} failed ({out.returncode}):\n{out.stderr[-3000:]}"
                        f"\n{self.log()[-3000:]}")


def start_postgres(folder: Optional[str] = None, *, port: int = 0, conf: Sequence[str] = (),
                   name: str = "data") -> PostgresServer:
    """A new PostgreSQL server, initialised and started (see PostgresServer)."""
    return PostgresServer(folder, port=port, conf=conf, name=name).init().start()


def require() -> None:
    """Skip where PostgreSQL is missing (scripts/bootstrap installs it when run as root),
    unless MORPHZ_TEST_STORE=postgres asked for it: then fail."""
    if available():
        return
    message = f"PostgreSQL 15 is not installed ({PG_BIN}): run scripts/bootstrap as root"
    if os.environ.get("MORPHZ_TEST_STORE") == "postgres":
        pytest.fail(message)
    pytest.skip(message)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return out


# -- fixtures (import them into a test module to use them) ---------------------------------
_schemas = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server():
    """One PostgreSQL server for the session's tests; each store a schema of its own."""
    require()
    server = start_postgres()
    yield server
    server.remove()


@pytest.fixture
def pg_dsn(postgres_server) -> str:
    return postgres_server.dsn()


def new_database(server: PostgresServer) -> str:
    """A new, empty database on `server`: its name."""
    name = f"morphz_{os.getpid()}_{next(_schemas)}"
    server.psql(f"CREATE DATABASE {name}")
    return name


def new_schema() -> str:
    """A schema name no other store of this session uses (a new, empty store)."""
    return f"t{os.getpid()}_{next(_schemas)}"
