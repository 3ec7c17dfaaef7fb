"""Model-based test (issue 3): random transactions of every operation kind, inputs,
activations, retries and stale "concurrent session" transactions, run against the real server
(gRPC + LMDB) and against the independent reference model in `reference.py`; after every step
every frame, relation, the frame order, session states, the revision and the cognitive tick
must agree, and every rejection must carry the predicted reason (and op index; for
TX_CONFLICT, the predicted changed boundaries). Observations a step touched are compared after
it, all of them at the end of each example.

Every state the machine reads is kept; at the end of each example the context's history is
judged from them with `history.check_history` (lost updates by the reference model's rules,
from what the observed states show each transaction and activation changed), and the
server's own audit must match.
"""
from __future__ import annotations

import collections
import itertools
import os
import uuid
from typing import Optional

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

from history import check_history, observe
from reference import ACTIVE, RETIRING, Model, Rejected, Tx, render_tx

FRAME_IDS = ("a", "b", "c", "d", "e")
BODIES = ("(v 0)", "(v 1)", "(v 2)")
SESSIONS = ("s1", "s2")
CHECKPOINTS = ("cp1", "cp2")
OP_KINDS = ("create", "derive", "revise", "retire", "restore", "protect", "unprotect", "relate",
            "unrelate", "place", "checkpoint", "rollback", "drop-checkpoint", "retire-session",
            "restore-session")
