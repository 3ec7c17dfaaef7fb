"""The history checker (issue 3) on a real history written by 8 racing writers (no problem
may be reported), and on doctored inputs (each doctoring must be reported)."""
from __future__ import annotations

import copy
import threading

import grpc
import pytest

from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError

from history import check_events, check_history, read_history

WRITERS = 8
ROUNDS = 4


def _race(address: str, ctx: str) -> tuple[list[dict], list[dict]]:
    """8 threads, each with its own channel, racing from one shared base per round: on the
    shared frame one wins per round, each own frame commits (rebased), each writer retries
    one request with the same payload (replayed) and one with another payload (rejected)."""
    acked: list[dict] = []
    rejected: list[dict] = []
    lock = threading.Lock()
    base = [0]
    with grpc.insecure_channel(address) as ch:
        TransactionClient(ch).commit(ctx, "(context-tx (base-version 0) (create shared (v 0)) "
                                     + " ".join(f"(create own-{i} (v 0))" for i in range(WRITERS))
                                     + ")")
        control = TransactionClient(ch)

        def read_base() -> None:
            base[0] = control.status(ctx)["revision"]

        barrier = threading.Barrier(WRITERS, action=read_base)
        errors: list[BaseException] = []

        def writer(i: int) -> None:
            try:
                with grpc.insecure_channel(address) as wch:
                    c = TransactionClient(wch, timeout=30)
                    for r in range(ROUNDS):
                        barrier.wait()
                        b = base[0]
                        sent = [
                            (f"w{i}-r{r}-shared", f"(context-tx (base-version {b}) "
                                                  f"(revise shared (v {i} {r})))"),
                            (f"w{i}-r{r}-own", f"(context-tx (base-version {b}) "
                                               f"(revise own-{i} (v {r})) "
                                               f"(relate own-{i} supports shared))"),
                            (f"w{i}-r{r}-edge", f"(context-tx (base-version {b}) "
                                                f"(relate shared tracks own-{(i + r) % WRITERS}))"),
                        ]
                        # a retry of the first request, and the same id with another payload
                        sent.append(sent[0])
                        sent.append((sent[1][0], sent[1][1].replace("(v ", "(w ")))
                        for rid, text in sent:
                            try:
                                receipt = c.commit(ctx, text, request_id=rid)
                                with lock:
                                    acked.append({"request_id": rid, "text": text,
                                                  "receipt": receipt})
                            except MorphzError as e:
                                with lock:
                                    rejected.append({"request_id": rid, "text": text,
                                                     "reason": e.reason})
            except BaseException as e:  # surfaced by the caller
                errors.append(e)
                barrier.abort()

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
    return acked, rejected


@pytest.fixture(scope="module")
def raced(address, client):
    name = "history-race"
    client.create_context(name)
    acked, rejected = _race(address, name)
    return name, acked, rejected


def test_conc_dur_history_checker_finds_no_problem_in_racing_writers_history(client, raced):
    ctx, acked, rejected = raced
    reasons = [r["reason"] for r in rejected]
    # The race really raced: rebased commits, conflicts, replays and id mismatches happened.
    assert any(a["receipt"]["rebased"] for a in acked)
    assert any(a["receipt"]["replayed"] for a in acked)
    assert reasons.count("TX_CONFLICT") >= (WRITERS - 1) * ROUNDS
    assert "IDEMPOTENCY_MISMATCH" in reasons
    assert set(reasons) <= {"TX_CONFLICT", "IDEMPOTENCY_MISMATCH"}, reasons
    shared_wins = [a for a in acked if a["request_id"].endswith("-shared")
                   and not a["receipt"]["replayed"]]
    assert len(shared_wins) == ROUNDS  # one winner per round on the shared frame
    assert check_history(client, ctx, acked, rejected) == []
    assert client.audit(ctx)["match"]


@pytest.fixture(scope="module")
def recorded(client, raced):
    ctx, acked, rejected = raced
    events, revision = read_history(client, ctx)
    return events, revision, acked, rejected


def _first_commit(acked: list[dict]) -> dict:
    return next(a for a in acked if "event_ref" in a["receipt"] and not a["receipt"]["replayed"])


