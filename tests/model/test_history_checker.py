"""The history checker (issue 3) on a real history written by 8 racing writers (no problem
may be reported), and on doctored inputs (each doctoring must be reported)."""
from __future__ import annotations

import copy
import threading

import grpc
import pytest

from morphz.services.server.app import AllInOne, ServerConfig
from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError

from history import check_events, check_history, observe, observe_revisions, read_history
from reference import frame_view, mind_view

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
    events, _ = read_history(client, ctx)
    observed = observe_revisions(client, ctx, events)
    # Every revision was observed, and the shared frame changed at one per round.
    assert len(observed) == 1 + client.status(ctx)["revision"]
    assert len({v["frames"]["shared"]["body"] for v in observed[1:]}) == 1 + ROUNDS
    assert check_history(client, ctx, acked, rejected, observed) == []
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


def _tx_event(seq: int, text: str, request_id: str = "", session: str = "") -> dict:
    return {"seq": seq, "ref": f"@e{seq}", "kind": "context-tx", "text": text,
            "request_id": request_id, "session": session}


def _event(seq: int, kind: str) -> dict:
    return {"seq": seq, "ref": f"@e{seq}", "kind": kind, "text": ""}


def _view(events: int, revision: int, frames: dict, tick: int = 0, relations=(),
          order=None) -> dict:
    """An observation: frames as {id: (body, revision[, state])}."""
    return mind_view(revision, tick, events,
                     {fid: frame_view(f[0], f[1], f[2] if len(f) > 2 else "active", False, (), 0,
                                      None) for fid, f in frames.items()},
                     relations, order if order is not None else sorted(frames), {}, {})


def test_conc_dur_history_checker_reports_a_lost_update():
    """Two transactions accepted from base 1 that both revised frame f: the second one lost
    the first one's update, as the observed states show. A rebase over an independent
    boundary is fine."""
    events = [_event(0, "context-created"),
              _tx_event(1, "(context-tx (base-version 0) (create f (v 0)) (create g (v 0)))"),
              _tx_event(2, "(context-tx (base-version 1) (revise f (v 1)))"),
              _tx_event(3, "(context-tx (base-version 1) (revise g (v 1)))"),
              _tx_event(4, "(context-tx (base-version 1) (revise f (v 2)))")]
    observed = [_view(1, 0, {}),
                _view(2, 1, {"f": ("(v 0)", 1), "g": ("(v 0)", 1)}),
                _view(3, 2, {"f": ("(v 1)", 2), "g": ("(v 0)", 1)}),
                _view(4, 3, {"f": ("(v 1)", 2), "g": ("(v 1)", 2)}),
                _view(5, 4, {"f": ("(v 2)", 3), "g": ("(v 1)", 2)})]
    problems = check_events(events, 4, [], [], observed)
    assert len(problems) == 1, problems
    assert "lost update: revision 4" in problems[0] and "frame:f (revision 2)" in problems[0]
    assert "same base version accepted twice" in problems[0]
    # Judged from what was observed: had revision 2 changed nothing, nothing was lost.
    unchanged = observed[:2] + [_view(3, 2, {"f": ("(v 0)", 1), "g": ("(v 0)", 1)})] + \
        [_view(4, 3, {"f": ("(v 0)", 1), "g": ("(v 1)", 2)}),
         _view(5, 4, {"f": ("(v 2)", 2), "g": ("(v 1)", 2)})]
    assert check_events(events, 4, [], [], unchanged) == []
    # Without observations no lost update is judged.
    assert check_events(events, 4, [], []) == []
    # A rebased exact-version operation is reported too.
    events.append(_tx_event(5, "(context-tx (base-version 3) (checkpoint cp))"))
    assert any("exact version" in p for p in check_events(events, 5, [], []))


def test_conc_dur_history_checker_reports_a_lost_update_past_a_too_small_footprint():
    """A rollback names only its checkpoint, yet it changed frame a (observed): the
    transaction based before it that revised a was accepted over that change."""
    events = [_event(0, "context-created"),
              _tx_event(1, "(context-tx (base-version 0) (create a (v 0)))"),
              _tx_event(2, "(context-tx (base-version 1) (checkpoint cp))"),
              _tx_event(3, "(context-tx (base-version 2) (revise a (v 1)))"),
              _tx_event(4, "(context-tx (base-version 3) (rollback cp))"),
              _tx_event(5, "(context-tx (base-version 3) (revise a (v 2)))")]
    observed = [_view(1, 0, {}), _view(2, 1, {"a": ("(v 0)", 1)}),
                _view(3, 2, {"a": ("(v 0)", 1)}), _view(4, 3, {"a": ("(v 1)", 2)}),
                _view(5, 4, {"a": ("(v 0)", 3)}), _view(6, 5, {"a": ("(v 2)", 4)})]
    problems = check_events(events, 5, [], [], observed)
    assert problems == ["lost update: revision 5 was accepted from base 3 although frame:a "
                        "(revision 4) changed after it (the same base version accepted twice "
                        "for the same boundary)"], problems


