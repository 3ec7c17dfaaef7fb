"""Semantic boundaries of a transaction: what it read and what it wrote.

Conflicts are judged per boundary, not per Mind version: a transaction
based on version B commits at the latest version when none of its boundaries changed
after B, and is rejected, naming the changed ones, when any did.

  frame:ID        frame content (and existence: creating ID reads it)
  life:TARGET     lifecycle of a frame or an @eN observation (retire, protect...)
  edge:S N O      one exact relation edge
  sources:ID      a frame's declared sources
  order           frame projection order
  checkpoint:N    checkpoint identity
  session:S       a session's attention (a commit made for session S reads it)

Each boundary keeps a stamp of its last change (see changes.py for what changes
which): the revision of the transaction that changed it, or, for a window retirement
at an activation, the latest revision and the tick. A transaction reads at (base, tick):
the tick is that of the activation it names, or its `(base-tick T)`, else unknown, and
then a change after its base revision counts as unseen.
"""
from __future__ import annotations

from typing import Optional

from morphz.services.transaction.core.txlang import (
    EXACT_VERSION_OPS, EdgeOp, FrameOp, NamedOp, PlaceOp, TargetsOp, Tx, is_ref)
from morphz.shared.errors import MorphzError
from morphz.shared.mind.records import Stamp
from morphz.shared.mind.state import MindState



class Boundary(str):
    """One conflict boundary. Its text is its stored key (the boundaries table) and what
    a TX_CONFLICT names, so it is a str; it is made only by these constructors, which
    spell each kind one way."""
    __slots__ = ()

    @property
    def kind(self) -> str:
        """frame, life, edge, sources, order, checkpoint, session or window."""
        return self.partition(":")[0]

    @staticmethod
    def frame(frame_id: str) -> "Boundary":
        return Boundary("frame:" + frame_id)

    @staticmethod
    def life(target: str) -> "Boundary":
        """The lifecycle of a frame (by id) or of an observation (by its @eN ref)."""
        return Boundary("life:" + target)

    @staticmethod
    def sources(frame_id: str) -> "Boundary":
        return Boundary("sources:" + frame_id)

    @staticmethod
    def edge(subject: str, name: str, obj: str) -> "Boundary":
        return Boundary(f"edge:{subject} {name} {obj}")

    @staticmethod
    def checkpoint(name: str) -> "Boundary":
        return Boundary("checkpoint:" + name)

    @staticmethod
    def session(session: str) -> "Boundary":
        return Boundary("session:" + session)


ORDER = Boundary("order")
# Stamped by every window retirement too: where the latest one happened.
WINDOW = Boundary("window")


def footprint(tx: Tx) -> tuple[set[Boundary], set[Boundary]]:
    """(reads, writes) of a transaction, from its operations alone."""
    reads: set[Boundary] = set()
    writes: set[Boundary] = set()
    for op in tx.ops:
        if isinstance(op, FrameOp):
            frame = Boundary.frame(op.frame_id)
            reads.add(frame)
            writes.add(frame)
            if op.op == "revise":  # revising a retiring frame cancels its retirement
                life = Boundary.life(op.frame_id)
                reads.add(life)
                writes.add(life)
            if op.sources is not None:
                writes.add(Boundary.sources(op.frame_id))
                reads.update(Boundary.frame(s) for s in op.sources if not is_ref(s))
        elif isinstance(op, TargetsOp):
            for t in op.targets:
                life = Boundary.life(t)
                reads.add(life)
                writes.add(life)
        elif isinstance(op, EdgeOp):
            edge = Boundary.edge(op.subject, op.name, op.object)
            reads.add(edge)
            writes.add(edge)
        elif isinstance(op, PlaceOp):
            reads.add(ORDER)
            writes.add(ORDER)
        elif isinstance(op, NamedOp) and op.op in ("checkpoint", "rollback", "drop-checkpoint"):
            point = Boundary.checkpoint(op.name)
            reads.add(point)
            writes.add(point)
            if op.op == "rollback":  # it rewrites every lifecycle, window retirements too
                reads.add(WINDOW)
    return reads, writes


def unseen(stamp: Optional[Stamp], base: int, read_tick: Optional[int]) -> bool:
    """Whether a change with this stamp happened after the read point (base, read_tick)."""
    if stamp is None or stamp.revision < base:
        return False
    if stamp.tick is None:  # a transaction's: it made its revision
        return stamp.revision > base
    return stamp.revision > base or read_tick is None or stamp.tick > read_tick


def check_base(m: MindState, tx: Tx, latest: int, *, session: str = "",
               read_tick: Optional[int] = None) -> bool:
    """Accept a transaction at `latest`: exactly, or rebased when none of its boundaries
    changed after its read point (True), else reject naming what changed. Never
    last-writer-wins."""
    base = tx.base_version
    if base > latest:
        raise MorphzError("BASE_VERSION_AHEAD", f"base-version {base} is ahead of the latest "
                          f"revision {latest}", base=base, latest=latest)
    if base == latest and not unseen(m.boundary_stamp(WINDOW), base, read_tick):
        return False  # nothing at all changed after the read point
    exact = sorted({o.op for o in tx.ops if o.op in EXACT_VERSION_OPS})
    if exact and base < latest:
        raise MorphzError("EXACT_VERSION_REQUIRED", f"{', '.join(exact)} need(s) the exact "
                          f"latest revision {latest}, not {base}", base=base, latest=latest,
                          ops=exact)
    reads, writes = footprint(tx)
    if session:
        reads.add(Boundary.session(session))
    changed = []
    for b in sorted(reads | writes):
        stamp = m.boundary_stamp(b)
        if unseen(stamp, base, read_tick):
            changed.append({"boundary": b, "revision": stamp.revision}
                           if stamp.tick is None else
                           {"boundary": b, "revision": stamp.revision, "tick": stamp.tick})
    if changed:
        raise MorphzError("TX_CONFLICT", f"{len(changed)} boundar{'y' if len(changed) == 1 else 'ies'}"
                          f" changed since base-version {base}"
                          + (f" (tick {read_tick})" if read_tick is not None else "")
                          + ": reread and merge", base=base, latest=latest, changed=changed)
    return base < latest