def test_conc_dur_history_checker_reports_an_acknowledged_commit_that_is_absent(client, raced):
    ctx, acked, rejected = raced
    events, _ = read_history(client, ctx)
    ghost = copy.deepcopy(_first_commit(acked))
    ghost["request_id"] = "never-committed"
    ghost["receipt"]["event_ref"] = f"@e{len(events) + 5}"
    problems = check_history(client, ctx, acked + [ghost], rejected)
    assert len(problems) == 1 and "never-committed" in problems[0] and "absent" in problems[0]


def test_conc_dur_history_checker_reports_a_receipt_naming_another_requests_event(recorded):
    events, revision, acked, rejected = recorded
    commits = [a for a in acked if "event_ref" in a["receipt"] and not a["receipt"]["replayed"]]
    wrong = copy.deepcopy(commits[0])
    wrong["receipt"]["event_ref"] = commits[1]["receipt"]["event_ref"]
    others = [a for a in acked if a is not commits[0]]
    problems = check_events(events, revision, [wrong] + others, rejected)
    assert any(commits[0]["request_id"] in p and "carries request" in p for p in problems), \
        problems
    bumped = copy.deepcopy(commits[0])
    bumped["receipt"]["revision"] += 1
    problems = check_events(events, revision, [bumped], [])
    assert any("acknowledged as revision" in p for p in problems), problems


def test_conc_dur_history_checker_reports_a_rejected_request_that_appears(recorded):
    events, revision, acked, rejected = recorded
    committed = _first_commit(acked)
    others = [a for a in acked if a["request_id"] != committed["request_id"]]
    claimed_rejected = dict(committed, reason="TX_CONFLICT")
    del claimed_rejected["receipt"]
    problems = check_events(events, revision, others, rejected + [claimed_rejected])
    assert len(problems) == 1, problems
    assert committed["request_id"] in problems[0] and "is in the history" in problems[0]
    # Without a request id the rejected text itself is looked for.
    problems = check_events(events, revision, others,
                            [{"text": committed["text"], "reason": "TX_CONFLICT"}])
    assert len(problems) == 1 and "is in the history" in problems[0], problems


def test_conc_dur_history_checker_reports_gaps_and_double_application(recorded):
    events, revision, acked, rejected = recorded
    assert check_events(events, revision, acked, rejected) == []
    # The context claims a revision its history does not hold.
    assert any("gap" in p for p in check_events(events, revision + 1, acked, rejected))
    # An event cannot be read back.
    holed = list(events)
    holed[3] = None
    problems = check_events(holed, revision, acked, rejected)
    assert any("@e3 is missing" in p for p in problems) and any("gap" in p for p in problems)
    # One request applied twice (a retry that was not recognised).
    twice = list(events) + [dict(events[-1], seq=len(events), ref=f"@e{len(events)}")]
    problems = check_events(twice, revision + 1, acked, rejected)
    assert any("applied 2 times" in p for p in problems), problems


def _tx_event(seq: int, text: str, request_id: str = "") -> dict:
    return {"seq": seq, "ref": f"@e{seq}", "kind": "context-tx", "text": text,
            "request_id": request_id}


def test_conc_dur_history_checker_reports_a_lost_update():
    """Two transactions accepted from base 1 that both wrote frame f: the second one lost
    the first one's update. A rebase over an independent boundary is fine."""
    events = [{"seq": 0, "ref": "@e0", "kind": "context-created", "text": ""},
              _tx_event(1, "(context-tx (base-version 0) (create f (v 0)) (create g (v 0)))"),
              _tx_event(2, "(context-tx (base-version 1) (revise f (v 1)))"),
              _tx_event(3, "(context-tx (base-version 1) (revise g (v 1)))"),
              _tx_event(4, "(context-tx (base-version 1) (revise f (v 2)))")]
    problems = check_events(events, 4, [], [])
    assert len(problems) == 1, problems
    assert "lost update: revision 4" in problems[0] and "frame:f" in problems[0]
    assert "same base version accepted twice" in problems[0]
    # A rebased exact-version operation is reported too.
    events.append(_tx_event(5, "(context-tx (base-version 3) (checkpoint cp))"))
    assert any("exact version" in p for p in check_events(events, 5, [], []))
