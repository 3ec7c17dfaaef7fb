"""One storage behaviour suite, run against every Store: LMDB, in-memory, PostgreSQL (a
real server, tests/pg.py) and the gRPC StorageClient talking to a real StorageService
over loopback."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import grpc
import pytest

from morphz.api.storage.v1 import storage_pb2 as pb
from morphz.services.server.app import AllInOne, ServerConfig
from morphz.services.storage.client import StorageClient
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.storage.postgres import PostgresStore
from morphz.services.storage.servicer import key_from_proto
from morphz.shared.errors import MorphzError
from morphz.shared.storage import keys
from morphz.shared.storage.api import StaleCommit, StaleRead, Write
from morphz.shared.limits import MESSAGE_BYTES
from morphz.shared.storage.memory_store import MemoryStore

from tests.pg import new_schema
from tests.polling import until
from tests.rpc_count import counted


# The PostgreSQL store runs the same under either --topology: its cases run once
# (.ci/run's split pass leaves split_processes out).
POSTGRES = pytest.param("postgres", marks=pytest.mark.split_processes)


@pytest.fixture(params=["lmdb", "memory", POSTGRES, "grpc"])
def store(request, tmp_path):
    if request.param == "lmdb":
        s = LmdbStore(str(tmp_path / "lmdb"))
        yield s
        s.close()
    elif request.param == "postgres":
        s = PostgresStore(request.getfixturevalue("postgres_server").dsn(),
                          schema=new_schema())
        yield s
        s.close()
    elif request.param == "memory":
        yield MemoryStore()
    else:
        app = AllInOne(ServerConfig(str(tmp_path / "server"), "127.0.0.1:0",
                                    storage_listen="127.0.0.1:0")).start()
        channel = grpc.insecure_channel(f"127.0.0.1:{app.storage_port}", options=[
            ("grpc.max_receive_message_length", MESSAGE_BYTES.max)])  # as a service's
        yield StorageClient(channel, timeout=10, page_rows=3)  # scans span many RPCs
        channel.close()
        app.stop(grace=1)


@pytest.fixture(params=["lmdb", POSTGRES])
def durable(request, tmp_path):
    """A new store that group-commits (LMDB, PostgreSQL), made by calling it."""
    made = []

    def make():
        if request.param == "lmdb":
            made.append(LmdbStore(str(tmp_path / f"lmdb{len(made)}")))
        else:
            made.append(PostgresStore(request.getfixturevalue("postgres_server").dsn(),
                                      schema=new_schema()))
        return made[-1]
    yield make
    for s in made:
        s.close()


def read(store, ctx, table, key):
    with store.reader(ctx) as r:
        return r.get(table, key)


def rows(store, ctx, table, **kw):
    with store.reader(ctx) as r:
        return list(r.scan(table, **kw))


def test_commit_then_read_and_version_advances(store):
    assert read(store, "c", "frames", ("a",)) is None
    assert store.commit("c", 0, [Write("frames", ("a",), b"A"), Write("meta", (), b"M")]) == 1
    assert read(store, "c", "frames", ("a",)) == b"A"
    with store.reader("c") as r:
        assert r.commit_seq == 1
    assert store.commit("c", 1, [Write("frames", ("a",), None)]) == 2
    assert read(store, "c", "frames", ("a",)) is None
    assert store.contexts() == ["c"]


def test_scan_keys_gives_the_keys_of_a_scan_in_order(store):
    """Across pages (the grpc store's are 3 rows), with a prefix and after a key, other
    contexts' and tables' rows left out; over the storage service without the values."""
    writes = [Write("relations", (s, "n", o), s.encode() * 1000)
              for s in ("a", "b", "é", "c") for o in ("x", "y")]
    store.commit("c", 0, writes + [Write("frames", ("a",), b"F")])
    store.commit("d", 0, [Write("relations", ("a", "n", "z"), b"other context")])
    with store.reader("c") as r:
        assert list(r.scan_keys("relations")) == [k for k, _ in r.scan("relations")]
        assert len(list(r.scan_keys("relations"))) == 8
        assert list(r.scan_keys("relations", ("b",))) == [("b", "n", "x"), ("b", "n", "y")]
        after = list(r.scan_keys("relations", after=("b", "n", "x")))
        assert after == [k for k, _ in r.scan("relations", after=("b", "n", "x"))]
        assert list(r.scan_keys("frames")) == [("a",)]
        assert list(r.scan_keys("events")) == []
    if isinstance(store, StorageClient):  # what the service sends for a keys-only scan
        def keys_only(**asked) -> list[tuple]:
            reply = store._stub.Scan(pb.ScanRequest(context="c", table="relations",
                                                    keys_only=True, **asked), timeout=10)
            assert not any(row.value for row in reply.rows)
            return [key_from_proto(row.key) for row in reply.rows]
        with store.reader("c") as r:
            forward = [k for k, _ in r.scan("relations")]
        assert keys_only() == forward
        assert keys_only(reverse=True) == forward[::-1]  # read with values, sent without
        assert keys_only(limit=3) == forward[:3]


def test_stale_commit_is_rejected_and_writes_nothing(store):
    store.commit("c", 0, [Write("frames", ("a",), b"1")])
    with pytest.raises(StaleCommit):
        store.commit("c", 0, [Write("frames", ("a",), b"2"), Write("frames", ("b",), b"2")])
    assert read(store, "c", "frames", ("a",)) == b"1"
    assert read(store, "c", "frames", ("b",)) is None


def test_append_only_tables_refuse_rewrites_atomically(store):
    store.commit("c", 0, [Write("events", (1,), b"e1")])
    for bad in (Write("events", (1,), b"x"), Write("events", (1,), None)):
        with pytest.raises(MorphzError) as info:
            store.commit("c", 1, [Write("frames", ("f",), b"F"), bad])
        assert info.value.reason == "STORAGE_APPEND_ONLY"
    assert read(store, "c", "events", (1,)) == b"e1"
    assert read(store, "c", "frames", ("f",)) is None  # the whole batch was refused
    with pytest.raises(MorphzError):  # twice in one batch is a rewrite too
        store.commit("c", 1, [Write("outbox", (0,), b"a"), Write("outbox", (0,), b"b")])


def test_quarantine_moves_a_stray_row_aside_and_frees_its_key_in_the_same_commit(store):
    store.commit("c", 0, [Write("events", (1,), b"e1"), Write("events", (2,), b"stray")])
    store.commit("c", 1, [Write("events", (2,), None, quarantine=True),
                          Write("events", (2,), b"e2")])
    store.commit("c", 2, [Write("frames", ("f",), b"junk")])
    store.commit("c", 3, [Write("frames", ("f",), None, quarantine=True)])
    assert rows(store, "c", "events") == [((1,), b"e1"), ((2,), b"e2")]
    assert read(store, "c", "frames", ("f",)) is None
    # Under the commit_seq that moved it: the same key moved twice keeps both rows.
    assert rows(store, "c", "quarantine") == [((2, "events", 2), b"stray"),
                                              ((4, "frames", "f"), b"junk")]


def test_quarantine_only_moves_an_existing_row_and_never_its_own(store):
    store.commit("c", 0, [Write("events", (1,), b"e1"), Write("frames", ("f",), b"F")])
    for bad, reason in ((Write("events", (9,), None, quarantine=True), "STORAGE_KEY_MISSING"),
                        (Write("events", (1,), b"x", quarantine=True), "STORAGE_TABLE_INVALID"),
                        (Write("quarantine", (1, "events", 1), None, quarantine=True),
                         "STORAGE_TABLE_INVALID")):
        with pytest.raises(MorphzError) as info:
            store.commit("c", 1, [Write("frames", ("g",), b"G"), bad])
        assert info.value.reason == reason
    assert rows(store, "c", "events") == [((1,), b"e1")]
    assert read(store, "c", "frames", ("g",)) is None and rows(store, "c", "quarantine") == []


def test_priv_03_an_erasure_rewrites_an_existing_row_of_any_erasable_table(store):
    """Write.erase rewrites a row that exists, even an event's (append-only); the feed
    names the events and frames it rewrote as erased; a missing row, a table an erasure
    does not rewrite or no value is refused with the whole batch."""
    store.commit("c", 0, [Write("events", (1,), b"secret text"), Write("frames", ("f",), b"F"),
                          Write("frame_versions", ("f", 1), b"F1")])
    store.commit("c", 1, [Write("events", (1,), b"erased", erase=True),
                          Write("frame_versions", ("f", 1), b"erased F1", erase=True),
                          Write("events", (2,), b"the erasure event")])
    assert rows(store, "c", "events") == [((1,), b"erased"), ((2,), b"the erasure event")]
    assert read(store, "c", "frame_versions", ("f", 1)) == b"erased F1"
    change = store.changes(0, context="c").changes[-1]
    assert (change.events, change.erased, change.erased_frames) == ((1, 2), (1,), ("f",))
    assert store.changes(0, context="c").changes[0].erased == ()
    for bad, reason in ((Write("events", (9,), b"x", erase=True), "STORAGE_KEY_MISSING"),
                        (Write("event_ids", ("x",), b"1", erase=True), "STORAGE_TABLE_INVALID"),
                        (Write("events", (1,), None, erase=True), "STORAGE_TABLE_INVALID")):
        with pytest.raises(MorphzError) as info:
            store.commit("c", 2, [Write("frames", ("g",), b"G"), bad])
        assert info.value.reason == reason
    assert read(store, "c", "frames", ("g",)) is None
    assert store.reclaim("c").get("engine", "") in ("", "lmdb", "postgres")


def test_priv_05_delete_context_leaves_no_row_and_the_name_starts_again(store, tmp_path):
    store.commit("gone", 0, [Write("events", (0,), b"e0"), Write("frames", ("f",), b"F"),
                             Write("sessions", ("s1",), b"S")], fence=7)
    store.commit("kept", 0, [Write("events", (0,), b"k0")])
    store.commit("gone", 1, [Write("events", (1,), b"e1")], fence=7)
    position = store.delete_context("gone")
    assert store.changes(position - 1).changes[0].deleted
    # Its commits stay in the feed as fillers naming nothing: positions stay consecutive
    # (a follower reads a hole as a stale stream and reads again, for ever).
    feed = store.changes(0).changes
    assert [c.position for c in feed] == list(range(1, position + 1))
    assert [(c.context, c.events) for c in feed if c.context != "kept"][:-1] == [("", ())] * 2
    copy = getattr(store, "copy_compacted", None)  # a backup holds the fillers as they are
    if copy is not None:
        (tmp_path / "copy").mkdir()
        assert copy(str(tmp_path / "copy"))["feed_head"] == position
        copied = LmdbStore(str(tmp_path / "copy"), sync=False)
        try:
            assert [c.context for c in copied.changes(0).changes] == [c.context for c in feed]
        finally:
            copied.close()
    assert "gone" not in store.contexts() and "kept" in store.contexts()
    for table in ("events", "frames", "sessions"):
        assert rows(store, "gone", table) == []
    assert rows(store, "kept", "events") == [((0,), b"k0")]
    with store.reader("gone") as r:
        assert r.commit_seq == 0
    with pytest.raises(MorphzError) as info:
        store.delete_context("gone")
    assert info.value.reason == "CONTEXT_NOT_FOUND"
    with pytest.raises(MorphzError) as info:  # the old owner's token still holds
        store.commit("gone", 0, [Write("events", (0,), b"again")], fence=3)
    assert info.value.reason == "FENCED"
    assert store.commit("gone", 0, [Write("events", (0,), b"again")], fence=7) == 1
    assert [c.commit_seq for c in store.changes(0, context="gone").changes] == [1]


def test_priv_03_lmdb_reclaim_leaves_no_rewritten_bytes_in_the_data_file(tmp_path):
    """LMDB keeps the pages a commit freed, bytes and all, and never shrinks its file:
    reclaim() rewrites it compacted, and reads and commits go on after it."""
    s = LmdbStore(str(tmp_path / "lmdb"))
    try:
        s.commit("c", 0, [Write("events", (i,), b"PLANTED-%04d " % i + b"x" * 500)
                          for i in range(200)])
        s.commit("c", 1, [Write("events", (i,), b"gone", erase=True) for i in range(200)])
        data = (tmp_path / "lmdb" / "data.mdb")
        assert b"PLANTED-" in data.read_bytes()  # freed pages keep what they held
        done = s.reclaim()
        assert b"PLANTED-" not in data.read_bytes() and done["bytes_after"] < done["bytes_before"]
        s.commit("c", 2, [Write("events", (200,), b"after")])
        assert read(s, "c", "events", (200,)) == b"after" and read(s, "c", "events", (7,)) == b"gone"
    finally:
        s.close()


def test_feed_tables_take_only_the_key_shape_the_feed_names(store):
    for bad in (Write("events", (), b"e"), Write("events", ("zz",), b"e"),
                Write("events", (1, 2), b"e"), Write("frames", (7,), b"F")):
        with pytest.raises(MorphzError) as info:
            store.commit("c", 0, [Write("events", (0,), b"e0"), bad])
        assert info.value.reason == "STORAGE_KEY_INVALID"
    assert rows(store, "c", "events") == []


def test_scan_order_prefix_after_limit_reverse(store):
    writes = [Write("frame_versions", (fid, rev), f"{fid}{rev}".encode())
              for fid in ("a", "b") for rev in (1, 2, 10, 300)]
    writes.append(Write("frame_versions", ("ab", 1), b"ab1"))
    store.commit("c", 0, writes)
    assert [k for k, _ in rows(store, "c", "frame_versions", prefix=("a",))] == \
        [("a", 1), ("a", 2), ("a", 10), ("a", 300)]  # numeric order; "ab" is not under "a"
    assert [k for k, _ in rows(store, "c", "frame_versions", prefix=("a",), after=("a", 2),
                               limit=1)] == [("a", 10)]
    assert [k for k, _ in rows(store, "c", "frame_versions", prefix=("b",), reverse=True)] == \
        [("b", 300), ("b", 10), ("b", 2), ("b", 1)]
    # The as-of read: the last version at or before revision 9.
    assert rows(store, "c", "frame_versions", prefix=("b",), after=("b", 10), limit=1,
                reverse=True) == [(("b", 2), b"b2")]
    assert len(rows(store, "c", "frame_versions")) == 9


def store_order(key: tuple) -> tuple:
    """The order the stores keep the test's keys in, written out: by the first part, then
    (s,) before (s, int) before (s, str)."""
    return key[0], len(key), type(key[-1]) is str


def test_a_whole_scan_of_many_rows_reads_each_once_in_order(store):
    """A whole scan (and scan_tables) of 2,000 rows, past every run the LMDB reader reads
    at once, in the common key shapes and a mixed one; the neighbouring contexts' rows
    (names that extend or precede this one) never mix in; a reader that stops after
    the first row gets it."""
    tables = {"observations": [(i,) for i in range(2000)],
              "frames": [(f"f{i:04}",) for i in range(2000)],
              "boundaries": [(f"b{i}",) for i in range(1000)] + [(f"b{i}", i) for i in range(1000)]
              + [(f"b{i}", "x") for i in range(1000)]}
    for ctx in ("c", "cc", "b", "c0"):
        store.commit(ctx, 0, [Write(t, k, repr((ctx, k)).encode())
                              for t, ks in tables.items() for k in ks])
    with store.reader("c") as r:
        for table, ks in tables.items():
            expected = [(k, repr(("c", k)).encode()) for k in sorted(ks, key=store_order)]
            assert list(r.scan(table)) == expected
            assert r.scan_tables([(table, ())]) == [expected]
            assert next(iter(r.scan(table))) == expected[0]
        assert [k for k, _ in r.scan("observations", after=(1990,))] == [(i,) for i in range(1991, 2000)]


def test_whole_scans_read_every_row_once_at_every_length_around_the_runs(store):
    """Lengths on each side of where the LMDB reader changes how it reads (16 rows one at a
    time, then runs of 64, 256...), each ended by another context's rows or by the table's
    end."""
    lengths = (15, 16, 17, 80, 81, 336, 337)
    for n in lengths:
        store.commit(f"c{n}", 0, [Write("observations", (i,), b"%d" % i) for i in range(n)])
        store.commit(f"e{n}", 0, [Write("frames", (f"f{i:04}",), b"") for i in range(n)])
    for n in lengths:
        with store.reader(f"c{n}") as r:
            assert list(r.scan("observations")) == [((i,), b"%d" % i) for i in range(n)]
        with store.reader(f"e{n}") as r:  # e81 is the frames table's last context
            assert [k for k, _ in r.scan("frames")] == [(f"f{i:04}",) for i in range(n)]


def test_a_whole_scan_of_the_only_context_ends_at_its_last_row(store):
    """The table's first and last rows are the context's: the scan reads each once."""
    store.commit("c", 0, [Write("frames", (f"f{i:03}",), b"") for i in range(40)])
    with store.reader("c") as r:
        assert [k for k, _ in r.scan("frames")] == [(f"f{i:03}",) for i in range(40)]
        assert len(r.scan_tables([("frames", ())])[0]) == 40


def test_lmdb_a_key_past_the_prefix_bound_is_still_read(tmp_path):
    """A row under the context's prefix with a 0xff tag byte (never written by keys.encode:
    a damaged store) lies past the bound a whole scan reads to; the scan still reads it,
    one key at a time, as it read every row before."""
    store = LmdbStore(str(tmp_path / "lmdb"))
    store.commit("c", 0, [Write("frames", (f"f{i:03}",), b"") for i in range(100)])
    store.commit("d", 0, [Write("frames", ("other",), b"")])
    with store._env.begin(write=True) as txn:
        txn.put(keys.context_prefix("c") + b"\xffx\x00", b"odd", db=store._dbs["frames"])
    with store.reader("c") as r:
        got = list(r.scan("frames"))
        assert got[-1] == (("x",), b"odd") and len(got) == 101
        assert r.scan_tables([("frames", ())]) == [got]
    store.close()


def test_contexts_are_isolated(store):
    store.commit("one", 0, [Write("frames", ("x",), b"1")])
    store.commit("two", 0, [Write("frames", ("x",), b"2")])
    assert read(store, "one", "frames", ("x",)) == b"1"
    assert rows(store, "two", "frames") == [(("x",), b"2")]
    assert rows(store, "three", "frames") == []
    assert sorted(store.contexts()) == ["one", "two"]


def test_bad_tables_and_keys_are_structured_errors(store):
    for writes, reason in ([Write("nope", ("a",), b"")], "STORAGE_TABLE_UNKNOWN"), \
                          ([Write("frames", ("a\x00b",), b"")], "STORAGE_KEY_INVALID"), \
                          ([Write("frames", ("x" * 600,), b"")], "STORAGE_KEY_INVALID"):
        with pytest.raises(MorphzError) as info:
            store.commit("c", 0, writes)
        assert info.value.reason == reason
    assert store.contexts() == []


def test_a_side_record_moves_no_version_so_a_commit_computed_before_it_lands(store):
    """put_record (encoding snapshots) beside a transaction computed on commit_seq 1: the
    transaction still commits at 1 -> 2, and a reader taken before the put keeps its
    view; a reader taken after sees the record at the same version."""
    store.commit("c", 0, [Write("meta", (), b"M")])
    with store.reader("c") as before:
        assert before.get("snapshots", ("s1",)) is None and before.commit_seq == 1
        store.put_record("c", "snapshots", ("s1",), b"what one evaluation saw")
        with store.reader("c") as after:
            assert after.commit_seq == 1
            assert after.get("snapshots", ("s1",)) == b"what one evaluation saw"
            assert list(after.scan("snapshots")) == [(("s1",), b"what one evaluation saw")]
        assert before.get("snapshots", ("s1",)) is None
        assert list(before.scan("snapshots")) == []
        assert store.commit("c", 1, [Write("frames", ("f",), b"F")]) == 2
    assert read(store, "c", "frames", ("f",)) == b"F"


def test_side_records_are_written_once_by_put_record_only(store):
    store.commit("c", 0, [Write("meta", (), b"M")])
    store.put_record("c", "snapshots", ("s1",), b"first")
    cases = [(lambda: store.put_record("c", "snapshots", ("s1",), b"forged"),
              "STORAGE_APPEND_ONLY"),
             (lambda: store.put_record("c", "snapshots", ("s2",), None), "STORAGE_APPEND_ONLY"),
             (lambda: store.commit("c", 1, [Write("frames", ("f",), b"F"),
                                            Write("snapshots", ("s3",), b"x")]),
              "STORAGE_TABLE_INVALID"),
             (lambda: store.put_record("c", "frames", ("f",), b"F"), "STORAGE_TABLE_INVALID"),
             (lambda: store.put_record("c", "nope", ("f",), b"F"), "STORAGE_TABLE_UNKNOWN"),
             (lambda: store.put_record("c", "snapshots", ("a\x00b",), b""),
              "STORAGE_KEY_INVALID"),
             (lambda: store.put_record("ghost", "snapshots", ("s1",), b"x"),
              "CONTEXT_NOT_FOUND")]
    for attempt, reason in cases:
        with pytest.raises(MorphzError) as info:
            attempt()
        assert info.value.reason == reason
    assert read(store, "c", "snapshots", ("s1",)) == b"first"
    assert rows(store, "c", "snapshots") == [(("s1",), b"first")]
    assert read(store, "c", "frames", ("f",)) is None  # the mixed batch was refused whole
    with store.reader("c") as r:
        assert r.commit_seq == 1
    assert store.contexts() == ["c"]


def test_asm_06_side_records_put_together_are_written_all_or_none(store):
    """put_records (a snapshot and its index entries): every record lands, or none does
    when one of them is refused, whichever comes first in the batch."""
    store.commit("c", 0, [Write("meta", (), b"M")])
    store.put_records("c", [Write("snapshots", ("s1",), b"record"),
                            Write("snapshot_index", ("s", "main", 7, "s1"), b"entry")])
    refused = [([Write("snapshot_index", ("s", "main", 8, "s2"), b"entry"),
                 Write("snapshots", ("s1",), b"forged")], "STORAGE_APPEND_ONLY"),
               ([Write("snapshots", ("s2",), b"x"), Write("snapshots", ("s2",), b"y")],
                "STORAGE_APPEND_ONLY"),
               ([Write("snapshots", ("s2",), b"x"), Write("frames", ("f",), b"F")],
                "STORAGE_TABLE_INVALID"),
               ([], "STORAGE_KEY_INVALID")]
    for records, reason in refused:
        with pytest.raises(MorphzError) as info:
            store.put_records("c", records)
        assert info.value.reason == reason
    with pytest.raises(MorphzError) as info:
        store.put_records("ghost", [Write("snapshots", ("s9",), b"x")])
    assert info.value.reason == "CONTEXT_NOT_FOUND"
    assert rows(store, "c", "snapshots") == [(("s1",), b"record")]
    assert rows(store, "c", "snapshot_index") == [(("s", "main", 7, "s1"), b"entry")]
    with store.reader("c") as r:
        assert r.commit_seq == 1


def test_asm_06_the_snapshot_index_lists_newest_first_in_bounded_range_reads(store):
    """The repository's listing on every engine: a session's entries newest first, a
    page past the last one's key, a time range (since inclusive, until exclusive), an
    activation's oldest first; other sessions' and contexts' entries left out."""
    from morphz.shared.mind.snapshots import Listing, SnapshotRepository
    from morphz.shared.mind.view import MindView
    store.commit("c", 0, [Write("meta", (), b"M")])
    store.commit("d", 0, [Write("meta", (), b"M")])
    repo = SnapshotRepository(store)
    for i in range(1, 13):
        session = "main" if i % 3 else "side"
        repo.put("c", f"enc-{i:02}", b"{}", b"{}",
                 Listing(session, f"a{(i + 1) // 2}", 1000 + i, f"e{i}".encode()))
    repo.put("d", "enc-x", b"{}", b"{}", Listing("main", "a1", 5000, b"other"))
    main = [i for i in range(12, 0, -1) if i % 3]

    def listed(**kw) -> list[int]:
        with store.reader("c") as r:
            return [int(e.snapshot_id[4:]) for e in SnapshotRepository.listed(MindView(r), **kw)]
    assert listed(session="main", limit=100) == main
    first = listed(session="main", limit=3)
    assert first == main[:3]
    assert listed(session="main", limit=3, after=(1000 + first[-1], f"enc-{first[-1]:02}")) \
        == main[3:6]
    assert listed(limit=100) == list(range(12, 0, -1))  # the whole context's
    assert listed(session="main", limit=100, since=1004, until=1010) == [8, 7, 5, 4]
    assert listed(activation="a3", limit=100, oldest_first=True) == [5, 6]
    assert listed(session="main", limit=2, after=(1005, "enc-05"), oldest_first=True) == [7, 8]
    with store.reader("c") as r:
        assert [e.summary for e in SnapshotRepository.listed(
            MindView(r), activation="a6", limit=5)] == [b"e12", b"e11"]


