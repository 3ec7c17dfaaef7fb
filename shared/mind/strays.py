"""Rows no commit wrote, found for rebuild-projections and create-context to move aside
(quarantine) before they repair or create a context."""
from __future__ import annotations

from morphz.shared.mind.state import MindState
from morphz.shared.mind.tables import SIDE_TABLES, TABLES


def strays(context: str, m: MindState) -> list[tuple[str, tuple]]:
    """Rows no commit could have written: events at or past the meta's next sequence (a
    row slipped in at the tail blocks every later append), and event ids naming such a
    seq or none. The history and its chain end where the meta says."""
    end = m.require_meta(context).next_seq
    out = [("events", (seq,)) for seq in m.event_seqs_from(end)]
    for k, raw in m.row_items("event_ids"):
        seq = raw.decode("ascii", "replace")
        if not seq.isdigit() or int(seq) >= end:
            out.append(("event_ids", k))
    return out


def orphans(m: MindState) -> list[tuple[str, tuple]]:
    """Every row of a context that has rows but no meta (written by something other than
    the transaction path: it was never created), to move aside before creating it."""
    if m.meta() is not None or not m.commit_seq:
        return []
    return [(t, k) for t in TABLES if t != "quarantine" and t not in SIDE_TABLES
            for k in m.rows(t)]
