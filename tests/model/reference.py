"""An independent, in-memory reference model of the Mind's rules (seed 002, CONFORMANCE SC-Core
and SC-Concurrent), written from the seeds and the README, not from the server's code.

It imports nothing from the project: the point is a second implementation that the real
server (gRPC + LMDB) is compared with, step by step, by `test_model_based.py`.

Operations are plain tuples:

  ("create", ID, BODY)                 ("derive", ID, (SOURCE, ...), BODY)
  ("revise", ID, SOURCES-or-None, BODY)
  ("retire" | "restore" | "protect" | "unprotect", (TARGET, ...))   TARGET: frame id or "@eN"
  ("relate" | "unrelate", SUBJECT, NAME, OBJECT)

A transaction is `Tx(base, reason, ops, request_id)`. `Model.commit` either returns the
predicted receipt or raises `Rejected(reason_code, ...)`; a rejection leaves the model
exactly as it was (whole-transaction atomicity).
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Optional

DEFAULT_WINDOW = 8
EXTERNAL_KINDS = ("user-message", "tool-result", "approval", "external")
INPUT_KINDS = EXTERNAL_KINDS + ("continuation", "recall")
ACTIVE, RETIRING, RETIRED = "active", "retiring", "retired"
SUPERSEDES = "supersedes"
TARGET_OPS = ("retire", "restore", "protect", "unprotect")
REASON_OPS = ("retire", "unprotect")
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


@dataclass
class Frame:
    id: str
    body: str
    sources: tuple = ()
    revision: int = 1
    state: str = ACTIVE
    protected: bool = False
    generation: int = 0        # retire requests made so far
    due: Optional[int] = None  # due tick of the open retire request, if retiring


@dataclass(frozen=True)
class RetireRequest:
    frame: str
    generation: int
    frame_revision: int
    due: int


@dataclass
class Tx:
    base: int
    reason: str
    ops: list
    request_id: str = ""

    def payload(self) -> tuple:
        """What makes two submissions "the same request" (the canonical transaction)."""
        return ("tx", self.base, self.reason, tuple(_canon(o) for o in self.ops))


def _canon(op: tuple) -> tuple:
    return tuple(tuple(x) if isinstance(x, (list, tuple)) else x for x in op)


@dataclass
class Model:
    window: int = DEFAULT_WINDOW
    revision: int = 0
    tick: int = 0
    # events[seq] = kind; @e0 is the context-created event.
    events: list = field(default_factory=lambda: ["context-created"])
    sessions_of: dict = field(default_factory=dict)    # seq -> session of an input event
    observations: dict = field(default_factory=dict)  # seq -> {"retired": b, "protected": b}
    pending: dict = field(default_factory=dict)       # session -> [seq] not yet claimed
    activations: dict = field(default_factory=dict)   # id -> {"root": seq|None, "delivered": b}
    frames: dict = field(default_factory=dict)
    relations: set = field(default_factory=set)
    boundaries: dict = field(default_factory=dict)    # boundary -> revision that last wrote it
    requests: list = field(default_factory=list)      # RetireRequests not yet due
    idempotency: dict = field(default_factory=dict)   # request id -> (payload, reply)

    # -- inputs and activations -------------------------------------------------------------
    @property
    def event_count(self) -> int:
        return len(self.events)

    def append_event(self, session: str, kind: str, text: str, request_id: str = "") -> dict:
        if kind not in INPUT_KINDS:
            raise Rejected("EVENT_KIND_INVALID")
        payload = ("event", session, kind, text)
        if request_id:
            done = self._replay(request_id, payload)
            if done is not None:
                return done
        seq = len(self.events)
        self.events.append(kind)
        self.sessions_of[seq] = session
        self.observations[seq] = {"retired": False, "protected": False}
        self.pending.setdefault(session, []).append(seq)
        reply = {"ref": f"@e{seq}", "seq": seq}
        if request_id:
            self.idempotency[request_id] = (payload, reply)
        return dict(reply, replayed=False)

    def activate(self, session: str) -> dict:
        """Claim the session's pending inputs as one batch: the clock advances once when the
        batch holds an external fact; retire requests that fell due then take effect if
        their generation and frame revision are unchanged."""
        if session not in self.pending:  # a session exists once it received an input
            raise Rejected("SESSION_NOT_FOUND")
        claimed, self.pending[session] = self.pending[session], []
        advanced = any(self.events[s] in EXTERNAL_KINDS for s in claimed)
        matured: list[str] = []
        if advanced:
            self.tick += 1
            matured = self._mature()
        root = next((s for s in claimed if self.events[s] == "user-message"), None)
        act_id = f"a{len(self.activations) + 1}"
        self.activations[act_id] = {"root": root, "delivered": False}
        self.events.append("activation")
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

    def _mature(self) -> list[str]:
        done, keep = [], []
        for req in self.requests:
            if req.due > self.tick:
                keep.append(req)
                continue
            f = self.frames.get(req.frame)
            if f is not None and f.state == RETIRING and f.generation == req.generation \
                    and f.revision == req.frame_revision:
                f.state, f.due = RETIRED, None
                done.append(f.id)
                # No revision is made: stamped with the latest revision and this tick.
                self.boundaries[f"life:{f.id}"] = (self.revision, self.tick)
        self.requests = keep
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
        rebased = self._check_base(tx)
        cand = copy.deepcopy(self)
        touched = cand._apply_ops(tx)
        superseded = cand._successor_rule()
        cand.revision += 1
        # A frame that came into being also got its lifecycle and sources (CONC-06).
        born = {f"{b}:{fid}" for fid in set(cand.frames) - set(self.frames)
                for b in ("frame", "life", "sources")}
        for b in footprint(tx)[1] | {f"life:{fid}" for fid in superseded} | born:
            cand.boundaries[b] = cand.revision
        seq = len(cand.events)
        cand.events.append("context-tx")
        reply = {"revision": cand.revision, "base_version": tx.base, "cognitive_tick": cand.tick,
                 "event_ref": f"@e{seq}", "rebased": rebased,
                 "rebased_from": tx.base if rebased else 0,
                 "capacity": cand._released(self, touched)}
        if tx.request_id:
            cand.idempotency[tx.request_id] = (tx.payload(), reply)
        self.__dict__.update(cand.__dict__)
        return dict(reply, replayed=False)

    def _check_base(self, tx: Tx) -> bool:
        """A boundary changed after the transaction read (at its base revision, tick
        unknown): by a later revision, or by a window retirement at its base revision."""
        if tx.base > self.revision:
            raise Rejected("BASE_VERSION_AHEAD")
        reads, writes = footprint(tx)
        changed = []
        for b in sorted(reads | writes):
            stamp = self.boundaries.get(b, 0)
            if isinstance(stamp, tuple):
                if stamp[0] >= tx.base:
                    changed.append({"boundary": b, "revision": stamp[0], "tick": stamp[1]})
            elif stamp > tx.base:
                changed.append({"boundary": b, "revision": stamp})
        if changed:
            raise Rejected("TX_CONFLICT", changed=changed)
        return tx.base < self.revision

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
            if op[0] in TARGET_OPS:
                touched.update(op[1])
            elif op[0] == "revise":
                touched.add(op[1])
            kind = op[0]
            if kind in ("create", "derive"):
                self._create(i, op)
            elif kind == "revise":
                self._revise(i, op)
            elif kind in TARGET_OPS:
                for t in op[1]:
                    getattr(self, "_" + kind)(i, t, tx.reason)
            elif kind in ("relate", "unrelate"):
                self._relate(i, op)
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
                if ref_seq(s) >= len(self.events):
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

    def _revise(self, i: int, op: tuple) -> None:
        _, fid, sources, body = op
        f = self._frame(i, fid)
        if f.state == RETIRED:
            raise Rejected("FRAME_RETIRED", i, fid)
        if f.state == RETIRING:  # revising inside the window cancels the request
            f.state, f.due = ACTIVE, None
        if sources is not None:
            self._check_sources(i, sources)
            f.sources = tuple(sources)
        f.body = body
        f.revision += 1

    def _observation(self, i: int, target: str) -> dict:
        seq = ref_seq(target)
        if seq >= len(self.events):
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
            f.state, f.due = RETIRING, self.tick + self.window
            self.requests.append(RetireRequest(f.id, f.generation, f.revision, f.due))
        # retiring: a repeated retire keeps the original due tick; retired: nothing to do

    def _restore(self, i: int, target: str, reason: str) -> None:
        if is_ref(target):
            self._observation(i, target)["retired"] = False
            return
        f = self._frame(i, target)
        f.state, f.due = ACTIVE, None

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
        f.state, f.due, f.protected = ACTIVE, None, True  # cancels a retire request

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
            self.frames[fid].state, self.frames[fid].due = RETIRED, None
        return done

    # -- views ---------------------------------------------------------------------------
    def frame_views(self) -> dict:
        return {f.id: {"body": f.body, "revision": f.revision, "state": f.state,
                       "protected": f.protected, "sources": list(f.sources), "due_tick": f.due,
                       "generation": f.generation} for f in self.frames.values()}

    def observation_views(self) -> dict:
        return {f"@e{s}": {"state": RETIRED if o["retired"] else ACTIVE,
                           "protected": o["protected"]} for s, o in self.observations.items()}


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
    frame:ID, life:TARGET, edge:S N O, sources:ID). Static: from the operations alone."""
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
        else:
            edge = f"edge:{op[1]} {op[2]} {op[3]}"
            reads.add(edge)
            writes.add(edge)
    return reads, writes


def render_op(op: tuple) -> str:
    kind = op[0]
    if kind == "create":
        return f"(create {op[1]} {op[2]})"
    if kind in ("derive", "revise"):
        src = "" if op[2] is None else " (from " + " ".join(op[2]) + ")"
        return f"({kind} {op[1]}{src} {op[3]})"
    if kind in TARGET_OPS:
        return f"({kind} {' '.join(op[1])})"
    return f"({kind} {op[1]} {op[2]} {op[3]})"


def render_tx(tx: Tx) -> str:
    reason = f' (reason "{tx.reason}")' if tx.reason else ""
    return f"(context-tx (base-version {tx.base}){reason} " + \
        " ".join(render_op(o) for o in tx.ops) + ")"
