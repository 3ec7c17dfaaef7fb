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

import json

from morphz.shared.mind.state import MindState


def changed_boundaries(m: MindState) -> set[str]:
    out: set[str] = set()
    for (fid,), before, after in m.changed_rows("frames"):
        if before is None or after is None:
            out.update((f"frame:{fid}", f"sources:{fid}", f"life:{fid}"))
            continue
        b, a = json.loads(before), json.loads(after)
        if (b["body"], b["revision"]) != (a["body"], a["revision"]):
            out.add(f"frame:{fid}")
        if b["sources"] != a["sources"]:
            out.add(f"sources:{fid}")
        if _lifecycle(b) != _lifecycle(a):
            out.add(f"life:{fid}")
    for (seq,), before, after in m.changed_rows("observations"):
        if _flags(before) != _flags(after):
            out.add(f"life:@e{seq}")
    for (s, n, o), _, _ in m.changed_rows("relations"):
        out.add(f"edge:{s} {n} {o}")
    if _order_changed(m):
        out.add("order")
    for (name,), _, _ in m.changed_rows("checkpoints"):
        out.add(f"checkpoint:{name}")
    for (sid,), before, after in m.changed_rows("sessions"):
        if _attention(before) != _attention(after):
            out.add(f"session:{sid}")
    return out


def _lifecycle(frame: dict) -> tuple:
    retire = frame.get("retire") or {}
    return (frame["state"], frame["protected"], retire.get("generation"),
            retire.get("due_tick"))


def _flags(raw) -> tuple:
    obs = json.loads(raw) if raw is not None else {}
    return bool(obs.get("retired")), bool(obs.get("protected"))


def _attention(raw) -> tuple:
    s = json.loads(raw) if raw is not None else {}
    return s.get("state"), s.get("level")


def _order_changed(m: MindState) -> bool:
    # Only a frame that had a rank and still has another one can have moved; creating a
    # frame (a first rank) or removing one (no rank) changes no relative order.
    moved = any(before is not None and after is not None
                for _, before, after in m.changed_rows("order_rank"))
    if not moved:
        return False
    before, after = m.order_before(), m.order()
    common = set(before) & set(after)
    return [f for f in before if f in common] != [f for f in after if f in common]
