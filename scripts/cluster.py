"""A split Morphz cluster on loopback for development: etcd, two storage shards, two
transaction instances owning contexts through etcd, two recall replicas and encoding,
each a process in the background (`etcd`, or `morphz serve ROLE`), with everything under
one folder DIR:

  DIR/NAME/        the process's --data (etcd's data; storage-N: shard-N's LMDB store;
                   recall-N: its own index)
  DIR/logs/NAME.log  its stdout and stderr, appended at every start
  DIR/run/NAME.pid, DIR/run/NAME.address   while it runs
  DIR/env          the CLI's exports (also printed by `start`)

start: starts them in dependency order (each is told the addresses of what it calls; the
shards register in etcd, where the others find them), waits until every one reports
SERVING (etcd: its /health), prints the exports (stdout; progress goes to stderr, so
`eval "$(scripts/cluster start)"` works). status: each process's pid, address and health
(`--json`: one object by name); exit 0 only if all are SERVING. stop: SIGTERM, callers
first, etcd last; each drains.

One process at a time (a conformance kit's control hooks, a failure drill), NAME as in
`status`: `start-process NAME [DIR] [-- FLAG...]` starts it again on its data at the
address it had (its command is kept in DIR/run/NAME.argv; FLAGs are added to it for this
start, e.g. `-- --rules-version 1`) and returns once it is SERVING (at once if it runs
with those FLAGs; running with others, it is stopped and started with these);
`stop-process NAME` sends SIGTERM and waits until it has drained; `kill NAME` sends SIGKILL
and waits until it is gone; `pause NAME` and `resume NAME` send SIGSTOP and SIGCONT (e.g.
etcd unreachable, then back). A process started again takes the environment of the
`start-process` call (OTEL_* included), not the one of `start`.

`backup [DIR] --to FOLDER` takes an online backup of each shard (`morphz backup`) into
FOLDER/storage-N.backup; `restore [DIR] --from FOLDER` stops every morphz process, restores
each shard from it (`morphz restore`), empties the recall replicas' indexes (derived: they
index the restored change feed again) and starts them all again.
Each context is placed on one shard and owned by the transaction instance that writes it
first; the CLI follows an instance's redirect to the owner (`morphz context status`
shows owner, shard and fencing token).
Run through scripts/cluster (it sets up the virtualenv as scripts/serve does)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from morphz.shared.coord.etcd_member import etcd_binary, member_argv
from morphz.shared.coord.etcd_member import health as etcd_health

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = ROOT / "cluster-data"  # in .gitignore
# (name, role, the flags naming another's address, other flags): each after what it
# calls. The same commands and flags as deploy/ (tests/integration/test_deploy.py).
ETCD = "etcd"
_TX = {"etcd": ETCD, "transaction": "transaction-1"}
PROCESSES = [(ETCD, ETCD, {}, []),
             ("storage-1", "storage", {"etcd": ETCD}, ["--shard", "shard-1"]),
             ("storage-2", "storage", {"etcd": ETCD}, ["--shard", "shard-2"]),
             ("transaction-1", "transaction", {"etcd": ETCD}, ["--instance", "transaction-1"]),
             ("transaction-2", "transaction", {"etcd": ETCD}, ["--instance", "transaction-2"]),
             ("recall-1", "recall", _TX, []),
             ("recall-2", "recall", _TX, []),
             ("encoding", "encoding", _TX, [])]
SHARDS = [name for name, role, *_ in PROCESSES if role == "storage"]
PORTS = len(PROCESSES) + 1  # etcd takes two: clients, then peers
BOUND = 60.0  # seconds a process may take to listen, to report SERVING, or to stop
SERVING_LINE = "morphz: serving on "
ONE_PROCESS = ("start-process", "stop-process", "kill", "pause", "resume")  # take a NAME
CLI = [sys.executable, "-m", "morphz.services.cli.main"]


def say(text: str) -> None:
    print(f"cluster: {text}", file=sys.stderr, flush=True)


class Layout:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def data(self, name: str) -> Path:
        return self.root / name

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"

    def pid_file(self, name: str) -> Path:
        return self.root / "run" / f"{name}.pid"

    def address_file(self, name: str) -> Path:
        return self.root / "run" / f"{name}.address"

    def flags_file(self, name: str) -> Path:
        return self.root / "run" / f"{name}.flags"

    def argv_file(self, name: str) -> Path:
        """The command it was started with, at the address it took: start-process reruns it."""
        return self.root / "run" / f"{name}.argv"

    def pid(self, name: str) -> int | None:
        """The pid recorded for `name` if that process still runs `morphz serve` on this
        cluster's data (a recycled pid belongs to someone else: never signal it)."""
        try:
            pid = int(self.pid_file(name).read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, ValueError, IndexError):
            return None
        mine = (b"serve" in cmdline or name == ETCD) and \
            str(self.data(name)).encode() in cmdline
        return pid if mine and state != "Z" else None

    def address(self, name: str) -> str:
        try:
            return self.address_file(name).read_text().strip()
        except OSError:
            return ""

    def forget(self, name: str) -> None:
        for f in (self.pid_file(name), self.address_file(name)):
            f.unlink(missing_ok=True)


