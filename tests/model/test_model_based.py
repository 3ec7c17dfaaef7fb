"""Model-based test (issue 3): random transactions, inputs, activations, retries and stale
"concurrent session" transactions, run against the real server (gRPC + LMDB) and against the
independent reference model in `reference.py`; after every step every frame, relation,
revision and the cognitive tick must agree, and every rejection must carry the predicted
reason (and op index; for TX_CONFLICT, the predicted changed boundaries). Observations a step
touched are compared after it, all of them at the end of each example.

At the end of each example the context's history is checked with `history.check_history`
and the server's own audit must match.
"""
from __future__ import annotations

import collections
import itertools
import os
import uuid

import grpc
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import event as _event, note as _note
from hypothesis.errors import InvalidArgument
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, invariant, precondition, rule,
                                 run_state_machine_as_test)

from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError

from history import check_history
from reference import ACTIVE, RETIRING, Model, Rejected, Tx, render_tx

FRAME_IDS = ("a", "b", "c", "d", "e")
BODIES = ("(v 0)", "(v 1)", "(v 2)")
SESSIONS = ("s1", "s2")
MAX_INPUTS = 16   # inputs per example from the `input` rule
MAX_BATCHES = 16  # ... and with the tool results of `advance_ticks`
# How many examples run the history checker at their end (reading every event back).
HISTORY_EVERY = int(os.environ.get("MORPHZ_MODEL_HISTORY_EVERY", "8"))

RECEIPT_KEYS = ("revision", "base_version", "cognitive_tick", "event_ref", "rebased",
                "rebased_from", "replayed")
STATS: collections.Counter = collections.Counter()  # what the run exercised (printed)


def _count(what: str) -> None:
    STATS[what] += 1
    try:
        _event(what)
    except InvalidArgument:  # a directed sequence, outside hypothesis
        pass


def note(text: str) -> None:
    try:
        _note(text)
    except InvalidArgument:
        print(text)


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs), None
    except MorphzError as e:
        return None, e