def test_side_records_share_the_group_commit_of_concurrent_commits(durable):
    """Held at the leader until 8 commits and 8 side records are queued, all 16 land in
    one write transaction; the side records moved no context's version."""
    store = durable()
    for i in range(8):
        store.commit(f"c{i}", 0, [Write("meta", (), b"M")])
    before = store.stats["write_transactions"]
    errors = []

    def run(fn, *args):
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(store.commit, f"c{i}", 1,
                                                  [Write("frames", ("f",), b"F")]))
               for i in range(8)]
    threads += [threading.Thread(target=run, args=(store.put_record, f"c{i}", "snapshots",
                                                   ("s",), b"S")) for i in range(8)]
    start_queued(store, threads, 16)
    assert not errors
    assert store.stats["write_transactions"] - before == 1
    for i in range(8):
        with store.reader(f"c{i}") as r:
            assert r.commit_seq == 2
            assert r.get("frames", ("f",)) == b"F" and r.get("snapshots", ("s",)) == b"S"


def _commit_in_thread(store, ctx, expect, writes):
    """Commit from another thread, as a concurrent writer would, and wait for it."""
    result = []
    t = threading.Thread(target=lambda: result.append(store.commit(ctx, expect, writes)))
    t.start()
    t.join()
    assert result == [expect + 1]