def health(address: str, name: str = "") -> str:
    if not address:
        return "no address"
    if name == ETCD:
        return etcd_health(address, timeout=3)
    with grpc.insecure_channel(address) as ch:
        try:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(),
                                                         timeout=3)
        except grpc.RpcError as e:
            return f"no answer ({e.code().name})"
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def cli_exports(addresses: dict[str, str]) -> list[str]:
    """What the `morphz` CLI reads (services/cli/connect.py server_for). MORPHZ_TRANSACTION is
    set too so one left from another cluster does not win; recall-2 is the spare replica
    (each replica keeps its own index and search cursors: point a client at one)."""
    tx = addresses["transaction-1"]
    return [f"export MORPHZ_SERVER={tx}", f"export MORPHZ_TRANSACTION={tx}",
            f"export MORPHZ_RECALL={addresses['recall-1']}",
            f"export MORPHZ_ENCODING={addresses['encoding']}",
            f"# recall replica 2: MORPHZ_RECALL={addresses['recall-2']}",
            f"# transaction instance 2: MORPHZ_SERVER={addresses['transaction-2']}"
            f" MORPHZ_TRANSACTION={addresses['transaction-2']}",
            f"# etcd: {addresses[ETCD]}"]


def _listening(layout: Layout, name: str, proc: subprocess.Popen, log_start: int) -> str:
    """The address `name` reports once it listens (its first line of this start)."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        with open(layout.log(name), "rb") as f:
            f.seek(log_start)
            for line in f.read().decode("utf-8", "replace").splitlines():
                if line.startswith(SERVING_LINE):
                    return line[len(SERVING_LINE):].split()[0]
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with status {proc.returncode}")
        time.sleep(0.1)
    raise RuntimeError(f"{name} did not listen within {BOUND:g} s")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _command(layout: Layout, name: str, role: str, calls: dict, extra: list[str],
             addresses: dict[str, str], ports: list[int]) -> tuple[list[str], str]:
    """The process's argv, and the address it will listen on ("" if it says so itself)."""
    if role == ETCD:
        client, peer = (f"127.0.0.1:{p or _free_port()}" for p in ports[:2])
        return member_argv(etcd_binary(), "morphz-dev", str(layout.data(name)), client,
                           peer), client
    k = [n for n, *_ in PROCESSES].index(name) + 1
    listen = f"127.0.0.1:{ports[k] if ports[k] else 0}"
    flags = [arg for flag, dep in calls.items() for arg in (f"--{flag}", addresses[dep])]
    return [sys.executable, "-m", "morphz.services.cli.main", "serve", role, "--listen",
            listen, "--data", str(layout.data(name)), *flags, *extra], ""