MAX_INPUTS = 16   # inputs per example from the `input` and `causal_event` rules
MAX_TICKS = 24    # the clock per example (`advance_ticks`): a window (8) runs out in it
# How many examples run the history checker at their end (reading every event back).
HISTORY_EVERY = int(os.environ.get("MORPHZ_MODEL_HISTORY_EVERY", "1"))
# Examples of the random walk (fewer while working on the model; the suite runs 200).
EXAMPLES = int(os.environ.get("MORPHZ_MODEL_EXAMPLES", "200"))
# The suite draws the same 200 examples every run, but what the server answers (ids,
# group commits) steers the walk, so coverage of rare outcomes is not guaranteed: the
# rarest (a conflict with a rollback) is asserted by the directed sequences instead;
# MORPHZ_MODEL_RANDOM=1 explores new walks (a failure prints its seed).
RANDOM_WALKS = os.environ.get("MORPHZ_MODEL_RANDOM") == "1"

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
        self.inputs = 0
        # Frames the latest window retirement changed (what the next transactions aim at,
        # to meet that change unseen), and the revision before the latest rollback with
        # the frames it changed (what a transaction based before it aims at).
        self.focus: list[str] = []
        self.rolled_back: Optional[tuple[int, list[str]]] = None
        self.observed: list[dict] = [observe(self.client, self.ctx)]  # every state read, in order

    # -- generation --------------------------------------------------------------------
    def _existing(self, state: str = "") -> list[str]:
        return sorted(f for f, v in self.model.frames.items() if not state or v.state == state)

    def _frame(self, data, prefer: list[str] = ()) -> str:
        """Mostly a frame that exists (or the preferred ones), sometimes any id of the pool."""
        pool = list(prefer) or (self.focus if self.focus and data.draw(st.booleans())
                                else self._existing())
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
                 "retire", "restore", "restore", "protect", "protect", "unprotect", "unprotect",
                 "relate", "relate", "relate", "unrelate", "unrelate", "unrelate", "place",
                 "place", "drop-checkpoint")))
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
        if kind == "place":
            where = data.draw(st.sampled_from(("first", "last", "before", "after", "after")))
            # the anchor: mostly another frame, sometimes itself or none (rejected)
            return ("place", self._frame(data), where,
                    self._frame(data) if where in ("before", "after") else "")
        if kind == "drop-checkpoint":
            return (kind, self._checkpoint_name(data, existing=True))
        chains = sorted((o, sup) for (sup, n, o) in self.model.relations if n == "supersedes")
        if kind == "retire" and chains and data.draw(st.integers(0, 2)) == 0:
            # an old frame and its successor at once (a chain of successors)
            return (kind, tuple(data.draw(st.permutations(data.draw(st.sampled_from(chains))))))
        retired = self._existing("retired")
        if kind == "restore" and retired and data.draw(st.booleans()):
            return (kind, (data.draw(st.sampled_from(retired)),))
        n = data.draw(st.sampled_from((1, 1, 2, 3) if kind == "retire" else (1, 2)))
        return (kind, tuple(dict.fromkeys(self._target(data) for _ in range(n))))

    def _checkpoint_name(self, data, existing: bool) -> str:
        """Mostly one that exists (existing) or not (else), sometimes any."""
        have = sorted(self.model.checkpoints)
        pool = have if existing else [n for n in CHECKPOINTS if n not in have]
        if pool and data.draw(st.integers(0, 5)):
            return data.draw(st.sampled_from(pool))
        return data.draw(st.sampled_from(CHECKPOINTS))

    def _exact_op(self, data) -> tuple:
        kind = data.draw(st.sampled_from(
            ("checkpoint", "rollback", "rollback", "rollback", "drop-checkpoint",
             "retire-session", "restore-session") if self.model.checkpoints else
            ("checkpoint", "checkpoint", "checkpoint", "rollback", "retire-session",
             "restore-session")))
        if kind in ("checkpoint", "rollback", "drop-checkpoint"):
            return (kind, self._checkpoint_name(data, existing=kind != "checkpoint"))
        return (kind, self._session(data, "nobody"))

    def _session(self, data, other: str) -> str:
        """Mostly a session that exists, sometimes `other` (one that does not)."""
        have = sorted(self.model.sessions)
        if have and data.draw(st.integers(0, 5)):
            return data.draw(st.sampled_from(have))
        return data.draw(st.sampled_from(SESSIONS + (other,)))

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
        """The release induction pattern, whole or in part, in some order: derive a
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
        tx = Tx(base, reason, list(ops), rid)
        acts = sorted(self.model.activations)
        if acts and data.draw(st.integers(0, 3)) == 0:  # the evaluation that read the Mind
            tx.activation = data.draw(st.sampled_from(acts[-3:] + ["a0"]))  # a0: never one
        if self.model.sessions and data.draw(st.integers(0, 4)) == 0:  # made for a session
            tx.session = self._session(data, "nobody")
        if data.draw(st.integers(0, 3)) == 0:  # the tick it read at (maybe an old one)
            tx.base_tick = data.draw(st.integers(max(0, self.model.tick - 2),
                                                 self.model.tick + (data.draw(st.integers(0, 9))
                                                                    == 0)))
        return tx

    # -- running one transaction on both sides ------------------------------------------
    def _run_tx(self, tx: Tx) -> None:
        text = render_tx(tx)
        note(f"tx {tx.request_id or '-'} {tx.session or '-'} {tx.activation or '-'}: {text}")
        try:
            expected, expected_err = self.model.commit(tx), None
        except Rejected as e:
            expected, expected_err = None, e
        got, err = _call(self.client.commit, self.ctx, text, request_id=tx.request_id,
                         session=tx.session, activation=tx.activation)
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
            _count(f"tx rejected: {err.reason}")
            if expected_err.reason == "TX_CONFLICT":
                assert err.details["changed"] == expected_err.changed, (err.details, text)
                for cause in self.model.conflict_causes(expected_err.changed) - {"tx"}:
                    _count(f"tx rejected: TX_CONFLICT ({cause})")
            self.rejected.append({"request_id": tx.request_id, "text": text,
                                  "reason": err.reason})
            return
        assert err is None, \
            f"server rejected {text} with {err.reason} {err.details}; the model commits it: " \
            f"{expected}"
        for k in RECEIPT_KEYS:
            assert got[k] == expected[k], (k, got, expected, text)
        # The receipt tells what capacity is released now and what only after the window
        # (what lifecycle operations released; a rollback's own changes are not judged).
        cap, want = got["capacity"], expected["capacity"]
        if not any(op[0] == "rollback" for op in tx.ops):
            for k in ("released_now", "released_after_window"):
                assert set(want[k]) <= set(cap[k]) <= set(want[k + "_may"]), \
                    f"{text}: receipt {k} {sorted(cap[k])}, model {want[k]} " \
                    f"(may also name {sorted(set(want[k + '_may']) - set(want[k]))})"
        _count("tx replayed" if got["replayed"] else "tx rebased" if got["rebased"]
               else "tx committed")
        if any(not r.startswith("@") for r in cap["released_now"]):
            _count("tx retired a frame by the successor rule")
        if got["replayed"]:
            first = self.receipts[tx.request_id]
            assert {**got, "replayed": False} == first, (got, first)
        else:
            for kind in {op[0] for op in tx.ops}:
                _count(f"op committed: {kind}")
            if any(op[0] == "rollback" for op in tx.ops):
                self.rolled_back = got["revision"] - 1, sorted(
                    {b.split(":", 1)[1] for b, s in self.model.stamps.items()
                     if s.cause == "rollback" and s.revision == got["revision"]
                     and b.split(":")[0] in ("frame", "life", "sources")})
            if tx.request_id:
                self.receipts[tx.request_id] = got
            self.acked.append({"request_id": tx.request_id, "text": text, "receipt": got,
                               "read_tick": self.model.activations[tx.activation]["tick"]
                               if tx.activation else None})
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

    @precondition(lambda self: self.rolled_back and self.rolled_back[1])
    @rule(data=st.data())
    def commit_from_before_the_latest_rollback(self, data):
        """A transaction based before the latest rollback, aimed at the frames it changed:
        rejected, never applied over the rollback."""
        base, focus = self.rolled_back
        f = data.draw(st.sampled_from(focus))
        aimed = data.draw(st.sampled_from((
            ("revise", f, None, data.draw(st.sampled_from(BODIES))), ("retire", (f,)),
            ("restore", (f,)), ("protect", (f,)), ("relate", f, "supports", self._frame(data)),
            ("place", f, "first", ""))))
        self._run_tx(self._tx(data, base, data.draw(st.permutations(
            [aimed] + [self._op(data) for _ in range(data.draw(st.integers(0, 1)))]))))

    @rule(data=st.data())
    def commit_exact(self, data):
        """Checkpoint, rollback or session attention, alone or with other operations; at the
        latest revision (rarely an older one: EXACT_VERSION_REQUIRED)."""
        base = self.model.revision
        if base and data.draw(st.integers(0, 9)) == 0:
            base = data.draw(st.integers(0, base - 1))
        ops = [self._exact_op(data)] + [self._op(data) for _ in range(data.draw(
            st.sampled_from((0, 0, 1, 2))))]
        self._run_tx(self._tx(data, base, data.draw(st.permutations(ops))))

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

    @precondition(lambda self: self.inputs < MAX_INPUTS)
    @rule(data=st.data(), session=st.sampled_from(SESSIONS),
          kind=st.sampled_from(("user-message", "tool-result", "continuation")))
    def input(self, data, session, kind):
        """A new input or a retry of one (same payload: the original reply; other:
        rejected)."""
        self._input(data, session, kind)

    @precondition(lambda self: self.inputs < MAX_INPUTS)
    @rule(data=st.data(), session=st.sampled_from(SESSIONS),
          kind=st.sampled_from(("message", "action", "action", "tool-result", "tool-result")))
    def causal_event(self, data, session, kind):
        """A message to another session, an action (tool call) of an activation, or the
        result of a call (in this rule mostly one that names its call)."""
        self._input(data, session, kind)

    def _input(self, data, session, kind):
        if self.event_requests and data.draw(st.integers(0, 3)) == 0:
            rid = data.draw(st.sampled_from(sorted(self.event_requests)))
            session, kind, text, activation, target, refs = self.event_requests[rid]
            if data.draw(st.booleans()):
                text += " (edited)"
        else:
            rid = next(self.rids) if data.draw(st.booleans()) else ""
            text = f"{kind} {len(self.model.events)}"
            activation, target, refs = "", "", ()
            if kind == "message":  # mostly to another session that exists
                target = data.draw(st.sampled_from(
                    [s for s in sorted(self.model.sessions) if s != session] * 3
                    + list(SESSIONS) + ["nobody"]))
            elif kind == "action":  # mostly of an open activation, of its session
                acts = self.model.activations
                open_ = [(a, v["session"]) for a, v in sorted(acts.items()) if not v["delivered"]]
                if open_ and data.draw(st.integers(0, 4)):
                    activation, session = data.draw(st.sampled_from(open_))
                else:  # delivered, maybe another session's, or none
                    activation = data.draw(st.sampled_from(sorted(acts)[-2:] + ["a0"]))
            elif kind == "tool-result":
                calls = sorted(s for s, c in self.model.calls.items() if c["result"] is None)
                if calls and data.draw(st.integers(0, 1)):  # a call's result
                    call = data.draw(st.sampled_from(calls))
                    refs = (f"@e{call}",)
                    session = data.draw(st.sampled_from(
                        ("", "", self.model.calls[call]["session"], session)))
            if data.draw(st.integers(0, 5)) == 0:  # evidence it follows from, maybe unseen
                refs += (self._any_ref(data),)
        self.inputs += 1
        self._append(session, kind, text, rid, activation, target, refs)

    def _append(self, session, kind, text, rid, activation="", target="", refs=()):
        note(f"input {rid or '-'}: {session or '-'} {kind} {text!r} {activation} {target} "
             f"{' '.join(refs)}")
        try:
            expected, expected_err = self.model.append_event(
                session, kind, text, rid, activation, target, refs), None
        except Rejected as e:
            expected, expected_err = None, e
        got, err = _call(self.client.append_event, self.ctx, session, kind, text,
                         request_id=rid, activation=activation, target_session=target,
                         causal_refs=refs)
        if expected_err is not None:
            assert err is not None and err.reason == expected_err.reason, (err, expected_err)
            _count(f"input rejected: {err.reason}")
            return
        assert err is None, err
        assert (got["ref"], got["seq"], got["replayed"]) == \
            (expected["ref"], expected["seq"], expected["replayed"]), (got, expected)
        if got["replayed"]:
            return
        if kind != "tool-result" or refs:
            _count(f"input appended: {kind}" + (" (a call's result)" if got.get("call")
                                                else ""))
        if rid:
            self.event_requests[rid] = (session, kind, text, activation, target, refs)
            self.acked.append({"request_id": rid, "text": text, "receipt": got})
        self.obs_to_check.add(got["ref"])

    @rule(data=st.data(), session=st.sampled_from(SESSIONS + ("nobody",)))
    def activate_or_deliver(self, data, session):
        if self.model.activations and data.draw(st.integers(0, 2)) == 0:
            self._deliver(data.draw(st.sampled_from(sorted(self.model.activations))))
        else:
            self._activate(session)

    def _deliver(self, act: str) -> None:
        note(f"deliver {act}")
        self.model.deliver(act)
        got = self.client.deliver(self.ctx, act)
        # the results of its calls that came while it was open came back into it
        want = [f"@e{s}" for s in self.model.activations[act]["results"]]
        assert got["delivered"] and got["results"] == want, (got, want)
        if want:
            _count("activation delivered with results of its calls")

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
            self.focus = list(got["retired_frames"])

    @precondition(lambda self: self.model.tick <= MAX_TICKS - 8 and self._existing(ACTIVE))
    @rule(data=st.data())
    def retire_and_let_the_window_run_out(self, data):
        """Retire frames and claim 8 batches: their windows run out (unless something else
        in the step cancels them first)."""
        active = [f for f in self._existing(ACTIVE) if not self.model.frames[f].protected]
        if active:
            targets = data.draw(st.lists(st.sampled_from(active), min_size=1, max_size=2,
                                         unique=True))
            self._run_tx(Tx(self.model.revision, "tidy", [("retire", tuple(targets))]))
            self._compare(())  # apart from the activations' changes (for the history checker)
        self.advance_ticks(8)

    @precondition(lambda self: self.model.tick < MAX_TICKS)
    @rule(n=st.sampled_from((2, 4, 8)))
    def advance_ticks(self, n):
        """n claimed batches, each holding one tool result: the clock advances n times."""
        for i in range(n):
            self._append("s1", "tool-result", f"tool output {len(self.model.events)}", "")
            self._activate("s1")
            if self.model.tick >= MAX_TICKS:
                break
            if i < n - 1:  # observed after each activation: the history checker tells which
                self._compare(())  # one retired what (the step's own check follows the last)

    # -- comparison -----------------------------------------------------------------------
    def _compare(self, refs) -> None:
        """Read the Mind, compare it with the model's and keep what was read."""
        want = self.model.view()
        refs = [r for r in refs if r in want["observations"]]
        got = observe(self.client, self.ctx, refs)
        self.observed.append(got)
        for k in ("revision", "tick", "events"):
            assert got[k] == want[k], (k, got[k], want[k])
        for fid in sorted(set(want["frames"]) | set(got["frames"])):
            assert got["frames"].get(fid) == want["frames"].get(fid), \
                f"frame {fid}: server {got['frames'].get(fid)} model {want['frames'].get(fid)}"
        for k in ("relations", "order", "sessions"):
            assert got[k] == want[k], (k, got[k], want[k])
        for r in refs:
            assert got["observations"][r] == want["observations"][r], \
                (r, got["observations"][r], want["observations"][r])

    @invariant()
    def check_step(self) -> None:
        """After every step: frames, relations, order, sessions, revision, tick, event count
        and the observations the step touched."""
        self._compare(self.obs_to_check)
        self.obs_to_check.clear()

    def teardown(self) -> None:
        try:
            self._compare(self.model.observation_views())
            if self.example % HISTORY_EVERY == 0:
                problems = check_history(self.client, self.ctx, self.acked, self.rejected,
                                         self.observed)
                assert problems == [], problems
            assert self.client.audit(self.ctx)["match"]
        finally:
            super().teardown()


