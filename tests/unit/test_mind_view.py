"""The read model (shared/mind/view.py) over a real store the transaction core wrote:
what encoding and recall read through it instead of decoding rows themselves."""
from __future__ import annotations

import pytest

from morphz.shared.auth import IN_PROCESS_CALLER
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.errors import MorphzError
from morphz.shared.mind.view import MindView
from morphz.shared.storage.memory_store import MemoryStore


@pytest.fixture
def tx():
    store = MemoryStore()
    core = TransactionCore(store)
    core.create_context("c", caller=IN_PROCESS_CALLER)
    return core, store


def view(store) -> MindView:
    return MindView(store.reader("c"))


def test_recall_04_an_event_is_found_by_its_ref_or_full_id_and_nothing_else(tx):
    core, store = tx
    e = core.append_event("c", "s1", "user-message", "hello", caller=IN_PROCESS_CALLER)
    m = view(store)
    assert m.event_by_ref(e.ref).text == m.event_by_ref(e.id).text == "hello"
    assert m.event_by_ref("@e99") is None and m.event_by_ref("no-such-id") is None
    assert m.event_dicts([e.seq, 99]) == {e.seq: m.event_dicts([e.seq])[e.seq]}
    assert m.event_dicts([e.seq])[e.seq]["text"] == "hello"


def test_recall_01_event_dicts_decodes_in_bounded_groups_and_cuts_texts_but_a_transactions(
        tx, monkeypatch):
    """Groups of rows decoded together give what one row at a time does; text_chars cuts
    each text as it is decoded, except a context-tx's (redaction parses it whole)."""
    from morphz.shared.mind import view_events

    core, store = tx
    seqs = [core.append_event("c", "s1", "tool-result", f"report {i} " + "z" * (40 * i),
                              caller=IN_PROCESS_CALLER).seq for i in range(9)]
    core.activate("c", "s1", caller=IN_PROCESS_CALLER)
    tx_seq = core.commit("c", "(context-tx (base-version 0) (create a (note " + "w " * 40
                         + ")))", caller=IN_PROCESS_CALLER).event_ref
    tx_seq = int(tx_seq[2:])
    whole = {s: view(store).event_dicts([s])[s] for s in seqs + [tx_seq]}
    monkeypatch.setattr(view_events, "DECODE_BYTES", 300)  # groups of a few rows
    assert view(store).event_dicts(seqs + [tx_seq, 999]) == whole
    cut = view(store).event_dicts(seqs + [tx_seq], text_chars=20)
    assert [cut[s]["text"] for s in seqs] == [whole[s]["text"][:20] for s in seqs]
    assert cut[tx_seq]["text"] == whole[tx_seq]["text"] and len(whole[tx_seq]["text"]) > 20
    assert all(cut[s]["id"] == whole[s]["id"] for s in seqs)


def test_core_08_observation_state_follows_retirement(tx):
    core, store = tx
    e = core.append_event("c", "s1", "tool-result", "report", caller=IN_PROCESS_CALLER)
    core.activate("c", "s1", caller=IN_PROCESS_CALLER)
    assert view(store).observation_state(e.seq) == "active"
    assert view(store).observation_state(0) == ""  # context-created: a runtime event
    core.commit("c", f'(context-tx (base-version 0) (reason "digested") (retire {e.ref}))',
                caller=IN_PROCESS_CALLER)
    assert view(store).observation_state(e.seq) == "retired"


def test_core_18_frames_come_in_projection_order_with_checkpoints_and_roots(tx):
    core, store = tx
    ask = core.append_event("c", "s1", "user-message", "do it", caller=IN_PROCESS_CALLER)
    core.activate("c", "s1", caller=IN_PROCESS_CALLER)
    core.commit("c", "(context-tx (base-version 0) (create b (n 1)) (create a (n 2)) "
                     "(place a first) (checkpoint cp))", caller=IN_PROCESS_CALLER)
    m = view(store)
    assert [f.id for f in m.frames_in_order()] == ["a", "b"]
    assert m.checkpoint_revisions() == [["cp", 1]]
    assert m.root_requests() == {ask.seq}


def test_sec_03_a_snapshot_record_is_a_json_object_or_snapshot_corrupt(tx):
    _, store = tx
    store.put_record("c", "snapshots", ("ok",), b'{"id": "ok"}')
    store.put_record("c", "snapshots", ("list",), b"[1]")
    store.put_record("c", "snapshots", ("deep",), b"[" * 50_000 + b"]" * 50_000)
    m = view(store)
    assert m.snapshot("ok") == {"id": "ok"} and m.snapshot("missing") is None
    for sid, why in (("list", "an array, not an object"), ("deep", "not JSON: RecursionError")):
        with pytest.raises(MorphzError) as e:
            m.snapshot(sid)
        assert (e.value.reason, e.value.details["why"]) == ("SNAPSHOT_CORRUPT", why)


def test_core_13_has_relations_reads_through_the_pending_writes(tx):
    """has_relations (the successor rule reads no frame's relations without one): the
    store's relations and a candidate's pending ones, a relation removed by a pending
    write gone."""
    from morphz.shared.mind.state import MindState
    core, store = tx
    core.commit("c", "(context-tx (base-version 0) (create a (x)) (create b (y)))",
                caller=IN_PROCESS_CALLER)
    assert not view(store).has_relations()
    m = MindState(store.reader("c"))
    m.add_relation("a", "supersedes", "b")
    assert m.has_relations() and not view(store).has_relations()
    core.commit("c", "(context-tx (base-version 1) (relate a supersedes b))",
                caller=IN_PROCESS_CALLER)
    assert view(store).has_relations()
    m = MindState(store.reader("c"))
    m.remove_relation("a", "supersedes", "b")
    assert not m.has_relations()
