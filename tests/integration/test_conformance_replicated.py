"""DUR-08 as the conformance kit checks it, against Morphz on replicated storage: `morphz
serve --store postgres` over a real PostgreSQL primary and synchronous standby
(tests/pg_replication.py). The kit's promotion hook (tests/socket_hook.py) SIGKILLs the
primary, promotes the standby and makes the lost member its standby again, while the
kit's writer commits; every acknowledged commit must then be there once and the audit
match. (The run against the LMDB store declares replicated storage not offered:
test_conformance_run.py; the many-writer failover is tests/crash/test_pg_failover.py.)"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from tests.pg_replication import ReplicatedPostgres
from tests.socket_hook import SocketHook
from tests.topology import ServerProcess

KIT = str(pathlib.Path(sys.executable).with_name("morphz-conformance"))
RUN_BOUND = 600  # seconds the kit run may take on a loaded machine


def test_dur_08_the_kit_passes_against_morphz_on_a_replicated_postgres_pair(tmp_path):
    pg = ReplicatedPostgres().start()
    srv = ServerProcess(tmp_path / "data", args=["--store", "postgres", "--dsn", pg.dsn()])

    def promote() -> None:
        pg.fail_over()  # SIGKILL the primary, `pg_ctl promote` the standby
        pg.rebuild_standby()  # commits wait for a synchronous standby: give it one again

    hook = SocketHook(promote)
    try:
        srv.start()
        report = tmp_path / "report.json"
        done = subprocess.run([KIT, "run", "--profile", "SC-Durable", "--only", "DUR-08",
                               "--target", srv.address, "--promote-standby-cmd", hook.command,
                               "--report", str(report)],
                              capture_output=True, text=True, timeout=RUN_BOUND)
        cases = json.loads(report.read_text())["cases"]
        assert [(c["id"], c["outcome"]) for c in cases] == [("DUR-08", "pass")], \
            (done.stdout, done.stderr, cases)
        assert (hook.calls, hook.errors, pg.promotions) == (1, [], 1)
        assert not srv.died(), srv.stderr()
    finally:
        hook.close()
        srv.kill()
        pg.remove()
