"""DIST-05 (and DIST-03 for a new owner): the transaction write path's cache over a remote store (shared/storage/owner_cache.py).

A TransactionCore over a real StorageClient (a storage service on loopback gRPC, RPCs
counted by a client interceptor) with an OwnerCache, next to a second core over the same
storage without one: the other writer the cache must never hide."""
from __future__ import annotations

import threading

import pytest

from morphz.services.storage.client import StorageClient
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.auth import IN_PROCESS_CALLER as ME
from morphz.shared.errors import MorphzError
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import Write
from morphz.shared.storage.owner_cache import ROW_BYTES, ROW_COST, OwnerCache

from tests.rpc_count import storage_service


@pytest.fixture
def storage(tmp_path):
    """(a StorageClient whose RPCs are counted, the counter) over a real storage service."""
    with storage_service(tmp_path / "server") as (_, channel, count):
        yield StorageClient(channel, timeout=30), count


def tx(base: int, ops: str) -> str:
    return f"(context-tx (base-version {base}) {ops})"


def revise_all(base: int, frames: list[str], n: int) -> str:
    return tx(base, " ".join(f"(revise {f} (v {n}))" for f in frames))


def frame_body(store, ctx: str, fid: str) -> str:
    with store.reader(ctx) as r:
        return MindState(r).frame(fid).body


def test_dist_05_owner_cache_a_warm_commit_is_one_storage_rpc(storage):
    client, count = storage
    cache = OwnerCache(client)
    core = TransactionCore(client, cache=cache)
    core.create_context("c", caller=ME)
    frames = [f"f{i}" for i in range(5)]
    core.commit("c", tx(0, " ".join(f"(create {f} (v 0))" for f in frames)), caller=ME)
    core.commit("c", revise_all(1, frames, 1), caller=ME)  # reads each frame's rows once
    count.calls.clear()
    for n in range(2, 22):
        receipt = core.commit("c", revise_all(n, frames, n), caller=ME)
    assert count.calls == ["Commit"] * 20  # no Get, Scan or snapshot: all cached
    assert receipt.revision == 22
    # What the cache answered from is what the store holds.
    with client.reader("c") as r:
        assert cache.cached("c") == r.commit_seq
    assert frame_body(client, "c", "f3") == "(v 21)"


def test_dist_05_owner_cache_another_writers_commit_is_never_hidden(storage):
    client, _ = storage
    cache = OwnerCache(client)
    owner, other = TransactionCore(client, cache=cache), TransactionCore(client)
    owner.create_context("c", caller=ME)
    owner.commit("c", tx(0, "(create f (x 1))"), caller=ME)        # revision 1
    other.commit("c", tx(1, "(revise f (x 2))"), caller=ME)        # revision 2, unseen
    stale = cache.cached("c")
    r = owner.commit("c", tx(2, "(create h (of f))"), caller=ME)   # refused, then redone
    assert r.revision == 3
    assert frame_body(client, "c", "f") == "(x 2)"
    assert cache.cached("c") is None  # the stale rows are gone...
    owner.commit("c", tx(3, "(revise h (of f) (seen))"), caller=ME)
    with client.reader("c") as reader:  # ...and what is read again is in step
        assert cache.cached("c") == reader.commit_seq == stale + 3


def test_dist_05_owner_cache_a_refusal_on_cached_rows_is_checked_against_the_store(storage):
    client, _ = storage
    cache = OwnerCache(client)
    owner, other = TransactionCore(client, cache=cache), TransactionCore(client)
    owner.create_context("c", caller=ME)
    with pytest.raises(MorphzError) as info:
        owner.commit("c", tx(0, "(revise g (x 1))"), caller=ME)
    assert info.value.reason == "FRAME_NOT_FOUND"  # and g is cached as absent
    other.commit("c", tx(0, "(create g (x 0))"), caller=ME)
    r = owner.commit("c", tx(1, "(revise g (x 1))"), caller=ME)
    assert r.results[0].outcome == "revised"
    assert frame_body(client, "c", "g") == "(x 1)"


