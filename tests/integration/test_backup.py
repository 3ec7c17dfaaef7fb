"""DUR-06: an online backup of a storage shard restores to a store whose audit matches and
that holds every commit acknowledged before the backup began. Real servers as child
processes (`morphz serve`, `morphz serve storage`), the real CLI (`morphz backup`,
`morphz restore`), real LMDB and tantivy folders."""
from __future__ import annotations

import io
import json
import secrets
import tarfile
import threading
import time

import grpc
import pytest

from morphz.shared.auth import IN_PROCESS_CALLER
from morphz.services.recall.client import RecallClient
from morphz.services.recall.core.engine import RecallCore
from morphz.services.recall.core.request import SearchRequest
from morphz.services.recall.runtime.pins import SearchPins
from morphz.services.recall.runtime.follower import FeedFollower
from morphz.services.recall.runtime.indexer import Indexer
from morphz.services.recall.index.index_directory import IndexDirectory
from morphz.services.storage.backup import Backups, restore, write_backup
from morphz.services.storage.client import StorageClient
from morphz.services.storage.lmdb import LmdbStore
from morphz.services.transaction.client import TransactionClient
from morphz.services.transaction.core.engine import TransactionCore
from morphz.shared.errors import MorphzError

from tests.conftest import ServerProcess
from tests.integration.test_cli import _env, assert_error, run_cli
from tests.integration.test_split import BOUND, SERVING, start, wait_health

WRITERS = 8
CONTEXTS = [f"dur06-{i}" for i in range(4)]  # two writers per context: they race


def backup(path, address: str | None = None, env: dict | None = None) -> dict:
    proc = run_cli("backup", "--to", str(path), "--format=json", address=address, env=env,
                   timeout=300)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return json.loads(proc.stdout)


def restored(path, data, *flags: str) -> dict:
    """`morphz restore` of a backup (as taken unless `flags` give an erasure log)."""
    if not any(f.startswith("--erasures") for f in flags):
        flags = ("--without-erasures", *flags)
    proc = run_cli("restore", "--from", str(path), "--data", str(data), "--format=json",
                   *flags)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return json.loads(proc.stdout)