def test_dist_05_a_reader_sees_one_version_while_other_threads_commit(store):
    """Commits land between the gets and inside the paged scans of one reader: an LMDB or
    remote reader keeps seeing the version it started on; the in-memory one refuses
    (StaleRead) rather than mix versions."""
    def version(n):
        return [Write("frames", (f"f{i:02}",), f"v{n}".encode()) for i in range(10)] + \
            [Write("meta", (), str(n).encode())]
    store.commit("c", 0, version(0))
    seq = 1
    with store.reader("c") as r:
        assert r.get("meta", ()) == b"0"
        for n in range(4):
            _commit_in_thread(store, "c", seq, version(seq))
            seq += 1
            if isinstance(store, MemoryStore):
                with pytest.raises(StaleRead):
                    r.get("meta", ())
                return
            rows = r.scan("frames", reverse=n % 2 == 1)
            seen = [next(rows)]
            _commit_in_thread(store, "c", seq, version(seq))  # in the middle of a scan
            seq += 1
            seen += list(rows)
            assert len(seen) == 10 and {v for _, v in seen} == {b"v0"}
            assert r.get("frames", ("f09",)) == b"v0" and r.get("meta", ()) == b"0"
            assert r.commit_seq == 1
    assert read(store, "c", "meta", ()) == b"8"


