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

from typing import Optional

from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.services.transaction.core.boundaries import ORDER, Boundary

_TABLES = frozenset(("frames", "observations", "relations", "order_rank", "checkpoints",
                     "sessions"))


def changed_boundaries(m: MindState, known: frozenset[str] = frozenset()) -> set[Boundary]:
    """Every boundary the writes of `m` changed; rows whose boundaries are all in `known`
    (already stamped) are not decoded."""
    rows = m.changed_rows(_TABLES)
    out: set[Boundary] = set()
    for (fid,), before, after in rows["frames"]:
        names = (Boundary.frame(fid), Boundary.sources(fid), Boundary.life(fid))
        if before is None or after is None:
            out.update(names)
        elif not known.issuperset(names):
            out.update(_frame_changes(names, R.decode_json(before), m.frame(fid)))
    for (seq,), before, after in rows["observations"]:
        if _flags(before) != _flags(after):
            out.add(Boundary.life(R.ref(seq)))
    out.update(Boundary.edge(s, n, o) for (s, n, o), _, _ in rows["relations"])
    if _order_changed(m, rows["order_rank"]):
        out.add(ORDER)
    out.update(Boundary.checkpoint(name) for (name,), _, _ in rows["checkpoints"])
    for (sid,), before, after in rows["sessions"]:
        if _attention(before) != _attention(after):
            out.add(Boundary.session(sid))
    return out


def _frame_changes(names: tuple[str, str, str], b: dict, a: R.Frame) -> list[str]:
    retire = b.get("retire") or {}
    after_retire = a.retire
    return [name for name, changed in zip(names, (
        (b["body"], b["revision"]) != (a.body, a.revision),
        b["sources"] != a.sources,
        (b["state"], b["protected"], retire.get("generation"), retire.get("due_tick")) !=
        (a.state, a.protected, after_retire.generation if after_retire else None,
         after_retire.due_tick if after_retire else None))) if changed]


def _flags(raw: Optional[bytes]) -> tuple:
    obs = R.decode_json(raw) if raw is not None else {}
    return bool(obs.get("retired")), bool(obs.get("protected"))


def _attention(raw: Optional[bytes]) -> tuple:
    s = R.decode_json(raw) if raw is not None else {}
    return s.get("state"), s.get("level")


def _order_changed(m: MindState, ranks: list) -> bool:
    # Only a frame that had a rank and still has another one can have moved; creating a
    # frame (a first rank) or removing one (no rank) changes no relative order.
    if not any(before is not None and after is not None for _, before, after in ranks):
        return False
    before, after = m.order_before(), m.order()
    common = set(before) & set(after)
    return [f for f in before if f in common] != [f for f in after if f in common]
