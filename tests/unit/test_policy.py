"""The policy of a context (shared/policy.py, SEC-01/02) over the transaction core and a
real in-memory store: who may do what, kept by events that audit and rebuild replay."""
from __future__ import annotations

import pytest

from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER, OPEN_CALLER, TOKEN, Caller
from morphz.shared.errors import MorphzError
from morphz.shared.storage.api import Write
from morphz.shared.storage.memory_store import MemoryStore

ALICE, BOB, ROOT = Caller("alice", TOKEN), Caller("bob", TOKEN), Caller("root", TOKEN,
                                                                         admin=True)


@pytest.fixture
def tx():
    store = MemoryStore()
    core = TransactionCore(store)
    core.create_context("c", caller=ALICE)
    core.append_event("c", "main", "user-message", "alice's request", caller=ALICE)  # @e1
    return core, store


def reason(fn, *args, **kwargs) -> str:
    with pytest.raises(MorphzError) as info:
        fn(*args, **kwargs)
    return info.value.reason


def test_sec_01_creator_administers_others_need_a_grant(tx):
    core, _ = tx
    assert core.get_policy("c", caller=ALICE).plain()["grants"] == [
        {"principal": "alice", "right": "admin", "session": ""}]
    assert reason(core.status, "c", caller=BOB) == "FORBIDDEN"
    assert reason(core.status, "nowhere", caller=BOB) == "FORBIDDEN"  # existence untold
    assert reason(core.status, "nowhere", caller=ROOT) == "CONTEXT_NOT_FOUND"
    for caller in (OPEN_CALLER, IN_PROCESS_CALLER, ROOT):  # unrestricted
        assert core.status("c", caller=caller).context == "c"


def test_sec_01_everyone_grant_and_revoke(tx):
    core, _ = tx
    core.set_policy("c", "grant", "*", ["read"], caller=ALICE)
    assert core.status("c", caller=BOB).context == "c"
    assert reason(core.append_event, "c", "main", "user-message", "x", caller=BOB) == \
        "FORBIDDEN"
    core.set_policy("c", "revoke", "*", ["read"], caller=ALICE)
    assert reason(core.status, "c", caller=BOB) == "FORBIDDEN"
    assert list(core.list_contexts(caller=BOB).contexts) == []


def test_sec_01_policy_changes_are_checked(tx):
    core, _ = tx
    assert reason(core.set_policy, "c", "grant", "bob", ["read"], caller=BOB) == "FORBIDDEN"
    for args in (("grant", "bob", ["fly"]), ("allow", "bob", ["read"]),
                 ("grant", "bad name", ["read"]), ("grant", "bob", [])):
        assert reason(core.set_policy, "c", *args, caller=ALICE) == "CONTEXT_INPUT_INVALID"
    assert reason(core.set_policy, "c", "grant", "bob", ["admin"], "main",
                  caller=ALICE) == "CONTEXT_INPUT_INVALID"  # admin is context-wide


def test_sec_02_session_bound_reader_sees_its_session_and_the_shared_mind(tx):
    core, _ = tx
    core.set_policy("c", "grant", "bob", ["read", "write"], "s2", caller=ALICE)
    mine = core.append_event("c", "s2", "user-message", "bob's own", caller=BOB)
    assert core.get_event("c", mine.ref, caller=BOB).text == "bob's own"
    missing = reason(core.get_event, "c", "@e999", caller=BOB)
    assert reason(core.get_event, "c", "@e1", caller=BOB) == missing == "EVENT_NOT_FOUND"
    # Once the shared Mind cites main's evidence, every session may read it.
    core.commit("c", "(context-tx (base-version 0) (derive asked (from @e1) (note x)))",
                caller=ALICE)
    assert core.get_event("c", "@e1", caller=BOB).text == "alice's request"
    assert list(core.get_frame("c", "asked", caller=BOB).sources) == ["@e1"]


def test_sec_01_policy_events_are_audited_and_rebuilt(tx):
    core, store = tx
    core.set_policy("c", "grant", "bob", ["read"], caller=ALICE)
    assert core.audit("c", caller=ALICE).match
    with store.reader("c") as r:  # an operator's mistake: bob's grant row is lost
        seq = r.commit_seq
    store.commit("c", seq, [Write("policy", ("bob", "read", ""), None)])
    assert reason(core.status, "c", caller=BOB) == "FORBIDDEN"
    report = core.audit("c", caller=ALICE)
    assert not report.match
    assert [list(p.differences) for p in report.projections if p.projection == "policy"] \
        == [["bob/read/: missing"]]
    assert core.rebuild_projections("c", caller=ALICE).rewritten == {"policy": 1}
    assert core.status("c", caller=BOB).context == "c"


def test_sec_01_a_session_bound_writer_cannot_retire_another_session(tx):
    core, _ = tx
    core.set_policy("c", "grant", "bob", ["write"], "s2", caller=ALICE)
    core.append_event("c", "s2", "user-message", "bob's input", caller=BOB)
    act = core.activate("c", "s2", caller=BOB).id
    status = core.status("c", caller=ALICE)
    tx_text = f"(context-tx (base-version {status.revision}) (reason \"done\") (retire-session main))"
    assert reason(core.commit, "c", tx_text, activation=act, caller=BOB) == "FORBIDDEN"
    assert core.commit("c", tx_text, caller=ALICE).revision == 1