def start_queued(store: LmdbStore, threads: list, queued: int) -> None:
    """Start the threads holding the group-commit leader's place until `queued` of their
    submissions wait, so that one batch takes them all (certain, not left to scheduling);
    then let them run and join them."""
    with store._leader:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(store._queue) < queued and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(store._queue) == queued
    for t in threads:
        t.join()


def test_group_commit_batches_concurrent_commits_into_fewer_write_transactions(durable):
    """Concurrent commits share write transactions (one fsync each) and every one of
    them still lands, in order per context."""
    store = durable()
    errors = []

    def writer(ctx: str) -> None:
        try:
            for n in range(25):
                assert store.commit(ctx, n, [Write("frames", (f"f{n}",), b"x")]) == n + 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(f"c{i}",)) for i in range(16)]
    start_queued(store, threads, 16)
    assert not errors
    assert store.stats["commits"] == 16 * 25
    assert store.stats["write_transactions"] <= store.stats["commits"] - 15
    for i in range(16):
        assert len(rows(store, f"c{i}", "frames")) == 25


# -- fencing tokens (DIST-02) ----------------------------------------------------------

def fenced_error(store, *args, **kw) -> MorphzError:
    with pytest.raises(MorphzError) as info:
        store.commit(*args, **kw)
    assert info.value.reason == "FENCED", info.value
    return info.value


def test_dist_02_a_lower_fencing_token_is_fenced_even_at_the_current_version(store):
    assert store.commit("c", 0, [Write("frames", ("a",), b"1")], fence=5) == 1
    err = fenced_error(store, "c", 1, [Write("frames", ("a",), b"stale")], fence=3)
    assert err.details == {"context": "c", "fence": 3, "highest": 5}
    assert read(store, "c", "frames", ("a",)) == b"1"  # nothing written, version kept
    with store.reader("c") as r:
        assert r.commit_seq == 1
    fenced_error(store, "c", 1, [Write("frames", ("a",), b"none")])  # no token is 0
    assert store.commit("c", 1, [Write("frames", ("a",), b"2")], fence=5) == 2  # equal: ok
    assert store.commit("c", 2, [Write("frames", ("a",), b"3")], fence=8) == 3  # higher: ok
    fenced_error(store, "c", 3, [Write("frames", ("a",), b"old")], fence=5)
    assert read(store, "c", "frames", ("a",)) == b"3"
    # Tokens are per context; a context never fenced takes commits without one.
    assert store.commit("d", 0, [Write("frames", ("a",), b"1")], fence=2) == 1
    assert store.commit("e", 0, [Write("frames", ("a",), b"1")]) == 1


def test_dist_02_the_token_is_checked_before_the_version(store):
    """A fenced writer is told FENCED, never StaleCommit (which would invite a retry)."""
    store.commit("c", 0, [Write("frames", ("a",), b"1")], fence=9)
    store.commit("c", 1, [Write("frames", ("a",), b"2")], fence=9)
    fenced_error(store, "c", 0, [Write("frames", ("a",), b"x")], fence=4)