def _at(argv: list[str], address: str) -> list[str]:
    """argv listening on `address` (a morphz process asked for port 0 learns its own)."""
    out = list(argv)
    if "--listen" in out:
        out[out.index("--listen") + 1] = address
    return out


def _launch(layout: Layout, name: str, argv: list[str]) -> tuple[subprocess.Popen, int]:
    """Start `name` in the background; its log offset at this start."""
    layout.data(name).mkdir(parents=True, exist_ok=True)
    log_start = layout.log(name).stat().st_size if layout.log(name).exists() else 0
    with open(layout.log(name), "ab") as log:
        # Its own session: it outlives this script and a Ctrl-C in its terminal.
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
    layout.pid_file(name).write_text(f"{proc.pid}\n")
    return proc, log_start


def _serving(address: str, name: str) -> None:
    deadline = time.monotonic() + BOUND
    while (state := health(address, name)) != "SERVING":
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} is {state}, not SERVING, after {BOUND:g} s")
        time.sleep(0.2)


def _etcd_ready(address: str) -> str:
    deadline = time.monotonic() + BOUND
    while health(address, ETCD) != "SERVING":
        if time.monotonic() > deadline:
            raise RuntimeError(f"etcd did not answer at {address} within {BOUND:g} s")
        time.sleep(0.1)
    return address


def start(layout: Layout, port_base: int) -> int:
    running = [name for name, *_ in PROCESSES if layout.pid(name)]
    if running:
        say(f"already running: {', '.join(running)} (scripts/cluster stop {layout.root})")
        return 1
    (layout.root / "logs").mkdir(parents=True, exist_ok=True)
    (layout.root / "run").mkdir(exist_ok=True)
    addresses: dict[str, str] = {}
    ports = [port_base + k if port_base else 0 for k in range(PORTS)]
    try:
        for name, role, calls, extra in PROCESSES:
            argv, known = _command(layout, name, role, calls, extra, addresses, ports)
            proc, log_start = _launch(layout, name, argv)
            addresses[name] = _etcd_ready(known) if known else \
                _listening(layout, name, proc, log_start)
            layout.address_file(name).write_text(addresses[name] + "\n")
            layout.argv_file(name).write_text(json.dumps(_at(argv, addresses[name])) + "\n")
            layout.flags_file(name).write_text("[]\n")
            say(f"{name:<13} pid {proc.pid:<7} {addresses[name]}  log {layout.log(name)}")
        for name, *_ in PROCESSES:
            _serving(addresses[name], name)
    except (RuntimeError, OSError) as e:
        say(f"start failed: {e}; stopping what started (logs in {layout.root / 'logs'})")
        stop(layout)
        return 1
    exports = cli_exports(addresses)
    (layout.root / "env").write_text("\n".join(exports) + "\n")
    say(f"all SERVING; the CLI's environment (also in {layout.root / 'env'}):")
    print("\n".join(exports), flush=True)
    return 0


def stop(layout: Layout) -> int:
    for name, *_ in reversed(PROCESSES):  # callers first: none loses a dependency mid-call
        pid = layout.pid(name)
        if pid is None:
            layout.forget(name)
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + BOUND
        while layout.pid(name) and time.monotonic() < deadline:
            time.sleep(0.1)
        if layout.pid(name):
            say(f"{name} (pid {pid}) did not drain within {BOUND:g} s: SIGKILL")
            os.kill(pid, signal.SIGKILL)
        layout.forget(name)
        say(f"stopped {name} (pid {pid})")
    return 0


def status(layout: Layout, as_json: bool = False) -> int:
    rows = {}
    for name, *_ in PROCESSES:
        pid = layout.pid(name)
        address = layout.address(name)
        rows[name] = {"pid": pid or 0, "address": address,
                      "state": health(address, name) if pid else "not running"}
    if as_json:
        print(json.dumps(rows))
    for name, row in rows.items() if not as_json else ():
        print(f"{name:<13} pid {row['pid'] or '-':<7} {row['address'] or '-':<21} "
              f"{row['state']}")
    return 0 if all(r["state"] == "SERVING" for r in rows.values()) else 1