def test_conc_dur_history_checker_reports_a_lost_update_past_a_window_retirement():
    """An activation retired frame a at tick 8 (revision 2, no new revision); a transaction
    based on revision 2 that had not seen tick 8 restored a over it. Having seen tick 8
    (declared, or by naming the activation) it loses nothing."""
    events = [_event(0, "context-created"),
              _tx_event(1, "(context-tx (base-version 0) (create a (v 0)))"),
              _tx_event(2, '(context-tx (base-version 1) (reason "tidy") (retire a))'),
              _event(3, "tool-result"), _event(4, "activation"),
              _tx_event(5, "(context-tx (base-version 2) (base-tick 7) (restore a))")]
    observed = [_view(1, 0, {}), _view(2, 1, {"a": ("(v 0)", 1)}),
                _view(3, 2, {"a": ("(v 0)", 1, "retiring")}, tick=7),
                _view(4, 2, {"a": ("(v 0)", 1, "retiring")}, tick=7),
                _view(5, 2, {"a": ("(v 0)", 1, "retired")}, tick=8),
                _view(6, 3, {"a": ("(v 0)", 1)}, tick=8)]
    problems = check_events(events, 3, [], [], observed)
    assert problems == ["lost update: revision 3 was accepted from base 2, tick 7 although "
                        "life:a (revision 2, tick 8 by the window) changed after it"], problems
    seen = dict(events[5], text="(context-tx (base-version 2) (base-tick 8) (restore a))")
    assert check_events(events[:5] + [seen], 3, [], [], observed) == []
    blind = events[:5] + [dict(events[5], text="(context-tx (base-version 2) (restore a))")]
    named = [{"request_id": "", "receipt": {"event_ref": "@e5", "revision": 3},
              "read_tick": 8}]
    assert check_events(blind, 3, named, [], observed) == []
    # No read tick at all: the retirement at its base revision was not seen.
    assert len(check_events(blind, 3, [], [], observed)) == 1
    # A rollback rewrites every lifecycle: it must have seen the latest retirement.
    rollback = events[:5] + [dict(events[5], text="(context-tx (base-version 2) (rollback cp))")]
    problems = check_events(rollback, 3, [], [], observed)
    assert len(problems) == 1 and "window (revision 2, tick 8 by the window)" in problems[0], \
        problems


def test_conc_dur_history_checker_reports_a_change_without_a_cause():
    """The observed Mind changed where the history holds no transaction or activation (an
    input), or an activation changed more than lifecycles."""
    events = [_event(0, "context-created"),
              _tx_event(1, "(context-tx (base-version 0) (create a (v 0)))"),
              _event(2, "tool-result"), _event(3, "activation")]
    observed = [_view(1, 0, {}), _view(2, 1, {"a": ("(v 0)", 1)}),
                _view(3, 1, {"a": ("(v 1)", 1)}), _view(4, 1, {"a": ("(v 2)", 1)}, tick=1)]
    problems = check_events(events, 1, [], [], observed)
    assert len(problems) == 2, problems
    assert "between @e2 and @e3 without a transaction or activation: frame:a" in problems[0]
    assert "the activation @e3 changed frame:a" in problems[1]


# The lost update once found in the server: a transaction based before a rollback revised a
# frame the rollback rewrote, and was rebased over it (the rollback stamped only its
# checkpoint). Rules version 1 still decides that way.
ROLLBACK_SCENARIO = ["(context-tx (base-version 0) (create a (v 0)))",
                     "(context-tx (base-version 1) (checkpoint cp))",
                     "(context-tx (base-version 2) (revise a (v 1)))",
                     "(context-tx (base-version 3) (rollback cp))",
                     "(context-tx (base-version 3) (revise a (v 2)))"]


def _run_observed(client, ctx: str, texts: list[str]) -> tuple[list, list, list]:
    """Commit each text in turn, observing the Mind after each as the model test does."""
    acked, rejected, observed = [], [], [observe(client, ctx)]
    for text in texts:
        try:
            acked.append({"request_id": "", "text": text, "receipt": client.commit(ctx, text)})
        except MorphzError as e:
            rejected.append({"request_id": "", "text": text, "reason": e.reason})
        observed.append(observe(client, ctx))
    return acked, rejected, observed


@pytest.fixture(scope="module")
def rules_v1_client(tmp_path_factory):
    app = AllInOne(ServerConfig(data_dir=str(tmp_path_factory.mktemp("lmdb-rules-v1")),
                                listen="127.0.0.1:0", rules_version=1)).start()
    channel = grpc.insecure_channel(f"127.0.0.1:{app.port}")
    yield TransactionClient(channel, timeout=30)
    channel.close()
    app.stop(grace=1)


def test_conc_06_history_checker_catches_a_rollback_stamping_only_its_checkpoint(
        rules_v1_client, client):
    """Rules version 1 (a rollback stamps only checkpoint:NAME) accepts the last revise and
    loses the rollback's change: the checker, judging from the observed states, reports it.
    The current rules reject that commit, and the checker finds nothing."""
    rules_v1_client.create_context("rollback-v1")
    acked, rejected, observed = _run_observed(rules_v1_client, "rollback-v1", ROLLBACK_SCENARIO)
    assert rejected == [] and acked[-1]["receipt"]["rebased"]
    assert check_history(rules_v1_client, "rollback-v1", acked, rejected, observed) == [
        "lost update: revision 5 was accepted from base 3 although frame:a (revision 4) "
        "changed after it (the same base version accepted twice for the same boundary)"]

    client.create_context("rollback-current")
    acked, rejected, observed = _run_observed(client, "rollback-current", ROLLBACK_SCENARIO)
    assert [r["reason"] for r in rejected] == ["TX_CONFLICT"] and len(acked) == 4
    assert check_history(client, "rollback-current", acked, rejected, observed) == []