class MindMachine(RuleBasedStateMachine):
    client: TransactionClient = None  # set by the test
    examples = itertools.count()

    def __init__(self) -> None:
        super().__init__()
        self.example = next(self.examples)
        self.ctx = f"model-{uuid.uuid4().hex[:16]}"
        self.client.create_context(self.ctx)
        self.model = Model()
        self.rids = (f"r{i}" for i in itertools.count())
        self.sent: list[Tx] = []                    # transactions sent with a request id
        self.receipts: dict[str, dict] = {}         # request id -> first acknowledged receipt
        self.event_requests: dict[str, tuple] = {}  # request id -> (session, kind, text)
        self.acked: list[dict] = []
        self.rejected: list[dict] = []
        self.obs_to_check: set[str] = set()
        self.status_due, self.seen_events = True, 1

    # -- generation --------------------------------------------------------------------
    def _existing(self, state: str = "") -> list[str]:
        return sorted(f for f, v in self.model.frames.items() if not state or v.state == state)

    def _frame(self, data, prefer: list[str] = ()) -> str:
        """Mostly a frame that exists (or the preferred ones), sometimes any id of the pool."""
        pool = list(prefer) or self._existing()
        if pool and data.draw(st.integers(0, 5)):
            return data.draw(st.sampled_from(pool))
        return data.draw(st.sampled_from(FRAME_IDS))

    def _new_id(self, data) -> str:
        fresh = [f for f in FRAME_IDS if f not in self.model.frames]
        if fresh and data.draw(st.integers(0, 3)):
            return data.draw(st.sampled_from(fresh))
        return data.draw(st.sampled_from(FRAME_IDS))

    def _any_ref(self, data) -> str:
        # @e0 .. the next event's seq: runtime events, observations, and one not yet written
        return f"@e{data.draw(st.integers(0, self.model.event_count))}"

    def _observation_ref(self, data) -> str:
        seqs = sorted(self.model.observations)
        if seqs and data.draw(st.integers(0, 4)):
            return f"@e{data.draw(st.sampled_from(seqs))}"
        return self._any_ref(data)

    def _target(self, data) -> str:
        if data.draw(st.integers(0, 3)) == 0:
            return self._observation_ref(data)
        return self._frame(data)

    def _sources(self, data, fid: str) -> tuple:
        out = []
        for _ in range(data.draw(st.integers(1, 2))):
            pick = data.draw(st.integers(0, 9))
            if pick < 6:  # a frame, often one on its way out
                others = [f for f in self._existing() if f != fid]
                s = self._frame(data, [f for f in self._existing(RETIRING) if f != fid]
                                if pick < 3 else others)
            else:
                s = self._observation_ref(data)
            if s not in out:
                out.append(s)
        return tuple(out)

    def _op(self, data) -> tuple:
        if len(self.model.frames) < 2 and data.draw(st.integers(0, 3)):
            kind = data.draw(st.sampled_from(("create", "derive")))
        else:
            kind = data.draw(st.sampled_from(
                ("create", "derive", "derive", "revise", "revise", "retire", "retire",
                 "retire", "restore", "protect", "unprotect", "relate", "relate", "relate",
                 "unrelate")))
        body = data.draw(st.sampled_from(BODIES))
        if kind == "create":
            return ("create", self._new_id(data), body)
        if kind == "derive":
            fid = self._new_id(data)
            return ("derive", fid, self._sources(data, fid), body)
        if kind == "revise":
            fid = self._frame(data)
            return ("revise", fid, self._sources(data, fid) if data.draw(st.booleans())
                    else None, body)
        if kind == "relate":
            return self._relate(data)
        if kind == "unrelate":
            edges = sorted(self.model.relations)
            if edges and data.draw(st.integers(0, 2)):
                return ("unrelate",) + data.draw(st.sampled_from(edges))
            return ("unrelate", self._frame(data), "supersedes", self._frame(data))
        chains = sorted((o, sup) for (sup, n, o) in self.model.relations if n == "supersedes")
        if kind == "retire" and chains and data.draw(st.integers(0, 2)) == 0:
            # an old frame and its successor at once (a chain of successors)
            return (kind, tuple(data.draw(st.permutations(data.draw(st.sampled_from(chains))))))
        retired = self._existing("retired")
        if kind == "restore" and retired and data.draw(st.booleans()):
            return (kind, (data.draw(st.sampled_from(retired)),))
        n = data.draw(st.sampled_from((1, 1, 2, 3) if kind == "retire" else (1, 2)))
        return (kind, tuple(dict.fromkeys(self._target(data) for _ in range(n))))

    def _relate(self, data) -> tuple:
        """Mostly `successor supersedes old` where the successor cites old (or may)."""
        cites = [(f, s) for f, v in sorted(self.model.frames.items()) for s in v.sources
                 if not s.startswith("@")]
        if cites and data.draw(st.integers(0, 2)):
            succ, old = data.draw(st.sampled_from(cites))
            return ("relate", succ, "supersedes", old)
        name = data.draw(st.sampled_from(("supersedes", "supersedes", "supports")))
        return ("relate", self._frame(data), name, self._frame(data))

    def _succession(self, data) -> list:
        """The induction pattern of seed 002, whole or in part, in some order: derive a
        successor from old frames, relate it as superseding them, retire them."""
        pool = (data.draw(st.integers(0, 2)) and self._existing(RETIRING)) or self._existing()
        olds = sorted(set(data.draw(st.lists(st.sampled_from(pool or list(FRAME_IDS)),
                                             min_size=1, max_size=2))))
        succ = self._new_id(data) if data.draw(st.booleans()) else self._frame(data)
        ops = [("derive" if succ not in self.model.frames else "revise", succ,
                tuple(o for o in olds if o != succ) or ("@e0",),
                data.draw(st.sampled_from(BODIES)))]
        ops += [("relate", succ, "supersedes", o) for o in olds]
        if data.draw(st.integers(0, 2)):
            ops.append(("retire", tuple(olds)))
        keep = data.draw(st.lists(st.integers(0, 3), min_size=len(ops), max_size=len(ops)))
        ops = [o for o, k in zip(ops, keep) if k] or ops[:1]
        return data.draw(st.permutations(ops))

    def _tx(self, data, base: int, ops=None) -> Tx:
        if ops is None:
            ops = [self._op(data) for _ in range(data.draw(st.integers(1, 3)))]
        reason = "tidy" if data.draw(st.integers(0, 9)) else ""
        rid = next(self.rids) if data.draw(st.integers(0, 3)) else ""
        return Tx(base, reason, list(ops), rid)

    # -- running one transaction on both sides ------------------------------------------
    def _run_tx(self, tx: Tx) -> None:
        text = render_tx(tx)
        note(f"tx {tx.request_id or '-'}: {text}")
        try:
            expected, expected_err = self.model.commit(tx), None
        except Rejected as e:
            expected, expected_err = None, e
        got, err = _call(self.client.commit, self.ctx, text, request_id=tx.request_id)
        if tx.request_id and tx not in self.sent:
            self.sent.append(tx)
        if expected_err is not None:
            assert err is not None, \
                f"server committed {text} but the model rejects it with " \
                f"{expected_err.reason} (op {expected_err.op_index}, {expected_err.ref}); " \
                f"receipt {got}"
            assert err.reason == expected_err.reason, \
                f"{text}: server rejected with {err.reason} {err.details}, model with " \
                f"{expected_err.reason} (op {expected_err.op_index}, {expected_err.ref})"
            if expected_err.op_index is not None:
                assert err.details.get("op_index") == expected_err.op_index, (err.details, text)
            if expected_err.reason == "TX_CONFLICT":
                assert err.details["changed"] == expected_err.changed, (err.details, text)
            _count(f"tx rejected: {err.reason}")
            self.rejected.append({"request_id": tx.request_id, "text": text,
                                  "reason": err.reason})
            return
        assert err is None, \
            f"server rejected {text} with {err.reason} {err.details}; the model commits it: " \
            f"{expected}"
        for k in RECEIPT_KEYS:
            assert got[k] == expected[k], (k, got, expected, text)
        # The receipt tells what capacity is released now and what only after the window.
        cap, want = got["capacity"], expected["capacity"]
        for k in ("released_now", "released_after_window"):
            assert set(want[k]) <= set(cap[k]) <= set(want[k + "_may"]), \
                f"{text}: receipt {k} {sorted(cap[k])}, model {want[k]} " \
                f"(may also name {sorted(set(want[k + '_may']) - set(want[k]))})"
        _count("tx replayed" if got["replayed"] else "tx rebased" if got["rebased"]
               else "tx committed")
        if any(not r.startswith("@") for r in cap["released_now"]):
            _count("tx retired a frame by the successor rule")
        if not got["replayed"]:
            self.seen_events += 1  # the receipt named the transaction's event
        if got["replayed"]:
            first = self.receipts[tx.request_id]
            assert {**got, "replayed": False} == first, (got, first)
        else:
            if tx.request_id:
                self.receipts[tx.request_id] = got
            self.acked.append({"request_id": tx.request_id, "text": text, "receipt": got})
        for op in tx.ops:
            if op[0] in ("retire", "restore", "protect", "unprotect"):
                self.obs_to_check.update(t for t in op[1] if t.startswith("@"))

    # -- rules ----------------------------------------------------------------------------
    @rule(data=st.data())
    def commit_at_latest(self, data):
        self._run_tx(self._tx(data, self.model.revision))

    @rule(data=st.data())
    def commit_succession(self, data):
        """Successor structures, at the latest revision or from an older one."""
        base = self.model.revision
        if data.draw(st.integers(0, 3)) == 0:
            base = data.draw(st.integers(0, base))
        self._run_tx(self._tx(data, base, self._succession(data)))

    @rule(data=st.data())
    def commit_from_concurrent_session(self, data):
        """A transaction another session wrote against an older revision (rarely a future
        one): rebased when none of its boundaries changed since its base, else TX_CONFLICT."""
        if data.draw(st.integers(0, 19)) == 0:
            base = self.model.revision + 1
        else:
            base = data.draw(st.integers(max(0, self.model.revision - 6), self.model.revision))
        self._run_tx(self._tx(data, base))

    @precondition(lambda self: self.sent)
    @rule(data=st.data())
    def retry(self, data):
        """Same request id and payload: the original receipt again, nothing changes (a
        request that was rejected is evaluated again); same id, other payload: rejected."""
        if data.draw(st.integers(0, 2)):
            self._run_tx(data.draw(st.sampled_from(self.sent)))
            return
        rids = sorted(self.receipts) + sorted(self.event_requests)
        if not rids:
            return
        tx = self._tx(data, self.model.revision)
        tx.request_id = data.draw(st.sampled_from(rids))
        self._run_tx(tx)

    @precondition(lambda self: len(self.model.observations) < MAX_INPUTS)
    @rule(data=st.data(), session=st.sampled_from(SESSIONS),
          kind=st.sampled_from(("user-message", "tool-result", "continuation")))
    def input(self, data, session, kind):
        """A new input, or a retry of one (same payload: the original reply; other: rejected)."""
        if self.event_requests and data.draw(st.integers(0, 3)) == 0:
            rid = data.draw(st.sampled_from(sorted(self.event_requests)))
            session, kind, text = self.event_requests[rid]
            if data.draw(st.booleans()):
                text += " (edited)"
        else:
            rid = next(self.rids) if data.draw(st.booleans()) else ""
            text = f"{kind} {len(self.model.events)}"
        self._append(session, kind, text, rid)

    def _append(self, session, kind, text, rid):
        note(f"input {rid or '-'}: {session} {kind} {text!r}")
        try:
            expected, expected_err = self.model.append_event(session, kind, text, rid), None
        except Rejected as e:
            expected, expected_err = None, e
        got, err = _call(self.client.append_event, self.ctx, session, kind, text,
                         request_id=rid)
        if expected_err is not None:
            assert err is not None and err.reason == expected_err.reason, (err, expected_err)
            _count(f"input rejected: {err.reason}")
            return
        assert err is None, err
        assert (got["ref"], got["seq"], got["replayed"]) == \
            (expected["ref"], expected["seq"], expected["replayed"]), (got, expected)
        if rid and not got["replayed"]:
            self.event_requests[rid] = (session, kind, text)
            self.acked.append({"request_id": rid, "text": text, "receipt": got})
        self.obs_to_check.add(got["ref"])

    @rule(data=st.data(), session=st.sampled_from(SESSIONS + ("nobody",)))
    def activate_or_deliver(self, data, session):
        if self.model.activations and data.draw(st.integers(0, 2)) == 0:
            act = data.draw(st.sampled_from(sorted(self.model.activations)))
            note(f"deliver {act}")
            self.model.deliver(act)
            self.client.deliver(self.ctx, act)
        else:
            self._activate(session)

    def _activate(self, session):
        note(f"activate {session}")
        try:
            expected, expected_err = self.model.activate(session), None
        except Rejected as e:
            expected, expected_err = None, e
        got, err = _call(self.client.activate, self.ctx, session)
        if expected_err is not None:
            assert err is not None and err.reason == expected_err.reason, (err, expected_err)
            return
        assert err is None, err
        for k in ("id", "claimed", "tick", "tick_advanced", "root"):
            assert got[k] == expected[k], (k, got, expected)
        assert sorted(got["retired_frames"]) == sorted(expected["retired_frames"]), \
            (got, expected)
        if got["retired_frames"]:
            _count("activation retired a frame (window over)")

    @precondition(lambda self: len(self.model.observations) < MAX_BATCHES)
    @rule(n=st.sampled_from((2, 4, 8)))
    def advance_ticks(self, n):
        """n claimed batches, each holding one tool result: the clock advances n times."""
        for _ in range(n):
            self._append("s1", "tool-result", f"tool output {len(self.model.events)}", "")
            self._activate("s1")
            if len(self.model.observations) >= MAX_BATCHES:
                break

    # -- comparison -----------------------------------------------------------------------
    def _compare(self, with_status: bool = True) -> None:
        listed = self.client.list_frames(self.ctx)
        m = self.model
        assert listed["revision"] == m.revision, (listed["revision"], m.revision)
        if with_status:
            status = self.client.status(self.ctx)
            assert (status["revision"], status["cognitive_tick"], status["event_count"]) == \
                (m.revision, m.tick, m.event_count), (status, m.revision, m.tick, m.event_count)
        got_frames, got_edges = {}, set()
        for f in listed["frames"]:
            got_frames[f["id"]] = {
                "body": f["body"], "revision": f["revision"], "state": f["state"],
                "protected": f["protected"], "sources": f["sources"],
                # the due tick of the open request (a retired frame keeps its old request)
                "due_tick": f["retire"]["due_tick"] if f.get("retire") and
                f["state"] == RETIRING else None,
                "generation": f["generation"]}
            got_edges.update((e["subject"], e["name"], e["object"]) for e in f["relations"])
        want = m.frame_views()
        for fid in sorted(set(want) | set(got_frames)):
            assert got_frames.get(fid) == want.get(fid), \
                f"frame {fid}: server {got_frames.get(fid)} model {want.get(fid)}"
        assert got_edges == m.relations, (got_edges, m.relations)

    def _compare_observations(self, refs) -> None:
        views = self.model.observation_views()
        for r in sorted(refs):
            if r not in views:
                continue
            ev = self.client.get_event(self.ctx, r)
            assert {"state": ev["state"] or ACTIVE, "protected": ev["protected"]} == views[r], \
                (r, ev, views[r])

    @invariant()
    def check_step(self) -> None:
        """After every step: frames, relations, revision, touched observations; the tick and
        the event count after steps that could change them without a receipt."""
        self._compare(with_status=self.status_due or self.model.event_count != self.seen_events)
        self.status_due, self.seen_events = False, self.model.event_count
        self._compare_observations(self.obs_to_check)
        self.obs_to_check.clear()

    def teardown(self) -> None:
        try:
            self._compare()
            self._compare_observations(self.model.observation_views())
            if self.example % HISTORY_EVERY == 0:
                problems = check_history(self.client, self.ctx, self.acked, self.rejected)
                assert problems == [], problems
            assert self.client.audit(self.ctx)["match"]
        finally:
            super().teardown()