def start_process(layout: Layout, name: str, flags: list[str]) -> int:
    """`name` again on its data, at the address it had, with `flags` added; returns once
    it is SERVING. Running with those flags, it is left alone; with others, it is stopped
    (drained) and started with these."""
    if layout.pid(name):
        if _flags(layout, name) == flags:
            say(f"{name} already runs (pid {layout.pid(name)})")
            return 0
        if end_process(layout, name, signal.SIGTERM):
            return 1
    try:
        argv = json.loads(layout.argv_file(name).read_text())
    except (OSError, ValueError):
        say(f"{name} has no recorded command in {layout.root / 'run'}: start the cluster first")
        return 1
    address = argv[argv.index("--listen") + 1] if "--listen" in argv else ""
    try:
        proc, log_start = _launch(layout, name, argv + flags)
        if name == ETCD:
            address = _etcd_ready(argv[argv.index("--listen-client-urls") + 1]
                                  .removeprefix("http://"))
        else:
            _listening(layout, name, proc, log_start)
        _serving(address, name)
    except (RuntimeError, OSError, ValueError) as e:
        say(f"{name} did not start: {e} (log {layout.log(name)})")
        return 1
    layout.address_file(name).write_text(address + "\n")
    layout.flags_file(name).write_text(json.dumps(flags) + "\n")
    say(f"{name:<13} pid {proc.pid:<7} {address}  log {layout.log(name)}")
    return 0


def _flags(layout: Layout, name: str) -> list[str]:
    """The flags `name` was last started with beyond its recorded command."""
    try:
        return json.loads(layout.flags_file(name).read_text())
    except (OSError, ValueError):
        return []


