"""SOAK-01: continuous mixed load with faults, and nothing lost. scripts/soak (the harness
in scripts/soaking/) run short: real processes, the normal principal's agents writing,
encoding, searching (reading their own writes), importing and paging in several sessions,
an abusive principal, and a fault every FAULT_EVERY seconds chosen by the seed (SIGKILL
and SIGSTOP of each process kind, PostgreSQL failover and pause, a full disk, a slowed
network). Its report must show every acknowledged write present exactly once (the
history checker), every audit `match`, no INTERNAL, every read-your-writes search
finding its write, and a write acknowledged after every fault. The normal principal's
p50 against its quiet baseline (within 3x) and flat memory are judged in runs of 20
minutes or more (scripts/soak); a short run shows them.

.ci/run exports MORPHZ_SOAK_SEED (printed) and MORPHZ_SOAK_MINUTES=3; a failure replays
with that seed (the topology follows it: odd seeds the split cluster on PostgreSQL, even
the all-in-one server on LMDB, unless MORPHZ_SOAK_TOPOLOGY names one). The hour-long
soak of each topology is `scripts/soak` (docs/soak.md)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests import pg

pytestmark = pytest.mark.split_processes  # it starts every process it needs

ROOT = pathlib.Path(__file__).resolve().parents[2]
MINUTES = float(os.environ.get("MORPHZ_SOAK_MINUTES") or 1.5)
SEED = int(os.environ.get("MORPHZ_SOAK_SEED") or 0)
FAULT_EVERY = min(60.0, max(20.0, MINUTES * 60 / 6))


def topology(seed: int) -> str:
    named = os.environ.get("MORPHZ_SOAK_TOPOLOGY", "")
    if named:
        return named
    return "split-pg" if seed % 2 and pg.available() else "lmdb"


def test_soak_01_mixed_load_and_a_fault_every_few_seconds_lose_nothing(tmp_path):
    seed = SEED or int.from_bytes(os.urandom(4), "big") % (1 << 31) + 1
    report_path = tmp_path / "soak.json"
    argv = [sys.executable, str(ROOT / "scripts" / "soaking" / "main.py"),
            "--minutes", str(MINUTES), "--seed", str(seed), "--topology", topology(seed),
            "--fault-every", str(FAULT_EVERY), "--json", str(report_path),
            "--dir", str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True,
                          timeout=MINUTES * 60 + 900)
    assert report_path.exists(), f"seed {seed}: no report\n{done.stderr[-4000:]}"
    report = json.loads(report_path.read_text())
    table = done.stdout
    h = report["history"]
    assert (h["lost"], h["duplicated"], h["problems"], h["unsettled"]) == (0, 0, [], 0), table
    assert h["acknowledged"] > 100, table
    assert all(report["audits"].values()) and report["audits"], table
    assert report["internal"]["count"] == 0, (report["internal"], table)
    assert report["read_your_writes"].get("found") and \
        not report["read_your_writes"].get("missed"), table
    assert report["faults"] and all(r["recovered"] == r["faults"]
                                    for r in report["recovery"].values()), table
    assert report["failed"] == [], f"seed {seed}:\n{table}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, table
