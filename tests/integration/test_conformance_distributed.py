"""The conformance kit's SC-Distributed profile against real split processes: a real etcd,
a storage process, two transaction instances owning contexts through etcd leases, recall
and encoding. The kit starts, stops and SIGKILLs the first instance itself (--start-cmd);
the second is its second runtime (--second-target). About 40 s of kit run on a quiet
machine: it runs in .ci/run's first pass (marked split_processes, like the other tests
that start split processes of their own)."""
from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ServerProcess

pytestmark = pytest.mark.split_processes

KIT = str(Path(sys.executable).with_name("morphz-conformance"))
TTL = 3  # seconds: each instance's lease TTL
RUN_BOUND = 600


def _free_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def cluster(tmp_path, etcd):
    storage = ServerProcess(tmp_path / "storage", args=["storage"]).start()
    flags = ["transaction", "--storage", storage.address, "--etcd", etcd.address,
             "--lease-ttl", str(TTL)]
    second = ServerProcess(tmp_path / "second", args=flags).start()
    first = _free_address()
    start = shlex.join([sys.executable, "-m", "morphz.services.cli.main", "serve", *flags,
                        "--listen", first, "--data", str(tmp_path / "first")])
    calls = ["--storage", storage.address, "--transaction", first]
    # They print their address at once and serve once the first instance answers.
    others = {role: ServerProcess(tmp_path / role, args=[role, *calls]).start()
              for role in ("recall", "encoding")}
    yield {"first": first, "start": start, "second": second.address,
           "storage": storage.address, "others": others,
           # DIST-04's lease service outage: etcd paused, then continued (by its pid)
           "lease_stop": f"kill -STOP {etcd.proc.pid}", "lease_start": f"kill -CONT {etcd.proc.pid}"}
    for proc in [*others.values(), second, storage]:
        proc.kill()


def test_kit_01_the_whole_sc_distributed_profile_passes_against_split_processes(cluster,
                                                                                tmp_path):
    """Every case of SC-Core through SC-Distributed, each service its own process: the
    kit starts the first transaction instance, then recall and encoding (which call it)
    are started, and the kit kills and restarts the instance under them."""
    report = tmp_path / "report.json"
    done = subprocess.run(
        [KIT, "run", "--profile", "SC-Distributed", "--target", cluster["first"],
         "--second-target", cluster["second"], "--storage-target", cluster["storage"],
         "--recall-target", cluster["others"]["recall"].address,
         "--encoding-target", cluster["others"]["encoding"].address,
         "--lease-stop-cmd", cluster["lease_stop"], "--lease-start-cmd", cluster["lease_start"],
         "--start-cmd", cluster["start"], "--target-log", str(tmp_path / "first.log"),
         "--report", str(report)], capture_output=True, text=True, timeout=RUN_BOUND)
    cases = json.loads(report.read_text())["cases"]
    assert {c["outcome"] for c in cases} == {"pass"}, done.stdout + done.stderr
    assert {c["profile"] for c in cases} == {"SC-Core", "SC-Durable", "SC-Concurrent",
                                             "SC-Distributed"}
    assert sorted(c["id"] for c in cases if c["profile"] == "SC-Distributed") == [
        "DIST-01", "DIST-02", "DIST-03", "DIST-04", "DIST-05"]
