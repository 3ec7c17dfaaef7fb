"""Erasure (docs/privacy.md; PRIV-01..03): the content a plan names (erase_select.py)
removed from every row of the Mind that holds it, in the commit of the `erasure` event
that says what it took.

- An event erased whole keeps its envelope (seq, id, kind, session, actor, times, request
  id, causal refs, link) and its runtime facts; its text goes, and its data gets a mark:
  the digest of its first record (the chain's content digest: envelope.py) and the
  erasures that took it.
- A transaction keeps its ops; a frame op whose body is erased keeps its frame, sources
  and place with an empty body and the erasure's ref, so a replay of the history makes
  the erased frames; its text is rendered again from what is left, and it is marked too.
- A frame version (and the frame, when it is the present one, and every checkpoint that
  copied it) keeps all but its body, and names the erasure.

The `erasure` event lists each rewritten event as (seq, digest before, digest of the
record left): audit checks both ways (chain.py). Replaying the history gives exactly
the rows written here, so audit reports `match` and a projection rebuild changes
nothing."""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from morphz.services.transaction.core.erase_select import Plan
from morphz.services.transaction.core.results import ErasureResult, Reclaimed
from morphz.services.transaction.core.txlang import FRAME_OPS, Tx
from morphz.shared.errors import MorphzError
from morphz.shared.limits import STRING_CHARS
from morphz.shared.mind import envelope, records as R, snapshots
from morphz.shared.mind.state import MindState
from morphz.shared.mind.view import MindView

# Events one erasure event takes at most: a larger selection is erased in steps, each
# its own commit (a commit stores at most commit_bytes) and its own erasure event.
ERASE_BATCH = 20_000


def rewrite(m: MindState, plan: Plan, erasure: str) -> tuple[list[tuple[int, str, str]],
                                                           list[tuple[str, int]]]:
    """Remove what `plan` names, as erasure `erasure` (@eN, the event about to be
    applied): (the erasure's entries (seq, digest before, digest after) in seq order, the
    frame versions (id, revision) it took)."""
    what = [_erase_event(m, seq, erasure) for seq in plan.events]
    what += [_erase_event(m, seq, erasure, frames)
             for seq, frames in sorted(plan.transactions.items())]
    what.sort()
    taken: set[tuple[str, int]] = set()
    for f, present in plan.versions:
        m.erase_frame_version(_erased(f, erasure), present)
        taken.add((f.id, f.changed_at))
    for cp in plan.checkpoints:
        m.erase_checkpoint(replace(cp, frames=[
            _erased(f, erasure) if (f.id, f.changed_at) in taken else f for f in cp.frames]))
    return what, sorted(taken)


def _erased(f: R.Frame, erasure: str) -> R.Frame:
    return replace(f, body="", erased=erasure)


def _erase_event(m: MindState, seq: int, erasure: str,
                 frames: frozenset[str] | set[str] | None = None) -> tuple[int, str, str]:
    """Rewrite event `seq` without its content (`frames`: a transaction's ops on these
    frames lose their bodies; None: the whole text goes); its entry in the erasure."""
    ev, raw = m.event_record(seq)
    before = envelope.content_digest(ev.data, raw)
    old = envelope.mark(ev.data)
    if frames is None:
        ev.text = ""
    else:
        tx = ev.data["tx"]
        for op in tx["ops"]:
            if op.get("op") in FRAME_OPS and op.get("frame_id") in frames:
                op["body"], op["erased"] = "", erasure
        ev.text = Tx.from_dict(tx).render()
    ev.data[envelope.ERASED] = {"digest": before,
                                "by": [*(old["by"] if old else ()), erasure]}
    return seq, before, envelope.raw_digest(m.erase_event(ev))


def version_name(frame_id: str, revision: int) -> str:
    """How a reply names a frame version: ID@REVISION (the context revision)."""
    return f"{frame_id}@{revision}"


def check_reason(reason: str) -> str:
    """An erasure says why (PRIV-01): ERASE_REASON_REQUIRED without one."""
    if not isinstance(reason, str) or not reason.strip():
        raise MorphzError("ERASE_REASON_REQUIRED", "an erasure must give its reason",
                          field="reason")
    if len(reason) > STRING_CHARS.max:
        raise MorphzError(STRING_CHARS.reason, f"reason longer than {STRING_CHARS.max} "
                          "characters", field="reason", **STRING_CHARS.details())
    return reason.strip()


def showing_snapshots(m: MindView, plans: Sequence[Plan]) -> tuple[str, ...]:
    """The encoding snapshots that showed what the plans take."""
    seqs = {s for p in plans for s in p.events}
    frames = {(f.id, f.revision) for p in plans for f, _ in p.versions}
    return tuple(snapshots.showing(m, seqs, frames)) if seqs or frames else ()


def erasure_result(context: str, plans: Sequence[Plan], erasures: Sequence[str],
                   shown: Sequence[str], commit_seq: int = 0,
                   reclaimed: dict | None = None) -> ErasureResult:
    """The reply: what the plans took (`erasures` empty: a dry run's, nothing taken)."""
    versions = sorted({(f.id, f.changed_at) for p in plans for f, _ in p.versions})
    return ErasureResult(
        context, not erasures, tuple(erasures),
        tuple(R.ref(s) for s in sorted({s for p in plans for s in p.events})),
        tuple(R.ref(s) for s in sorted({s for p in plans for s in p.transactions})),
        tuple(sorted({f.id for p in plans for f, present in p.versions if present})),
        tuple(version_name(fid, r) for fid, r in versions),
        tuple(sorted({cp.name for p in plans for cp in p.checkpoints})), tuple(shown),
        commit_seq, Reclaimed(**reclaimed) if reclaimed else None)
