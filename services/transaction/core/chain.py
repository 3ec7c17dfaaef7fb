"""The history's hash chain: each event records the hash of its predecessor's envelope
(`data["link"]`; shared/mind/envelope.py), so an event edited, removed or slipped into
the store by anything but the transaction path breaks a link that audit reports, while an
erasure, which removes content and keeps the envelope, breaks none (PRIV-02).

Stores written before envelopes keep their links (`data["prev"]`, the predecessor's
stored bytes' hash) up to the seq their meta records (Meta.links_from), and verify as
they did. The link is set when a live event is built (replay applies stored events as
they are); the context's meta keeps the hash the next event links with (`Meta.chain`).

An erased event keeps a mark (the digest of its first record, the erasures that took its
content) and each `erasure` event lists what it took: (seq, digest before, digest of the
record left). Audit checks both ways: every event marked is listed by the erasures its
mark names, each listed one is marked, and the record left is the one the last erasure
made, so what an erasure left cannot be edited unseen either."""
from __future__ import annotations

from typing import Any, Iterable, Optional

from morphz.shared.mind import envelope, records as R
from morphz.shared.mind.envelope import LINK, PREV
from morphz.shared.mind.state import MindState


def link(m: MindState, ev: R.Event) -> None:
    """Record the link to the event before `ev` (the first event's is "")."""
    meta = m.meta()
    if meta is None or meta.next_seq == 0:
        ev.data[LINK] = ""
    elif meta.links_from is not None:
        ev.data[LINK] = meta.chain
    else:  # the first event since envelopes of a store written before them
        ev.data[LINK] = m.envelope_link(meta.next_seq - 1)


def verify(events: Iterable[tuple[int, bytes, Any]]) -> dict:
    """Walk stored events in order, (seq, stored bytes, their decoded JSON or the
    ValueError decoding raised): the first link that does not hold, if any."""
    links = Verifier()
    for seq, raw, value in events:
        if not links.add(seq, raw, value):
            break
    return links.result()


class _Erased:
    """An erased event met on the walk, until the last erasure its mark names is met."""
    __slots__ = ("digest", "now", "by")

    def __init__(self, digest: str, now: str, by: set[str]) -> None:
        self.digest, self.now, self.by = digest, now, by


class Verifier:
    """verify() an event at a time (audit walks the history once, for the chain and the
    replay together, holding no more of it than the replay does, and the erased events
    whose erasure is still to come)."""

    def __init__(self) -> None:
        self._prev_raw: Optional[str] = None  # predecessor's first record's bytes' hash
        self._prev_envelope = ""  # and its envelope's
        self._expected_seq = 0
        self._checked = 0
        self._erased = 0
        self._chained = False  # a `prev` link was met (events before chains carry none)
        self._enveloped = False  # a `link` was met: every later event must carry one
        self._pending: dict[int, _Erased] = {}
        self._broken: Optional[dict] = None

    def add(self, seq: int, raw: bytes, value: Any) -> bool:
        """Judge the next stored event; False once a link is broken (the rest is not
        judged: the first broken link is the answer)."""
        if self._broken is not None:
            return False
        if seq != self._expected_seq:
            return self._break(self._expected_seq, "missing")
        data = value.get("data") if isinstance(value, dict) else None
        if not isinstance(data, dict):  # the ValueError decoding raised, or not a record
            return self._break(seq, "undecodable")
        problem = self._judge_link(seq, data)
        if problem:
            return self._break(seq, problem)
        now = envelope.raw_digest(raw)
        content = now
        mark = envelope.mark(data)
        if envelope.ERASED in data:
            by = mark.get("by") if mark is not None else None
            if not (isinstance(mark.get("digest") if mark else None, str)
                    and isinstance(by, list) and by and all(isinstance(r, str) for r in by)):
                return self._break(seq, "erasure mark unreadable")
            content = mark["digest"]
            self._pending[seq] = _Erased(content, now, set(by))
            self._erased += 1
        self._prev_raw = content
        self._prev_envelope = envelope.envelope_hash(value, content)
        if value.get("kind") == R.ERASURE and not self._erasure(seq, data):
            return False
        self._expected_seq += 1
        return True

    def _judge_link(self, seq: int, data: dict) -> str:
        """Why the event's own link does not hold ("" when it does)."""
        if LINK in data:
            self._enveloped = True
            self._checked += 1
            if data[LINK] != (self._prev_envelope if seq else ""):
                return "predecessor changed" if seq else "unexpected link"
        elif PREV in data and not self._enveloped:
            self._chained = True
            self._checked += 1
            if data[PREV] != self._prev_raw:
                return "predecessor changed" if seq else "unexpected link"
        elif self._chained or self._enveloped:
            return "link missing"
        return ""

    def _erasure(self, seq: int, data: dict) -> bool:
        """An erasure's list against the marks met: each event it names is marked by it,
        with the digest it names; for the last erasure of an event, the record left is
        the one it made."""
        ref = R.ref(seq)
        what = data.get("what")
        if not isinstance(what, list):
            return self._break(seq, "erasure unreadable")
        for entry in what:
            if not (isinstance(entry, list) and len(entry) == 3
                    and isinstance(entry[0], int) and entry[0] in self._pending):
                return self._break(seq, "erasure names an event not marked erased")
            erased = self._pending[entry[0]]
            if ref not in erased.by:
                return self._break(seq, "erasure names an event not marked erased")
            if erased.digest != entry[1]:
                return self._break(entry[0], "erased digest differs")
            erased.by.discard(ref)
            if not erased.by:
                if erased.now != entry[2]:
                    return self._break(entry[0], "erased event changed")
                del self._pending[entry[0]]
        return True

    def _break(self, seq: int, problem: str) -> bool:
        self._broken = {"match": False, "checked": self._checked, "erased": self._erased,
                        "first_broken": R.ref(seq), "problem": problem}
        return False

    def result(self) -> dict:
        if self._broken is None and self._pending:  # marked by an erasure never met
            self._break(min(self._pending), "erasure missing")
        return self._broken or {"match": True, "checked": self._checked,
                                "erased": self._erased, "first_broken": "", "problem": ""}
