"""An independent, in-memory reference model of the Mind's rules (CONFORMANCE SC-Core
and SC-Concurrent), written from the specification and the README, not from the server's code.

It imports nothing from the project: the point is a second implementation that the real
server (gRPC + LMDB) is compared with, step by step, by `test_model_based.py`, and a second
set of conflict rules the history checker (`history.py`) judges observed histories with.

Operations are plain tuples:

  ("create", ID, BODY)                 ("derive", ID, (SOURCE, ...), BODY)
  ("revise", ID, SOURCES-or-None, BODY)
  ("retire" | "restore" | "protect" | "unprotect", (TARGET, ...))   TARGET: frame id or "@eN"
  ("relate" | "unrelate", SUBJECT, NAME, OBJECT)
  ("place", ID, "first" | "last" | "before" | "after", ANCHOR-or-"")
  ("checkpoint" | "rollback" | "drop-checkpoint", NAME)
  ("retire-session" | "restore-session", SESSION)

A transaction is `Tx(base, reason, ops, request_id, base_tick, session, activation)`.
`Model.commit` either returns the predicted receipt or raises `Rejected(reason_code, ...)`;
a rejection leaves the model exactly as it was (whole-transaction atomicity).

Conflicts ("rules version 2"): every committed transaction stamps, with its revision, the
boundaries its operations name as written (`footprint`) and every boundary its final state
changed (`changed_boundaries`, on the plain views `Model.view` gives and a test observes); a
window retirement stamps the frame's lifecycle with (revision, tick). A transaction read the
Mind at (base, tau), tau being its `(base-tick T)` or else the tick of the activation it
names; it is rejected when a boundary it reads or writes was stamped after that point
(`after`).
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Optional

DEFAULT_WINDOW = 8
# Inputs are observations; claiming one of the external facts advances the clock. A message
# comes from another session; an action (a tool call of an open activation) is no
# observation and waits for its result, a tool result that names it.
EXTERNAL_KINDS = ("user-message", "tool-result", "approval", "external", "message")
INPUT_KINDS = EXTERNAL_KINDS + ("continuation", "recall")
APPEND_KINDS = INPUT_KINDS + ("action",)
SHARED_KINDS = ("context-created", "context-tx")  # seen by every session
ACTIVE, RETIRING, RETIRED = "active", "retiring", "retired"
SUPERSEDES = "supersedes"
TARGET_OPS = ("retire", "restore", "protect", "unprotect")
CHECKPOINT_OPS = ("checkpoint", "rollback", "drop-checkpoint")
SESSION_OPS = ("retire-session", "restore-session")
# Never rebased: they act on the whole Mind or a session's attention as the agent read it.
EXACT_VERSION_OPS = ("checkpoint", "rollback") + SESSION_OPS
REASON_OPS = ("retire", "unprotect", "retire-session")
# A boundary no operation names: a rollback reads it, every window retirement stamps it.
WINDOW = "window"
_REF = re.compile(r"@e(\d+)\Z")


class Rejected(Exception):
    def __init__(self, reason: str, op_index: Optional[int] = None, ref: str = "",
                 changed: Optional[list[dict]] = None) -> None:
        super().__init__(f"{reason} (op {op_index}, {ref})")
        self.reason, self.op_index, self.ref, self.changed = reason, op_index, ref, changed


def is_ref(target: str) -> bool:
    return _REF.match(target) is not None


def ref_seq(target: str) -> int:
    return int(_REF.match(target).group(1))


@dataclass(frozen=True)
class RetireRequest:
    generation: int
    frame_revision: int  # the request applies only while the frame keeps this revision
    due: int


@dataclass
class Frame:
    id: str
    body: str
    sources: tuple = ()
    revision: int = 1
    state: str = ACTIVE
    protected: bool = False
    generation: int = 0  # retire requests made so far
    # The last retire request: open while retiring, kept once it took effect (retired).
    request: Optional[RetireRequest] = None

    def content(self) -> tuple:
        """What a rollback compares with its snapshot (the revision is history, not content)."""
        return self.body, self.sources, self.state, self.protected, self.request


@dataclass
class Checkpoint:
    revision: int
    frames: dict
    relations: frozenset
    order: tuple


class Stamp(NamedTuple):
    """When a boundary last changed: a transaction's revision (tick None), or a window
    retirement at (revision, tick) that made no revision. `cause` is for statistics only:
    "tx", "rollback" (a change a rollback made beyond its own footprint) or "window"."""
    revision: int
    tick: Optional[int] = None
    cause: str = "tx"


def after(stamp: Stamp, base: int, tau: Optional[int]) -> bool:
    """Is the change `stamp` after the read point (base, tau)? A window change at the base
    revision is after it unless the reader saw that tick."""
    if stamp.tick is None:
        return stamp.revision > base
    return stamp.revision > base or (stamp.revision == base and (tau is None or stamp.tick > tau))


@dataclass
class Tx:
    base: int
    reason: str
    ops: list
    request_id: str = ""
    base_tick: Optional[int] = None
    session: str = ""     # the session the commit names (or is made for: see read_point)
    activation: str = ""  # the activation (evaluation) the commit names

    def payload(self) -> tuple:
        """What makes two submissions "the same request" (the canonical transaction)."""
        return ("tx", self.base, self.base_tick, self.reason,
                tuple(_canon(o) for o in self.ops), self.session, self.activation)


def _canon(op: tuple) -> tuple:
    return tuple(tuple(x) if isinstance(x, (list, tuple)) else x for x in op)


@dataclass
class Model:
    window: int = DEFAULT_WINDOW
    revision: int = 0
    tick: int = 0
    # events[seq] = kind and event_sessions[seq] its session; @e0 is the context-created event.
    events: list = field(default_factory=lambda: ["context-created"])
    event_sessions: list = field(default_factory=lambda: [""])
    targets: dict = field(default_factory=dict)       # seq -> target session of a message
    promoted: set = field(default_factory=set)        # seqs a committed frame cited
    calls: dict = field(default_factory=dict)         # action seq -> {activation, session, result}
    observations: dict = field(default_factory=dict)  # seq -> {"retired": b, "protected": b}
    pending: dict = field(default_factory=dict)       # session -> [seq] not yet claimed
    sessions: dict = field(default_factory=dict)      # session -> attention state
    activations: dict = field(default_factory=dict)   # id -> {root, delivered, tick, session,
    #                                                        results}
    frames: dict = field(default_factory=dict)
    order: list = field(default_factory=list)         # projection order of the frames
    relations: set = field(default_factory=set)
    checkpoints: dict = field(default_factory=dict)   # name -> Checkpoint
    last_known: dict = field(default_factory=dict)    # id -> Frame last seen before removal
    stamps: dict = field(default_factory=dict)        # boundary -> Stamp
    idempotency: dict = field(default_factory=dict)   # request id -> (payload, reply)
    viewer: str = ""  # while a commit made for a session applies: the events it may name

    # -- inputs and activations -------------------------------------------------------------
    @property
    def event_count(self) -> int:
        return len(self.events)

    def append_event(self, session: str, kind: str, text: str, request_id: str = "",
                     activation: str = "", target: str = "", refs: tuple = ()) -> dict:
        """An input, an action of an open activation of its session, a message to another
        session, or the result of a call (a tool result naming the action among its refs:
        it returns to the call's session, into its activation while that is open)."""
        if kind not in APPEND_KINDS:
            raise Rejected("EVENT_KIND_INVALID")
        if (kind == "action") != bool(activation) or (kind == "message") != bool(target) \
                or (target and target == session):
            raise Rejected("CONTEXT_INPUT_INVALID")
        payload = ("event", session, kind, text, tuple(refs), activation, target)
        if request_id:
            done = self._replay(request_id, payload)
            if done is not None:
                return done
        if any(ref_seq(r) >= len(self.events) for r in refs):
            raise Rejected("EVENT_NOT_FOUND")
        owner, call = session, None
        if kind == "action":
            act = self.activations.get(activation)
            if act is None:
                raise Rejected("ACTIVATION_NOT_FOUND")
            if act["session"] != session:
                raise Rejected("CAUSAL_SCOPE_VIOLATION")
            if act["delivered"]:
                raise Rejected("ACTIVATION_DELIVERED")
        elif kind == "message" and target not in self.sessions:
            raise Rejected("SESSION_NOT_FOUND")
        elif kind == "tool-result":
            called = sorted({ref_seq(r) for r in refs if self.events[ref_seq(r)] == "action"})
            if len(called) > 1 or not (called or session):
                raise Rejected("CONTEXT_INPUT_INVALID")
            if called:
                call = self.calls[called[0]]
                if call["result"] is not None:
                    raise Rejected("CALL_ANSWERED")
                if session and session != call["session"]:
                    raise Rejected("CAUSAL_SCOPE_VIOLATION")
                owner = call["session"]
        # Every other ref must be evidence the event's session may see.
        if any(not self.sees(owner, ref_seq(r)) for r in refs
               if call is None or ref_seq(r) != called[0]):
            raise Rejected("EVENT_NOT_FOUND")
        seq = len(self.events)
        self.events.append(kind)
        self.event_sessions.append(owner)
        if kind == "action":
            self.calls[seq] = {"activation": activation, "session": owner, "result": None}
        else:
            self.observations[seq] = {"retired": False, "protected": False}
            self.sessions.setdefault(owner, ACTIVE)  # a session exists once it had an input
            if kind == "message":
                self.targets[seq] = target
                self.pending.setdefault(target, []).append(seq)
            elif call is not None:
                call["result"] = seq
                act = self.activations[call["activation"]]
                if act["delivered"]:  # late: back to its session, as an input
                    self.pending.setdefault(owner, []).append(seq)
                else:
                    act["results"].append(seq)
            else:
                self.pending.setdefault(owner, []).append(seq)
        reply = {"ref": f"@e{seq}", "seq": seq}
        if request_id:
            self.idempotency[request_id] = (payload, reply)
        return dict(reply, replayed=False)

    def sees(self, session: str, seq: int) -> bool:
        """May an evaluation of `session` see event seq? The shared Mind's events, its own
        session's, messages to it, and evidence a committed frame cites."""
        return seq < len(self.events) and (
            self.events[seq] in SHARED_KINDS or self.event_sessions[seq] in ("", session)
            or self.targets.get(seq) == session or seq in self.promoted)

    def activate(self, session: str) -> dict:
        """Claim the session's pending inputs as one batch: the clock advances once when the
        batch holds an external fact; retire requests that fell due then take effect if
        their generation and frame revision are unchanged. No revision is made: each such
        lifecycle change is stamped with (revision, new tick)."""
        if session not in self.sessions:
            raise Rejected("SESSION_NOT_FOUND")
        claimed, self.pending[session] = self.pending.get(session, []), []
        advanced = any(self.events[s] in EXTERNAL_KINDS for s in claimed)
        matured: list[str] = []
        if advanced:
            self.tick += 1
            matured = self._mature()
            for fid in matured:
                self.stamps[f"life:{fid}"] = Stamp(self.revision, self.tick, "window")
            if matured:  # where the latest window retirement happened (see footprint)
                self.stamps[WINDOW] = Stamp(self.revision, self.tick, "window")
        root = next((s for s in claimed if self.events[s] == "user-message"), None)
        act_id = f"a{len(self.activations) + 1}"
        self.activations[act_id] = {"root": root, "delivered": False, "tick": self.tick,
                                    "session": session, "results": []}
        self.events.append("activation")
        self.event_sessions.append(session)
        return {"id": act_id, "claimed": [f"@e{s}" for s in claimed], "tick": self.tick,
                "tick_advanced": advanced, "retired_frames": matured,
                "root": f"@e{root}" if root is not None else ""}

    def deliver(self, act_id: str) -> None:
        act = self.activations.get(act_id)
        if act is None:
            raise Rejected("ACTIVATION_NOT_FOUND")
        if not act["delivered"]:  # delivering twice is a retry: no second event
            act["delivered"] = True
            self.events.append("delivery")
            self.event_sessions.append(act["session"])

    def _mature(self) -> list[str]:
        done = []
        for f in sorted(self.frames.values(), key=lambda f: f.id):
            req = f.request
            if f.state == RETIRING and req.due <= self.tick and \
                    req.generation == f.generation and req.frame_revision == f.revision:
                f.state = RETIRED
                done.append(f.id)
        return done

    def _replay(self, request_id: str, payload: tuple) -> Optional[dict]:
        rec = self.idempotency.get(request_id)
        if rec is None:
            return None
        if rec[0] != payload:
            raise Rejected("IDEMPOTENCY_MISMATCH")
        return dict(rec[1], replayed=True)

    # -- transactions ----------------------------------------------------------------------
    def commit(self, tx: Tx) -> dict:
        _check_shape(tx)
        if tx.request_id:
            done = self._replay(tx.request_id, tx.payload())
            if done is not None:
                return done
        session, tau = self.read_point(tx)
        rebased = self._check_base(tx, session, tau)
        cand = copy.deepcopy(self)
        before = self.view()
        cand.viewer = session
        touched = cand._apply_ops(tx)
        cand.viewer = ""
        cand._successor_rule()
        cand.revision += 1
        # Evidence a committed frame cites joins the shared Mind: every session sees it.
        cand.promoted.update(ref_seq(s) for op in tx.ops if op[0] in ("derive", "revise")
                             and op[2] for s in op[2] if is_ref(s))
        _, writes = footprint(tx)
        changed = changed_boundaries(before, cand.view())
        rollback = any(op[0] == "rollback" for op in tx.ops)
        for b in writes | changed:
            cand.stamps[b] = Stamp(cand.revision, None,
                                   "rollback" if rollback and b not in writes else "tx")
        seq = len(cand.events)
        cand.events.append("context-tx")
        cand.event_sessions.append(session)
        reply = {"revision": cand.revision, "base_version": tx.base, "cognitive_tick": cand.tick,
                 "event_ref": f"@e{seq}", "rebased": rebased,
                 "rebased_from": tx.base if rebased else 0,
                 "capacity": cand._released(self, touched)}
        if tx.request_id:
            cand.idempotency[tx.request_id] = (tx.payload(), reply)
        self.__dict__.update(cand.__dict__)
        return dict(reply, replayed=False)

    def read_point(self, tx: Tx) -> tuple[str, Optional[int]]:
        """The session a commit is made for and the tick it read at: the activation it
        names gives both (its session must be the one named, if any); a declared
        `(base-tick T)` is the tick read, else the activation's. A retired session's
        evaluations cannot commit, except to restore that session."""
        tau, session = tx.base_tick, tx.session
        if tau is not None and tau > self.tick:
            raise Rejected("BASE_TICK_AHEAD")
        if tx.activation:
            act = self.activations.get(tx.activation)
            if act is None:
                raise Rejected("ACTIVATION_NOT_FOUND")
            if session and act["session"] != session:
                raise Rejected("CAUSAL_SCOPE_VIOLATION")
            session = act["session"]
            if tau is None:
                tau = act["tick"]
        if session:
            if session not in self.sessions:
                raise Rejected("SESSION_NOT_FOUND")
            if self.sessions[session] == RETIRED and ("restore-session", session) not in \
                    [tuple(op) for op in tx.ops]:
                raise Rejected("SESSION_RETIRED")
        return session, tau

    def _check_base(self, tx: Tx, session: str, tau: Optional[int]) -> bool:
        if tx.base > self.revision:
            raise Rejected("BASE_VERSION_AHEAD")
        if tx.base < self.revision and any(op[0] in EXACT_VERSION_OPS for op in tx.ops):
            raise Rejected("EXACT_VERSION_REQUIRED")
        reads, writes = footprint(replace(tx, session=session))
        changed = []
        for b in sorted(reads | writes):
            s = self.stamps.get(b)
            if s is not None and after(s, tx.base, tau):
                changed.append({"boundary": b, "revision": s.revision}
                               if s.tick is None else
                               {"boundary": b, "revision": s.revision, "tick": s.tick})
        if changed:
            raise Rejected("TX_CONFLICT", changed=changed)
        return tx.base < self.revision

    def conflict_causes(self, changed: list[dict]) -> set:
        """What stamped the boundaries a TX_CONFLICT named (for statistics)."""
        return {self.stamps[c["boundary"]].cause for c in changed}

    def _released(self, before: "Model", touched: set) -> dict:
        """Capacity the receipt must name, by the net effect of the transaction: what left
        the active context now (`released_now`) and the frames that now wait in the
        organizing window (`released_after_window`). A target the transaction took out and
        put back in the same state (restore then retire) may be named or not (`*_may`);
        nothing may be named that does not end in that state."""
        def was(fid: str, state: str) -> bool:
            return fid in before.frames and before.frames[fid].state == state

        now = [f"@e{s}" for s, o in self.observations.items()
               if o["retired"] and not before.observations[s]["retired"]]
        now_may = [f"@e{s}" for s, o in self.observations.items()
                   if o["retired"] and f"@e{s}" in touched]
        now += [fid for fid, f in self.frames.items() if f.state == RETIRED and
                not was(fid, RETIRED)]
        now_may += [fid for fid, f in self.frames.items() if f.state == RETIRED and
                    fid in touched]
        later = [fid for fid, f in self.frames.items() if f.state == RETIRING and
                 not was(fid, RETIRING)]
        later_may = [fid for fid, f in self.frames.items() if f.state == RETIRING and
                     fid in touched]
        return {"released_now": sorted(now), "released_after_window": sorted(later),
                "released_now_may": sorted(set(now) | set(now_may)),
                "released_after_window_may": sorted(set(later) | set(later_may))}

    def _apply_ops(self, tx: Tx) -> set:
        """Apply the operations in order; returns the lifecycle targets they touched."""
        touched = set()
        for i, op in enumerate(tx.ops):
            kind = op[0]
            if kind in TARGET_OPS:
                touched.update(op[1])
                for t in op[1]:
                    getattr(self, "_" + kind)(i, t, tx.reason)
            elif kind in ("create", "derive"):
                self._create(i, op)
            elif kind == "revise":
                touched.add(op[1])
                self._revise(i, op)
            elif kind in ("relate", "unrelate"):
                self._relate(i, op)
            elif kind == "place":
                self._place(i, op)
            elif kind in CHECKPOINT_OPS:
                self._checkpoint(i, op)
            elif kind in SESSION_OPS:
                self._session(i, op)
            else:
                raise AssertionError(f"unknown op {op!r}")
        return touched

    def _frame(self, i: int, fid: str) -> Frame:
        f = self.frames.get(fid)
        if f is None:
            raise Rejected("FRAME_NOT_FOUND", i, fid)
        return f

    def _check_sources(self, i: int, sources) -> None:
        # A source must exist when the transaction is validated: the transaction's own
        # event does not exist yet (it is written only if the transaction commits).
        for s in sources:
            if is_ref(s):
                if not self._visible(ref_seq(s)):
                    raise Rejected("SOURCE_NOT_FOUND", i, s)
            elif s not in self.frames:
                raise Rejected("SOURCE_NOT_FOUND", i, s)

    def _create(self, i: int, op: tuple) -> None:
        if op[0] == "create":
            fid, sources, body = op[1], (), op[2]
        else:
            fid, sources, body = op[1], tuple(op[2]), op[3]
        self._check_sources(i, sources)
        old = self.frames.get(fid)
        if old is not None:
            if old.body == body and old.sources == sources:
                return  # the same content again: unchanged
            raise Rejected("FRAME_EXISTS", i, fid)
        self.frames[fid] = Frame(fid, body, sources)
        self.order.append(fid)

    def _cancel(self, f: Frame) -> None:
        f.state, f.request = ACTIVE, None

    def _revise(self, i: int, op: tuple) -> None:
        _, fid, sources, body = op
        f = self._frame(i, fid)
        if f.state == RETIRED:
            raise Rejected("FRAME_RETIRED", i, fid)
        if f.state == RETIRING:  # revising inside the window cancels the request
            self._cancel(f)
        if sources is not None:
            self._check_sources(i, sources)
            f.sources = tuple(sources)
        f.body = body
        f.revision += 1

    def _visible(self, seq: int) -> bool:
        """Does the event exist, for the session the commit is made for (if any)?"""
        return seq < len(self.events) and (not self.viewer or self.sees(self.viewer, seq))

    def _observation(self, i: int, target: str) -> dict:
        seq = ref_seq(target)
        if not self._visible(seq):
            raise Rejected("EVENT_NOT_FOUND", i, target)
        if self.events[seq] not in INPUT_KINDS:
            raise Rejected("NOT_AN_OBSERVATION", i, target)
        return self.observations[seq]

    def _root_requests(self) -> set:
        return {a["root"] for a in self.activations.values()
                if not a["delivered"] and a["root"] is not None}

    def _retire(self, i: int, target: str, reason: str) -> None:
        if is_ref(target):
            obs = self._observation(i, target)
            if obs["protected"]:
                raise Rejected("OBSERVATION_PROTECTED", i, target)
            if ref_seq(target) in self._root_requests():
                raise Rejected("ROOT_REQUEST_PROTECTED", i, target)
            obs["retired"] = True  # an observation retires at once
            return
        f = self._frame(i, target)
        if f.protected:
            raise Rejected("FRAME_PROTECTED", i, target)
        if f.state == ACTIVE:  # a new request: enters the organizing window
            f.generation += 1
            f.state = RETIRING
            f.request = RetireRequest(f.generation, f.revision, self.tick + self.window)
        # retiring: a repeated retire keeps the original due tick; retired: nothing to do

    def _restore(self, i: int, target: str, reason: str) -> None:
        if is_ref(target):
            self._observation(i, target)["retired"] = False
            return
        f = self._frame(i, target)
        if f.state != ACTIVE:
            self._cancel(f)

    def _protect(self, i: int, target: str, reason: str) -> None:
        if is_ref(target):
            obs = self._observation(i, target)
            if obs["retired"]:
                raise Rejected("OBSERVATION_RETIRED", i, target)
            obs["protected"] = True
            return
        f = self._frame(i, target)
        if f.state == RETIRED:
            raise Rejected("FRAME_RETIRED", i, target)
        if f.state == RETIRING:  # protecting cancels a retire request
            self._cancel(f)
        f.protected = True

    def _unprotect(self, i: int, target: str, reason: str) -> None:
        if is_ref(target):
            self._observation(i, target)["protected"] = False
        else:
            self._frame(i, target).protected = False

    def _relate(self, i: int, op: tuple) -> None:
        kind, s, n, o = op
        self._frame(i, s)
        self._frame(i, o)
        if kind == "relate":
            self.relations.add((s, n, o))
        elif (s, n, o) in self.relations:
            self.relations.discard((s, n, o))
        else:
            raise Rejected("RELATION_NOT_FOUND", i, f"{s} {n} {o}")

    def _place(self, i: int, op: tuple) -> None:
        """Move a frame in the projection order (CORE-18): first, last, or next to another
        frame of the order."""
        _, fid, where, anchor = op
        self._frame(i, fid)
        rest = [f for f in self.order if f != fid]
        if where == "first":
            pos = 0
        elif where == "last":
            pos = len(rest)
        elif anchor not in rest:  # itself, or no frame
            raise Rejected("PLACE_ANCHOR_INVALID", i, anchor)
        else:
            pos = rest.index(anchor) + (where == "after")
        self.order = rest[:pos] + [fid] + rest[pos:]

    def _checkpoint(self, i: int, op: tuple) -> None:
        kind, name = op
        if kind == "checkpoint":
            if name in self.checkpoints:
                raise Rejected("CHECKPOINT_EXISTS", i, name)
            # The Mind as the operation finds it (earlier operations of the transaction
            # included); the transaction's own revision.
            self.checkpoints[name] = Checkpoint(self.revision + 1, copy.deepcopy(self.frames),
                                                frozenset(self.relations), tuple(self.order))
            return
        cp = self.checkpoints.get(name)
        if cp is None:
            raise Rejected("CHECKPOINT_NOT_FOUND", i, name)
        if kind == "drop-checkpoint":
            del self.checkpoints[name]
        else:
            self._rollback(cp)

    def _rollback(self, cp: Checkpoint) -> None:
        """Make the Mind equal to the snapshot. Frames it does not hold go (their retire
        requests with them); a frame whose content differs from the snapshot's comes back
        with a revision above both its snapshot revision and the last one it had (frame
        revisions only rise, so a retire request made before cannot apply to it), and its
        retire request, if the snapshot held one, is renewed for that revision; a frame
        whose content is equal keeps its revision. Relations and order are the snapshot's."""
        for fid in [f for f in self.frames if f not in cp.frames]:
            self.last_known[fid] = self.frames.pop(fid)
        for fid, snap in cp.frames.items():
            cur = self.frames.get(fid)
            if cur is not None and cur.content() == snap.content():
                continue
            known = cur or self.last_known.get(fid)
            f = copy.deepcopy(snap)
            f.revision = max(snap.revision, known.revision if known else 0) + 1
            f.generation = max(snap.generation, known.generation if known else 0)
            if f.request is not None:
                f.request = RetireRequest(f.generation, f.revision, snap.request.due)
            self.frames[fid] = f
        self.relations = set(cp.relations)
        self.order = list(cp.order)

    def _session(self, i: int, op: tuple) -> None:
        kind, sid = op
        if sid not in self.sessions:
            raise Rejected("SESSION_NOT_FOUND", i, sid)
        self.sessions[sid] = RETIRED if kind == "retire-session" else ACTIVE

    def _successor_rule(self) -> set:
        """On the transaction's final state: a retiring frame retires at once when a
        non-retired successor lists it in its sources and `successor supersedes old`.
        All retiring frames are judged on the same final state of the operations."""
        done = set()
        for old in self.frames.values():
            if old.state != RETIRING:
                continue
            for (s, n, o) in self.relations:
                succ = self.frames.get(s)
                if o == old.id and n == SUPERSEDES and succ is not None \
                        and succ.state != RETIRED and old.id in succ.sources:
                    done.add(old.id)
                    break
        for fid in done:
            self.frames[fid].state = RETIRED
        return done

    # -- views ---------------------------------------------------------------------------
    def view(self) -> dict:
        """The Mind as a test observes it (see `mind_view` for the shape)."""
        frames = {f.id: frame_view(f.body, f.revision, f.state, f.protected, f.sources,
                                   f.generation, f.request and (f.request.generation,
                                                                f.request.due))
                  for f in self.frames.values()}
        return mind_view(self.revision, self.tick, self.event_count, frames, self.relations,
                         self.order, self.observation_views(), self.sessions)

    def observation_views(self) -> dict:
        return {f"@e{s}": {"state": RETIRED if o["retired"] else ACTIVE,
                           "protected": o["protected"]} for s, o in self.observations.items()}


# -- views and what changed between two of them -----------------------------------------------

def frame_view(body: str, revision: int, state: str, protected: bool, sources, generation: int,
               request: Optional[tuple]) -> dict:
    """request: (generation, due tick) of the frame's retire request (open while retiring,
    kept once retired), or None."""
    return {"body": body, "revision": revision, "state": state, "protected": protected,
            "sources": list(sources), "generation": generation,
            "request": tuple(request) if request else None}


def mind_view(revision: int, tick: int, events: int, frames: dict, relations, order,
              observations: Optional[dict], sessions: Optional[dict]) -> dict:
    """One observation of the Mind. `observations` (@eN -> {"state", "protected"}) may hold
    only those read; None for a part not observed."""
    return {"revision": revision, "tick": tick, "events": events, "frames": frames,
            "relations": None if relations is None else {tuple(e) for e in relations},
            "order": None if order is None else list(order),
            "observations": None if observations is None else dict(observations),
            "sessions": None if sessions is None else dict(sessions)}


def _life(f: dict) -> tuple:
    return f["state"], f["protected"], f["request"]


def changed_boundaries(before: dict, after: dict) -> set:
    """Boundaries whose content differs between two views of the Mind: a frame's content
    (body, revision), sources and lifecycle (state, protected, retire request), each also
    when the frame appeared or went; each relation edge added or removed; the relative order
    of the frames present in both; an observation's lifecycle and a session's attention
    state (those present in both views). Parts a view did not observe (None) are skipped."""
    out = set()
    fa, fb = before["frames"], after["frames"]
    for fid in set(fa) | set(fb):
        a, b = fa.get(fid), fb.get(fid)
        if a is None or b is None:
            out.update((f"frame:{fid}", f"sources:{fid}", f"life:{fid}"))
            continue
        if (a["body"], a["revision"]) != (b["body"], b["revision"]):
            out.add(f"frame:{fid}")
        if a["sources"] != b["sources"]:
            out.add(f"sources:{fid}")
        if _life(a) != _life(b):
            out.add(f"life:{fid}")
    if before["relations"] is not None and after["relations"] is not None:
        out.update(f"edge:{s} {n} {o}" for s, n, o in before["relations"] ^ after["relations"])
    if before["order"] is not None and after["order"] is not None:
        both = set(fa) & set(fb)
        if [f for f in before["order"] if f in both] != [f for f in after["order"] if f in both]:
            out.add("order")
    for part, prefix, key in (("observations", "life:", lambda v: (v["state"], v["protected"])),
                              ("sessions", "session:", lambda v: v)):
        a, b = before[part] or {}, after[part] or {}
        out.update(prefix + k for k in set(a) & set(b) if key(a[k]) != key(b[k]))
    return out


def _check_shape(tx: Tx) -> None:
    """Checks a transaction fails before anything is looked up."""
    if not tx.ops:
        raise Rejected("TX_INVALID")
    for i, op in enumerate(tx.ops):
        if op[0] in ("derive", "revise") and op[2] is not None:
            if op[0] == "derive" and not op[2]:
                raise Rejected("TX_INVALID", i, op[1])
            if op[1] in op[2]:
                raise Rejected("TX_INVALID", i, op[1])  # a frame cannot be its own source
        if op[0] in REASON_OPS and not tx.reason.strip():
            raise Rejected("TX_REASON_REQUIRED", i)


def footprint(tx: Tx) -> tuple[set, set]:
    """Boundaries a transaction reads and writes (boundary names as in the design:
    frame:ID, life:TARGET, edge:S N O, sources:ID, order, checkpoint:N, session:S, and
    `window`, read by a rollback). Static: from the operations alone; a commit made for a
    session reads that session's state."""
    reads, writes = set(), set()
    for op in tx.ops:
        kind = op[0]
        if kind in ("create", "derive", "revise"):
            fid = op[1]
            reads.add(f"frame:{fid}")
            writes.add(f"frame:{fid}")
            sources = None if kind == "create" else op[2]
            if kind == "revise":  # a revise may cancel a retire request: touches lifecycle
                reads.add(f"life:{fid}")
                writes.add(f"life:{fid}")
            if sources is not None:
                writes.add(f"sources:{fid}")
                reads.update(f"frame:{s}" for s in sources if not is_ref(s))
        elif kind in TARGET_OPS:
            for t in op[1]:
                reads.add(f"life:{t}")
                writes.add(f"life:{t}")
        elif kind in ("relate", "unrelate"):
            edge = f"edge:{op[1]} {op[2]} {op[3]}"
            reads.add(edge)
            writes.add(edge)
        elif kind == "place":
            reads.add("order")
            writes.add("order")
        elif kind in CHECKPOINT_OPS:
            reads.add(f"checkpoint:{op[1]}")
            writes.add(f"checkpoint:{op[1]}")
            if kind == "rollback":  # it rewrites every lifecycle: it must have seen them all
                reads.add(WINDOW)
        elif kind in SESSION_OPS:
            reads.add(f"session:{op[1]}")  # written only when its state changes
    if tx.session:
        reads.add(f"session:{tx.session}")
    return reads, writes


# -- text ------------------------------------------------------------------------------------

def render_op(op: tuple) -> str:
    kind = op[0]
    if kind == "create":
        return f"(create {op[1]} {op[2]})"
    if kind in ("derive", "revise"):
        src = "" if op[2] is None else " (from " + " ".join(op[2]) + ")"
        return f"({kind} {op[1]}{src} {op[3]})"
    if kind in TARGET_OPS:
        return f"({kind} {' '.join(op[1])})"
    if kind == "place":
        where = f"({op[2]} {op[3]})" if op[2] in ("before", "after") else op[2]
        return f"(place {op[1]} {where})"
    if kind in CHECKPOINT_OPS + SESSION_OPS:
        return f"({kind} {op[1]})"
    return f"({kind} {op[1]} {op[2]} {op[3]})"


def render_tx(tx: Tx) -> str:
    tick = f" (base-tick {tx.base_tick})" if tx.base_tick is not None else ""
    reason = f' (reason "{tx.reason}")' if tx.reason else ""
    return f"(context-tx (base-version {tx.base}){tick}{reason} " + \
        " ".join(render_op(o) for o in tx.ops) + ")"


_TOKEN = re.compile(r'\s*(?:(\()|(\))|("(?:[^"\\]|\\.)*")|([^\s()"]+))')


def _read(text: str):
    """A small S-expression reader: lists, strings (kept quoted) and atoms."""
    stack: list[list] = [[]]
    pos = 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"cannot read {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.group(1):
            stack.append([])
        elif m.group(2):
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(m.group(3) or m.group(4))
    return stack[0][0]


def _show(node) -> str:
    return "(" + " ".join(_show(x) for x in node) + ")" if isinstance(node, list) else node


def parse_tx(text: str) -> Tx:
    """A transaction from its text (as `render_tx` or the server writes it) into the
    model's tuples: enough for footprints and exact-version checks."""
    form = _read(text)
    assert form[0] == "context-tx", text
    tx = Tx(base=-1, reason="", ops=[])
    for item in form[1:]:
        head, args = item[0], item[1:]
        if head == "base-version":
            tx.base = int(args[0])
        elif head == "base-tick":
            tx.base_tick = int(args[0])
        elif head == "reason":
            tx.reason = args[0][1:-1]
        elif head in ("create", "derive", "revise"):
            rest, sources = args[1:], None
            if rest and isinstance(rest[0], list) and rest[0][:1] == ["from"]:
                sources, rest = tuple(rest[0][1:]), rest[1:]
            body = " ".join(_show(x) for x in rest)
            tx.ops.append(("create", args[0], body) if head == "create"
                          else (head, args[0], sources, body))
        elif head in TARGET_OPS:
            tx.ops.append((head, tuple(args)))
        elif head in ("relate", "unrelate"):
            tx.ops.append((head, *args))
        elif head == "place":
            where = args[1]
            tx.ops.append(("place", args[0], where[0], where[1]) if isinstance(where, list)
                          else ("place", args[0], where, ""))
        else:
            tx.ops.append((head, args[0]))
    return tx
