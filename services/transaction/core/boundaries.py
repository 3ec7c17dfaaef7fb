"""Semantic boundaries of a transaction: what it read and what it wrote.

Conflicts are judged per boundary, not per Mind version (seed 001): a transaction
based on version B commits at the latest version when none of its boundaries changed
after B, and is rejected, naming the changed ones, when any did.

  frame:ID        frame content (and existence: creating ID reads it)
  life:TARGET     lifecycle of a frame or an @eN observation (retire, protect...)
  edge:S N O      one exact relation edge
  sources:ID      a frame's declared sources
  order           frame projection order
  checkpoint:N    checkpoint identity
"""
from __future__ import annotations

from morphz.services.transaction.core.txlang import (
    EXACT_VERSION_OPS, EdgeOp, FrameOp, NamedOp, PlaceOp, TargetsOp, Tx, is_ref)
from morphz.shared.errors import MorphzError
from morphz.shared.mind.state import MindState


def footprint(tx: Tx) -> tuple[set[str], set[str]]:
    """(reads, writes) of a transaction, from its operations alone."""
    reads: set[str] = set()
    writes: set[str] = set()
    for op in tx.ops:
        if isinstance(op, FrameOp):
            reads.add(f"frame:{op.frame_id}")
            writes.add(f"frame:{op.frame_id}")
            if op.op == "revise":  # revising a retiring frame cancels its retirement
                reads.add(f"life:{op.frame_id}")
                writes.add(f"life:{op.frame_id}")
            if op.sources is not None:
                writes.add(f"sources:{op.frame_id}")
                reads.update(f"frame:{s}" for s in op.sources if not is_ref(s))
        elif isinstance(op, TargetsOp):
            for t in op.targets:
                reads.add(f"life:{t}")
                writes.add(f"life:{t}")
        elif isinstance(op, EdgeOp):
            edge = f"edge:{op.subject} {op.name} {op.object}"
            reads.add(edge)
            writes.add(edge)
        elif isinstance(op, PlaceOp):
            reads.add("order")
            writes.add("order")
        elif isinstance(op, NamedOp) and op.op in ("checkpoint", "rollback", "drop-checkpoint"):
            reads.add(f"checkpoint:{op.name}")
            writes.add(f"checkpoint:{op.name}")
    return reads, writes


def check_base(m: MindState, tx: Tx, latest: int) -> bool:
    """Accept a transaction at `latest`: exactly, or rebased when none of its boundaries
    changed after its base (True), else reject naming what changed. Never last-writer-wins."""
    base = tx.base_version
    if base > latest:
        raise MorphzError("BASE_VERSION_AHEAD", f"base-version {base} is ahead of the latest "
                          f"revision {latest}", base=base, latest=latest)
    if base == latest:
        return False
    exact = sorted({o.op for o in tx.ops if o.op in EXACT_VERSION_OPS})
    if exact:
        raise MorphzError("EXACT_VERSION_REQUIRED", f"{', '.join(exact)} need(s) the exact "
                          f"latest revision {latest}, not {base}", base=base, latest=latest,
                          ops=exact)
    reads, writes = footprint(tx)
    changed = [{"boundary": b, "revision": r} for b in sorted(reads | writes)
               if (r := m.boundary_revision(b)) > base]
    if changed:
        raise MorphzError("TX_CONFLICT", f"{len(changed)} boundar{'y' if len(changed) == 1 else 'ies'}"
                          f" changed since base-version {base}: reread and merge", base=base,
                          latest=latest, changed=changed)
    return True
