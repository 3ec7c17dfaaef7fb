"""DUR-08 on PostgreSQL: a real `morphz serve --store postgres` process takes commits from
8 writers, its DSN naming a primary and its synchronous standby (tests/pg_replication.py,
real processes) with target_session_attrs=read-write. Round after round the primary is
SIGKILLed, the standby promoted (`pg_ctl promote`) and the lost member rebuilt as the new
primary's standby, while the writers go on: a commit whose outcome a writer did not see is
sent again with its request id until it is acknowledged or refused. At the end every
acknowledged commit is present exactly once (the crash test's history checker), no
refused one is, and audit matches, for every context. And a commit whose wait for the
standby is cancelled is not acknowledged."""
from __future__ import annotations

import pathlib
import random
import sys
import threading
import time

from morphz.services.storage.postgres import PostgresStore
from morphz.shared.errors import MorphzError, Status
from morphz.shared.storage.api import Write

from tests.pg_replication import ReplicatedPostgres
from tests.polling import until
from tests.topology import ServerProcess

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "model"))
from history import check_events, read_history  # noqa: E402

WRITERS = 8
CONTEXTS = 4  # two writers a context: some commits meet a moved base and are refused
KILLS = 5
PER_ROUND = 32  # acknowledged commits each round waits for before its kill
BOUND = 180.0  # seconds a round may take to make that progress on a loaded machine
# Outcome unknown: the storage's database went away mid-commit, or the deadline passed
# while the promoted standby waited for a synchronous standby of its own.
UNKNOWN = (Status.UNAVAILABLE, Status.DEADLINE_EXCEEDED, Status.CANCELLED)


class Log:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.acked: dict[str, list[dict]] = {}
        self.rejected: dict[str, list[dict]] = {}
        self.ack_times: list[tuple[float, float, bool]] = []  # (sent, acknowledged, replayed)
        self.unknown_outcomes = 0
        self.errors: list[MorphzError] = []  # what no writer should see

    def count(self) -> int:
        with self.lock:
            return len(self.ack_times)


def _commit_until_known(c, ctx: str, rid: str, text: str, log: Log) -> None:
    """Send the commit until its outcome is known: a retry with the same request id is
    applied at most once (answered with the first attempt's receipt if that one was)."""
    while True:
        sent = time.monotonic()
        try:
            receipt = c.commit(ctx, text, request_id=rid)
        except MorphzError as e:
            if e.status in UNKNOWN:
                with log.lock:
                    log.unknown_outcomes += 1
                time.sleep(0.05)
                continue
            with log.lock:
                log.rejected[ctx].append({"request_id": rid, "text": text, "reason": e.reason})
            return
        with log.lock:
            log.acked[ctx].append({"request_id": rid, "receipt": receipt, "text": text})
            log.ack_times.append((sent, time.monotonic(), bool(receipt.get("replayed"))))
        return


def _writer(srv: ServerProcess, wid: int, stop: threading.Event, log: Log,
            rng: random.Random) -> None:
    c = srv.client(timeout=5)
    ctx = f"failover-{wid % CONTEXTS}"
    n = 0
    while not stop.is_set():
        n += 1
        rid = f"w{wid}-{n}-{rng.getrandbits(32):x}"
        try:
            base = c.status(ctx)["revision"]
        except MorphzError as e:
            if e.status not in UNKNOWN:
                with log.lock:
                    log.errors.append(e)
                return
            time.sleep(0.05)
            continue
        text = (f"(context-tx (base-version {base}) (reason \"failover\") "
                f"(create {rid} (n {n})) (derive d-{rid} (from {rid}) (w {wid})) "
                f"(relate d-{rid} explains {rid}) (retire {rid}))")
        _commit_until_known(c, ctx, rid, text, log)