def backup(layout: Layout, folder: Path) -> int:
    """An online backup of every shard (`morphz backup`), FOLDER/NAME.backup each,
    replacing what is there: the cluster serves meanwhile."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in SHARDS:
        target = folder / f"{name}.backup"
        target.unlink(missing_ok=True)  # `morphz backup` writes only a new file
        done = subprocess.run([*CLI, "backup", "--to", str(target), "--server",
                               layout.address(name)], capture_output=True, text=True)
        if done.returncode:
            say(f"backup of {name} failed: {done.stdout}{done.stderr}")
            return 1
        say(f"backed up {name} into {target}")
    return 0


def restore(layout: Layout, folder: Path) -> int:
    """Offline: every morphz process stopped (callers first; etcd stays), each shard's
    data replaced by FOLDER/NAME.backup (`morphz restore`), each recall replica's index
    emptied (it is derived: the replicas index the restored feed again from its start),
    then every process started again as recorded, without extra flags."""
    for name in SHARDS:
        if not (folder / f"{name}.backup").is_file():
            say(f"no backup of {name} in {folder}")
            return 1
    names = [name for name, *_ in PROCESSES if name != ETCD]
    for name in reversed(names):
        if end_process(layout, name, signal.SIGTERM):
            return 1
    for name, role, *_ in PROCESSES:
        if role not in ("storage", "recall"):
            continue
        data = layout.data(name)
        # A restore applies again the erasures made since the backup (docs/privacy.md):
        # the shard's erasure log is kept aside before its data goes (a store older than
        # erasures has none: restored as taken).
        log = folder / f"{name}.erasures.jsonl"
        kept = role == "storage" and (data / "store" / "erasures.jsonl").is_file()
        if kept:
            shutil.copyfile(data / "store" / "erasures.jsonl", log)
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        if role == "storage":
            done = subprocess.run([*CLI, "restore", "--from", str(folder / f"{name}.backup"),
                                   "--data", str(data),
                                   *(["--erasures", str(log)] if kept
                                     else ["--without-erasures"])],
                                  capture_output=True, text=True)
            if done.returncode:
                say(f"restore of {name} failed: {done.stdout}{done.stderr}")
                return 1
            say(f"restored {name} from {folder / f'{name}.backup'}")
    for name in names:
        if start_process(layout, name, []):
            return 1
    return 0


def end_process(layout: Layout, name: str, sig: signal.Signals) -> int:
    """SIGTERM (`name` drains) or SIGKILL, and wait until it is gone; its address and
    command stay for start-process."""
    pid = layout.pid(name)
    if pid is None:
        say(f"{name} is not running")
        layout.pid_file(name).unlink(missing_ok=True)
        return 0
    os.kill(pid, sig)
    deadline = time.monotonic() + BOUND
    while layout.pid(name):
        if time.monotonic() > deadline:
            say(f"{name} (pid {pid}) did not end within {BOUND:g} s")
            return 1
        time.sleep(0.05)
    layout.pid_file(name).unlink(missing_ok=True)
    say(f"{'killed' if sig == signal.SIGKILL else 'stopped'} {name} (pid {pid})")
    return 0


def signal_process(layout: Layout, name: str, sig: signal.Signals) -> int:
    """SIGSTOP or SIGCONT: the process stays, unanswering or answering again."""
    pid = layout.pid(name)
    if pid is None:
        say(f"{name} is not running")
        return 1
    os.kill(pid, sig)
    say(f"{'paused' if sig == signal.SIGSTOP else 'resumed'} {name} (pid {pid})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    argv = list(sys.argv[1:] if argv is None else argv)
    flags = argv[argv.index("--") + 1:] if "--" in argv else []  # start-process only
    argv = argv[:argv.index("--")] if "--" in argv else argv
    commands = parser.add_subparsers(dest="command", required=True)
    for command in ("start", "stop", "status", *ONE_PROCESS, "backup", "restore"):
        sub = commands.add_parser(command)
        if command in ONE_PROCESS:
            sub.add_argument("name", choices=[n for n, *_ in PROCESSES])
        sub.add_argument("dir", nargs="?", default=str(DEFAULT_DIR),
                         help="where data, logs and pid files go (default: the "
                         "repository's cluster-data/)")
        if command == "start":
            sub.add_argument("--port-base", type=int, default=0, metavar="PORT",
                             help=f"listen on PORT..PORT+{PORTS - 1} in the order above, "
                             "etcd's clients then peers first (default: ports chosen, printed)")
        if command == "status":
            sub.add_argument("--json", action="store_true", help="as one JSON object by name")
        if command == "backup":
            sub.add_argument("--to", required=True, metavar="FOLDER",
                             help="where each shard's backup goes (NAME.backup, replaced)")
        if command == "restore":
            sub.add_argument("--from", dest="source", required=True, metavar="FOLDER",
                             help="a folder `backup` wrote")
    args = parser.parse_args(argv)
    if not 0 <= getattr(args, "port_base", 0) <= 65535 - PORTS:
        parser.error(f"--port-base must be 1..{65535 - PORTS} (0: ports chosen)")
    if flags and args.command != "start-process":
        parser.error("FLAGs after -- go with start-process only")
    layout = Layout(Path(args.dir))
    return {"start": lambda: start(layout, args.port_base), "stop": lambda: stop(layout),
            "status": lambda: status(layout, args.json),
            "start-process": lambda: start_process(layout, args.name, flags),
            "stop-process": lambda: end_process(layout, args.name, signal.SIGTERM),
            "kill": lambda: end_process(layout, args.name, signal.SIGKILL),
            "pause": lambda: signal_process(layout, args.name, signal.SIGSTOP),
            "resume": lambda: signal_process(layout, args.name, signal.SIGCONT),
            "backup": lambda: backup(layout, Path(args.to)),
            "restore": lambda: restore(layout, Path(args.source))}[
        args.command]()


if __name__ == "__main__":
    sys.exit(main())
