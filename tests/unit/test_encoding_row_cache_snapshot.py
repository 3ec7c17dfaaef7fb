"""A RowCache shares what it made of a frame between compiles: the rendered item, its
template and the frame's snapshot input record (snapshot.frame_input), and of an event
its decoding, shown text and inbox items. A compile
through a warm cache replies and stores the bytes an engine without a cache does."""
from __future__ import annotations

import itertools
import os
from datetime import datetime, timezone

from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.encoding.core.row_cache import RowCache
from morphz.services.encoding.core.options import MAX_BUDGET_BYTES
from morphz.services.storage.lmdb_store import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as CALLER

CLOCK = lambda: datetime(2026, 1, 1, tzinfo=timezone.utc)  # noqa: E731


def _commit(tx, ops: str) -> None:
    rev = tx.status("c", caller=CALLER)["revision"]
    tx.commit("c", f'(context-tx (base-version {rev}) (reason "step") {ops})', caller=CALLER)


def _compile(enc: EncodingCore, store, act: str, reveal: bool) -> tuple[dict, bytes]:
    e = enc.compile("c", "s1", activation=act, budget_bytes=MAX_BUDGET_BYTES, caller=CALLER,
                    scope={"reveal_secrets": True} if reveal else None)
    with store.reader("c") as r:
        return e, r.get("snapshots", (e["snapshot"],))


def test_a_warm_row_cache_replies_and_stores_the_bytes_no_cache_does(tmp_path):
    store = LmdbStore(os.path.join(tmp_path, "store"), map_size=1 << 28, sync=False)
    try:
        tx = TransactionCore(store)
        tx.create_context("c", caller=CALLER)
        tx.append_event("c", "s1", "user-message", "hello ✓", caller=CALLER)
        _commit(tx, " ".join(f'(create f{i} (goal "keep {i} ✓") (n {i}))' for i in range(30)))
        _commit(tx, '(create db (password (secret "wombatsecret")))')
        cache = RowCache()
        ids = [itertools.count(), itertools.count()]
        warm = EncodingCore(store, tx, clock=CLOCK, new_id=lambda: f"warm-{next(ids[0]):03}",
                            row_cache=cache)
        cold = EncodingCore(store, tx, clock=CLOCK, new_id=lambda: f"cold-{next(ids[1]):03}")
        steps = ["", '(revise f1 (goal "changed"))', "(retire f2 f3)", "(protect f4)",
                 "(relate f5 refines f6)", "(place f7 (before f0))"]
        for step in steps:
            if step:
                _commit(tx, step)
            act = tx.activate("c", "s1", caller=CALLER)["id"]
            for reveal in (False, True, False, True):  # each twice: cold, then warm
                got, got_raw = _compile(warm, store, act, reveal)
                want, want_raw = _compile(cold, store, act, reveal)
                # The same but for the snapshot id (the ids differ in their prefix only).
                assert {**got, "snapshot": ""} == {**want, "snapshot": ""}
                assert got_raw.replace(got["snapshot"].encode(), b"") == \
                    want_raw.replace(want["snapshot"].encode(), b"")
        assert len(cache) > 0
    finally:
        store.close()