def until(check, what: str):
    """Wait (bounded) until check() is truthy; its value."""
    deadline = time.monotonic() + BOUND
    while not (value := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
    return value


@pytest.mark.parametrize("store", [
    "lmdb", pytest.param("postgres", marks=pytest.mark.split_processes)])  # its own servers
def test_dur_06_backup_under_8_writers_restores_every_commit_acknowledged_before_it(
        tmp_path, request, store):
    """On either store; a PostgreSQL store's backup is the same file (an LMDB copy taken
    from one snapshot, PostgresStore.copy_compacted), restored into a new database."""
    flags, restore_flags = [], []
    if store == "postgres":
        from tests.pg import new_database
        pg = request.getfixturevalue("postgres_server")
        flags = ["--store", "postgres", "--dsn", pg.dsn(new_database(pg))]
        restore_flags = ["--store", "postgres", "--dsn", pg.dsn(new_database(pg))]
    # The storage API (which takes backups) is on the internal listener only.
    srv = ServerProcess(tmp_path / "data",
                        args=["--storage-listen", "127.0.0.1:0", *flags]).start()
    try:
        with grpc.insecure_channel(srv.address) as ch:
            for context in CONTEXTS:
                TransactionClient(ch).create_context(context)
        # (kind, context, ref or frame id, text or body, sent, acknowledged): times are
        # monotonic; an acknowledgement is stamped after its reply arrived.
        acks: list[tuple] = []
        stop, errors, lock = threading.Event(), [], threading.Lock()
        enough = threading.Semaphore(0)

        def writer(i: int) -> None:
            context = CONTEXTS[i % len(CONTEXTS)]
            with grpc.insecure_channel(srv.address) as ch:
                c = TransactionClient(ch, timeout=30)
                n = 0
                while not stop.is_set():
                    text = f"writer {i} note {n} kw{i}x{n}"
                    sent = time.monotonic()
                    ref = c.append_event(context, f"w{i}", "user-message", text)["ref"]
                    done = [("event", context, ref, text, sent, time.monotonic())]
                    try:
                        base = c.status(context)["revision"]
                        sent = time.monotonic()
                        c.commit(context, f"(context-tx (base-version {base}) "
                                          f"(create w{i}-{n} (note {n})))")
                        done.append(("frame", context, f"w{i}-{n}", f"(note {n})", sent,
                                     time.monotonic()))
                    except MorphzError as e:  # raced the other writer: not acknowledged
                        if e.reason != "TX_CONFLICT":
                            errors.append(e.to_dict())
                    with lock:
                        acks.extend(done)
                    enough.release()
                    n += 1

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
        for t in threads:
            t.start()
        try:
            for _ in range(80):  # every writer is under way
                assert enough.acquire(timeout=BOUND)
            began = time.monotonic()
            report = backup(tmp_path / "shard.backup", srv.storage_address)
            ended = time.monotonic()
            until(lambda: sum(a[4] > ended for a in list(acks)) >= 16,
                  "writes go on after the backup")
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        assert not errors, errors
        with grpc.insecure_channel(srv.address) as ch:
            live = TransactionClient(ch)
            heads = {context: live.status(context)["commit_seq"] for context in CONTEXTS}
    finally:
        srv.stop()

    before = [a for a in acks if a[5] < began]
    during = [a for a in acks if began <= a[5] < ended]
    after = [a for a in acks if a[4] > ended]  # sent once the copy was made
    assert before and during and after, (len(before), len(during), len(after))
    assert {a[0] for a in before} == {"event", "frame"}

    info = restored(tmp_path / "shard.backup", tmp_path / "restored", *restore_flags)
    assert (info["feed_head"], info["contexts"]) == (report["feed_head"], len(CONTEXTS))
    copy = ServerProcess(tmp_path / "restored", args=restore_flags).start()
    try:
        with grpc.insecure_channel(copy.address) as ch:
            c = TransactionClient(ch)
            for context in CONTEXTS:
                audit = c.audit(context)
                assert audit["match"], audit
                assert c.status(context)["commit_seq"] <= heads[context]
            for kind, context, ref, text, *_ in before:  # every acknowledged one is there
                if kind == "event":
                    assert c.get_event(context, ref)["text"] == text
                else:
                    assert c.get_frame(context, ref)["body"] == text
            for kind, context, ref, *_ in after:  # nothing sent after the copy is
                with pytest.raises(MorphzError) as info:
                    (c.get_event if kind == "event" else c.get_frame)(context, ref)
                assert info.value.reason in ("EVENT_NOT_FOUND", "FRAME_NOT_FOUND")
            # The recall index is derived: the restored server rebuilds it from the feed.
            rc = RecallClient(ch, timeout=30)
            for context in CONTEXTS:
                status = until(lambda name=context: (s := rc.inspect(name))["lag"] == 0
                               and s["feed_lag"] == 0 and s, f"{context} indexed")
                assert status["documents"] == c.status(context)["event_count"] + \
                    len(c.list_frames(context)["frames"])
            kind, context, ref, text, *_ = next(a for a in before if a[0] == "event")
            hits = rc.search(context, text.split()[-1], mode="lexical")["results"]
            assert [h["ref"] for h in hits] == [ref]
    finally:
        copy.stop()


def test_dur_06_restore_refuses_a_non_empty_target_and_a_file_not_a_backup(
        endpoints, client, ctx, tmp_path):
    client.append_event(ctx, "s1", "user-message", "kept in the backup")
    good = tmp_path / "good.backup"
    backup(good, endpoints.storage)
    assert_error(run_cli("backup", "--to", str(good), address=endpoints.storage),
                 "ALREADY_EXISTS", "BACKUP_FILE_EXISTS")

    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    err = assert_error(run_cli("restore", "--from", str(good), "--data", str(occupied),
                               "--without-erasures"),
                       "FAILED_PRECONDITION", "RESTORE_TARGET_NOT_EMPTY")
    assert err["details"]["entries"] == ["notes.txt"]
    assert [p.name for p in occupied.iterdir()] == ["notes.txt"]

    def tar_of(*members: tuple[str, bytes]):
        path = tmp_path / f"{secrets.token_hex(4)}.backup"
        with tarfile.open(path, "w") as tar:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return path

    with tarfile.open(good) as tar:
        manifest = json.loads(tar.extractfile("MANIFEST.json").read())
        data = tar.extractfile("store/data.mdb").read()
    text = tmp_path / "notes.txt"
    text.write_text("not a backup at all\n")
    head = json.dumps(manifest).encode()
    newer = json.dumps(dict(manifest, version=2)).encode()
    flipped = data[:-1] + bytes([data[-1] ^ 1])
    truncated = tmp_path / "truncated.backup"
    truncated.write_bytes(good.read_bytes()[:len(data) // 2])
    cases = [
        (text, "BACKUP_INVALID"),                                         # not a tar
        (tar_of(("README", b"hello")), "BACKUP_INVALID"),                 # no manifest
        (tar_of(("MANIFEST.json", b"{not json")), "BACKUP_INVALID"),
        (tar_of(("MANIFEST.json", newer), ("store/data.mdb", data)), "BACKUP_INVALID"),
        (tar_of(("MANIFEST.json", head)), "BACKUP_CORRUPT"),              # no copy
        (tar_of(("MANIFEST.json", head), ("store/data.mdb", flipped)), "BACKUP_CORRUPT"),
        (truncated, "BACKUP_CORRUPT"),
    ]
    for path, reason in cases:
        target = tmp_path / f"target-{secrets.token_hex(4)}"
        proc = run_cli("restore", "--from", str(path), "--data", str(target),
                       "--without-erasures")
        err = assert_error(proc, "INVALID_ARGUMENT" if reason == "BACKUP_INVALID"
                           else "DATA_LOSS", reason)
        assert not target.exists(), (path, err)  # nothing is left behind
        if path == cases[3][0]:  # a backup of another format version names both
            assert (err["details"]["version"], err["details"]["supported"]) == ("2", 1)
    assert restored(good, tmp_path / "fine")["contexts"] >= 1  # the good one restores


def test_dur_06_a_second_concurrent_backup_is_refused(tmp_path):
    storage = start(tmp_path, "storage")
    transaction = start(tmp_path, "transaction", "--storage", storage.address)
    try:
        for p in (storage, transaction):
            wait_health(p, SERVING)
        with grpc.insecure_channel(transaction.address) as ch:
            tx = TransactionClient(ch, timeout=60)
            tx.create_context("big")
            # More than the stream's transport buffers hold: the first backup stays
            # being sent while its caller reads nothing.
            for _ in range(8):
                tx.append_event("big", "s1", "tool-result", secrets.token_hex(4 << 20))
        env = _env(MORPHZ_STORAGE=storage.address)  # the CLI's way to the storage service
        with grpc.insecure_channel(storage.address, options=[
                ("grpc.max_receive_message_length", 64 << 20)]) as ch:
            store = StorageClient(ch, timeout=120)
            manifest, chunks = store.backup()
            assert manifest.size > 64 << 20
            err = assert_error(run_cli("backup", "--to", str(tmp_path / "second"), env=env),
                               "ABORTED", "BACKUP_RUNNING")
            assert err["message"]
            assert not (tmp_path / "second").exists()
            write_backup(str(tmp_path / "first"), lambda: (manifest, chunks))  # it goes on
            assert store.changes(0, 1).store == manifest.store
        third = backup(tmp_path / "third", env=env)  # the slot is free again
        assert (third["feed_head"], third["size"]) == (manifest.feed_head, manifest.size)
    finally:
        transaction.kill()
        storage.kill()


@pytest.mark.parametrize("feed", ["behind", "past"])
def test_dur_06_recall_starts_over_on_a_restored_store(tmp_path, feed):
    """A recall index folder that followed the original store, then the restored one:
    its saved position is past the backup. The restored store's feed head is behind it,
    or (more commits since the restore) past it: either way the follower drops its
    indexes and follows the new store from the start, never skipping its commits."""
    original = LmdbStore(str(tmp_path / "a" / "store"), sync=False)
    tx = TransactionCore(original)
    tx.create_context("c", caller=IN_PROCESS_CALLER)
    for i in range(5):
        tx.append_event("c", "s1", "user-message", f"alpha note {i}", caller=IN_PROCESS_CALLER)
    with Backups(original, str(tmp_path / "a")).take() as copy:
        write_backup(str(tmp_path / "c.backup"), lambda: (copy.manifest, copy.chunks(4096)))
    for i in range(6):  # after the backup: lost with the original
        tx.append_event("c", "s1", "user-message", f"lost note {i}", caller=IN_PROCESS_CALLER)
    tx.commit("c", "(context-tx (base-version 0) (create lostframe (note lost)))",
              caller=IN_PROCESS_CALLER)
    follow(original, tx, tmp_path / "recall")
    original.close()
    saved, _ = IndexDirectory(str(tmp_path / "recall")).feed_position()
    assert saved == 13  # 1 + 5 + 6 + 1 commits

    restore(str(tmp_path / "c.backup"), str(tmp_path / "b"))
    store = LmdbStore(str(tmp_path / "b" / "store"), sync=False)
    tx = TransactionCore(store)
    fresh = 9 if feed == "past" else 0
    for i in range(fresh):
        tx.append_event("c", "s1", "user-message", f"after note {i}", caller=IN_PROCESS_CALLER)
    assert (store.feed_head() > saved) == (feed == "past")
    core = follow(store, tx, tmp_path / "recall", then=lambda: tx.append_event(
        "c", "s1", "user-message", "after note last", caller=IN_PROCESS_CALLER))
    # Lexical: which words the index holds (a hybrid search adds vector hits and neighbours).
    words = {w: [h.ref for h in core.search(SearchRequest.parse("c", w, limit=50, mode="lexical"),
                                            caller=IN_PROCESS_CALLER).results]
             for w in ("alpha", "lost", "after")}
    assert (len(words["alpha"]), words["lost"], len(words["after"])) == (5, [], fresh + 1)
    assert core.inspect("c", caller=IN_PROCESS_CALLER).documents == \
        tx.status("c", caller=IN_PROCESS_CALLER).event_count
    store.close()


def follow(store: LmdbStore, tx: TransactionCore, root, then=None) -> RecallCore:
    """Follow the store's feed into the index folder until caught up (after `then`)."""
    indexes = IndexDirectory(str(root))
    indexer = Indexer(store, indexes)
    follower = FeedFollower(store, indexer, indexes).start()
    try:
        until(lambda: follower.status()["feed_position"] == store.feed_head(), "caught up")
        if then is not None:
            then()
            until(lambda: follower.status()["feed_position"] == store.feed_head(), "again")
    finally:
        follower.stop()
    return RecallCore(store, tx, indexer, pins=SearchPins())