MindMachine = settings(max_examples=200, stateful_step_count=30, deadline=None, database=None,
                       suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                              HealthCheck.filter_too_much])(MindMachine)


@pytest.fixture(scope="module")
def model_client(address):
    channel = grpc.insecure_channel(address)
    yield TransactionClient(channel, timeout=30)
    channel.close()


# The in-process server's tracing draws span ids from `random` while strategies draw.
@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
def test_conc_dur_model_based_transactions_match_reference_model(model_client):
    MindMachine.client = model_client
    STATS.clear()
    run_state_machine_as_test(MindMachine)
    print("model-based run:", dict(sorted(STATS.items())))
    # The run must have exercised what it claims to check.
    # (Windows running out are rarer: a few per run; the directed sequences cover them.)
    for what in ("tx committed", "tx rebased", "tx replayed", "tx rejected: TX_CONFLICT",
                 "tx rejected: IDEMPOTENCY_MISMATCH", "tx retired a frame by the successor rule"):
        assert STATS[what] > 0, (what, STATS)


# -- directed sequences --------------------------------------------------------------------
# Shapes the random walk reaches rarely, run through the same machine (model and server
# side by side, full comparison after every step).
T, R = "tidy", "retire"
DIRECTED = {
    # CORE-09/11/12: the window runs out after 8 claimed batches unless cancelled.
    "window_runs_out_unless_cancelled": [
        ("tx", "", [("create", "a", "(v 0)"), ("create", "b", "(v 0)"), ("create", "c", "(v 0)")]),
        ("tx", T, [("retire", ("a", "b", "c"))]),
        ("ticks", 4),
        ("tx", T, [("revise", "b", None, "(v 1)"), ("retire", ("a",))]),
        ("ticks", 2),
        ("tx", T, [("restore", ("c",)), ("retire", ("c",))]),
        ("ticks", 2),
        ("ticks", 8)],
    # CORE-06/23: a source must exist when the transaction is validated; the transaction's
    # own event (@e1 here) does not exist yet.
    "derive_from_its_own_event": [("tx", "", [("derive", "a", ("@e1",), "(v 0)")])],
    "retire_its_own_event": [("tx", T, [("retire", ("@e1",))])],
    # CORE-21: capacity the receipt names (net effect of the transaction).
    "retire_then_revise_releases_nothing_later": [
        ("tx", "", [("create", "a", "(v 0)")]),
        ("tx", T, [("retire", ("a",)), ("revise", "a", None, "(v 1)")])],
    "retire_then_restore_observation_releases_nothing_now": [
        ("input", "tool-result"),
        ("tx", T, [("retire", ("@e1",)), ("restore", ("@e1",))])],
    # CORE-13: the successor rule judged on the final state, whatever the frames are called.
    "successor_chain_a_b_c": [
        ("tx", "", [("create", "a", "(v 0)")]),
        ("tx", "", [("derive", "b", ("a",), "(v 1)"), ("relate", "b", "supersedes", "a")]),
        ("tx", "", [("derive", "c", ("b",), "(v 2)"), ("relate", "c", "supersedes", "b")]),
        ("tx", T, [("retire", ("a", "b"))])],
    "successor_chain_c_b_a": [
        ("tx", "", [("create", "c", "(v 0)")]),
        ("tx", "", [("derive", "b", ("c",), "(v 1)"), ("relate", "b", "supersedes", "c")]),
        ("tx", "", [("derive", "a", ("b",), "(v 2)"), ("relate", "a", "supersedes", "b")]),
        ("tx", T, [("retire", ("c", "b"))])],
    # CORE-13: restoring a successor gives a retiring frame a non-retired successor.
    "restoring_a_successor_retires_the_old_frame": [
        ("tx", "", [("create", "o", "(v 0)"), ("derive", "s", ("o",), "(v 1)"),
                    ("relate", "s", "supersedes", "o")]),
        ("tx", T, [("retire", ("s",))]),
        ("ticks", 8),
        ("tx", T, [("retire", ("o",))]),
        ("tx", "", [("restore", ("s",))])],
}


# Sequences whose point is a rejection; in all the others every transaction must commit
# (both sides rejecting alike would otherwise pass without reaching the shape named).
REJECTING = {"derive_from_its_own_event", "retire_its_own_event"}


@pytest.mark.parametrize("name", list(DIRECTED))
def test_conc_dur_directed_sequences_match_reference_model(model_client, name):
    MindMachine.client = model_client
    machine = MindMachine()
    for step in DIRECTED[name]:
        if step[0] == "tx":
            before = machine.model.revision
            machine._run_tx(Tx(machine.model.revision, step[1], list(step[2])))
            committed = machine.model.revision > before
            assert committed != (name in REJECTING), (name, step)
        elif step[0] == "input":
            machine._append("s1", step[1], "x" * 10, "")
        else:
            machine.advance_ticks(step[1])
        machine.check_step()
    machine.teardown()