def test_dur_08_primary_sigkilled_under_8_writers_standby_promoted_nothing_lost_or_doubled(
        tmp_path):
    started = time.monotonic()
    pg = ReplicatedPostgres().start()
    srv = ServerProcess(tmp_path / "data", args=["--store", "postgres", "--dsn", pg.dsn()])
    stop = threading.Event()
    try:
        srv.start()
        admin = srv.client(timeout=30)
        log = Log()
        for i in range(CONTEXTS):
            admin.create_context(f"failover-{i}")
            log.acked[f"failover-{i}"], log.rejected[f"failover-{i}"] = [], []
        rng = random.Random(20261204)
        threads = [threading.Thread(target=_writer, args=(srv, w, stop, log,
                                                          random.Random(rng.random())),
                                    daemon=True)  # a failed test must not leave them running
                   for w in range(WRITERS)]
        for t in threads:
            t.start()
        to_first_commit = []
        for _ in range(KILLS):
            before = log.count()
            until(lambda b=before: log.count() >= b + PER_ROUND, BOUND,
                  "no progress before a kill")
            pg.kill_primary()  # SIGKILL; returns once its every process is gone
            killed_at = time.monotonic()
            pg.promote()
            pg.rebuild_standby()
            # Until a standby was back, the promoted primary committed nothing: what it
            # alone holds is not acknowledged. (It may answer a resent commit that the lost
            # primary had replicated with the first receipt: that commits nothing new.)
            with log.lock:
                alone = [a for s, a, replayed in log.ack_times
                         if s > killed_at and a < pg.standby_started_at and not replayed]
            assert not alone, f"{len(alone)} commits acknowledged with no standby"
            until(lambda k=killed_at: log.ack_times[-1][0] > k, BOUND,
                  "no commit after the failover")
            # From the kill to the first acknowledgement of a commit sent after it.
            to_first_commit.append(
                min(a for s, a, _ in log.ack_times if s > killed_at) - killed_at)
        last = log.count()
        until(lambda: log.count() >= last + PER_ROUND, BOUND, "no progress at the end")
        stop.set()
        for t in threads:
            t.join(timeout=BOUND)
            assert not t.is_alive(), "a writer is stuck"
        assert not srv.died(), srv.stderr()
        assert not log.errors, log.errors[:5]

        problems, acked, lost, doubled = [], 0, 0, 0
        for ctx in log.acked:
            audit = admin.audit(ctx)
            assert audit["match"], [p for p in audit["projections"] if not p["match"]]
            events, revision = read_history(admin, ctx)
            problems += check_events(events, revision, log.acked[ctx], log.rejected[ctx])
            applied: dict[str, int] = {}
            for ev in events:
                if ev and ev.get("request_id"):
                    applied[ev["request_id"]] = applied.get(ev["request_id"], 0) + 1
            ids = {a["request_id"] for a in log.acked[ctx]}
            acked += len(ids)
            lost += sum(1 for rid in ids if rid not in applied)
            doubled += sum(1 for n in applied.values() if n > 1)
        print(f"DUR-08 failover: {pg.promotions} primary kills, {acked} acknowledged commits, "
              f"{lost} lost, {doubled} duplicated, "
              f"{sum(len(r) for r in log.rejected.values())} refused, "
              f"{log.unknown_outcomes} unknown outcomes resent; death to first commit "
              f"{', '.join(f'{s:.1f}' for s in to_first_commit)} s; "
              f"wall {time.monotonic() - started:.0f} s")
        assert not problems, problems[:10]
        assert (lost, doubled) == (0, 0)
        assert pg.promotions >= KILLS and acked >= (KILLS + 1) * PER_ROUND
    finally:
        stop.set()
        srv.kill()
        pg.remove()


def test_dur_08_a_commit_whose_wait_for_the_standby_is_cancelled_is_not_acknowledged():
    """PostgreSQL answers a COMMIT whose wait for the synchronous standby was cancelled
    (pg_cancel_backend, as an operator does to a commit stuck without its standby) with
    success and a WARNING: committed on the primary, maybe nowhere else. The store must
    not acknowledge it: its outcome is unknown (STORAGE_UNAVAILABLE), as for a lost
    connection. The store runs in this process, on the real primary and standby."""
    pg = ReplicatedPostgres().start()
    store = PostgresStore(pg.dsn())
    try:
        assert store.commit("c", 0, [Write("frames", ("a",), b"1")]) == 1  # replicated
        pg.standby.stop()  # the primary's commits now wait for a standby
        outcome: dict = {}

        def commit() -> None:
            try:
                outcome["seq"] = store.commit("c", 1, [Write("frames", ("b",), b"2")])
            except MorphzError as e:
                outcome["error"] = e
        t = threading.Thread(target=commit)
        t.start()
        waiting = ("SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep' "
                   "AND application_name = 'morphz-storage'")
        until(lambda: pg.primary.psql(waiting) != "", 60, "the commit never waited")
        pg.primary.psql(f"SELECT pg_cancel_backend(pid) FROM ({waiting}) w")
        t.join(60)
        assert not t.is_alive()
        assert "seq" not in outcome, "a commit the standby may lack was acknowledged"
        assert outcome["error"].reason == "STORAGE_UNAVAILABLE", outcome
        # It did commit on the primary: the next commit sees it (and waits for a standby).
        pg.rebuild_standby()
        assert store.latest("c").commit_seq == 2
        assert store.commit("c", 2, [Write("frames", ("c",), b"3")]) == 3
    finally:
        store.close()
        pg.remove()
