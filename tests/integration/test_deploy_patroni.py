"""DUR-08 with the deploy examples' PostgreSQL (DIST-05), run for real. Two Patroni members
(Debian's patroni, installed by scripts/bootstrap) with deploy/postgres/patroni.yml over a
real etcd elect a primary, run post-bootstrap.sh (Morphz's role and the shards' databases)
and keep the other member a synchronous standby; `morphz serve --store postgres` commits
through the deploy's multi-host DSN shape. The primary's machine is lost (SIGKILL): Patroni
promotes the standby, which acknowledges nothing alone, and the lost member rejoins as its
standby. Changed for one machine, and only that: ports, data folders and the script's path
(the container's are fixed), and Patroni's timings (ttl 10 s, loop 1 s)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request

import pytest
import yaml

from morphz.shared.errors import MorphzError

from tests.pg import SUPERUSER, PostgresServer, as_postgres, make_folder, require
from tests.ports import free_port
from tests.polling import until
from tests.topology import ServerProcess

pytestmark = pytest.mark.split_processes  # processes of its own, the same in either topology

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POSTGRES = os.path.join(ROOT, "deploy", "postgres")
BOUND = 180.0
MEMBERS = ("postgres-1", "postgres-2")
DATABASES = ("morphz_shard_1", "morphz_shard_2")


class Member:
    def __init__(self, name: str, folder: str, config: str, etcd: str) -> None:
        self.name, self.folder, self.config = name, folder, config
        self.pg_port, self.api_port = free_port(), free_port()
        self.env = dict(
            os.environ, PATRONI_NAME=name, PATRONI_ETCD3_HOSTS=etcd,
            PATRONI_RESTAPI_LISTEN=f"127.0.0.1:{self.api_port}",
            PATRONI_RESTAPI_CONNECT_ADDRESS=f"127.0.0.1:{self.api_port}",
            PATRONI_POSTGRESQL_LISTEN=f"127.0.0.1:{self.pg_port}",
            PATRONI_POSTGRESQL_CONNECT_ADDRESS=f"127.0.0.1:{self.pg_port}",
            PATRONI_POSTGRESQL_DATA_DIR=os.path.join(folder, name, "data"),
            PATRONI_POSTGRESQL_PGPASS=os.path.join(folder, name, "pgpass"),
            # what entrypoint.sh reads from the secrets
            PATRONI_SUPERUSER_PASSWORD="superuser-pw", PATRONI_REPLICATION_PASSWORD="repl-pw",
            PATRONI_REWIND_PASSWORD="rewind-pw", MORPHZ_PG_PASSWORD="morphz-pw",
            MORPHZ_PG_DATABASES=" ".join(DATABASES))
        os.makedirs(os.path.join(folder, name), mode=0o700)
        if os.geteuid() == 0:
            os.chown(os.path.join(folder, name), *_ids())
        self.log_path = os.path.join(folder, f"{name}.log")
        # Its PostgreSQL, as tests/pg.py knows one (to SIGKILL it with its every process).
        self.postgres = PostgresServer(os.path.join(folder, name), port=self.pg_port)
        self.start()

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            # Its own process group: runuser (as root) stays Patroni's parent, and the
            # signals below are for Patroni.
            self.proc = subprocess.Popen(as_postgres(["patroni", self.config]), env=self.env,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def lose(self) -> None:
        """The machine is gone: SIGKILL Patroni and PostgreSQL."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self.postgres.kill()

    def cluster(self) -> dict:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.api_port}/cluster",
                                        timeout=5) as r:
                return json.load(r)
        except OSError:
            return {}

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # Patroni stops its PostgreSQL first
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        self.postgres.kill()  # whatever outlived it


def _ids() -> tuple[int, int]:
    import pwd
    p = pwd.getpwnam(SUPERUSER)
    return p.pw_uid, p.pw_gid


def _config(folder: str) -> str:
    cfg = yaml.safe_load(open(os.path.join(POSTGRES, "patroni.yml")))
    cfg["bootstrap"]["post_bootstrap"] = os.path.join(POSTGRES, "post-bootstrap.sh")
    cfg["bootstrap"]["dcs"].update(ttl=10, loop_wait=1, retry_timeout=5)
    path = os.path.join(folder, "patroni.yml")
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    return path


def test_dur_08_patroni_from_deploy_fails_over_to_its_synchronous_standby_losing_nothing(
        etcd, tmp_path):
    require()
    assert subprocess.run(["patroni", "--version"], capture_output=True).returncode == 0, \
        "patroni is not installed: scripts/bootstrap installs it"
    folder = make_folder("morphz-patroni-")
    config = _config(folder)
    members = [Member(name, folder, config, etcd.address) for name in MEMBERS]
    srv = None
    try:
        def roles() -> dict[str, str]:
            found = members[0].cluster().get("members", [])
            return {m["name"]: m.get("role", "") for m in found if m.get("state") in
                    ("running", "streaming")}
        # One leader, the other its synchronous standby (synchronous_mode_strict).
        until(lambda: sorted(roles().values()) == ["leader", "sync_standby"], BOUND,
              "no primary with a synchronous standby")
        passfile = tmp_path / "morphz.pgpass"
        passfile.write_text("*:*:*:morphz:morphz-pw\n")
        passfile.chmod(0o600)
        dsn = (f"host=127.0.0.1,127.0.0.1 port={members[0].pg_port},{members[1].pg_port} "
               f"dbname={DATABASES[0]} user=morphz passfile={passfile} "
               "target_session_attrs=read-write connect_timeout=5")
        srv = ServerProcess(tmp_path / "data", args=["--store", "postgres", "--dsn", dsn])
        srv.start()
        c = srv.client(timeout=30)
        c.create_context("deployed")
        receipt = c.commit("deployed", "(context-tx (base-version 0) (create a (n 1)))")
        assert receipt["revision"] == 1

        # DUR-08 under Patroni: the primary's machine is lost; Patroni promotes the
        # synchronous standby by itself.
        by_name = {m.name: m for m in members}
        leader = next(n for n, r in roles().items() if r == "leader")
        survivor = next(m for m in members if m.name != leader)
        by_name[leader].lose()
        until(lambda: survivor.cluster().get("members") and any(
            m["name"] == survivor.name and m.get("role") == "leader" and
            m.get("state") == "running" for m in survivor.cluster()["members"]), BOUND,
            "the standby was not promoted")
        # Alone, it acknowledges nothing (strict synchronous mode): the commit waits.
        text = "(context-tx (base-version 1) (create b (n 2)))"
        with pytest.raises(MorphzError) as alone:
            srv.client(timeout=5).commit("deployed", text, request_id="after-failover")
        assert alone.value.reason in ("DEADLINE_EXCEEDED", "STORAGE_UNAVAILABLE",
                                      "UNAVAILABLE"), alone.value
        # The lost member comes back: Patroni rewinds it into the new primary's standby,
        # and the waiting commit is released; sent again, it is applied once.
        by_name[leader].start()
        until(lambda: roles() == {survivor.name: "leader", leader: "sync_standby"}, BOUND,
              "the lost member did not come back as the synchronous standby")
        again = c.commit("deployed", text, request_id="after-failover")
        assert again["revision"] == 2
        assert c.status("deployed")["revision"] == 2
        assert c.audit("deployed")["match"]
    except AssertionError as e:
        logs = {m.name: open(m.log_path, errors="replace").read()[-3000:] for m in members}
        raise AssertionError(f"{e}\n{logs}") from None
    finally:
        if srv is not None:
            srv.kill()
        for m in members:
            m.stop()
        subprocess.run(["rm", "-rf", folder], check=False)