def test_dist_02_a_rejected_batch_does_not_raise_the_token(store):
    """The highest token moves only with a commit that lands (same transaction)."""
    store.commit("c", 0, [Write("events", (1,), b"e1")], fence=3)
    with pytest.raises(MorphzError) as info:
        store.commit("c", 1, [Write("events", (1,), b"again")], fence=7)
    assert info.value.reason == "STORAGE_APPEND_ONLY"
    with pytest.raises(StaleCommit):
        store.commit("c", 0, [Write("frames", ("a",), b"x")], fence=7)
    assert store.commit("c", 1, [Write("frames", ("a",), b"ok")], fence=3) == 2


def test_dist_02_one_group_commit_fences_a_lower_token_behind_a_higher_one(durable):
    """Two commits of one context in one write transaction: the second, with a lower
    token, sees the first's token although neither is durable yet."""
    store = durable()
    with store._leader:  # both queued before any leader runs: one write transaction
        first = store.submit("c", 0, [Write("frames", ("a",), b"new owner")], fence=9)
        second = store.submit("c", 1, [Write("frames", ("a",), b"old owner")], fence=4)
    assert store.wait(first) == 1
    with pytest.raises(MorphzError) as info:
        store.wait(second)
    assert info.value.reason == "FENCED"
    assert store.stats["write_transactions"] == 1


