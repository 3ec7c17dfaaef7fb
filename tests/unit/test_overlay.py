"""overlay_scan reads exactly what a store would after the overlay's writes were
committed: checked against a second store that really commits them."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from morphz.shared.storage.api import Write
from morphz.shared.storage.memory_store import MemoryStore
from morphz.shared.storage.overlay import Overlay, overlay_scan

# Keys of mixed shape and length, as the tables hold them (str and int parts).
parts = st.one_of(st.sampled_from(["a", "ab", "b", "é", ""]), st.integers(0, 3))
keys = st.lists(parts, min_size=1, max_size=3).map(tuple)
values = st.one_of(st.none(), st.binary(min_size=0, max_size=3))


def committed(rows: list[Write]) -> MemoryStore:
    store = MemoryStore()
    if rows:
        store.commit("c", 0, rows)
    return store


@settings(max_examples=300, deadline=None)
@given(base=st.dictionaries(keys, st.binary(max_size=3), max_size=12),
       pending=st.lists(st.tuples(st.sampled_from(["relations", "frames"]), keys, values),
                        max_size=16),
       prefix=st.lists(parts, max_size=2).map(tuple),
       after=st.one_of(st.none(), keys), limit=st.integers(0, 4), reverse=st.booleans(),
       scan_first=st.booleans())
def test_overlay_scan_equals_a_store_with_the_writes_committed(base, pending, prefix, after,
                                                               limit, reverse, scan_first):
    below = committed([Write("relations", k, v) for k, v in base.items()])
    overlay = Overlay()
    if scan_first:  # the table's order is built before the puts that follow keep it
        list(overlay_scan(below.reader("c"), overlay, "relations", prefix))
    for i, (table, key, value) in enumerate(pending):
        overlay.put(table, key, value)
        if scan_first and i == len(pending) // 2:
            list(overlay_scan(below.reader("c"), overlay, "relations", prefix))
    merged = dict(base)
    for table, key, value in pending:
        if table == "relations":
            merged[key] = value
    expect = committed([Write("relations", k, v) for k, v in merged.items() if v is not None])
    got = list(overlay_scan(below.reader("c"), overlay, "relations", prefix, after, limit,
                            reverse))
    assert got == list(expect.reader("c").scan("relations", prefix, after, limit, reverse))
    alone = {}  # the writes alone, as a store holds them: a deleted row is no row
    for table, key, value in pending:
        if table == "relations":
            alone[key] = value
    assert overlay.present("relations") == {k: v for k, v in alone.items() if v is not None}


def test_overlay_keeps_the_last_write_of_a_key_and_a_deletion_hides_the_row():
    below = committed([Write("frames", ("f1",), b"old"), Write("frames", ("f2",), b"two")])
    overlay = Overlay([Write("frames", ("f1",), b"new"), Write("frames", ("f2",), None)])
    assert overlay.get("frames", ("f1",)) == b"new"
    assert overlay.get("frames", ("f2",)) is None and overlay.has("frames", ("f2",))
    assert not overlay.has("frames", ("f3",))
    assert list(overlay_scan(below.reader("c"), overlay, "frames")) == [(("f1",), b"new")]


def test_overlay_scan_reads_the_store_only_as_far_as_it_yields():
    """A write pending under the prefix does not make the scan read the whole table
    first (it did: a dict of every row, e.g. every event of a context)."""
    below = committed([Write("events", (i,), b"e") for i in range(1000)])
    read = []

    class Counting:
        def scan(self, *args):
            for row in below.reader("c").scan(*args):
                read.append(row)
                yield row

    overlay = Overlay([Write("events", (5,), b"new"), Write("events", (1,), None)])
    got = list(overlay_scan(Counting(), overlay, "events", limit=3))
    assert got == [((0,), b"e"), ((2,), b"e"), ((3,), b"e")]
    assert len(read) == 4
    reverse = list(overlay_scan(Counting(), overlay, "events", after=(7,), limit=3,
                                reverse=True))
    assert reverse == [((6,), b"e"), ((5,), b"new"), ((4,), b"e")]


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(st.tuples(st.sampled_from(["relations", "frames"]),
                                  st.lists(keys, max_size=5), values), max_size=8),
       scan_at=st.integers(0, 8))
def test_put_all_writes_what_put_of_each_key_writes(batches, scan_at):
    """put_all is put of each key: the same rows, in the same first-written order, and
    the same scans, also of a table already put in order by a scan."""
    store = committed([])
    one, each = Overlay(), Overlay()
    for i, (table, ks, value) in enumerate(batches):
        if i == scan_at:
            for o in (one, each):
                list(overlay_scan(store.reader("c"), o, "relations"))
        one.put_all(table, ks, value)
        for k in ks:
            each.put(table, k, value)
    assert list(one.items()) == list(each.items())
    assert list(overlay_scan(store.reader("c"), one, "relations")) == \
        list(overlay_scan(store.reader("c"), each, "relations"))
