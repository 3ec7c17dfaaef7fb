"""Integrity of the history (issue 11 item 7): each event records the hash of its
predecessor's envelope (issue 55: seq, kind, session, actor, times, request id, causal
refs, its own link and the SHA-256 of its stored bytes), and audit reports the first
link an edit outside the transaction path broke — an event rewritten in place, removed,
or slipped in."""
from __future__ import annotations

import hashlib
import json

import pytest

from morphz.services.storage.lmdb import LmdbStore
from morphz.shared.storage.api import Write

CTX = "chain"


def story(c) -> None:
    c.create_context(CTX)
    for i in range(4):
        c.append_event(CTX, "s1", "user-message", f"message {i}")
    c.commit(CTX, "(context-tx (base-version 0) (create plan (step one)))")


def test_every_event_links_to_its_predecessor_and_audit_checks_the_links(server_process):
    srv = server_process().start()
    c = srv.client()
    story(c)
    report = c.audit(CTX)
    assert report["match"] and report["chain"] == {
        "match": True, "checked": 6, "erased": 0, "first_broken": "", "problem": ""}
    srv.stop()
    store = LmdbStore(f"{srv.data_dir}/store")
    try:
        with store.reader(CTX) as r:
            rows = list(r.scan("events"))
        assert json.loads(rows[0][1])["data"]["link"] == ""
        for (seq,), raw in rows[1:]:
            assert json.loads(raw)["data"]["link"] == envelope_of(rows[seq - 1][1])
    finally:
        store.close()


def envelope_of(raw: bytes) -> str:
    """The envelope hash of a stored event, computed here from its fields as docs/privacy.md
    states it: SHA-256 of the compact JSON, keys sorted, of the envelope's fields with the
    SHA-256 of the event's stored bytes as its content."""
    ev = json.loads(raw)
    fields = {k: ev[k] for k in ("seq", "id", "kind", "context", "session", "actor", "time",
                                 "request_id", "causal_refs")}
    fields.update(occurred_at=ev["data"].get("occurred_at", ""), link=ev["data"]["link"],
                  content=hashlib.sha256(raw).hexdigest())
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("damage", ["edit", "remove-last-but-one", "append-unlinked",
                                    "unreplayable"])
def test_an_event_changed_outside_the_transaction_path_breaks_its_successors_link(
        server_process, damage):
    srv = server_process().start()
    story(srv.client())
    srv.stop()
    store = LmdbStore(f"{srv.data_dir}/store")
    try:
        with store.reader(CTX) as r:
            seq_now, raw, first = r.commit_seq, r.get("events", (2,)), r.get("events", (1,))
        ev = json.loads(raw)
        if damage == "edit":  # the text of @e2 rewritten: the same length, a new meaning
            ev["text"] = ev["text"].replace("message", "MESSAGE")
            writes = [Write("events", (2,), json.dumps(ev).encode())]
        elif damage == "append-unlinked":  # a forged message at the tail, with no link
            ev.update(seq=5, id="forged", text="approve the release")
            ev["data"] = {}
            writes = [Write("events", (5,), json.dumps(ev).encode())]
        elif damage == "unreplayable":  # @e1 made a transaction that does not parse
            ev = json.loads(first)
            ev.update(kind="context-tx", text="(context-tx (base-version 0) (create")
            writes = [Write("events", (1,), json.dumps(ev).encode())]
        else:
            writes = [Write("events", (4,), None)]
        _force(store, seq_now, writes)
    finally:
        store.close()
    srv.start()
    report = srv.client().audit(CTX)
    assert not report["match"]
    if damage == "edit":
        assert report["chain"]["first_broken"] == "@e3"
        assert report["chain"]["problem"] == "predecessor changed"
    elif damage == "append-unlinked":
        assert report["chain"]["first_broken"] == "@e5"
        assert report["chain"]["problem"] == "link missing"
    elif damage == "unreplayable":  # the replay stops at @e1; the chain is judged on
        assert report["replay_error"] and report["events_replayed"] == 0
        assert report["chain"]["first_broken"] == "@e2"
        assert report["chain"]["problem"] == "predecessor changed"
    else:  # a gap: the events cannot even be replayed, and audit says so
        assert report["chain"]["first_broken"] == "@e4"
        assert report["chain"]["problem"] == "missing"
        assert "out of order" in report["replay_error"]


def _force(store: LmdbStore, seq: int, writes: list[Write]) -> None:
    """Write past the store's append-only rule, as a disk fault or an operator would:
    straight into the LMDB environment."""
    from morphz.shared.storage import keys
    prefix = keys.context_prefix(CTX)
    with store._env.begin(write=True) as txn:
        db = store._dbs["events"]
        for w in writes:
            key = keys.encode_in(prefix, w.key)
            if w.value is None:
                txn.delete(key, db=db)
            else:
                txn.put(key, w.value, db=db)
