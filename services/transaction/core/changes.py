"""The boundaries a request actually changed, read from the candidate state's own
writes (before vs after), whatever operation made them: a rollback rewrites frames,
edges, order and lifecycles it never names, and each of those must be stamped.

  frame:ID     the frame appeared or disappeared, or its body or revision changed
  sources:ID   appeared or disappeared, or its sources changed
  life:ID      appeared or disappeared, or its state, protection or retire request changed
  life:@eN     the observation's retired or protected flag changed
  edge:S N O   the edge was added or removed
  order        frames present before and after are in another relative order (appending
               a new frame or dropping a removed one is not a change of order)
  checkpoint:N created, dropped or rewritten
  session:S    the session's attention state or level changed
"""
from __future__ import annotations

from morphz.shared.mind import records as R
from morphz.shared.mind.state import FrameFacts, MindState
from morphz.services.transaction.core.boundaries import ORDER, Boundary


def changed_boundaries(m: MindState, known: frozenset[str] = frozenset()) -> set[Boundary]:
    """Every boundary the writes of `m` changed; frames whose boundaries are all in
    `known` (already stamped) are not decoded."""
    changes = m.written_changes()
    out: set[Boundary] = set()
    for fid, existed, exists in changes.frames:
        names = (Boundary.frame(fid), Boundary.sources(fid), Boundary.life(fid))
        if not (existed and exists):
            out.update(names)
        elif not known.issuperset(names):
            for name, before, after in zip(names, changes.frame_before(fid),
                                           FrameFacts.of(m.frame(fid))):
                if before != after:
                    out.add(name)
    for seq, before, after in changes.observations:
        if before != after:
            out.add(Boundary.life(R.ref(seq)))
    out.update(Boundary.edge(s, n, o) for s, n, o in changes.relations)
    if changes.reranked and _order_changed(m):
        out.add(ORDER)
    out.update(Boundary.checkpoint(name) for name in changes.checkpoints)
    for sid, before, after in changes.sessions:
        if before != after:
            out.add(Boundary.session(sid))
    return out


def _order_changed(m: MindState) -> bool:
    """Whether frames present before and after are in another relative order (only a
    frame that had a rank and still has another one can have moved; creating a frame or
    removing one changes no relative order)."""
    before, after = m.order_before(), m.order()
    common = set(before) & set(after)
    return [f for f in before if f in common] != [f for f in after if f in common]
