"""Work that keeps thousands of containers alive until it ends runs with the cycle
collector paused (collections in between only walk them): a transaction of thousands of
ops (its cost stays linear in its ops) and an encoding compile. The collector is on again
after, even when the work is refused, and one already off stays off; a small commit
leaves the collector alone."""
from __future__ import annotations

import gc

import pytest

from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.encoding.core.options import MAX_BUDGET_BYTES
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import BIG_TX_OPS, TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as CALLER
from morphz.shared.errors import MorphzError


def creates(n: int, base: int = 0) -> str:
    body = " ".join(f"(create f{i} (note {i}))" for i in range(n))
    return f"(context-tx (base-version {base}) {body})"


@pytest.fixture
def store(tmp_path):
    store = LmdbStore(str(tmp_path / "lmdb"), sync=False)
    yield store
    store.close()


@pytest.fixture
def core(store):
    return TransactionCore(store)


@pytest.fixture
def collections():
    """Full collections seen while the test runs, with a threshold low enough that a few
    hundred allocations trigger one whenever the collector is on."""
    seen: list[int] = []
    def note(phase, info):
        if phase == "start":
            seen.append(info["generation"])
    before = gc.get_threshold()
    gc.set_threshold(50, 1, 1)
    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*before)


def test_a_big_transaction_commits_with_the_collector_paused(core, collections):
    core.create_context("big", caller=CALLER)
    text = creates(BIG_TX_OPS * 4)
    collections.clear()
    core.commit("big", text, caller=CALLER)
    assert len(collections) <= 1, collections  # one the allocations before the pause may make
    assert gc.isenabled()
    core.commit("big", creates(3, base=1).replace("(create f", "(create g"), caller=CALLER)
    assert collections, "a small commit runs with the collector on"


def test_the_collector_is_on_again_after_a_refused_big_transaction(core, collections):
    core.create_context("big", caller=CALLER)
    with pytest.raises(MorphzError):
        core.commit("big", creates(BIG_TX_OPS * 4, base=7), caller=CALLER)  # no revision 7
    assert gc.isenabled()
    gc.disable()
    try:  # a collector already off stays off
        core.commit("big", creates(BIG_TX_OPS * 4), caller=CALLER)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.fixture
def enc(store, core):
    core.create_context("c", caller=CALLER)
    core.append_event("c", "s1", "user-message", "hello", caller=CALLER)
    body = " ".join(f'(create f{i} (goal "keep {i}") (n {i}))' for i in range(300))
    core.commit("c", f"(context-tx (base-version 0) {body})", caller=CALLER)
    return EncodingCore(store, core)


def test_a_compile_runs_with_the_collector_paused(enc, collections):
    reply = enc.compile("c", "s1", budget_bytes=MAX_BUDGET_BYTES, caller=CALLER)
    assert len(reply.items) > 300
    collections.clear()
    enc.compile("c", "s1", budget_bytes=MAX_BUDGET_BYTES, caller=CALLER)
    assert len(collections) <= 1, collections  # one the allocations before the pause may make
    assert gc.isenabled()
    collections.clear()  # the threshold does trigger collections once the compile is over
    kept = [[] for _ in range(500)]
    assert kept and collections, "outside a compile the collector runs"


def test_the_collector_is_on_again_after_a_refused_compile(enc, collections):
    with pytest.raises(MorphzError):
        enc.compile("c", "nobody", budget_bytes=MAX_BUDGET_BYTES, caller=CALLER)
    with pytest.raises(MorphzError):
        enc.compile("c", "s1", budget_bytes=1000, caller=CALLER)  # over the budget
    assert gc.isenabled()
    gc.disable()
    try:  # a collector already off stays off
        enc.compile("c", "s1", budget_bytes=MAX_BUDGET_BYTES, caller=CALLER)
        assert not gc.isenabled()
    finally:
        gc.enable()
