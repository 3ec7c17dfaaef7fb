"""What the PostgreSQL store adds to the storage contract (test_storage_contract.py runs
that suite on it): LMDB's key order, append-only rows no client can rewrite, faults with
named reasons (a lost server, a full disk), a commit and its fencing token durable only
together, and the backup copy. A real PostgreSQL 15 (tests/pg.py) throughout."""
from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest

from morphz.services.storage.lmdb import LmdbStore
from morphz.services.storage.postgres import PostgresStore
from morphz.shared.errors import MorphzError
from morphz.shared.storage.api import Write

from tests.pg import make_folder, new_database, new_schema, start_postgres


# No servers of the session's topology: it runs the same under either (.ci/run's split
# pass leaves it out).
pytestmark = pytest.mark.split_processes


@pytest.fixture
def pg(postgres_server):
    """A store of its own (a new schema) on the session's server."""
    store = PostgresStore(postgres_server.dsn(), schema=new_schema())
    yield store
    store.close()


@pytest.fixture
def own_server():
    """A PostgreSQL of the test's own, which it may kill."""
    server = start_postgres()
    yield server
    server.remove()


def reason(call, *args, **kw) -> str:
    with pytest.raises(MorphzError) as info:
        call(*args, **kw)
    return info.value.reason


def test_pg_scans_see_lmdbs_key_order_for_every_key_shape(pg, tmp_path):
    """Random keys of mixed shapes (ints to 2^64-1, text past U+FFFF, empty text): every
    scan (prefix, after, limit, reverse) answers on PostgreSQL what it answers on LMDB."""
    rng = random.Random(44)
    lm = LmdbStore(str(tmp_path / "lmdb"))
    texts = ["", "a", "ab", "b", "é", "z\U0001F600", "\u00ff", "a\u0100", "Z"]

    def part():
        return rng.choice([rng.choice(texts), rng.choice([0, 1, 255, 256, 1 << 32,
                                                          (1 << 63) + 5, (1 << 64) - 1])])
    keys_ = {(rng.choice(texts), part(), part()) for _ in range(300)}
    writes = [Write("relations", k, repr(k).encode()) for k in keys_]
    for store in (lm, pg):
        store.commit("c", 0, writes)
        store.commit("c\u00e9", 0, [Write("relations", ("a", 1, 2), b"other context")])
    ordered = sorted(keys_, key=lambda k: [(0, p.to_bytes(8, "big")) if isinstance(p, int)
                                           else (1, p.encode()) for p in k])
    asks = [{}, {"reverse": True}, {"limit": 7}, {"limit": 7, "reverse": True}]
    for k in rng.sample(ordered, 12):
        asks += [{"prefix": k[:1]}, {"prefix": k[:2], "reverse": True},
                 {"after": k}, {"after": k, "reverse": True, "limit": 5},
                 {"prefix": k[:1], "after": k}]
    with lm.reader("c") as a, pg.reader("c") as b:
        assert [k for k, _ in b.scan("relations")] == ordered
        for ask in asks:
            assert list(b.scan("relations", **ask)) == list(a.scan("relations", **ask)), ask
            if "limit" not in ask and "reverse" not in ask:
                assert list(b.scan_keys("relations", ask.get("prefix", ()),
                                        ask.get("after"))) == \
                    list(a.scan_keys("relations", ask.get("prefix", ()), ask.get("after")))
    lm.close()


def test_pg_append_only_rows_refuse_update_delete_and_truncate_from_any_client(
        postgres_server, pg):
    """Another client (psql) cannot rewrite history either: the triggers refuse it."""
    pg.commit("c", 0, [Write("events", (1,), b"e1"), Write("frames", ("f",), b"F")])
    pg.commit("c", 1, [Write("events", (2,), b"e2")])
    pg.put_record("c", "snapshots", ("s",), b"S")
    pg.commit("c", 2, [Write("events", (2,), None, quarantine=True)])
    schema = pg.schema
    for statement in (f"UPDATE {schema}.events SET v = 'x'",
                      f"DELETE FROM {schema}.events",
                      f"TRUNCATE {schema}.events",
                      f"DELETE FROM {schema}.snapshots",
                      f"UPDATE {schema}.quarantine SET v = 'x'",
                      f"DELETE FROM {schema}.quarantine",
                      # the flag a quarantine sets lets no DELETE of quarantined rows by
                      f"SELECT set_config('morphz.quarantine', 'on', false); "
                      f"DELETE FROM {schema}.quarantine"):
        with pytest.raises(RuntimeError, match="append-only"):
            postgres_server.psql(statement)
    postgres_server.psql(f"DELETE FROM {schema}.frames")  # versioned tables: not history
    with pg.reader("c") as r:
        assert list(r.scan("events")) == [((1,), b"e1")]
        assert r.get("snapshots", ("s",)) == b"S"
        assert list(r.scan("quarantine")) == [((3, "events", 2), b"e2")]


