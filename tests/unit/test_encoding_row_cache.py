"""The RowCache EncodingCore keeps between compiles (services/encoding/core/row_cache.py):
a warm cache replies and stores the bytes a cold one does (the items, templates and
snapshot inputs it keeps of frames, the decoding, shown text and items of inbox events),
a row revealed once stays redacted for a compile that does not reveal, and the cache
stays within its bounds."""
from __future__ import annotations

import dataclasses
import itertools
import os
from datetime import datetime, timezone

import pytest

from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.encoding.core.row_cache import ENTRY_OVERHEAD, MAX_ROW_BYTES, RowCache
from morphz.services.encoding.core.material import FrameIn
from morphz.services.encoding.core.options import MAX_BUDGET_BYTES
from morphz.services.encoding.core.scope import Scope
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as CALLER

SECRET = "wombatsecret4419"
CLOCK = lambda: datetime(2026, 1, 1, tzinfo=timezone.utc)  # noqa: E731


@pytest.fixture
def parts(tmp_path):
    store = LmdbStore(os.path.join(tmp_path, "store"), map_size=1 << 28, sync=False)
    tx = TransactionCore(store)
    tx.create_context("c", caller=CALLER)
    tx.append_event("c", "s1", "user-message", "hello", caller=CALLER)
    yield store, tx
    store.close()


def _commit(tx, ops: str, reason: str = "") -> None:
    rev = tx.status("c", caller=CALLER).revision
    r = f' (reason "{reason}")' if reason else ""
    tx.commit("c", f"(context-tx (base-version {rev}){r} {ops})", caller=CALLER)


def _engine(store, tx, prefix: str, cache=None, ids=None) -> EncodingCore:
    ids = ids if ids is not None else itertools.count()
    return EncodingCore(store, tx, clock=CLOCK, new_id=lambda: f"{prefix}-{next(ids):03}",
                        row_cache=cache)


def _compile(enc: EncodingCore, store, act: str, **kw) -> tuple[dict, bytes]:
    e = enc.compile("c", "s1", activation=act, budget_bytes=MAX_BUDGET_BYTES, caller=CALLER,
                    **kw)
    with store.reader("c") as r:
        stored = r.get("snapshots", (e.snapshot,))
    return dataclasses.asdict(e), stored  # the reply's fields, compared whole below


def test_asm_03_a_warm_row_cache_renders_the_bytes_a_cold_one_does(parts):
    store, tx = parts
    _commit(tx, " ".join(f'(create f{i} (goal "keep {i} ✓") (n {i}))' for i in range(40)))
    _commit(tx, f'(create db (host "h") (password (secret "{SECRET}")))')
    refs = [tx.append_event("c", "s1", "tool-result", f"output {i} ✓ " + "line " * 1000 * i,
                            secret=i == 3, caller=CALLER).ref
            for i in range(4)]  # inbox events: long ones shown as previews, one secret
    cache = RowCache()
    warm, cold_ids = _engine(store, tx, "warm", cache), itertools.count()
    steps = ['(revise f1 (goal "changed"))', "(retire f2 f3)", "(protect f4)",
             "(relate f5 refines f6)", '(revise f1 (goal "changed again"))',
             f"(protect {refs[1]})", f"(retire {refs[0]})", f"(unprotect {refs[1]})",
             f"(derive d1 (from {refs[1]} {refs[2]}) (note cites))",
             f"(revise d1 (from {refs[2]}) (note cites one))", "(place f7 (before f0))"]
    asks = [{}, {"preview_bytes": 64}, {"must_read": [refs[2]]}, {"preview_bytes": 0}]
    for i, step in enumerate([""] + steps):
        if step:
            _commit(tx, step, reason="step")
        act = tx.activate("c", "s1", caller=CALLER).id
        for reveal, ask in itertools.product((False, True, False), asks):
            scope = Scope(reveal_secrets=True) if reveal else None
            cached = len(cache)
            got, got_raw = _compile(warm, store, act, scope=scope, **ask)
            if i or reveal:  # past the first compile the warm engine renders from its cache
                assert cached >= 40
            # No cache: every frame decoded and rendered by the uncached path.
            want, want_raw = _compile(_engine(store, tx, "cold", None, cold_ids), store, act,
                                      scope=scope, **ask)
            # The same reply but for the snapshot id (the ids differ in their prefix only).
            assert {**got, "snapshot": ""} == {**want, "snapshot": ""}
            assert got_raw.replace(got["snapshot"].encode(), b"") == \
                want_raw.replace(want["snapshot"].encode(), b"")
            assert (SECRET in got["text"]) == reveal
        if i == 0:
            assert 'f1 (runtime (revision 1)' in got["text"]
    assert "(state retiring)" in got["text"] and '(goal "changed again")' in got["text"]
    assert "(preview (shown-bytes" in got["text"] and f"observation {refs[0]}" not in got["text"]
    assert f"(state {refs[2]} (runtime (protected no) (residency preview) (freshness seen) " \
           "(usage (cited-by d1)))" in got["text"]