MindMachine = settings(max_examples=EXAMPLES, stateful_step_count=30, deadline=None, database=None,
                       derandomize=not RANDOM_WALKS,
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
    # The run must have exercised what it claims to check. A conflict with a rollback is
    # rare in the walk (14 of ~1,900 steps; 0 in one CI run: the walk is not the same every
    # run) and the directed sequences below assert it by construction (their "by" checks).
    # So is a restore-session that commits (it needs a retired session and the exact
    # version: 17 in one walk, 0 in another when other test files ran first in the same
    # worker); `session_attention` below commits two by construction.
    for what in ("tx committed", "tx rebased", "tx replayed", "tx rejected: TX_CONFLICT",
                 "tx rejected: TX_CONFLICT (window)",
                 "tx rejected: IDEMPOTENCY_MISMATCH", "tx rejected: EXACT_VERSION_REQUIRED",
                 "tx retired a frame by the successor rule",
                 "activation retired a frame (window over)", "input appended: message",
                 "input appended: action", "input appended: tool-result (a call's result)",
                 *(f"op committed: {kind}" for kind in OP_KINDS if kind != "restore-session")):
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
    # CONC-06: a rollback stamps every boundary it changes: a transaction based before it
    # that revises a rolled-back frame is rejected, not rebased over it.
    "rollback_conflicts_with_a_transaction_based_before_it": [
        ("tx", "", [("create", "a", "(v 0)")]),
        ("tx", "", [("checkpoint", "cp")]),
        ("tx", "", [("revise", "a", None, "(v 1)")]),
        ("tx", "", [("rollback", "cp")]),
        ("tx", "", [("revise", "a", None, "(v 2)")],
         {"base": 3, "expect": "TX_CONFLICT", "by": "rollback"})],
    # CORE-19, CONC-06: rollback removes the frames made after the checkpoint and brings back
    # its relations and order; a transaction based before it over any of them conflicts.
    "rollback_restores_frames_relations_and_order": [
        ("tx", "", [("create", "a", "(v 0)"), ("create", "b", "(v 0)"),
                    ("relate", "a", "supports", "b")]),
        ("tx", "", [("checkpoint", "cp")]),
        ("tx", "", [("create", "c", "(v 0)"), ("place", "b", "first", ""),
                    ("unrelate", "a", "supports", "b"), ("relate", "b", "supports", "a")]),
        ("tx", "", [("rollback", "cp")]),
        ("tx", "", [("relate", "a", "supports", "b")],
         {"base": 3, "expect": "TX_CONFLICT", "by": "rollback"}),
        ("tx", "", [("place", "a", "last", "")],
         {"base": 3, "expect": "TX_CONFLICT", "by": "rollback"}),
        ("tx", "", [("create", "c", "(v 1)")],
         {"base": 3, "expect": "TX_CONFLICT", "by": "rollback"}),
        ("tx", "", [("drop-checkpoint", "cp")]),
        ("tx", "", [("rollback", "cp")], {"expect": "CHECKPOINT_NOT_FOUND"}),
        ("tx", "", [("checkpoint", "cp"), ("checkpoint", "cp")],
         {"expect": "CHECKPOINT_EXISTS"})],
    # Frame revisions keep rising through rollbacks, for a frame removed and made again too;
    # a frame whose content equals the snapshot's keeps its revision.
    "rollback_revisions_keep_rising": [
        ("tx", "", [("checkpoint", "empty")]),
        ("tx", "", [("create", "a", "(v 0)")]),
        ("tx", "", [("revise", "a", None, "(v 1)")]),
        ("tx", "", [("checkpoint", "one")]),
        ("tx", "", [("rollback", "empty")]),
        ("tx", "", [("create", "a", "(v 2)")]),
        ("tx", "", [("rollback", "one")]),
        ("tx", "", [("rollback", "empty")]),
        ("tx", "", [("rollback", "one")]),
        ("tx", "", [("rollback", "one")])],
    # A rollback to a snapshot holding retire requests renews them for the restored
    # revisions: they still fall due at their tick, or at the next one once past it.
    "rollback_renews_retire_requests": [
        ("tx", "", [("create", "a", "(v 0)"), ("create", "b", "(v 0)")]),
        ("tx", T, [("retire", ("a", "b"))]),
        ("tx", "", [("checkpoint", "cp")]),
        ("tx", "", [("restore", ("a",)), ("revise", "b", None, "(v 1)")]),
        ("ticks", 4),
        ("tx", "", [("rollback", "cp")]),
        ("ticks", 4),  # both fall due at tick 8
        # A rollback rewrites every lifecycle: it must have seen the latest retirement.
        ("tx", "", [("rollback", "cp")], {"expect": "TX_CONFLICT", "by": "window"}),
        ("tx", "", [("rollback", "cp")], {"base_tick": 8}),
        ("tx", T, [("restore", ("a",)), ("retire", ("a",))]),
        ("tx", "", [("rollback", "cp")], {"base_tick": 8}),
        ("ticks", 1)],
    # CORE-13 after CORE-19: a snapshot taken inside a transaction, before the successor rule
    # retired a frame, holds it retiring next to its successor; the rule judges the final
    # state of the rollback's transaction too.
    "rollback_to_a_snapshot_taken_before_the_successor_rule": [
        ("tx", "", [("create", "o", "(v 0)"), ("derive", "s", ("o",), "(v 1)"),
                    ("relate", "s", "supersedes", "o")]),
        ("tx", T, [("retire", ("o",)), ("checkpoint", "cp")]),
        ("tx", "", [("rollback", "cp")])],
    # CONC-06: a window retirement stamps the frame's lifecycle with (revision, tick); a
    # transaction that did not see that tick conflicts, even at the latest revision.
    "window_retirement_conflicts_unless_seen": [
        ("tx", "", [("create", "a", "(v 0)"), ("create", "b", "(v 0)"),
                    ("create", "c", "(v 0)")]),
        ("tx", T, [("retire", ("a", "c"))]),
        ("ticks", 8),  # activations a1..a8: a8 (tick 8) retires a and c
        ("tx", "", [("restore", ("a",))], {"expect": "TX_CONFLICT", "by": "window"}),
        ("tx", "", [("restore", ("a",))],
         {"base_tick": 7, "expect": "TX_CONFLICT", "by": "window"}),
        ("tx", "", [("restore", ("a",))],
         {"activation": "a7", "expect": "TX_CONFLICT", "by": "window"}),
        ("tx", "", [("restore", ("a",))],
         {"activation": "a8", "base_tick": 7, "expect": "TX_CONFLICT", "by": "window"}),
        ("tx", "", [("restore", ("a",))],
         {"activation": "a8", "session": "s2", "expect": "CAUSAL_SCOPE_VIOLATION"}),
        ("tx", "", [("restore", ("a",))], {"base_tick": 9, "expect": "BASE_TICK_AHEAD"}),
        ("tx", "", [("revise", "b", None, "(v 1)")]),
        ("tx", "", [("restore", ("a",))], {"base": 2, "base_tick": 8}),
        ("tx", "", [("restore", ("c",))], {"base": 2, "activation": "a8", "session": "s1"})],
    # CORE-18: place moves a frame in the projection order only.
    "place_orders_frames": [
        ("tx", "", [("create", "a", "(v 0)"), ("create", "b", "(v 0)"),
                    ("create", "c", "(v 0)")]),
        ("tx", "", [("place", "c", "first", "")]),
        ("tx", "", [("place", "a", "after", "b")]),
        ("tx", "", [("place", "b", "before", "c"), ("place", "c", "last", "")]),
        ("tx", "", [("place", "a", "before", "a")], {"expect": "PLACE_ANCHOR_INVALID"}),
        ("tx", "", [("place", "a", "after", "z")], {"expect": "PLACE_ANCHOR_INVALID"}),
        ("tx", "", [("place", "z", "first", "")], {"expect": "FRAME_NOT_FOUND"}),
        ("tx", "", [("place", "a", "first", "")], {"base": 1, "expect": "TX_CONFLICT"}),
        ("tx", "", [("create", "d", "(v 0)")], {"base": 1})],
    # CORE-20: session attention needs the exact version; a commit naming a session reads
    # its state.
    "session_attention": [
        ("input", "user-message"),
        ("tx", T, [("retire-session", "s1")]),
        ("tx", "", [("create", "a", "(v 0)")], {"session": "s1", "expect": "SESSION_RETIRED"}),
        ("tx", "", [("create", "a", "(v 0)")], {"session": "s2", "expect": "SESSION_NOT_FOUND"}),
        ("tx", T, [("retire-session", "s2")], {"expect": "SESSION_NOT_FOUND"}),
        ("tx", "", [("retire-session", "s1")], {"expect": "TX_REASON_REQUIRED"}),
        ("tx", "", [("restore-session", "s1"), ("create", "a", "(v 0)")]),
        ("tx", "", [("create", "b", "(v 0)")],
         {"base": 1, "session": "s1", "expect": "TX_CONFLICT"}),
        ("tx", "", [("create", "b", "(v 0)")], {"base": 1}),
        ("tx", T, [("retire-session", "s1")], {"base": 2, "expect": "EXACT_VERSION_REQUIRED"}),
        ("tx", "", [("restore-session", "s1")], {"session": "s1"})],
    # CONC-04/05/07: actions, the results of calls (into their open activation, or late,
    # back to its session), messages; a commit made for a session names only what that
    # session sees (its own evidence, messages to it, what a committed frame cites).
    "causal_scopes_and_visibility": [
        ("input", "user-message", {"session": "s1"}),                       # @e1
        ("input", "user-message", {"session": "s2"}),                       # @e2
        ("activate", "s1"),                                                  # a1 @e3
        ("input", "action", {"activation": "a1"}),                           # @e4
        ("input", "tool-result", {"session": "", "refs": ("@e4",)}),         # @e5, into a1
        ("input", "action", {"session": "s2", "activation": "a1",
                             "expect": "CAUSAL_SCOPE_VIOLATION"}),
        ("tx", "", [("derive", "x", ("@e2",), "(v 0)")],
         {"session": "s1", "expect": "SOURCE_NOT_FOUND"}),
        ("tx", T, [("retire", ("@e2",))], {"activation": "a1", "expect": "EVENT_NOT_FOUND"}),
        ("tx", "", [("derive", "x", ("@e2",), "(v 0)")]),                   # @e6, promotes @e2
        ("tx", "", [("derive", "y", ("@e2", "@e5"), "(v 1)")], {"session": "s1"}),  # @e7
        ("input", "message", {"session": "s2", "target": "s1"}),             # @e8
        ("tx", T, [("retire", ("@e8",))], {"activation": "a1"}),             # @e9
        ("input", "action", {"activation": "a1"}),                           # @e10
        ("deliver", "a1"),                                                   # @e11
        ("input", "action", {"activation": "a1", "expect": "ACTIVATION_DELIVERED"}),
        ("input", "tool-result", {"refs": ("@e10",)}),                       # @e12, late
        ("input", "tool-result", {"refs": ("@e10",), "expect": "CALL_ANSWERED"}),
        ("activate", "s1"),                                                  # claims @e8 @e12
        ("input", "user-message", {"session": "s2", "refs": ("@e1",),
                                   "expect": "EVENT_NOT_FOUND"}),
        ("input", "message", {"target": "s1", "expect": "CONTEXT_INPUT_INVALID"}),
        ("input", "message", {"target": "s3", "expect": "SESSION_NOT_FOUND"})],
}