def test_pg_a_lost_server_is_storage_unavailable_and_the_store_reconnects(own_server):
    """PostgreSQL killed: commits and reads answer STORAGE_UNAVAILABLE (never INTERNAL);
    once it is back the same store commits and reads again, nothing acknowledged lost."""
    store = PostgresStore(own_server.dsn())
    store.commit("c", 0, [Write("frames", ("a",), b"1")])
    with store.reader("c"):
        pass  # an idle reader connection, left in the pool
    own_server.kill()
    assert reason(store.commit, "c", 1, [Write("frames", ("a",), b"2")]) == \
        "STORAGE_UNAVAILABLE"
    assert reason(store.reader, "c") == "STORAGE_UNAVAILABLE"
    assert reason(store.changes, 0) == "STORAGE_UNAVAILABLE"
    own_server.start()
    with store.reader("c") as r:
        assert r.commit_seq == 1 and r.get("frames", ("a",)) == b"1"
    assert store.commit("c", 1, [Write("frames", ("a",), b"2")]) == 2
    store.close()


def test_dist_02_pg_a_commit_killed_before_its_commit_leaves_neither_it_nor_its_token(
        postgres_server):
    """The token is kept with its commit; a process SIGKILLed after every statement but
    before COMMIT leaves neither the commit nor its token behind."""
    dsn, schema = postgres_server.dsn(), new_schema()
    store = PostgresStore(dsn, schema=schema)
    store.commit("c", 0, [Write("frames", ("a",), b"1")], fence=5)
    store.close()
    crash = ("from morphz.services.storage.postgres import PostgresStore\n"
             "from morphz.shared.process.faults import Faults\n"
             "from morphz.shared.storage.api import Write\n"
             f"s = PostgresStore({dsn!r}, schema={schema!r}, "
             "faults=Faults('after-puts-before-commit'))\n"
             "s.commit('c', 1, [Write('frames', ('a',), b'lost')], fence=50)\n")
    proc = subprocess.run([sys.executable, "-c", crash], capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    store = PostgresStore(dsn, schema=schema)
    assert reason(store.commit, "c", 1, [Write("frames", ("a",), b"x")], fence=4) == "FENCED"
    assert store.commit("c", 1, [Write("frames", ("a",), b"2")], fence=6) == 2
    with store.reader("c") as r:
        assert r.get("frames", ("a",)) == b"2"
    assert store.feed_head() == 2
    store.close()


def test_dur_06_pg_the_backup_copy_is_an_lmdb_store_with_every_row_and_the_feed(
        pg, tmp_path):
    """copy_compacted (what `morphz backup` takes) writes LMDB's environment: opened as
    an LmdbStore it holds the same rows, versions, tokens and feed."""
    pg.commit("c", 0, [Write("events", (1,), b"e1"), Write("frames", ("f",), b"F"),
                       Write("meta", (), b"M")], fence=3)
    pg.commit("d", 0, [Write("relations", ("a", "n", "b"), b"")])
    pg.put_record("c", "snapshots", ("s",), b"S")
    pg.commit("c", 1, [Write("frames", ("f",), None, quarantine=True)], fence=3)
    info = pg.copy_compacted(str(tmp_path / "copy"))
    assert (info["feed_head"], info["contexts"], info["store"]) == (3, 2, pg.store_id)
    assert os.listdir(tmp_path / "copy") == ["data.mdb"]
    lm = LmdbStore(str(tmp_path / "copy"))
    assert lm.store_id == pg.store_id and lm.contexts() == pg.contexts()
    assert lm.changes(0) == pg.changes(0)
    assert lm.changes(0, context="c") == pg.changes(0, context="c")
    for ctx in ("c", "d"):
        with lm.reader(ctx) as a, pg.reader(ctx) as b:
            assert a.commit_seq == b.commit_seq
            for table in ("events", "frames", "meta", "relations", "snapshots", "quarantine"):
                assert list(a.scan(table)) == list(b.scan(table)), table
    assert reason(lm.commit, "c", 2, [Write("frames", ("g",), b"G")], fence=2) == "FENCED"
    lm.close()


def test_pg_a_pipelined_batch_larger_than_the_socket_takes_at_once_commits(
        postgres_server):
    """psycopg stops sending a pipeline once its last command is queued, sent or not,
    and waits for results the server cannot give before the rest arrives: commits of
    1 MiB over a Unix socket hung about one run in two (of 200), and a slow server's small
    TCP window does the same at any size. The store hands all of a pipeline's bytes to
    the kernel before its last command. Here the writer's socket takes 8 KiB at once
    (SO_SNDBUF, set on the store's own writer connection) and each commit pipelines 60 KB:
    before, the first such commit hung for ever."""
    import socket
    import threading

    # A store of its own, closed only if its writer came back (a hung one holds it).
    pg = PostgresStore(postgres_server.dsn(), schema=new_schema())
    pg.commit("c", 0, [Write("frames", ("a",), b"x")])  # the writer's connection is open
    with socket.socket(fileno=os.dup(pg._writer.pgconn.socket)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    done = []

    def commits():
        for i in range(1, 11):
            done.append(pg.commit("c", i, [Write("frames", (f"f{i}",), os.urandom(60_000))]))
    writer = threading.Thread(target=commits, daemon=True)  # a hung one must not hang pytest
    writer.start()
    writer.join(timeout=60)
    assert done == list(range(2, 12)), f"{len(done)} of 10 commits returned in 60 s"
    assert pg.stats["write_transactions"] == 11
    pg.close()


# Run in a process of its own: the memory the copy took at most, above what the process
# held before it (ru_maxrss is a high-water mark, so earlier tests' peaks must not count).
_COPY_PEAK = """
import resource, sys
from morphz.services.storage.postgres import PostgresStore
store = PostgresStore(sys.argv[1], schema=sys.argv[2])
with store.reader("") as r:
    r.get("meta", ())  # a reader's connection, and what reading costs, are counted before
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
store.copy_compacted(sys.argv[3])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)  # KiB
"""


def test_sec_06_pg_a_backup_copy_holds_a_bounded_part_of_the_store_in_memory(
        postgres_server, tmp_path):
    """copy_compacted streams each table: rows fetched a few MiB at a time (a server-side
    cursor), the LMDB copy committed every few MiB. Before, a table came whole into the
    client (libpq's result) and whole into LMDB's dirty pages: a 96 MiB table took about
    twice that in the storage process."""
    dsn, schema = postgres_server.dsn(), new_schema()
    store = PostgresStore(dsn, schema=schema)
    mib = 1 << 20
    for i in range(96):  # 96 frames of 1 MiB each, incompressible
        store.commit("big", i, [Write("frames", (f"f{i:03}",), os.urandom(mib))])
    store.close()
    done = subprocess.run([sys.executable, "-c", _COPY_PEAK, dsn, schema,
                           str(tmp_path / "copy")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    grew_mib = int(done.stdout.split()[-1]) / 1024
    assert grew_mib < 40, f"the copy of a 96 MiB table took {grew_mib:.0f} MiB"
    copy = LmdbStore(str(tmp_path / "copy"))
    with copy.reader("big") as r:
        assert [k for k, in ((k,) for k, _ in r.scan("frames"))] == \
            [(f"f{i:03}",) for i in range(96)]
    copy.close()


def test_dur_06_pg_a_copy_loads_into_an_empty_store_only(pg, postgres_server, tmp_path):
    """What `morphz restore --store postgres` does: the copy loaded into an empty store
    reads as the original (feed, versions, tokens, rows, identity); a store with
    anything in it refuses (RESTORE_TARGET_NOT_EMPTY) and keeps what it has."""
    pg.commit("c", 0, [Write("events", (1,), b"e1"), Write("meta", (), b"M")], fence=3)
    pg.commit("c", 1, [Write("events", (2,), b"e2")], fence=3)
    pg.put_record("c", "snapshots", ("s",), b"S")
    pg.copy_compacted(str(tmp_path / "copy"))
    copy = PostgresStore(postgres_server.dsn(), schema=new_schema())
    assert copy.load(str(tmp_path / "copy")) == {"feed_head": 2, "contexts": 1,
                                                 "store": pg.store_id}
    assert copy.feed_head() == 2 and copy.changes(0) == pg.changes(0)
    with copy.reader("c") as a, pg.reader("c") as b:
        assert a.commit_seq == b.commit_seq == 2
        for table in ("events", "meta", "snapshots"):
            assert list(a.scan(table)) == list(b.scan(table))
    assert reason(copy.commit, "c", 2, [Write("meta", (), b"x")], fence=1) == "FENCED"
    assert copy.commit("c", 2, [Write("events", (3,), b"e3")], fence=3) == 3
    assert reason(copy.load, str(tmp_path / "copy")) == "RESTORE_TARGET_NOT_EMPTY"
    assert copy.feed_head() == 3
    copy.close()


def test_dur_06_pg_a_copy_made_before_a_table_existed_loads_with_that_table_empty(
        postgres_server, tmp_path):
    """A backup taken by an older server has no snapshot_index (issue 57 added it): it
    loads, every table it has as it was, the new one empty."""
    import shutil
    import lmdb
    legacy = os.path.join(os.path.dirname(__file__), "..", "fixtures", "legacy_store",
                          "datadir", "store")
    shutil.copytree(legacy, tmp_path / "copy")
    env = lmdb.open(str(tmp_path / "copy"), readonly=True, lock=False, max_dbs=64)
    with env.begin() as txn:
        with pytest.raises(lmdb.NotFoundError):
            env.open_db(b"snapshot_index", txn=txn, create=False)
    env.close()
    copy = PostgresStore(postgres_server.dsn(), schema=new_schema())
    try:
        loaded = copy.load(str(tmp_path / "copy"))
        assert loaded["contexts"] >= 1
        context = copy.contexts()[0]
        with copy.reader(context) as r:
            assert list(r.scan("events", limit=1)) and list(r.scan("snapshot_index")) == []
    finally:
        copy.close()


@pytest.fixture
def small_disk(own_server):
    """A database whose tables live on an 8 MiB tmpfs (a tablespace), so the disk really
    fills; (server, dsn, mount point, remount(size))."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    point = make_folder("morphz-pg-disk-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700,uid=postgres,"
                    "gid=postgres", "tmpfs", point], check=True)
    try:
        name = new_database(own_server)
        own_server.psql(f"CREATE TABLESPACE small LOCATION '{point}'")
        own_server.psql(f"ALTER DATABASE {name} SET default_tablespace = small")

        def remount(size: str) -> None:
            subprocess.run(["mount", "-o", f"remount,size={size}", point], check=True)
        yield own_server, own_server.dsn(name), remount
    finally:
        own_server.stop("immediate")
        subprocess.run(["umount", "-l", point], check=False)
        os.rmdir(point)


def test_dur_07_pg_a_full_disk_refuses_writes_storage_full_reads_go_on_and_writes_resume(
        small_disk):
    _, dsn, remount = small_disk
    store = PostgresStore(dsn)
    acked, value, seq = [], os.urandom(256 << 10), 0
    while True:
        try:
            seq = store.commit("c", seq, [Write("events", (seq,), value)])
        except MorphzError as e:
            assert e.reason == "STORAGE_FULL", e
            assert e.details["cause"] == "disk"
            break
        acked.append(seq - 1)
        assert len(acked) < 200, "8 MiB never filled"
    assert store.space.alarm is not None
    with store.reader("c") as r:  # reads go on, nothing acknowledged lost
        assert r.commit_seq == seq and [k for k, in r.scan_keys("events")] == acked
    remount("64m")
    assert store.commit("c", seq, [Write("events", (seq,), value)]) == seq + 1
    assert store.space.alarm is None
    store.close()


def test_pg_a_store_reopened_has_its_identity_rows_and_feed_head(postgres_server):
    """Opening an existing store creates nothing (no DDL): the same identity, head, rows."""
    dsn, schema = postgres_server.dsn(), new_schema()
    first = PostgresStore(dsn, schema=schema)
    first.commit("c", 0, [Write("events", (0,), b"e0")])
    second = PostgresStore(dsn, schema=schema)
    assert (second.store_id, second.feed_head(), second.contexts()) == \
        (first.store_id, 1, ["c"])
    assert reason(second.commit, "c", 1, [Write("events", (0,), b"again")]) == \
        "STORAGE_APPEND_ONLY"
    assert second.commit("c", 1, [Write("events", (1,), b"e1")]) == 2
    first.close()
    second.close()


def test_pg_serve_with_a_database_it_cannot_reach_or_a_bad_flag_is_a_structured_error(
        tmp_path):
    """`morphz serve --store postgres`: an unreachable database is STORAGE_UNAVAILABLE,
    --store on a role that keeps no store CONTEXT_INPUT_INVALID (JSON on stdout, exit 1);
    a DSN that does not parse is CONTEXT_INPUT_INVALID too."""
    from tests.integration.test_cli import assert_error, run_cli
    serve = ("serve", "--data", str(tmp_path / "d"), "--listen", "127.0.0.1:0")
    missing = f"host={tmp_path} port=1"  # no server's socket there
    assert_error(run_cli(*serve, "--store", "postgres", "--dsn", missing),
                 "UNAVAILABLE", "STORAGE_UNAVAILABLE")
    with pytest.raises(MorphzError) as bad:
        PostgresStore("= bad")
    assert (bad.value.reason, bad.value.details["field"]) == ("CONTEXT_INPUT_INVALID", "dsn")
    assert_error(run_cli("serve", "recall", "--data", str(tmp_path / "r"), "--listen",
                         "127.0.0.1:0", "--storage", "127.0.0.1:1", "--transaction",
                         "127.0.0.1:2", "--store", "postgres", "--dsn", missing),
                 "INVALID_ARGUMENT", "CONTEXT_INPUT_INVALID")


def test_sec_06_pg_snapshots_past_the_readers_connections_are_refused_at_once(
        postgres_server, tmp_path):
    """Each open read snapshot holds one of the store's reader connections (64). A storage
    service on PostgreSQL opens at most 48 (16 stay free for reads of the latest rows),
    and the next is STORAGE_SNAPSHOT_LIMIT at once: before, the limit was the service's
    128, so the 65th open waited 30 s for a connection and ended STORAGE_UNAVAILABLE.
    A real `morphz serve storage` process, real gRPC."""
    import grpc

    from morphz.api.storage.v1 import storage_pb2 as spb
    from morphz.api.storage.v1 import storage_pb2_grpc
    from morphz.services.storage.client import StorageClient
    from morphz.shared.grpc.errors import call
    from tests.topology import ServerProcess

    dsn = postgres_server.dsn(new_database(postgres_server))
    srv = ServerProcess(tmp_path / "s", args=["storage", "--store", "postgres", "--dsn", dsn])
    try:
        srv.start()
        with grpc.insecure_channel(srv.address) as channel:
            stub = storage_pb2_grpc.StorageServiceStub(channel)
            capacity = 48  # the documented cap (README), not the code's constants
            for i in range(capacity):
                call(stub.OpenSnapshot, spb.OpenSnapshotRequest(context=f"c{i}"), timeout=30)
            with pytest.raises(MorphzError) as refused:
                call(stub.OpenSnapshot, spb.OpenSnapshotRequest(context="one-more"),
                     timeout=30)
            assert refused.value.reason == "STORAGE_SNAPSHOT_LIMIT"
            assert (refused.value.details["limit"], refused.value.details["max"]) == \
                ("open_snapshots", capacity)
            # The connections kept free serve reads of the latest rows meanwhile.
            StorageClient(channel, timeout=30).commit("c0", 0, [Write("frames", ("a",), b"A")])
            with StorageClient(channel, timeout=30).latest("c0") as latest:
                assert latest.get("frames", ("a",)) == b"A"
    finally:
        srv.kill()
