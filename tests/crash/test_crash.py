"""Crash test (SC-Durable): a real server process is SIGKILLed again and again, at every
fault point and at random moments, while clients commit. After each restart every
acknowledged commit is there, nothing partial is visible, the revision chain has no gap,
audit matches, and retried requests are not applied twice. The same on the PostgreSQL
store, whose database is SIGKILLed too (tests/pg.py)."""
from __future__ import annotations

import pathlib
import random
import sys
import threading
import time

from morphz.shared.errors import MorphzError
from morphz.shared.process.faults import POINTS

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "model"))
from history import check_history  # noqa: E402

CTX = "crash"
WRITERS = 4
KILLS = 28  # at least 25 per CI run: one per round


def _writer(srv, wid: int, stop: threading.Event, log: dict, lock: threading.Lock,
            rng: random.Random) -> None:
    c = srv.client(timeout=5)
    n = 0
    while not stop.is_set():
        n += 1
        rid = f"w{wid}-{rng.getrandbits(48):x}"
        try:
            base = c.status(CTX)["revision"]
            text = (f"(context-tx (base-version {base}) (reason \"crash test\") "
                    f"(create {rid} (n {n})) (derive d-{rid} (from {rid}) (w {wid})) "
                    f"(relate d-{rid} explains {rid}) (retire {rid}))")
            if n % 3 == 0:
                text = text[:-1] + f" (place d-{rid} first))"
            with lock:
                log["attempted"][rid] = text
            receipt = c.commit(CTX, text, request_id=rid)
            with lock:
                log["acked"].append({"request_id": rid, "receipt": receipt, "text": text})
        except MorphzError as e:
            with lock:
                if rid not in log["attempted"]:
                    pass  # failed before the commit was sent
                elif e.reason in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "INTERNAL",
                                  "STORAGE_UNAVAILABLE"):  # may or may not be applied
                    log["unknown"][rid] = log["attempted"][rid]
                else:
                    log["rejected"].append({"request_id": rid, "text": log["attempted"][rid],
                                            "reason": e.reason})
            if e.reason in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED",
                            "STORAGE_UNAVAILABLE"):
                return  # the server (or its database) is gone


def _round(srv, rng: random.Random, log: dict, kill_index: int) -> str:
    """Run writers until the server dies at its fault point or is killed at a random
    moment; returns the point that killed it, or "random"."""
    point = POINTS[(kill_index // 2) % len(POINTS)] if kill_index % 2 == 0 else None
    if point:
        nth = rng.randint(1, 2) if point == "mid-rebuild" else rng.randint(2, 12)
        srv.start(MORPHZ_FAULT=f"{point}:{nth}")
    else:
        srv.start()
    stop, lock = threading.Event(), threading.Lock()
    threads = [threading.Thread(target=_writer, args=(srv, w, stop, log, lock,
                                                      random.Random(rng.random())))
               for w in range(WRITERS)]
    for t in threads:
        t.start()
    # A fault round waits for the point to fire (the server kills itself); a bound only
    # so that a point that never fires fails the test below instead of hanging it.
    deadline = time.monotonic() + (20 if point else rng.uniform(0.05, 0.6))
    while time.monotonic() < deadline and not srv.died():
        if point == "mid-rebuild":
            try:
                srv.client(timeout=5).rebuild_projections(CTX)
            except MorphzError:
                pass
        time.sleep(0.02)
    fired = srv.died() and srv.proc.returncode == -9  # SIGKILLed itself at the point
    srv.kill()  # SIGKILL at a random moment (or reap the process the point killed)
    stop.set()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a writer did not notice the server was gone"
    if point:
        assert fired, f"fault point {point} never fired"
    return point or "random"


def _verify(srv, log: dict) -> None:
    c = srv.client()
    audit = c.audit(CTX)
    assert audit["match"], [p for p in audit["projections"] if not p["match"]]
    # Requests whose outcome we never saw: a retry must apply them at most once.
    for rid, text in list(log["unknown"].items()):
        try:
            receipt = c.commit(CTX, text, request_id=rid)
            log["acked"].append({"request_id": rid, "receipt": receipt, "text": text})
        except MorphzError as e:
            log["rejected"].append({"request_id": rid, "text": text, "reason": e.reason})
        del log["unknown"][rid]
    started = time.monotonic()
    problems = check_history(c, CTX, log["acked"], log["rejected"])
    log["check_seconds"] = log.get("check_seconds", 0) + time.monotonic() - started
    assert not problems, problems[:10]


def test_dur_02_sigkill_at_fault_points_and_random_moments_loses_nothing(server_process):
    rng = random.Random(20261129)
    srv = server_process()
    srv.start()
    srv.client().create_context(CTX)
    srv.kill()
    log = {"attempted": {}, "acked": [], "rejected": [], "unknown": {}}
    seen = []
    for k in range(KILLS):
        seen.append(_round(srv, rng, log, k))
        srv.start()
        _verify(srv, log)
        srv.kill()
    # every point really killed the server (asserted in _round), each at least once
    assert len(seen) >= 25 and set(POINTS) <= set(seen) and "random" in seen
    assert len(log["acked"]) > KILLS  # the rounds did real work
    print(f"{len(log['acked'])} acked, {len(log['rejected'])} rejected, "
          f"history checks {log['check_seconds']:.1f}s")


# The server killed at each fault point (_round's even indexes) and at a random moment
# (an odd one), PostgreSQL killed between them: 8 kills.
PG_SCHEDULE = (0, "postgres", 2, 1, "postgres", 4, 6, "postgres")


def _pg_round(srv, pg, rng: random.Random, log: dict) -> None:
    """Writers commit through a running server until PostgreSQL is SIGKILLed under them
    (once some commits were acknowledged); it restarts (crash recovery) and the same
    server, reconnecting, must show every acknowledged commit."""
    srv.start()
    stop, lock = threading.Event(), threading.Lock()
    acked = len(log["acked"])
    threads = [threading.Thread(target=_writer, args=(srv, w, stop, log, lock,
                                                      random.Random(rng.random())))
               for w in range(WRITERS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(log["acked"]) < acked + 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 0.3))
    pg.kill()
    stop.set()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a writer did not notice the database was gone"
    assert len(log["acked"]) >= acked + 3, "no commit was acknowledged before the kill"
    pg.start()


def test_dur_02_pg_sigkill_of_the_server_and_of_postgresql_loses_nothing(server_process):
    """DUR-02 on the PostgreSQL store: the server SIGKILLed at every fault point and at
    random moments, and PostgreSQL itself SIGKILLed under 4 writers; after each, every
    acknowledged commit is there exactly once (the history checker) and audit matches."""
    from tests.pg import start_postgres
    pg = start_postgres()  # its own: this test kills it
    try:
        rng = random.Random(20261204)
        srv = server_process()
        srv.args = ["--store", "postgres", "--dsn", pg.dsn()]
        srv.start()
        srv.client().create_context(CTX)
        srv.kill()
        log = {"attempted": {}, "acked": [], "rejected": [], "unknown": {}}
        seen = []
        for k in PG_SCHEDULE:
            if k == "postgres":
                _pg_round(srv, pg, rng, log)
                seen.append("postgres")
            else:
                seen.append(_round(srv, rng, log, k))
                srv.start()
            _verify(srv, log)
            srv.kill()
        assert set(POINTS) <= set(seen) and {"random", "postgres"} <= set(seen), seen
        assert len(log["acked"]) > len(PG_SCHEDULE)
        print(f"{len(log['acked'])} acked, {len(log['rejected'])} rejected, "
              f"history checks {log['check_seconds']:.1f}s")
    finally:
        pg.remove()