# Sequences whose point is a rejection; in all the others every transaction must commit
# (both sides rejecting alike would otherwise pass without reaching the shape named).
REJECTING = {"derive_from_its_own_event", "retire_its_own_event"}


# Where the server is known to disagree with the model (the model follows the rule named).
KNOWN_DIFFERENCES: dict[str, str] = {}  # directed sequence -> why the server differs


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_DIFFERENCES[n], strict=True))
    if n in KNOWN_DIFFERENCES else n for n in DIRECTED])
def test_conc_dur_directed_sequences_match_reference_model(model_client, name):
    MindMachine.client = model_client
    machine = MindMachine()
    machine.example = 0  # its history is always checked
    for step in DIRECTED[name]:
        if step[0] == "tx":
            opts = step[3] if len(step) > 3 else {}
            before, stats = machine.model.revision, STATS.copy()
            tx = Tx(opts.get("base", machine.model.revision), step[1], list(step[2]),
                    base_tick=opts.get("base_tick"), session=opts.get("session", ""),
                    activation=opts.get("activation", ""))
            machine._run_tx(tx)
            committed = machine.model.revision > before
            if "expect" in opts:
                assert not committed and machine.rejected[-1]["reason"] == opts["expect"], \
                    (name, step, machine.rejected[-1:])
            else:
                assert committed != (name in REJECTING), (name, step)
            if "by" in opts:  # what stamped the boundary that conflicted
                assert STATS[f"tx rejected: TX_CONFLICT ({opts['by']})"] > \
                    stats[f"tx rejected: TX_CONFLICT ({opts['by']})"], (name, step)
        elif step[0] == "input":
            opts = step[2] if len(step) > 2 else {}
            events, stats = machine.model.event_count, STATS.copy()
            machine._append(opts.get("session", "s1"), step[1], "x" * 10, "",
                            opts.get("activation", ""), opts.get("target", ""),
                            opts.get("refs", ()))
            appended = machine.model.event_count > events
            assert appended == ("expect" not in opts), (name, step)
            if "expect" in opts:
                what = f"input rejected: {opts['expect']}"
                assert STATS[what] > stats[what], (name, step)
        elif step[0] == "activate":
            machine._activate(step[1])
        elif step[0] == "deliver":
            machine._deliver(step[1])
        else:
            machine.advance_ticks(step[1])
        machine.check_step()
    machine.teardown()
