"""An encoding compile runs with the cycle collector paused (the thousands of containers
it builds stay alive until it returns: collections in between only walk them), and the
collector is on again after, a refused compile included; one already off stays off."""
from __future__ import annotations

import gc
import os

import pytest

from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.encoding.core.options import MAX_BUDGET_BYTES
from morphz.services.storage.lmdb_store import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as CALLER
from morphz.shared.errors import MorphzError


@pytest.fixture
def enc(tmp_path):
    store = LmdbStore(os.path.join(tmp_path, "store"), map_size=1 << 28, sync=False)
    tx = TransactionCore(store)
    tx.create_context("c", caller=CALLER)
    tx.append_event("c", "s1", "user-message", "hello", caller=CALLER)
    body = " ".join(f'(create f{i} (goal "keep {i}") (n {i}))' for i in range(300))
    tx.commit("c", f"(context-tx (base-version 0) {body})", caller=CALLER)
    yield EncodingCore(store, tx)
    store.close()


@pytest.fixture
def collections():
    """Collections started while the test runs, with a threshold low enough that a few
    dozen allocations trigger one whenever the collector is on."""
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


def test_a_compile_runs_with_the_collector_paused(enc, collections):
    reply = enc.compile("c", "s1", budget_bytes=MAX_BUDGET_BYTES, caller=CALLER)
    assert len(reply["items"]) > 300
    collections.clear()
    enc.compile("c", "s1", budget_bytes=MAX_BUDGET_BYTES, caller=CALLER)
    assert len(collections) <= 1, collections  # one the allocations before the pause may make
    assert gc.isenabled()
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
