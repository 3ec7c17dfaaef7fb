"""A transaction of thousands of ops commits with the cycle collector paused (its cost
stays linear in its ops), and the collector is on again after, even when the commit is
refused; a small commit leaves the collector alone."""
from __future__ import annotations

import gc

import pytest

from morphz.services.storage.lmdb_store import LmdbStore
from morphz.services.transaction.core.engine import BIG_TX_OPS, TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as CALLER
from morphz.shared.errors import MorphzError


def creates(n: int, base: int = 0) -> str:
    body = " ".join(f"(create f{i} (note {i}))" for i in range(n))
    return f"(context-tx (base-version {base}) {body})"


@pytest.fixture
def core(tmp_path):
    store = LmdbStore(str(tmp_path / "lmdb"), sync=False)
    yield TransactionCore(store)
    store.close()


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
