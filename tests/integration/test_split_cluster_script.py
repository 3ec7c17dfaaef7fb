"""DIST-05 for development: `scripts/cluster start|status|stop DIR` runs etcd, two storage
shards, two transaction instances, two recall replicas and encoding as background
processes on loopback, with data, logs and pid files under DIR, and prints the
environment the CLI needs.

It starts its own processes, so it runs the same under either --topology."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import grpc
import pytest

from morphz.services.recall.client import RecallClient

from tests.topology import BOUND

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMES = ["etcd", "storage-1", "storage-2", "transaction-1", "transaction-2", "recall-1",
         "recall-2", "encoding"]
pytestmark = pytest.mark.split_processes


def cluster(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / "scripts" / "cluster"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def exports(stdout: str) -> dict[str, str]:
    """The `export NAME=VALUE` lines `start` prints."""
    return dict(line.removeprefix("export ").split("=", 1) for line in stdout.splitlines()
                if line.startswith("export "))


def morphz(env: dict, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", *args,
                           "--format=json"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def indexed(address: str, context: str) -> list[str]:
    """The refs a recall replica finds for "cluster" once it has caught up."""
    with grpc.insecure_channel(address) as ch:
        recall = RecallClient(ch, timeout=30)
        deadline = time.monotonic() + BOUND
        while (st := recall.inspect(context))["lag"]:
            assert time.monotonic() < deadline, st
            time.sleep(0.1)
        return [h["ref"] for h in recall.search(context, "cluster")["results"]]


def test_dist_05_scripts_cluster_starts_reports_and_stops_a_loopback_cluster(tmp_path):
    data = tmp_path / "cluster"
    started = cluster("start", str(data), cwd=tmp_path)
    try:
        assert started.returncode == 0, started.stderr
        env = exports(started.stdout)
        assert set(env) == {"MORPHZ_SERVER", "MORPHZ_TRANSACTION", "MORPHZ_RECALL",
                            "MORPHZ_ENCODING"}
        assert (data / "env").read_text().split("\n")[:4] == started.stdout.split("\n")[:4]
        replica_2 = started.stdout.split("# recall replica 2: MORPHZ_RECALL=")[1].split()[0]

        status = cluster("status", str(data), cwd=tmp_path)
        assert status.returncode == 0, status.stdout + status.stderr
        rows = [line.split() for line in status.stdout.splitlines()]
        assert [(r[0], r[-1]) for r in rows] == [(n, "SERVING") for n in NAMES]
        pids = {r[0]: int(r[2]) for r in rows}
        assert env["MORPHZ_RECALL"] in status.stdout and replica_2 in status.stdout

        # The CLI reaches every service through the printed environment.
        cli_env = dict(os.environ, **env)
        morphz(cli_env, "context", "create", "demo")
        # Contexts spread over both shards; each is owned by the instance that wrote it
        # first, and the other instance's clients are redirected to it.
        tx_2 = started.stdout.split("# transaction instance 2: MORPHZ_SERVER=")[1].split()[0]
        other = dict(cli_env, MORPHZ_SERVER=tx_2, MORPHZ_TRANSACTION=tx_2)
        shards = set()
        for n in range(6):
            created = morphz(other, "context", "create", f"spread-{n}")
            assert created["owner"] == "transaction-2" and created["fencing_token"] > 0
            shards.add(created["shard"])
        assert shards == {"shard-1", "shard-2"}
        demo = morphz(other, "context", "status", "demo")
        assert (demo["owner"], demo["shard"] in shards) == ("transaction-1", True)
        tx_file = tmp_path / "demo.tx"
        tx_file.write_text("(context-tx (base-version 0) (create plan (goal demo)))")
        assert morphz(other, "context", "tx", "--context", "demo", "--file",
                      str(tx_file))["revision"] == 1
        ev = morphz(cli_env, "context", "event", "--context", "demo", "--session", "main",
                    "--kind", "user-message", "--text", "hello cluster")
        assert morphz(cli_env, "context", "encode", "--context", "demo", "--session",
                      "main")["activation"]
        # Each replica indexes into its own data directory and finds the event.
        assert indexed(env["MORPHZ_RECALL"], "demo") == indexed(replica_2, "demo") == [ev["ref"]]
        assert (data / "recall-1" / "recall").is_dir() and (data / "recall-2" / "recall").is_dir()
    finally:
        stopped = cluster("stop", str(data), cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    for name in NAMES:  # each drained on SIGTERM and is gone
        if name != "etcd":
            assert "morphz: stopped" in (data / "logs" / f"{name}.log").read_text(), name
        assert not (data / "run" / f"{name}.pid").exists()
        assert not os.path.exists(f"/proc/{pids[name]}/cmdline") or \
            str(data) not in pathlib.Path(f"/proc/{pids[name]}/cmdline").read_text()
    down = cluster("status", str(data), cwd=tmp_path)
    assert down.returncode == 1
    assert [line.split()[-1] for line in down.stdout.splitlines()] == ["running"] * len(NAMES)
