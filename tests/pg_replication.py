"""A PostgreSQL primary with one synchronous standby, as real processes (tests/pg.py's
PostgresServer): two members on fixed loopback ports, one the primary, the other a copy
of it made by `pg_basebackup -R` that streams from it under its member name. Both carry
the same settings, so either may be primary: `synchronous_standby_names` names both
members (FIRST 1), `synchronous_commit = on`, so the primary answers a COMMIT only once
the standby has flushed it.

`fail_over()` SIGKILLs the primary and promotes the standby (`pg_ctl promote`); the new
primary then makes commits wait until `rebuild_standby()` has made the lost member a
standby of it again (its data directory replaced by a new base backup, on its old port).
`dsn()` names both members with target_session_attrs=read-write: libpq connects to
whichever accepts writes."""
from __future__ import annotations

import os
import shutil
import time

from tests.pg import BOUND, PG_BIN, PostgresServer, require
from tests.polling import until

MEMBERS = ("member_a", "member_b")
REPLICATION_CONF = (
    "wal_level = replica",
    "max_wal_senders = 10",
    "hot_standby = on",
    "wal_keep_size = 256MB",
    f"synchronous_standby_names = 'FIRST 1 ({', '.join(MEMBERS)})'",
    "synchronous_commit = on",
    # A standby whose primary vanished retries (and notices a promotion) this often; the
    # default 5 s would be most of a failover's time.
    "wal_retrieve_retry_interval = 100ms",
)


class ReplicatedPostgres:
    """Two members; `primary` and `standby` are PostgresServers (they swap on promotion)."""

    def __init__(self) -> None:
        require()
        # cluster_name: the name a member's walreceiver gives itself when it is a standby.
        self.members = {name: PostgresServer(conf=(*REPLICATION_CONF, f"cluster_name = '{name}'"),
                                             name=name)
                        for name in MEMBERS}
        self.primary, self.standby = (self.members[n] for n in MEMBERS)
        self.promotions = 0
        self.standby_started_at = 0.0  # when the last standby's postmaster was started

    def start(self) -> "ReplicatedPostgres":
        self.primary.init().start()
        self._make_standby(self.standby)
        return self

    def dsn(self, dbname: str = "postgres", **extra: str) -> str:
        """Both members, over TCP, connecting only to the one that accepts writes."""
        members = list(self.members.values())
        parts = {"host": ",".join("127.0.0.1" for _ in members),
                 "port": ",".join(str(m.port) for m in members), "user": "postgres",
                 "dbname": dbname, "target_session_attrs": "read-write", **extra}
        return " ".join(f"{k}={v}" for k, v in parts.items())

    def name_of(self, member: PostgresServer) -> str:
        return os.path.basename(member.data_dir)

    # -- failover ---------------------------------------------------------------------------
    def kill_primary(self) -> None:
        """SIGKILL the primary's postmaster and every process it started."""
        self.primary.kill()

    def promote(self) -> None:
        """Promote the standby (`pg_ctl promote`, which waits until it accepts writes); the
        lost primary becomes the member to rebuild."""
        self.standby.run([os.path.join(PG_BIN, "pg_ctl"), "promote", "-w",
                          "-t", str(int(BOUND)), "-D", self.standby.data_dir])
        self.primary, self.standby = self.standby, self.primary
        self.promotions += 1

    def fail_over(self) -> None:
        self.kill_primary()
        self.promote()

    def rebuild_standby(self) -> None:
        """Make the lost member a standby of the new primary: a new base backup in place of
        its data directory (it may hold commits the new primary never had: those were never
        acknowledged), started on its old port, synchronous once caught up."""
        self.standby.kill()
        shutil.rmtree(self.standby.data_dir)
        self._make_standby(self.standby)

    def is_synchronous(self) -> bool:
        return self.primary.psql(
            "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync' "
            f"AND application_name = '{self.name_of(self.standby)}'") == "1"

    def remove(self) -> None:
        for m in self.members.values():
            m.remove()

    # -- helpers ------------------------------------------------------------------------------
    def _make_standby(self, member: PostgresServer) -> None:
        # -R: standby.signal and a primary_conninfo; -X stream: the WAL of the copy's time.
        # The copy's own WAL stream reports flushed positions (its temporary slot): under a
        # name synchronous_standby_names lists, it would stand in as the synchronous standby
        # while it copies, and the primary would acknowledge commits that no standby holds.
        # So it connects as pg_basebackup; the standby names itself (cluster_name) once it runs.
        member.run([os.path.join(PG_BIN, "pg_basebackup"), "-D", member.data_dir, "-R",
                    "-X", "stream", "-c", "fast", "--no-sync", "-d", self.primary.tcp_dsn()])
        self.standby_started_at = time.monotonic()
        member.start()
        until(self.is_synchronous, BOUND,
              f"{self.name_of(member)} did not become the synchronous standby")
