"""The rules of the Mind: one `apply_*` per context-tx operation, over a MindState.

Each function checks its preconditions against the candidate state (raising a
MorphzError that names the op and ref) and then changes the candidate. A
transaction is the ops in order followed by the successor rule on the final state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.services.transaction.core.txlang import (
    EdgeOp, FrameOp, NamedOp, Op, PlaceOp, TargetsOp, Tx)
from morphz.shared.errors import MorphzError
from morphz.shared.mind.records import is_ref, ref_seq

SUPERSEDES = "supersedes"


@dataclass
class Outcome:
    """What one op did to one target; becomes an OpResult in the receipt."""
    index: int
    op: str
    target: str
    outcome: str
    frame_revision: int = 0
    due_tick: int = 0


@dataclass
class TxRun:
    tx: Tx
    index: int = 0
    results: list[Outcome] = field(default_factory=list)
    released_now: dict[str, int] = field(default_factory=dict)
    released_later: dict[str, int] = field(default_factory=dict)
    # Which events the transaction may name (a commit naming a session: its causal scope).
    sees: Callable[[int], bool] = lambda seq: True
    # Whether the successor rule judges the frames a rollback brought back and the
    # receipt counts what it released (rules.py).
    rollback_settles_frames: bool = True
    touched: set[str] = field(default_factory=set)  # frames the successor rule looks at
    superseded: set[str] = field(default_factory=set)  # retired at once by a successor
    changed: set[str] = field(default_factory=set)  # frames to re-index
    keep_results: bool = True  # False: a replay, whose results no one reads

    def note(self, op: str, target: str, outcome: str, f: Optional[R.Frame] = None) -> None:
        if self.keep_results:
            self.results.append(Outcome(self.index, op, target, outcome,
                                        f.revision if f else 0,
                                        f.retire.due_tick if f and f.retire else 0))

    def fail(self, reason: str, message: str, ref: str) -> MorphzError:
        return MorphzError(reason, message, op_index=self.index, op=self.tx.ops[self.index].op,
                           ref=ref)


def _frame(m: MindState, run: TxRun, fid: str) -> R.Frame:
    f = m.frame(fid)
    if f is None:
        raise run.fail("FRAME_NOT_FOUND", f"frame {fid} does not exist", fid)
    return f


def _check_sources(m: MindState, run: TxRun, sources: list[str]) -> None:
    meta = m.meta()
    for s in sources:
        if is_ref(s):
            if ref_seq(s) >= meta.next_seq or m.event(ref_seq(s)) is None or \
                    not run.sees(ref_seq(s)):
                raise run.fail("SOURCE_NOT_FOUND", f"source event {s} does not exist", s)
        elif m.frame(s) is None:
            raise run.fail("SOURCE_NOT_FOUND", f"source frame {s} does not exist", s)


def _cancel_retire(m: MindState, f: R.Frame) -> None:
    if f.retire is not None:
        m.set_due(f.retire.due_tick, f.id, None)
        f.retire = None
    f.state = R.ACTIVE


# -- frames --------------------------------------------------------------------------

def apply_create(m: MindState, run: TxRun, op: FrameOp) -> None:
    sources = op.sources or []
    if sources:
        _check_sources(m, run, sources)
    existing = m.frame(op.frame_id)
    if existing is not None:
        if existing.body == op.body and existing.sources == sources:
            run.note(op.op, op.frame_id, "unchanged", existing)
            return
        raise run.fail("FRAME_EXISTS", f"frame {op.frame_id} already exists with other content",
                       op.frame_id)
    f = R.Frame(op.frame_id, 1, op.body, sources, erased=op.erased)
    m.put_frame(f)
    m.append_order(op.frame_id)
    run.touched.add(f.id)
    run.changed.add(f.id)
    run.note(op.op, op.frame_id, "derived" if op.op == "derive" else "created", f)


def apply_revise(m: MindState, run: TxRun, op: FrameOp) -> None:
    f = _frame(m, run, op.frame_id)
    if f.state == R.RETIRED:
        raise run.fail("FRAME_RETIRED", f"frame {f.id} is retired: restore it before revising",
                       f.id)
    outcome = "revised"
    if f.state == R.RETIRING:
        _cancel_retire(m, f)
        run.released_later.pop(f.id, None)
        outcome = "revised (retire request cancelled)"
    if op.sources is not None:
        _check_sources(m, run, op.sources)
        f.sources = op.sources
    f.body, f.erased = op.body, op.erased  # (an op replayed after an erasure took its body)
    f.revision += 1
    m.put_frame(f)
    run.touched.add(f.id)
    run.changed.add(f.id)
    run.note(op.op, f.id, outcome, f)


# -- lifecycle -----------------------------------------------------------------------

def _observation(m: MindState, run: TxRun, target: str) -> tuple[int, R.Event, R.Observation]:
    seq = ref_seq(target)
    ev = m.event(seq) if seq < m.meta().next_seq and run.sees(seq) else None
    if ev is None:
        raise run.fail("EVENT_NOT_FOUND", f"event {target} does not exist", target)
    if ev.kind not in R.INPUT_KINDS:
        raise run.fail("NOT_AN_OBSERVATION", f"{target} is a runtime event ({ev.kind}), "
                       "not an observation", target)
    return seq, ev, m.observation(seq) or R.Observation()


def apply_retire(m: MindState, run: TxRun, target: str) -> None:
    meta = m.meta()
    if is_ref(target):
        seq, ev, obs = _observation(m, run, target)
        if obs.protected:
            raise run.fail("OBSERVATION_PROTECTED", f"{target} is protected: unprotect it first",
                           target)
        if m.is_protected_root(seq):
            raise run.fail("ROOT_REQUEST_PROTECTED", f"{target} is the root request of an "
                           "undelivered activation", target)
        if obs.retired:
            run.note("retire", target, "unchanged")
            return
        obs.retired, obs.reason = True, run.tx.reason
        m.put_observation(seq, obs)
        run.released_now[target] = len(ev.text.encode())
        run.note("retire", target, "retired")
        return
    f = _frame(m, run, target)
    if f.protected:
        raise run.fail("FRAME_PROTECTED", f"frame {f.id} is protected: unprotect it first", f.id)
    if f.state == R.ACTIVE:
        f.generation += 1
        f.state = R.RETIRING
        f.retire = R.RetireRequest(f.generation, meta.tick, meta.tick + meta.window,
                                   run.tx.reason, f.revision)
        m.set_due(f.retire.due_tick, f.id, f.generation)
        m.put_frame(f)
        run.released_later[f.id] = f.size()
    # A repeated retire keeps the original due tick (CORE-11).
    run.touched.add(f.id)
    run.note("retire", f.id, f.state if f.state == R.RETIRING else "unchanged", f)


def apply_restore(m: MindState, run: TxRun, target: str) -> None:
    if is_ref(target):
        seq, _, obs = _observation(m, run, target)
        if not obs.retired:
            run.note("restore", target, "unchanged")
            return
        obs.retired, obs.reason = False, ""
        m.put_observation(seq, obs)
        run.released_now.pop(target, None)
        run.note("restore", target, "restored")
        return
    f = _frame(m, run, target)
    if f.state == R.ACTIVE:
        run.note("restore", f.id, "unchanged", f)
        return
    _cancel_retire(m, f)
    m.put_frame(f)
    run.released_later.pop(f.id, None)
    run.touched.add(f.id)  # a restored frame may be the successor of a retiring one
    run.note("restore", f.id, "restored", f)


def apply_protect(m: MindState, run: TxRun, target: str, on: bool) -> None:
    op = "protect" if on else "unprotect"
    if is_ref(target):
        seq, _, obs = _observation(m, run, target)
        if on and obs.retired:
            raise run.fail("OBSERVATION_RETIRED", f"{target} is retired: restore it before protecting", target)
        if obs.protected == on:
            run.note(op, target, "unchanged")
            return
        obs.protected = on
        m.put_observation(seq, obs)
        run.note(op, target, "protected" if on else "unprotected")
        return
    f = _frame(m, run, target)
    if on and f.state == R.RETIRED:
        raise run.fail("FRAME_RETIRED", f"frame {f.id} is retired: restore it before protecting",
                       f.id)
    outcome = "protected" if on else "unprotected"
    if on and f.state == R.RETIRING:
        _cancel_retire(m, f)
        run.released_later.pop(f.id, None)
        outcome = "protected (retire request cancelled)"
    elif f.protected == on:
        run.note(op, f.id, "unchanged", f)
        return
    f.protected = on
    m.put_frame(f)
    run.note(op, f.id, outcome, f)


# -- relations and order ------------------------------------------------------------------

def apply_relate(m: MindState, run: TxRun, op: EdgeOp) -> None:
    edge = f"{op.subject} {op.name} {op.object}"
    for fid in (op.subject, op.object):
        _frame(m, run, fid)
    present = m.has_relation(op.subject, op.name, op.object)
    if op.op == "relate":
        if present:
            run.note(op.op, edge, "unchanged")
            return
        m.add_relation(op.subject, op.name, op.object)
        run.touched.update((op.subject, op.object))
        run.note(op.op, edge, "related")
    else:
        if not present:
            raise run.fail("RELATION_NOT_FOUND", f"no relation {edge}", edge)
        m.remove_relation(op.subject, op.name, op.object)
        run.note(op.op, edge, "unrelated")


def apply_place(m: MindState, run: TxRun, op: PlaceOp) -> None:
    _frame(m, run, op.frame_id)
    order = [x for x in m.order() if x != op.frame_id]
    if op.where == "first":
        pos = 0
    elif op.where == "last":
        pos = len(order)
    else:
        if op.anchor == op.frame_id or op.anchor not in order:
            raise run.fail("PLACE_ANCHOR_INVALID",
                           f"{op.anchor} is not another frame in the order", op.anchor)
        pos = order.index(op.anchor) + (1 if op.where == "after" else 0)
    m.place(op.frame_id, pos)
    run.note("place", op.frame_id, f"placed {op.where} {op.anchor}".strip())


# -- checkpoints ---------------------------------------------------------------------------

def apply_checkpoint(m: MindState, run: TxRun, op: NamedOp) -> None:
    if op.op == "checkpoint":
        if m.checkpoint(op.name) is not None:
            raise run.fail("CHECKPOINT_EXISTS", f"checkpoint {op.name} exists", op.name)
        m.put_checkpoint(R.Checkpoint(op.name, m.meta().revision, list(m.frames()),
                                      [list(e) for e in m.relations()], m.order()))
        run.note(op.op, op.name, "checkpointed")
        return
    cp = m.checkpoint(op.name)
    if cp is None:
        raise run.fail("CHECKPOINT_NOT_FOUND", f"no checkpoint {op.name}", op.name)
    if op.op == "drop-checkpoint":
        m.remove_checkpoint(op.name)
        run.note(op.op, op.name, "dropped")
        return
    _rollback(m, run, cp)
    run.note(op.op, op.name, f"rolled back to revision {cp.revision}")


def _rollback(m: MindState, run: TxRun, cp: R.Checkpoint) -> None:
    """Make the Mind equal the snapshot; frame revisions keep rising (history stays)."""
    saved = {f.id: f for f in cp.frames}
    for cur in list(m.frames()):
        if cur.id not in saved:
            if run.rollback_settles_frames and cur.state != R.RETIRED:
                run.released_now[cur.id] = cur.size()  # it leaves the Mind now
            _cancel_retire(m, cur)
            m.remove_frame(cur.id)
            run.changed.add(cur.id)
    for fid, snap in saved.items():
        cur = m.frame(fid) or m.last_version(fid)
        if cur is not None and m.frame(fid) is not None and _same_content(cur, snap):
            continue
        if run.rollback_settles_frames:
            _count_release(run, m.frame(fid), snap)
        if cur is not None and cur.retire is not None:
            m.set_due(cur.retire.due_tick, fid, None)
        restored = R.Frame(**{**snap.__dict__})
        restored.revision = max(snap.revision, cur.revision if cur else 0) + 1
        restored.generation = max(snap.generation, cur.generation if cur else 0)
        if restored.retire is not None:
            restored.retire.generation = restored.generation
            restored.retire.frame_revision = restored.revision
            m.set_due(restored.retire.due_tick, fid, restored.generation)
        m.put_frame(restored)
        run.changed.add(fid)
    if run.rollback_settles_frames:  # the rule judges the final state, these included
        run.touched.update(saved)
    wanted = {tuple(e) for e in cp.relations}
    for e in m.relations():
        if e not in wanted:
            m.remove_relation(*e)
    for e in wanted:
        m.add_relation(*e)
    m.put_order(list(cp.order))


def _count_release(run: TxRun, cur: Optional[R.Frame], snap: R.Frame) -> None:
    """A frame a rollback puts back retired leaves now, retiring leaves after its window."""
    was = cur.state if cur is not None else R.RETIRED  # absent: it occupied nothing
    if snap.state == R.RETIRED and was != R.RETIRED:
        run.released_now[snap.id] = snap.size()
    elif snap.state == R.RETIRING and was == R.ACTIVE:
        run.released_later[snap.id] = snap.size()


def _same_content(a: R.Frame, b: R.Frame) -> bool:
    return (a.body, a.sources, a.state, a.protected, a.retire) == \
        (b.body, b.sources, b.state, b.protected, b.retire)


# -- sessions ------------------------------------------------------------------------------

def apply_session(m: MindState, run: TxRun, op: NamedOp) -> None:
    s = m.session(op.name)
    if s is None:
        raise run.fail("SESSION_NOT_FOUND", f"no session {op.name}", op.name)
    want = R.RETIRED if op.op == "retire-session" else R.ACTIVE
    if s.state == want:
        run.note(op.op, s.id, "unchanged")
        return
    s.state = want
    m.put_session(s)
    run.note(op.op, s.id, "session retired" if want == R.RETIRED else "session restored")


# -- the successor rule --------------------------------------------------------------------

RELATIONS_READ_EACH = 16  # touched frames whose relations are read without asking first


def apply_successor_rule(m: MindState, run: TxRun) -> None:
    """A retiring frame leaves at once when, in the final state, a non-retired successor
    lists it among its sources and `successor supersedes old` holds (CORE-13)."""
    candidates = set(run.touched)
    # Reading each touched frame's relations is a read each; a transaction touching many
    # asks first whether any relation exists (one read). A small one reads its frames'
    # relations, which the write path's owner cache keeps (a warm commit reads nothing).
    related = len(run.touched) <= RELATIONS_READ_EACH or m.has_relations()
    for fid in run.touched:  # frames a touched successor cites or supersedes
        f = m.frame(fid)
        if f is not None:
            if f.sources:
                candidates.update(s for s in f.sources if not is_ref(s))
            if related:
                candidates.update(o for (_, n, o) in m.relations_from(fid) if n == SUPERSEDES)
    # Judge every candidate on the state the ops left, then retire: retiring one frame
    # must not change whether another qualifies (chains retire whole, in any naming).
    leaving: list[tuple[R.Frame, str]] = []
    for fid in sorted(candidates):
        old = m.frame(fid)
        if old is None or old.state != R.RETIRING:
            continue
        for succ_id, name, _ in m.relations_to(fid):
            succ = m.frame(succ_id) if name == SUPERSEDES else None
            if succ is not None and succ.state != R.RETIRED and fid in succ.sources:
                leaving.append((old, succ_id))
                break
    for old, succ_id in leaving:
        m.set_due(old.retire.due_tick, old.id, None)
        old.state = R.RETIRED
        run.superseded.add(old.id)
        m.put_frame(old)
        run.released_now[old.id] = run.released_later.pop(old.id, old.size())
        run.results.append(Outcome(run.index, "retire", old.id,
                                   f"retired (superseded by {succ_id})", old.revision))


_DISPATCH: dict[str, Callable[[MindState, TxRun, Op], None]] = {
    "create": apply_create,
    "derive": apply_create,
    "revise": apply_revise,
    "relate": apply_relate,
    "unrelate": apply_relate,
    "place": apply_place,
    "checkpoint": apply_checkpoint,
    "rollback": apply_checkpoint,
    "drop-checkpoint": apply_checkpoint,
    "retire-session": apply_session,
    "restore-session": apply_session,
}


def apply_ops(m: MindState, tx: Tx, sees: Optional[Callable[[int], bool]] = None, *,
              rollback_settles_frames: bool = True, results: bool = True) -> TxRun:
    """Apply the ops in order, then the successor rule. `results=False`: no outcome
    list (the state written is the same)."""
    run = TxRun(tx, rollback_settles_frames=rollback_settles_frames, keep_results=results)
    if sees is not None:
        run.sees = sees
    for run.index, op in enumerate(tx.ops):
        if isinstance(op, TargetsOp):
            for t in op.targets:
                if op.op == "retire":
                    apply_retire(m, run, t)
                elif op.op == "restore":
                    apply_restore(m, run, t)
                else:
                    apply_protect(m, run, t, op.op == "protect")
        else:
            _DISPATCH[op.op](m, run, op)
    apply_successor_rule(m, run)
    return run