def test_dist_02_the_highest_token_is_durable_with_its_commit(tmp_path):
    """Kept across a reopen; and a process SIGKILLed after the puts but before its LMDB
    commit leaves neither the commit nor its token behind."""
    import subprocess
    import sys
    path = str(tmp_path / "d")
    store = LmdbStore(path)
    store.commit("c", 0, [Write("frames", ("a",), b"1")], fence=5)
    store.close()
    crash = ("from morphz.services.storage.lmdb import LmdbStore\n"
             "from morphz.shared.process.faults import Faults\n"
             "from morphz.shared.storage.api import Write\n"
             f"s = LmdbStore({path!r}, faults=Faults('after-puts-before-commit'))\n"
             "s.commit('c', 1, [Write('frames', ('a',), b'lost')], fence=50)\n")
    proc = subprocess.run([sys.executable, "-c", crash], capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    store = LmdbStore(path)
    fenced_error(store, "c", 1, [Write("frames", ("a",), b"x")], fence=4)
    assert store.commit("c", 1, [Write("frames", ("a",), b"2")], fence=6) == 2
    assert read(store, "c", "frames", ("a",)) == b"2"
    store.close()


# -- read snapshots of the storage service (remote readers only) ----------------------

class Clock:
    """The registry's time source, moved by the test instead of waited for."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def snap(tmp_path):
    """A real StorageService (LMDB, loopback gRPC) whose snapshots have a 5 s lease on a
    test clock and a cap of 2."""
    from concurrent import futures
    from types import SimpleNamespace

    from morphz.api.storage.v1 import storage_pb2_grpc
    from morphz.services.storage.servicer import StorageServicer
    from morphz.services.storage.snapshots import SnapshotRegistry

    lmdb_store, clock = LmdbStore(str(tmp_path / "snap")), Clock()
    registry = SnapshotRegistry(lmdb_store, lease=5.0, limit=2, clock=clock)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    servicer = StorageServicer(lmdb_store, registry, watch_idle=0.2)
    storage_pb2_grpc.add_StorageServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield SimpleNamespace(client=StorageClient(channel, timeout=10), store=lmdb_store,
                          address=f"127.0.0.1:{port}",
                          registry=registry, clock=clock, servicer=servicer, channel=channel,
                          stub=storage_pb2_grpc.StorageServiceStub(channel))
    channel.close()
    server.stop(None)
    registry.close()
    lmdb_store.close()


def _reason(fn, *args):
    from morphz.shared.grpc.errors import call
    with pytest.raises(MorphzError) as info:
        call(fn, *args, timeout=10)
    return info.value


def test_dist_05_closing_a_reader_releases_its_snapshot_and_the_cap_is_structured(snap):
    snap.client.commit("c", 0, [Write("frames", ("a",), b"A")])
    first, second = snap.client.reader("c"), snap.client.reader("c")
    assert first.get("frames", ("a",)) == second.get("frames", ("a",)) == b"A"
    assert len(snap.registry) == 2
    with pytest.raises(MorphzError) as info:
        with snap.client.reader("c") as third:
            third.get("frames", ("a",))
    assert info.value.reason == "STORAGE_SNAPSHOT_LIMIT"
    assert info.value.to_dict()["code"] == "RESOURCE_EXHAUSTED"
    assert info.value.details["limit"] == "open_snapshots"  # named (SEC-06)
    assert info.value.details["max"] == 2
    first.close()
    assert len(snap.registry) == 1
    with snap.client.reader("c") as third:
        assert third.get("frames", ("a",)) == b"A"
    second.close()
    assert len(snap.registry) == 0


def test_dist_05_an_expired_unknown_or_foreign_snapshot_is_a_structured_error(snap):
    snap.client.commit("c", 0, [Write("frames", ("a",), b"A")])
    opened = snap.stub.OpenSnapshot(pb.OpenSnapshotRequest(context="c"), timeout=10)
    assert opened.commit_seq == 1 and opened.lease_ms == 5000
    foreign = _reason(snap.stub.Get, pb.GetRequest(context="other", table="frames",
                                                    snapshot=opened.snapshot))
    unknown = _reason(snap.stub.Scan, pb.ScanRequest(context="c", table="frames",
                                                      snapshot="0" * 32))
    snap.clock.now += 5.0
    expired = _reason(snap.stub.Get, pb.GetRequest(context="c", table="frames",
                                                    snapshot=opened.snapshot))
    huge = _reason(snap.stub.Get, pb.GetRequest(context="c", table="frames",
                                                 snapshot="x" * 100_000))
    for err in (foreign, unknown, expired, huge):
        assert err.reason == "STORAGE_SNAPSHOT_EXPIRED"
        assert err.to_dict()["code"] == "ABORTED"
    assert len(huge.details["snapshot"]) == 64  # a caller's id is never echoed whole
    assert len(snap.registry) == 0  # the expired one was released on use


def test_dist_05_use_renews_the_lease_and_the_reaper_releases_forgotten_snapshots(snap):
    snap.client.commit("c", 0, [Write("frames", ("a",), b"A")])
    kept, forgotten = snap.client.reader("c"), snap.client.reader("c")
    kept.get("frames", ("a",))
    forgotten.get("frames", ("a",))
    for _ in range(3):  # 12 s in all, never 5 s without a use
        snap.clock.now += 4.0
        assert kept.get("frames", ("a",)) == b"A"
    snap.registry.reap()  # (the background reaper may have been first)
    assert len(snap.registry) == 1  # the forgotten one is gone; the kept one was renewed
    kept.close()


def test_dist_05_a_remote_reader_outliving_its_lease_continues_or_gets_stale_read(snap):
    snap.client.commit("c", 0, [Write("frames", ("a",), b"A")])
    with snap.client.reader("c") as r:
        assert r.get("frames", ("a",)) == b"A"
        snap.clock.now += 6.0
        # Nothing changed: a new snapshot at the same commit_seq continues the read.
        assert list(r.scan("frames")) == [(("a",), b"A")] and r.commit_seq == 1
        snap.clock.now += 6.0
        snap.client.commit("c", 1, [Write("frames", ("a",), b"B")])
        with pytest.raises(StaleRead):  # the version it read is gone: redo the whole read
            r.get("frames", ("a",))
    assert len(snap.registry) == 0
    with snap.client.reader("c") as r:
        assert r.get("frames", ("a",)) == b"B" and r.commit_seq == 2


def test_dist_05_expired_snapshots_make_room_under_the_cap(snap):
    readers = [snap.client.reader("c") for _ in range(2)]
    for r in readers:
        assert r.commit_seq == 0  # opens its snapshot
    snap.clock.now += 5.0
    with snap.client.reader("c") as r:  # the cap is reached, but both leases ran out
        assert r.commit_seq == 0
    for r in readers:
        r.close()  # already released: closing is harmless
    assert len(snap.registry) == 0


def test_dist_05_concurrent_remote_commits_share_lmdb_write_transactions(snap):
    """Commit RPCs go through the store's group commit like in-process writers: held
    at the leader until all 8 first commits are queued, they land in one write
    transaction; then every one of 8 x 10 commits lands, in order per context."""
    errors = []

    def writer(ctx: str) -> None:
        try:
            for n in range(10):
                assert snap.client.commit(ctx, n, [Write("frames", (f"f{n}",), b"x")]) == n + 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(f"c{i}",)) for i in range(8)]
    with snap.store._leader:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(snap.store._queue) < 8 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(snap.store._queue) == 8
        txn_before = snap.store._env.info()["last_txnid"]
    for t in threads:
        t.join()
    assert not errors
    stats = snap.store.stats
    assert stats["commits"] == 80
    assert stats["write_transactions"] <= 80 - 7
    assert snap.store._env.info()["last_txnid"] - txn_before == stats["write_transactions"]
    for i in range(8):
        assert len(rows(snap.client, f"c{i}", "frames")) == 10


# -- the change feed (DIST-06): one entry per committed batch, on every store --------------
def test_dist_06_the_feed_has_one_entry_per_commit_naming_its_events_and_frames(store):
    store.commit("a", 0, [Write("events", (0,), b"e0"), Write("sessions", ("s",), b"s")])
    store.commit("b", 0, [Write("events", (0,), b"e0")])
    store.commit("a", 1, [Write("events", (1,), b"e1"), Write("frames", ("x",), b"X"),
                          Write("frames", ("y",), None), Write("relations", ("x", "r", "y"), b"")])
    with pytest.raises(StaleCommit):  # a rejected batch is not in the feed
        store.commit("a", 1, [Write("events", (2,), b"e2")])
    with pytest.raises(MorphzError):
        store.commit("a", 2, [Write("events", (0,), b"again")])
    page = store.changes(0)
    assert [(c.position, c.context, c.commit_seq, c.events, c.frames) for c in page.changes] \
        == [(1, "a", 1, (0,), ()), (2, "b", 1, (0,), ()), (3, "a", 2, (1,), ("x", "y"))]
    assert page.head == store.feed_head() == 3
    assert [c.position for c in store.changes(1, limit=1).changes] == [2]
    assert store.changes(3).changes == [] and store.changes(3).head == 3
    # One context's feed counts in its own commit_seq.
    mine = store.changes(0, context="a")
    assert [(c.position, c.commit_seq) for c in mine.changes] == [(1, 1), (3, 2)]
    assert mine.head == 2
    assert [c.position for c in store.changes(1, context="a").changes] == [3]
    assert store.changes(0, context="nobody").changes == []


@contextmanager
def following(store, after: int, idle: float):
    """The pages store.watch(after) gives, appended from a thread, while in the block."""
    stop, pages = threading.Event(), []

    def follow():
        for page in store.watch(after, stop=stop, idle=idle):
            pages.append(page)

    t = threading.Thread(target=follow)
    t.start()
    try:
        yield pages
    finally:
        stop.set()
        t.join(30)
    assert not t.is_alive()


def test_dist_06_watch_streams_new_commits_and_idle_pages_carry_the_head(store):
    store.commit("a", 0, [Write("events", (0,), b"e0")])
    with following(store, 1, idle=0.2) as pages:
        store.commit("a", 1, [Write("events", (1,), b"e1")])
        store.commit("b", 0, [Write("frames", ("f",), b"F")])
        until(lambda: sum(len(p.changes) for p in pages) >= 2 and not pages[-1].changes,
              what=pages)
    seen = [c for p in pages for c in p.changes]
    assert [(c.position, c.context, c.events, c.frames) for c in seen] == \
        [(2, "a", (1,), ()), (3, "b", (), ("f",))]
    assert pages[-1].head == 3  # an idle page: nothing new, the head as it stands


def test_dist_06_a_watch_at_the_head_waits_for_the_next_commit_not_an_empty_page(store):
    """After a page that reached the head, a follower hears of the next commit; it is not
    sent an empty page at once (a second read, and message, for every commit)."""
    store.commit("a", 0, [Write("events", (0,), b"e0")])
    # An idle time far past the pause: a loaded machine's pause of 0.3 s outlasted one of
    # 1 s, and the idle page that came meanwhile was taken for an empty page sent at once.
    with following(store, 0, idle=5.0) as pages:
        until(lambda: pages)
        time.sleep(0.3)  # well within the idle time: no page should come meanwhile
        store.commit("a", 1, [Write("events", (1,), b"e1")])
        until(lambda: len(pages) >= 2)
    assert [[c.position for c in p.changes] for p in pages[:2]] == [[1], [2]]


def test_dist_06_a_watch_asked_to_gather_sends_the_commits_made_meanwhile_as_one_page(snap):
    """gather_ms: after a page that reached the head, the service waits before reading
    the next. Five commits made within the wait come as one page; without it, 100 ms
    apart, as several (a follower then pays a message and a wake-up per commit). Either
    way every commit comes once, in order."""
    for gather_ms, pause in ((1000, 0.01), (0, 0.1)):
        start = snap.store.feed_head()
        stream = snap.stub.Watch(pb.WatchRequest(after=start, follow=True,
                                                 gather_ms=gather_ms), timeout=30)
        ctx = f"g{gather_ms}"
        snap.store.commit(ctx, 0, [Write("events", (0,), b"e")])
        first = next(page for page in stream if page.changes)  # (idle pages skipped)
        assert [c.commit_seq for c in first.changes] == [1]  # it reached the head
        for seq in range(1, 6):
            time.sleep(pause)
            snap.store.commit(ctx, seq, [Write("events", (seq,), b"e")])
        pages = []
        while sum(map(len, pages)) < 5:
            pages += [page.changes] if (page := next(stream)).changes else []
        stream.cancel()
        assert [c.commit_seq for changes in pages for c in changes] == [2, 3, 4, 5, 6]
        if gather_ms:
            assert len(pages) == 1, [len(p) for p in pages]
        else:
            assert len(pages) > 1, [len(p) for p in pages]


def test_dist_06_wait_changes_returns_at_a_commit_or_at_its_timeout(store):
    assert store.wait_changes(0, 0.1) == 0  # nothing committed: the timeout ends it
    committer = threading.Timer(0.2, lambda: store.commit("a", 0, [Write("events", (0,), b"e")]))
    committer.start()
    assert store.wait_changes(0, 30) == 1
    # The head moves before the commit is answered: its reply comes before the store
    # closes (a remote store's channel closed first failed the commit in its thread).
    committer.join(30)


def test_dist_06_following_watches_are_capped_and_end_when_the_server_drains(snap):
    streams = [snap.stub.Watch(pb.WatchRequest(follow=True), timeout=30) for _ in range(4)]
    for s in streams:
        assert next(s).head == 0  # each is being served
    with pytest.raises(grpc.RpcError) as info:
        next(snap.stub.Watch(pb.WatchRequest(follow=True), timeout=30))
    from morphz.shared.grpc.errors import from_rpc_error
    assert from_rpc_error(info.value).reason == "STORAGE_WATCH_LIMIT"
    streams[0].cancel()  # a cancelled watch gives its slot back
    deadline = time.monotonic() + 30
    while True:
        try:
            extra = snap.stub.Watch(pb.WatchRequest(follow=True), timeout=30)
            next(extra)
            break
        except grpc.RpcError:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    snap.servicer.close()  # drain: every following watch ends with OK
    for s in streams[1:] + [extra]:
        list(s)  # what is left of the stream, up to its end
        assert s.code() == grpc.StatusCode.OK


def test_get_many_answers_each_key_in_order_found_or_not(store):
    store.commit("c", 0, [Write("frames", (f"f{i}",), f"F{i}".encode()) for i in range(0, 1200, 2)])
    keys = [(f"f{i}",) for i in range(1200)]  # past one GetMany RPC's keys
    with store.reader("c") as r:
        got = r.get_many("frames", keys)
        assert got == [r.get("frames", k) for k in keys]
    assert got[:4] == [b"F0", None, b"F2", None] and got[-2:] == [b"F1198", None]


def test_get_tables_answers_each_tables_keys_in_order(store):
    """get_tables is get_many of each (table, keys), tables repeated or empty included,
    over more keys than one GetMany RPC takes."""
    store.commit("c", 0, [Write("frames", (f"f{i}",), f"F{i}".encode()) for i in range(0, 700, 2)]
                 + [Write("observations", (i,), f"O{i}".encode()) for i in range(0, 700, 3)])
    wanted = [("frames", [(f"f{i}",) for i in range(700)]), ("observations", []),
              ("observations", [(i,) for i in range(700)]), ("frames", [("f2",), ("zz",)])]
    with store.reader("c") as r:
        got = r.get_tables(wanted)
        assert got == [r.get_many(t, keys) for t, keys in wanted]
    assert [len(g) for g in got] == [700, 0, 700, 2]
    assert got[2][:4] == [b"O0", None, None, b"O3"] and got[3] == [b"F2", None]


def test_get_tables_with_max_bytes_reads_a_prefix_of_what_was_asked(store):
    """max_bytes: the rows of a prefix of the keys (one row at least), in the same shape,
    ending once what was read reaches it (a remote reader: between replies, each at most
    one reply's byte budget); without it, every row."""
    big = 3 << 20
    store.commit("c", 0, [Write("frames", (f"f{i}",), bytes([65 + i]) * big) for i in range(4)]
                 + [Write("events", (i,), b"e" * big) for i in range(2)])
    wanted = [("frames", [(f"f{i}",) for i in range(4)]), ("events", [(0,), (1,)])]
    with store.reader("c") as r:
        whole = r.get_tables(wanted)
        for max_bytes in (0, 1, 7 << 20):
            got = r.get_tables(wanted, max_bytes=max_bytes)
            assert len(got) == 2
            n = len(got[0]) + len(got[1])
            flat = whole[0] + whole[1]
            assert 1 <= n < 6 and got[0] + got[1] == flat[:n]
            assert len(got[1]) == 0 or len(got[0]) == 4  # a prefix across the tables
            if r.remote:  # one reply: it stops after the row that passes 8 MiB
                assert n == 3
            else:  # it stopped once reached
                assert sum(map(len, flat[:n - 1])) < max(max_bytes, 1)
    assert [len(w) for w in whole] == [4, 2]


def test_dist_05_a_remote_get_tables_is_one_round_trip(snap):
    channel, count = counted(snap.channel)
    client = StorageClient(channel, timeout=10)
    snap.store.commit("c", 0, [Write("frames", ("a",), b"A"), Write("observations", (1,), b"O"),
                               Write("events", (0,), b"E")])
    with client.latest("c") as r:
        assert r.get_tables([("observations", [(1,), (2,)]), ("frames", [("a",)]),
                             ("events", [(0,)])]) == [[b"O", None], [b"A"], [b"E"]]
    assert count.calls == ["GetMany:observations"]


def test_scan_tables_answers_each_prefix_whole_and_in_order(store):
    """scan_tables is a whole scan of each (table, prefix), repeated or empty ones
    included; over gRPC (3-row scan pages) past a ScanMany reply's row limit too."""
    store.commit("c", 0, [Write("frames", (f"f{i:02}",), f"F{i}".encode()) for i in range(12)]
                 + [Write("pending", (s, i), b"") for s in ("s1", "s2") for i in range(5)])
    wanted = [("frames", ()), ("pending", ("s2",)), ("pending", ("s9",)), ("frames", ()),
              ("pending", ())]
    with store.reader("c") as r:
        got = r.scan_tables(wanted)
        assert got == [list(r.scan(t, p)) for t, p in wanted]
    assert [len(g) for g in got] == [12, 5, 0, 12, 10]
    assert got[1][0] == (("s2", 0), b"")


def test_dist_05_a_remote_scan_tables_is_one_round_trip_and_goes_on_where_cut(snap,
                                                                             monkeypatch):
    """One ScanMany in the reader's snapshot; a scan its reply cut short (the reply's row
    limit, here 4) goes on with Scan after its last row, still in that snapshot."""
    from morphz.services.storage import servicer as servicer_module

    channel, count = counted(snap.channel)
    client = StorageClient(channel, timeout=10)
    snap.store.commit("c", 0, [Write("frames", (f"f{i}",), b"F") for i in range(3)]
                      + [Write("order", (i,), b"o") for i in range(3)])
    wanted = [("frames", ()), ("order", ()), ("relations", ())]
    with client.reader("c") as r:
        assert r.get("meta", ()) is None  # opens the snapshot
        snap.store.commit("c", 1, [Write("frames", ("g",), b"G")])  # not seen below
        whole = r.scan_tables(wanted)
        assert [len(rows) for rows in whole] == [3, 3, 0]
        monkeypatch.setattr(servicer_module, "MAX_SCAN_ROWS", 4)
        count.calls.clear()
        assert r.scan_tables(wanted) == whole
    assert count.methods() == ["ScanMany", "Scan", "CloseSnapshot"]  # order's last 2 rows


def test_dist_05_a_remote_scan_of_large_rows_goes_on_past_each_replys_byte_budget(snap):
    """A Scan reply stops after the row that passes GetMany's byte budget (8 MiB), as a
    ScanMany's does, and the reader goes on after its last row: 14 rows of 5 MiB come
    whole, two per reply, where one reply of every row passed the 64 MiB a message may
    hold (RESOURCE_EXHAUSTED, after the server had built it whole)."""
    channel, count = counted(grpc.insecure_channel(snap.address, options=[
        ("grpc.max_receive_message_length", MESSAGE_BYTES.max)]))  # as a service's
    client = StorageClient(channel, timeout=30)
    big = 5 << 20
    snap.store.commit("c", 0, [Write("events", (i,), bytes([65 + i]) * big) for i in range(14)])
    with client.reader("c") as r:
        rows = list(r.scan("events"))
        assert [k for k, _ in rows] == [(i,) for i in range(14)]
        assert all(v == bytes([65 + i]) * big for i, (_, v) in enumerate(rows))
        assert [k for k, _ in r.scan("events", limit=3)] == [(0,), (1,), (2,)]
    # 7 replies of 2 rows (10 MiB), then 2 for the scan of 3
    assert [c for c in count.methods() if c == "Scan"] == ["Scan"] * 9


def test_scan_many_refuses_more_scans_than_its_limit_and_unknown_tables(snap):
    from morphz.shared.limits import SCAN_MANY_SCANS

    scans = [pb.TablePrefix(table="frames")] * (SCAN_MANY_SCANS.max + 1)
    err = _reason(snap.stub.ScanMany, pb.ScanManyRequest(context="c", scans=scans))
    assert err.reason == "STORAGE_REQUEST_TOO_LARGE" and err.to_dict()["code"] == \
        "INVALID_ARGUMENT"
    assert (err.details["limit"], err.details["max"], err.details["size"]) == \
        ("scan_many_scans", SCAN_MANY_SCANS.max, SCAN_MANY_SCANS.max + 1)
    # Every table is checked, the name bounded, before anything is read.
    err = _reason(snap.stub.ScanMany, pb.ScanManyRequest(
        context="c", scans=[pb.TablePrefix(table="frames"), pb.TablePrefix(table="no" * 100)]))
    assert err.reason == "STORAGE_TABLE_UNKNOWN" and len(err.message) < 300


def test_get_many_refuses_more_keys_than_its_limit(snap):
    from morphz.services.storage.servicer import MAX_GET_MANY_KEYS, key_to_proto
    snap.client.commit("c", 0, [Write("frames", ("a",), b"A")])
    keys = [pb.Key(parts=key_to_proto((f"k{i}",))) for i in range(MAX_GET_MANY_KEYS + 1)]
    err = _reason(snap.stub.GetMany, pb.GetManyRequest(context="c", table="frames", keys=keys))
    assert err.reason == "STORAGE_REQUEST_TOO_LARGE"
    assert (err.details["limit"], err.details["max"]) == ("get_many_keys", MAX_GET_MANY_KEYS)
    # The keys of every table count.
    err = _reason(snap.stub.GetMany, pb.GetManyRequest(
        context="c", table="frames", keys=keys[:2],
        also=[pb.TableKeys(table="frames", keys=keys[2:])]))
    assert err.reason == "STORAGE_REQUEST_TOO_LARGE"
    assert err.details["size"] == MAX_GET_MANY_KEYS + 1
    # Another table is checked as the first is: a structured refusal, the name bounded.
    err = _reason(snap.stub.GetMany, pb.GetManyRequest(
        context="c", table="frames", keys=keys[:1],
        also=[pb.TableKeys(table="nope" * 100, keys=keys[:1])]))
    assert err.reason == "STORAGE_TABLE_UNKNOWN" and len(err.message) < 300


def test_dist_05_lmdb_group_commit_applies_a_contexts_batch_in_the_order_of_its_versions(
        durable):
    """Commits pipelined over concurrent RPCs may reach the store out of order: one write
    transaction applies a context's queued commits by the version each expects."""
    store = durable()
    second = store.submit("c", 1, [Write("frames", ("b",), b"B")])  # queued first
    first = store.submit("c", 0, [Write("frames", ("a",), b"A")])
    assert store.wait(second) == 2 and store.wait(first) == 1
    assert store.stats["write_transactions"] == 1
    assert read(store, "c", "frames", ("b",)) == b"B"


def test_dist_05_a_remote_readers_first_read_opens_its_snapshot_in_the_same_round_trip(snap):
    """No OpenSnapshot RPC: the first read opens the snapshot and reads in it, so a later
    read of the same reader still sees that version; a first read that fails leaves no
    snapshot open."""

    channel, count = counted(snap.channel)
    client = StorageClient(channel, timeout=10)
    snap.store.commit("c", 0, [Write("frames", ("a",), b"A1")])
    opened = snap.registry.__len__
    with client.reader("c") as r:
        assert r.get("frames", ("a",)) == b"A1" and r.commit_seq == 1
        assert opened() == 1
        snap.store.commit("c", 1, [Write("frames", ("a",), b"A2"), Write("frames", ("b",), b"B")])
        assert r.get_many("frames", [("a",), ("b",)]) == [b"A1", None]  # still version 1
        assert [k for k, _ in r.scan("frames")] == [("a",)]
    assert count.methods() == ["Get", "GetMany", "Scan", "CloseSnapshot"]
    assert opened() == 0
    with pytest.raises(grpc.RpcError):  # an unknown table: refused, nothing left open
        snap.stub.Get(pb.GetRequest(context="c", table="nope", key=[], open_snapshot=True),
                      timeout=10)
    assert opened() == 0
    reply = snap.stub.Scan(pb.ScanRequest(context="c", table="frames", open_snapshot=True),
                           timeout=10)
    assert reply.snapshot and reply.commit_seq == 2 and opened() == 1


def test_dist_05_a_readers_last_getmany_releases_its_snapshot(snap, monkeypatch):
    """get_tables(release=True): the snapshot goes with the reply that completes the read
    (no CloseSnapshot round trip); a read after that sees the same version through a new
    snapshot, or StaleRead once the context moved. A reply cut short keeps it."""
    from morphz.services.storage import servicer as servicer_module

    channel, count = counted(snap.channel)
    client = StorageClient(channel, timeout=10)
    snap.store.commit("c", 0, [Write("frames", ("a",), b"A1"), Write("frames", ("b",), b"B1")])
    with client.reader("c") as r:
        assert r.get("frames", ("a",)) == b"A1"
        assert r.get_tables([("frames", [("a",), ("b",)])], release=True) == [[b"A1", b"B1"]]
        assert len(snap.registry) == 0
        assert r.get("frames", ("b",)) == b"B1" and r.commit_seq == 1  # reopened at 1
    assert count.methods() == ["Get", "GetMany", "OpenSnapshot", "Get", "CloseSnapshot"]

    count.calls.clear()  # a first read that is also the last keeps no snapshot
    with client.reader("c") as r:
        assert r.get_tables([("frames", [("a",)])], release=True) == [[b"A1"]]
        assert len(snap.registry) == 0
        snap.store.commit("c", 1, [Write("frames", ("a",), b"A2")])
        with pytest.raises(StaleRead):  # version 1 is gone: redo the whole read
            r.get("frames", ("a",))
    assert count.methods() == ["GetMany", "OpenSnapshot", "CloseSnapshot"]
    assert len(snap.registry) == 0

    monkeypatch.setattr(servicer_module, "GET_MANY_BYTES", 1)  # a row per reply
    count.calls.clear()
    with client.reader("c") as r:
        assert r.get("frames", ("a",)) == b"A2"
        assert r.get_tables([("frames", [("a",), ("b",)])], release=True) == [[b"A2", b"B1"]]
        assert len(snap.registry) == 0
    assert count.methods() == ["Get", "GetMany", "GetMany"]  # released by the second


def test_dist_05_a_latest_reader_holds_no_snapshot_and_sees_each_commit(snap):
    """Store.latest over gRPC: no snapshot RPCs, and a read after a commit sees it."""
    channel, count = counted(snap.channel)
    client = StorageClient(channel, timeout=10)
    snap.store.commit("c", 0, [Write("frames", ("a",), b"A1")])
    with client.latest("c") as r:
        assert r.get("frames", ("a",)) == b"A1" and r.commit_seq == 1
        snap.store.commit("c", 1, [Write("frames", ("a",), b"A2")])
        assert r.get_many("frames", [("a",)]) == [b"A2"] and r.commit_seq == 2
        assert snap.registry.__len__() == 0
    assert count.methods() == ["Get", "GetMany"]
    with snap.store.latest("c") as r:  # an in-process store's is its consistent reader
        assert r.get("frames", ("a",)) == b"A2"


def test_dist_05_read_at_one_version_reads_again_when_its_version_went():
    """The in-memory store's reader fails (StaleRead) once a commit lands under it: the
    whole read runs again at the new version, never a mix; a second loss is raised."""
    from morphz.shared.storage.api import read_at_one_version

    store = MemoryStore()
    store.commit("c", 0, [Write("frames", ("a",), b"A1"), Write("frames", ("b",), b"B1")])
    firsts = []

    def read(r):
        firsts.append(r.get("frames", ("a",)))
        if len(firsts) == 1:  # a commit between this read's two gets
            store.commit("c", 1, [Write("frames", ("a",), b"A2"), Write("frames", ("b",), b"B2")])
        return firsts[-1], r.get("frames", ("b",))
    assert read_at_one_version(store, "c", read) == (b"A2", b"B2")
    assert firsts == [b"A1", b"A2"]

    def always_moved(r):
        r.get("frames", ("a",))
        store.commit("c", r.commit_seq, [Write("frames", ("a",), b"again")])
        return r.get("frames", ("b",))
    with pytest.raises(StaleRead):
        read_at_one_version(store, "c", always_moved)