def test_dist_05_owner_cache_pipelined_commits_of_one_context_stay_consistent(storage):
    client, count = storage
    cache = OwnerCache(client)
    core = TransactionCore(client, cache=cache)
    core.create_context("c", caller=ME)
    threads, each = 8, 12
    revisions: list[int] = []
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            base = core.commit("c", tx(0, f"(create w{k}-0 (n 0))"), caller=ME).revision
            for n in range(1, each):  # based on its own last receipt: rebased by the core
                r = core.commit("c", tx(base, f"(revise w{k}-0 (n {n})) "
                                              f"(create w{k}-{n} (n {n}))"), caller=ME)
                revisions.append(r.revision)
                base = r.revision
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
    ts = [threading.Thread(target=writer, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert errors == []
    assert len(set(revisions)) == len(revisions) == threads * (each - 1)
    assert core.audit("c", caller=ME).match
    for k in range(threads):
        assert frame_body(client, "c", f"w{k}-0") == f"(n {each - 1})"
    assert count.methods().count("Commit") >= threads * each  # each commit went to the store


def test_dist_03_owner_cache_starts_over_for_a_new_fencing_token_and_stays_bounded(tmp_path):
    store = LmdbStore(str(tmp_path / "store"))
    cache = OwnerCache(store, rows=8)
    with cache.reader("c", fence=1) as r:
        assert r.get("frames", ("a",)) is None
    assert cache.cached("c") == 0
    cache.wait(cache.submit("c", 0, [Write("frames", ("a",), b"A")], fence=1))
    assert cache.cached("c") == 1
    with cache.reader("c", fence=1) as r:
        assert r.get("frames", ("a",)) == b"A"
    with cache.reader("c", fence=2) as r:  # owned anew: nothing cached is trusted
        assert cache.cached("c") is None
        assert r.get("frames", ("a",)) == b"A"
    # More rows than the bound: the oldest half go, and read from the store again.
    cache.wait(cache.submit("c", 1, [Write("frames", (f"k{i}",), b"x") for i in range(9)],
                            fence=2))
    assert cache.cached("c") == 2 and cache.held("c") <= 8
    with cache.reader("c", fence=2) as r:
        assert r.commit_seq == 2
        assert [r.get("frames", (f"k{i}",)) for i in range(9)] == [b"x"] * 9
        assert r.get("frames", ("a",)) == b"A"
    assert cache.held("c") <= 8
    store.close()


def test_dist_05_owner_cache_a_refusal_the_store_confirms_keeps_the_cache(storage):
    client, count = storage
    cache = OwnerCache(client)
    core = TransactionCore(client, cache=cache)
    core.create_context("c", caller=ME)
    core.commit("c", tx(0, "(create f (x 1))"), caller=ME)
    core.commit("c", tx(1, "(revise f (x 2))"), caller=ME)  # f's rows cached
    with pytest.raises(MorphzError) as info:  # refused on the cache, then on the store
        core.commit("c", tx(2, "(create f (x 3))"), caller=ME)
    assert info.value.reason == "FRAME_EXISTS"
    assert cache.cached("c") == 3  # kept: the store's rows said the same
    count.calls.clear()
    assert core.commit("c", tx(2, "(revise f (x 3))"), caller=ME).revision == 3
    assert count.calls == ["Commit"]


def test_dist_05_owner_cache_a_scan_too_long_to_keep_is_read_once(storage):
    client, count = storage
    client.commit("c", 0, [Write("relations", ("s", "n", f"o{i:03}"), b"") for i in range(300)])
    cache = OwnerCache(client)
    with cache.reader("c") as r:  # the context's first version: one row kept
        assert r.get("meta", ()) is None
    count.calls.clear()
    with cache.reader("c") as r:  # a miss opens its snapshot with its first read
        assert len(list(r.scan("relations", ("s",)))) == 300
    assert count.methods() == ["Scan", "CloseSnapshot"]  # one pass, not kept
    assert cache.held("c") == 1


def test_owner_cache_keeps_no_row_larger_than_row_bytes(tmp_path):
    """An event's text or a large frame is read from the store each time, never held."""
    store = LmdbStore(str(tmp_path / "store"))
    cache = OwnerCache(store)
    large = b"x" * (ROW_BYTES + 1)

    def held(*values: bytes) -> int:  # the meta row (known absent) and these
        return ROW_COST * (1 + len(values)) + sum(map(len, values))
    with cache.reader("c") as r:
        assert r.get("meta", ()) is None  # the context's first version
    cache.wait(cache.submit("c", 0, [Write("frames", ("small",), b"s"),
                                     Write("frames", ("large",), large)]))
    assert cache.cached("c") == 1 and cache.held_bytes() == held(b"s")
    with cache.reader("c") as r:
        assert r.get("frames", ("large",)) == large  # from the store
        assert r.get("frames", ("small",)) == b"s"
    assert cache.held_bytes() == held(b"s")  # read, not kept
    # Rewritten small, the row is held again; rewritten large, it goes.
    cache.wait(cache.submit("c", 1, [Write("frames", ("large",), b"now small")]))
    assert cache.held_bytes() == held(b"s", b"now small")
    cache.wait(cache.submit("c", 2, [Write("frames", ("small",), large)]))
    assert cache.held_bytes() == held(b"now small")
    with cache.reader("c") as r:
        assert r.get("frames", ("small",)) == large
        assert r.get("frames", ("large",)) == b"now small"
        # Nor is a scan holding such a row.
        assert dict(r.scan("frames")) == {("large",): b"now small", ("small",): large}
    assert cache.held_bytes() == held(b"now small")
    store.close()


def test_owner_cache_holds_at_most_its_bytes_across_contexts(tmp_path):
    """Past max_bytes the least recently used contexts go; reads stay the store's."""
    store = LmdbStore(str(tmp_path / "store"))
    cache = OwnerCache(store, max_bytes=10_000)
    row = b"r" * 1000
    for c in range(5):
        ctx = f"c{c}"
        with cache.reader(ctx) as r:
            assert r.get("meta", ()) is None
        cache.wait(cache.submit(ctx, 0, [Write("frames", (f"f{i}",), row) for i in range(4)]))
        assert cache.held_bytes() <= 10_000
    assert cache.cached("c4") == 1  # the latest is kept...
    assert cache.cached("c0") is None  # ...the least recently used went
    # One context past the bound alone is trimmed, oldest rows first.
    cache.wait(cache.submit("c4", 1, [Write("frames", (f"g{i}",), row) for i in range(12)]))
    assert cache.held_bytes() <= 10_000 and cache.cached("c4") == 2
    for c in range(5):
        with cache.reader(f"c{c}") as r:
            assert [r.get("frames", (f"f{i}",)) for i in range(4)] == [row] * 4
    with cache.reader("c4") as r:
        assert [r.get("frames", (f"g{i}",)) for i in range(12)] == [row] * 12
    assert cache.held_bytes() <= 10_000
    # Rows count by what holding them costs, not their values alone: 100 one-byte
    # rows (boundary stamps are such) would be 100 bytes of values.
    with cache.reader("tiny") as r:
        assert r.get("meta", ()) is None
    cache.wait(cache.submit("tiny", 0, [Write("boundaries", (f"b{i}",), b"\x01")
                                        for i in range(100)]))
    assert cache.held_bytes() <= 10_000 and cache.held("tiny") <= 50  # 10,000 / ROW_COST
    with cache.reader("tiny") as r:
        assert [r.get("boundaries", (f"b{i}",)) for i in range(100)] == [b"\x01"] * 100
    store.close()


def test_owner_cache_does_not_grow_with_the_history(tmp_path):
    """A commit's event, its id and its frames' past versions are written once and not
    read back by the commits after it: the cache does not keep them, so a context's
    cache holds what its commits read (frames, meta, stamps), not its history. A commit
    that does read one (an event cited as a source) reads the store and is right."""
    store = LmdbStore(str(tmp_path / "store"))
    cache = OwnerCache(store)
    core = TransactionCore(store, cache=cache)
    core.create_context("c", caller=ME)
    frames = [f"f{i}" for i in range(5)]
    core.commit("c", tx(0, " ".join(f"(create {f} (v 0))" for f in frames)), caller=ME)
    held = []
    for n in range(1, 41):
        core.commit("c", revise_all(n, frames, n), caller=ME)
        held.append(cache.held("c"))
    assert held[9] == held[-1] < 60, held  # steady after 10 commits (it grew ~7 a commit)
    ref = core.append_event("c", "s", "tool-result", "the disk is full",
                            caller=ME).ref
    receipt = core.commit("c", tx(41, f"(derive cause (from {ref}) (v disk))"), caller=ME)
    assert receipt.revision == 42
    with store.reader("c") as r:
        assert MindState(r).frame("cause").sources == [ref]
        assert cache.cached("c") == r.commit_seq
    store.close()


def test_owner_cache_trims_a_context_that_holds_only_scans(tmp_path):
    """A context whose first reads are scans holds no single row: past max_bytes its
    scans go all the same (the trim only halved rows, and stopped when there were none),
    and a lone row over the bound goes too. Reads stay the store's."""
    store = LmdbStore(str(tmp_path / "store"))
    row = b"r" * 1000
    store.commit("c", 0, [Write("relations", ("s", "n", f"o{i}"), row) for i in range(10)])
    cache = OwnerCache(store, max_bytes=5_000)
    with cache.reader("c") as r:
        assert len(list(r.scan("relations", ("s",)))) == 10
    assert cache.cached("c") == 1 and cache.held_bytes() <= 5_000
    with cache.reader("c") as r:
        assert dict(r.scan("relations", ("s",)))[("s", "n", "o3")] == row
    tiny = OwnerCache(store, max_bytes=100)  # under one row's ROW_COST
    with tiny.reader("c") as r:
        assert r.get("relations", ("s", "n", "o1")) == row
    assert tiny.held_bytes() <= 100
    store.close()
