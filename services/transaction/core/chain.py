"""The history's hash chain: each event records the SHA-256 of its predecessor's stored
bytes (`data["prev"]`), so an event edited, removed or slipped into the store by anything
but the transaction path breaks a link that audit reports.

The link is set when a live event is built (replay applies stored events as they are);
the context's meta keeps the hash of its last event (`Meta.chain`, set by MindState)."""
from __future__ import annotations

from typing import Any, Iterable, Optional

from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState


def link(m: MindState, ev: R.Event) -> None:
    """Record the hash of the event before `ev` (the first event has none)."""
    meta = m.meta()
    if meta is not None and meta.next_seq > 0:
        ev.data["prev"] = meta.chain


def verify(events: Iterable[tuple[int, bytes, Any]]) -> dict:
    """Walk stored events in order, (seq, stored bytes, their decoded JSON or the
    ValueError decoding raised): the first link that does not hold, if any. Events
    written before the chain existed carry no link and are not judged; once one event
    carries a link, every later one must (an event slipped in without one is caught)."""
    prev_hash: Optional[str] = None
    expected_seq = 0
    checked = 0
    chained = False
    for seq, raw, value in events:
        if seq != expected_seq:
            return {"match": False, "checked": checked, "first_broken": R.ref(expected_seq),
                    "problem": "missing"}
        if not isinstance(value, dict):  # the ValueError decoding raised, or not a record
            return {"match": False, "checked": checked, "first_broken": R.ref(seq),
                    "problem": "undecodable"}
        data = value.get("data") or {}
        if "prev" in data:
            chained = True
            checked += 1
            if data["prev"] != prev_hash:
                return {"match": False, "checked": checked, "first_broken": R.ref(seq),
                        "problem": "predecessor changed" if seq else "unexpected link"}
        elif chained:
            return {"match": False, "checked": checked, "first_broken": R.ref(seq),
                    "problem": "link missing"}
        prev_hash = R.event_hash(raw)
        expected_seq += 1
    return {"match": True, "checked": checked, "first_broken": "", "problem": ""}
