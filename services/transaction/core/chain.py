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
    links = Verifier()
    for seq, raw, value in events:
        if not links.add(seq, raw, value):
            break
    return links.result()


class Verifier:
    """verify() an event at a time (audit walks the history once, for the chain and the
    replay together, holding no more of it than the replay does)."""

    def __init__(self) -> None:
        self._prev_hash: Optional[str] = None
        self._expected_seq = 0
        self._checked = 0
        self._chained = False
        self._broken: Optional[dict] = None

    def add(self, seq: int, raw: bytes, value: Any) -> bool:
        """Judge the next stored event; False once a link is broken (the rest is not
        judged: the first broken link is the answer)."""
        if self._broken is not None:
            return False
        if seq != self._expected_seq:
            return self._break(self._expected_seq, "missing")
        if not isinstance(value, dict):  # the ValueError decoding raised, or not a record
            return self._break(seq, "undecodable")
        data = value.get("data") or {}
        if "prev" in data:
            self._chained = True
            self._checked += 1
            if data["prev"] != self._prev_hash:
                return self._break(seq, "predecessor changed" if seq else "unexpected link")
        elif self._chained:
            return self._break(seq, "link missing")
        self._prev_hash = R.event_hash(raw)
        self._expected_seq += 1
        return True

    def _break(self, seq: int, problem: str) -> bool:
        self._broken = {"match": False, "checked": self._checked,
                        "first_broken": R.ref(seq), "problem": problem}
        return False

    def result(self) -> dict:
        return self._broken or {"match": True, "checked": self._checked,
                                "first_broken": "", "problem": ""}