def test_sec_04_a_frame_revealed_once_stays_redacted_for_a_compile_that_does_not_reveal(parts):
    store, tx = parts
    _commit(tx, f'(create db (host "h") (password (secret "{SECRET}")))')
    cache = RowCache()
    enc = _engine(store, tx, "enc", cache)
    act = tx.activate("c", "s1", caller=CALLER).id
    revealed, _ = _compile(enc, store, act, scope=Scope(reveal_secrets=True))
    assert SECRET in revealed["text"] and len(cache) == 2  # the frame's row, the event's
    plain, raw = _compile(enc, store, act)
    assert SECRET not in plain["text"] and "[secret db]" in plain["text"]
    assert SECRET.encode() not in raw
    assert len(cache) == 4  # the same rows, kept once per reveal


def test_sec_04_an_event_revealed_once_stays_redacted_for_a_compile_that_does_not_reveal(
        parts):
    store, tx = parts
    ref = tx.append_event("c", "s1", "tool-result", f"token {SECRET}", secret=True,
                          caller=CALLER).ref
    enc = _engine(store, tx, "enc", RowCache())
    act = tx.activate("c", "s1", caller=CALLER).id
    revealed, _ = _compile(enc, store, act, scope=Scope(reveal_secrets=True))
    plain, raw = _compile(enc, store, act)
    assert SECRET in revealed["text"] and SECRET not in plain["text"]
    assert f"[secret {ref}]" in plain["text"] and SECRET.encode() not in raw


def _frame(i: int) -> FrameIn:
    return FrameIn(f"f{i}", 1, "(x 1)", [], "active")


def test_row_cache_keeps_no_row_past_its_row_bound():
    cache = RowCache()
    cache.put(bytes(MAX_ROW_BYTES + 1), False, _frame(0))
    cache.put(bytes(MAX_ROW_BYTES), False, _frame(1))
    assert len(cache) == 1 and cache.get(bytes(MAX_ROW_BYTES), False) is not None


def test_row_cache_starts_over_past_its_entry_and_byte_bounds():
    by_entries = RowCache(max_entries=3, max_bytes=1 << 20)
    for i in range(7):
        by_entries.put(b"row %d" % i, False, _frame(i))
        assert len(by_entries) <= 3
    assert by_entries.get(b"row 6", False) is not None
    assert by_entries.get(b"row 0", False) is None
    row_cost = ENTRY_OVERHEAD + 4 * 41
    by_bytes = RowCache(max_entries=100, max_bytes=2 * row_cost + 1)
    for i in range(10):
        by_bytes.put(bytes(40) + bytes([i]), False, _frame(i))
        assert len(by_bytes) <= 2  # a third row would pass the bound
    assert len(by_bytes) == 2


def test_an_event_shown_whole_keeps_one_inbox_item_at_any_preview_size(parts):
    """The items kept with an event are bounded by what they show: a whole text's item is
    the same at every preview size, so callers varying it do not multiply it."""
    store, tx = parts
    cache = RowCache()
    enc = _engine(store, tx, "enc", cache)
    act = tx.activate("c", "s1", caller=CALLER).id
    for size in (64, 128, 256, 512, 1024):
        _compile(enc, store, act, preview_bytes=size)
    with store.reader("c") as r:
        seq = next(s for (s,), _ in r.scan("inbox"))
        seen = cache.get(r.get("events", (seq,)), False)
    assert sorted(k[0] for k in seen.items) == ["inbox", "state"]
