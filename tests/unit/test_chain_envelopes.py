"""The chain over envelopes (services/transaction/core/chain.py, shared/mind/envelope.py):
a history whose content was erased still verifies, the record an erasure left cannot be
edited unseen, and a history written before envelopes (links by stored bytes) verifies
with and without erasures, also where the envelope links begin after it (PRIV-02)."""
from __future__ import annotations

import json

import pytest

from morphz.services.transaction.core.chain import verify
from morphz.shared.mind import envelope, records as R


def history(n: int, legacy_until: int = 0) -> list[dict]:
    """n events, linked as the server links them: by stored bytes below `legacy_until`
    (the first with no link), by envelope from there (the first envelope link names the
    envelope of the last event linked by bytes)."""
    out: list[dict] = []
    for seq in range(n):
        ev = {"seq": seq, "id": f"id{seq}", "kind": "user-message", "time": f"t{seq}",
              "context": "c", "session": "s1", "actor": "user", "causal_refs": [],
              "text": f"message {seq} about the quarterly numbers", "request_id": "",
              "data": {}}
        if seq < legacy_until:
            if seq:
                ev["data"]["prev"] = envelope.raw_digest(_raw(out[-1]))
        else:
            ev["data"]["link"] = "" if not seq else envelope.next_link(
                out[-1], _raw(out[-1]), enveloped=True)
        out.append(ev)
    return out


def _raw(ev: dict) -> bytes:
    return R.dumps(ev)


def stored(events: list[dict]) -> list[tuple[int, bytes, dict]]:
    return [(e["seq"], _raw(e), json.loads(_raw(e))) for e in events]


def erase(events: list[dict], seqs: list[int], reason: str = "asked") -> dict:
    """What an erasure does to the history: each event's content removed and marked,
    then the erasure event listing (seq, digest before, digest after), linked last."""
    at = len(events)
    what = []
    for s in seqs:
        ev = events[s]
        before = envelope.content_digest(ev["data"], _raw(ev))
        old = envelope.mark(ev["data"])
        ev["text"] = ""
        ev["data"]["erased"] = {"digest": before,
                                "by": (list(old["by"]) if old else []) + [R.ref(at)]}
        what.append([s, before, envelope.raw_digest(_raw(ev))])
    last = events[-1]
    erasure = {"seq": at, "id": f"id{at}", "kind": R.ERASURE, "time": f"t{at}", "context": "c",
               "session": "", "actor": "admin", "causal_refs": [], "text": "",
               "request_id": "",
               "data": {"reason": reason, "what": what,
                        "link": envelope.next_link(last, _raw(last), enveloped=True)}}
    events.append(erasure)
    return erasure


@pytest.mark.parametrize("legacy_until", [0, 3, 7])
def test_priv_02_an_erased_history_verifies_with_the_count_erased(legacy_until):
    events = history(6, legacy_until)
    assert verify(stored(events)) == {"match": True, "checked": 6 - (legacy_until > 0),
                                      "erased": 0, "first_broken": "", "problem": ""}
    erase(events, [1, 4])
    report = verify(stored(events))
    assert report["match"] and report["erased"] == 2, report
    assert b"quarterly" not in _raw(events[1]) + _raw(events[4])


def test_priv_02_an_event_erased_twice_verifies_and_counts_once():
    events = history(5)
    erase(events, [2])
    erase(events, [2, 3])
    report = verify(stored(events))
    assert report["match"] and report["erased"] == 2, report


def test_priv_02_editing_what_an_erasure_left_breaks_the_chain():
    events = history(5)
    erase(events, [2])
    events[2]["actor"] = "someone else"  # an envelope field of the erased event
    assert verify(stored(events))["first_broken"] == "@e3"
    events = history(5)
    erase(events, [2])
    events[2]["text"] = "forged back in"  # the content left: the envelope keeps the digest
    report = verify(stored(events))
    assert (report["first_broken"], report["problem"]) == ("@e2", "erased event changed")


def test_priv_02_a_legacy_erased_event_edited_since_breaks_the_chain():
    """Before envelopes the successor links the first record's bytes (kept in the mark),
    so the envelope fields of an erased legacy event are held by the erasure's digest of
    what it left."""
    events = history(5, legacy_until=5)
    erase(events, [2])
    assert verify(stored(events))["match"]
    events[2]["actor"] = "someone else"
    report = verify(stored(events))
    assert (report["first_broken"], report["problem"]) == ("@e2", "erased event changed")


def test_priv_02_a_mark_without_its_erasure_or_an_erasure_without_its_mark_is_caught():
    events = history(5)
    erasure = erase(events, [2])
    events.pop()  # the erasure event gone (the last: no link names it)
    report = verify(stored(events))
    assert (report["first_broken"], report["problem"]) == ("@e2", "erasure missing")
    events.append(erasure)
    del events[2]["data"]["erased"]  # the mark gone: the envelope's content changes too
    assert verify(stored(events))["first_broken"] == "@e3"
    events = history(5)
    erasure = erase(events, [2])
    erasure["data"]["what"].append([1, "0" * 64, "0" * 64])  # names an event not erased
    report = verify(stored(events))
    assert (report["first_broken"], report["problem"]) == (
        "@e5", "erasure names an event not marked erased")
