"""RECALL-10 rebuild path: documents made in worker processes from the stored JSON
(as doc_json strings) index exactly like the Docs the incremental path makes."""
from __future__ import annotations

import json
import os
import random
from dataclasses import asdict

import numpy as np

from morphz.shared.auth import IN_PROCESS_CALLER
from morphz.services.recall.runtime import tokenpool
from morphz.services.recall.core.documents import event_doc, event_text
from morphz.services.recall.embedding.lsa import LsaEmbedder
from morphz.services.recall.core.timeparse import event_time_us
from morphz.services.recall.index.tantivy_docs import doc_json
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.services.recall.index.tantivy_search import Query
from morphz.shared.mind import records as R
from morphz.shared.text.analyze import query_terms

TEXTS = ["部署到 cn-hangzhou 时沙箱权限配置失败", "regression suite: 120 passed, 0 failed",
         "see @e42 and v1.2.3", "沙箱 ok", "", "Ｆｕｌｌ width ＳＡＮＤＢＯＸ"]


def _events(n: int) -> list[R.Event]:
    return [R.Event(seq, f"id{seq}", "tool-result", f"2026-08-04T09:00:{seq % 60:02d}+08:00",
                    "c", session=f"s{seq % 3}", text=TEXTS[seq % len(TEXTS)] + f" n{seq}")
            for seq in range(1, n + 1)]


def _raw(ev: R.Event) -> bytes:
    return json.dumps(asdict(ev), ensure_ascii=False).encode()


def test_recall_10_stored_json_gives_the_incremental_documents():
    events = _events(12)
    batch = tokenpool.analyze([_raw(ev) for ev in events])
    assert batch.docs == [event_doc(ev) for ev in events]
    assert batch.texts == [event_text(ev) for ev in events]
    assert [d.key for d in batch.vec_docs] == [d.key for d in batch.docs]


def test_recall_10_pool_yields_the_same_documents_and_vectors_in_order(monkeypatch):
    """Workers give the lexical documents as doc_json and the vectors of the embedder
    fitted here (restored from its state there), equal to embedding in this process; a
    damaged record is left out and counted, in either path."""
    events = _events(50)
    raws = [_raw(ev) for ev in events]
    raws.insert(9, b"{not json")
    base = LsaEmbedder(64)
    fitted = base.fitted(_corpus(300))
    assert fitted.learned
    monkeypatch.setattr(tokenpool, "MIN_PARALLEL", 0)
    monkeypatch.setattr(tokenpool, "BATCH", 7)
    pooled = list(tokenpool.event_batches(iter(raws), len(raws), base=base, fitted=fitted,
                                          workers=2))
    here = list(tokenpool.event_batches(iter(raws), len(raws), base=base, fitted=fitted,
                                        workers=1))
    assert [d for b in pooled for d in b.docs] == [doc_json(event_doc(ev)) for ev in events]
    assert [d for b in here for d in b.docs] == [event_doc(ev) for ev in events]
    expected = fitted.embed_array([event_text(ev) for ev in events])
    for got in (pooled, here):
        assert sum(b.damaged for b in got) == 1
        assert np.array_equal(np.concatenate([b.vectors for b in got]), expected)
        assert [d.key for b in got for d in b.vec_docs] == [f"e:{ev.seq}" for ev in events]


def test_recall_10_a_rebuild_worker_killed_midway_leaves_its_batches_to_this_process(
        monkeypatch):
    """SIGKILL one of the rebuild's workers after the first batch: its batches are
    analyzed here (its pipe ended), the rebuild never waits for it, and the batches are
    the same, in order, as without workers."""
    import signal
    from morphz.services.recall.runtime import worker_process

    events = _events(60)
    raws = [_raw(ev) for ev in events]
    base = LsaEmbedder(64)
    fitted = base.fitted(_corpus(300))
    started: list[worker_process.WorkerProcess] = []

    class Seen(worker_process.WorkerProcess):
        def __init__(self, name: str) -> None:
            super().__init__(name)
            started.append(self)
    monkeypatch.setattr(tokenpool, "WorkerProcess", Seen)
    monkeypatch.setattr(tokenpool, "MIN_PARALLEL", 0)
    monkeypatch.setattr(tokenpool, "BATCH", 7)
    got = []
    for batch in tokenpool.event_batches(iter(raws), len(raws), base=base, fitted=fitted,
                                         workers=2):
        if not got:
            os.kill(started[1].proc.pid, signal.SIGKILL)
        got.append(batch)
    assert len(started) == 2 and not started[1].proc.is_alive()
    docs = [d for b in got for d in b.docs]  # a worker's as doc_json, this process's as Doc
    assert any(not isinstance(d, str) for d in docs) and isinstance(docs[0], str)
    assert [d if isinstance(d, str) else doc_json(d) for d in docs] == \
        [doc_json(event_doc(ev)) for ev in events]
    assert np.array_equal(np.concatenate([b.vectors for b in got]),
                          fitted.embed_array([event_text(ev) for ev in events]))


class _RestoresOnlyInTheServer(LsaEmbedder):
    """An embedder whose state cannot be restored in another process (a native library
    the workers lack, say)."""

    def restore(self, state):
        if os.getpid() != int(os.environ["MORPHZ_TEST_SERVER_PID"]):
            raise RuntimeError("not here")
        return super().restore(state)


def test_recall_10_rebuild_workers_that_cannot_take_the_embedder_leave_the_work_here(
        monkeypatch):
    """A worker whose set-up fails (its embedder does not restore there) is no worker:
    every batch is analyzed and embedded here, the same as without workers."""
    monkeypatch.setenv("MORPHZ_TEST_SERVER_PID", str(os.getpid()))
    events = _events(30)
    base = _RestoresOnlyInTheServer(64)
    fitted = base.restore(LsaEmbedder(64).fitted(_corpus(300)).state())
    monkeypatch.setattr(tokenpool, "MIN_PARALLEL", 0)
    monkeypatch.setattr(tokenpool, "BATCH", 7)
    got = list(tokenpool.event_batches(iter([_raw(ev) for ev in events]), len(events),
                                       base=base, fitted=fitted, workers=2))
    assert [d for b in got for d in b.docs] == [event_doc(ev) for ev in events]  # here: Docs
    assert np.array_equal(np.concatenate([b.vectors for b in got]),
                          fitted.embed_array([event_text(ev) for ev in events]))


def _corpus(n: int) -> list[str]:
    """Texts with enough shared words for LSA to learn from."""
    rng = random.Random(7)
    words = [f"w{i}" for i in range(150)] + list("沙箱权限配置失败部署")
    return [" ".join(rng.choices(words, k=12)) for _ in range(n)]


def test_recall_10_an_embedder_that_cannot_travel_embeds_in_this_process(monkeypatch):
    class Local(LsaEmbedder):
        def __reduce__(self):
            raise TypeError("a native session")
    events = _events(30)
    base = Local(64)
    monkeypatch.setattr(tokenpool, "MIN_PARALLEL", 0)
    assert tokenpool.portable(base, base) is None
    got = list(tokenpool.event_batches(iter([_raw(ev) for ev in events]), len(events),
                                       base=base, fitted=base, workers=2))
    assert np.array_equal(np.concatenate([b.vectors for b in got]),
                          base.embed_array([event_text(ev) for ev in events]))


def test_recall_10_json_documents_search_like_docs(tmp_path):
    events = _events(40)
    by_doc, by_json = ContextIndex(str(tmp_path / "a")), ContextIndex(str(tmp_path / "b"))
    by_doc.apply([event_doc(ev) for ev in events], {"position": 1}, fresh=True)
    by_json.apply([doc_json(event_doc(ev)) for ev in events], {"position": 1}, fresh=True)
    queries = [Query(terms=query_terms(q)) for q in ("沙箱 权限", "passed", "e42", "sandbox")]
    queries += [Query(terms=query_terms("沙箱"), sessions=["s0"]),
                Query(since_us=_us(events[5]), until_us=_us(events[9])),
                Query(terms=query_terms("n7"), kinds=["event"])]
    for q in queries:
        a = by_doc.search(by_doc.snapshot()[0], q, 0, 20)
        b = by_json.search(by_json.snapshot()[0], q, 0, 20)
        assert a and a == b, q


def _us(ev: R.Event) -> int:
    return event_time_us(ev.time)


def test_recall_10_rebuild_reads_events_in_short_read_transactions(tmp_path, monkeypatch):
    """A rebuild holds no read transaction across the whole event history (it would keep
    LMDB from reusing pages and hold off map growth): events come in chunks, one short
    read transaction each, and every event and frame is indexed exactly once."""
    from morphz.services.recall.runtime import index_rebuild
    from morphz.services.recall.runtime.indexer import Indexer
    from morphz.services.recall.index.index_directory import IndexDirectory
    from morphz.services.storage.lmdb import LmdbStore
    from morphz.services.transaction.core.engine import TransactionCore

    store = LmdbStore(str(tmp_path / "store"), sync=False)
    try:
        core = TransactionCore(store)
        core.create_context("c", caller=IN_PROCESS_CALLER)
        for i in range(23):
            core.append_event("c", "s1", "tool-result", f"{TEXTS[i % len(TEXTS)]} n{i}",
                              caller=IN_PROCESS_CALLER)
        core.commit("c", "(context-tx (base-version 0) (create f1 (sandbox ok)))",
                    caller=IN_PROCESS_CALLER)
        opened, open_now, most = [], [0], [0]
        real_reader = store.reader

        class Counted:
            def __init__(self, context):
                self._r = real_reader(context)

            def __enter__(self):
                opened.append(1)
                open_now[0] += 1
                most[0] = max(most[0], open_now[0])
                return self._r.__enter__()

            def __exit__(self, *exc):
                open_now[0] -= 1
                return self._r.__exit__(*exc)

        store.reader = Counted
        indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")))
        records = list(indexer._event_records("c", 25, chunk=4))
        assert [json.loads(r)["seq"] for r in records] == list(range(25))
        assert len(opened) == 7 and most[0] == 1  # ceil(25 / 4) chunks, never two at once
        monkeypatch.setattr(index_rebuild, "REBUILD_READ_CHUNK", 4)
        opened.clear()
        info = indexer.rebuild("c")
        assert info.documents == 25 + 1  # 25 events (@e0..@e24) and the frame
        # one snapshot (frames, version), one page of the context's change feed (which
        # commit last wrote each frame), one read of those events, then 7 chunks read once
        # for the lexical leg (the hashing embedder learns nothing: no fit sample), then
        # the catch-up's page of the context's feed, then the vector leg's own step (with
        # no vector follower, right after): a page of the feed, one read of its rows;
        # none open while another is
        assert len(opened) == 1 + 1 + 1 + 7 + 1 + 2 and most[0] == 1
        idx = indexer.index("c")
        hits = idx.search(idx.snapshot()[0], Query(terms=query_terms("sandbox")), 0, 50)
        assert {h.key for h in hits} >= {"f:f1"}
    finally:
        store.close()


def test_recall_10_fresh_index_never_shares_the_live_directory(tmp_path):
    """A rebuild of a context never indexed yet gets its own generation directory: the
    outbox worker opening the live index must not write into the one being built."""
    from morphz.services.recall.index.index_directory import IndexDirectory
    indexes = IndexDirectory(str(tmp_path / "recall"))
    fresh = indexes.fresh("c")
    live = indexes.get("c")
    assert fresh.path != live.path
    second = indexes.fresh("c")  # two rebuilds at once never share one either
    assert len({live.path, fresh.path, second.path}) == 3
    indexes.swap("c", fresh)
    assert indexes.get("c").path == fresh.path


def test_recall_10_leftovers_of_a_dead_rebuild_are_removed_at_first_use(tmp_path):
    from morphz.services.recall.index.index_directory import IndexDirectory
    root = str(tmp_path / "recall")
    live = IndexDirectory(root).get("c").path
    dead = IndexDirectory(root).fresh("c").path  # its process died before the swap
    assert os.path.isdir(dead)
    again = IndexDirectory(root)  # a restart
    assert again.get("c").path == live and not os.path.exists(dead)


def _store_with_events(tmp_path, n: int):
    from morphz.services.storage.lmdb import LmdbStore
    from morphz.services.transaction.core.engine import TransactionCore
    store = LmdbStore(str(tmp_path / "store"), sync=False)
    core = TransactionCore(store)
    core.create_context("c", caller=IN_PROCESS_CALLER)
    for i in range(n):
        core.append_event("c", "s1", "tool-result", f"{TEXTS[i % len(TEXTS)]} n{i}",
                          caller=IN_PROCESS_CALLER)
    return store, core


def _found(indexer, word: str) -> set[str]:
    idx = indexer.index("c")
    return {h.key for h in idx.search(idx.snapshot()[0], Query(terms=query_terms(word)), 0, 100)}


def test_recall_10_follower_leaves_a_rebuilding_context_to_the_rebuild(tmp_path, monkeypatch):
    """While a context's rebuild runs, the feed's changes of that context are not indexed
    into the index it replaces; the rebuild catches up on them after its swap, so the
    live index ends at the context's head with every event, each indexed once."""
    import threading
    from morphz.services.recall.runtime import indexer as indexer_module
    from morphz.services.recall.runtime.indexer import Indexer
    from morphz.services.recall.index.index_directory import IndexDirectory

    store, core = _store_with_events(tmp_path, 10)
    try:
        indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")))
        while indexer.catch_up("c"):
            pass
        reading, release = threading.Event(), threading.Event()
        real = indexer_module.Indexer._event_records

        def paused(self, context, events, chunk=0, **deadline):
            reading.set()
            assert release.wait(10)
            yield from real(self, context, events, chunk, **deadline)
        monkeypatch.setattr(indexer_module.Indexer, "_event_records", paused)
        rebuild = threading.Thread(target=indexer.rebuild, args=("c",))
        rebuild.start()
        assert reading.wait(10)
        before = indexer.position("c")
        core.append_event("c", "s1", "tool-result", "latecomer arrives", caller=IN_PROCESS_CALLER)
        page = store.changes(before, context="c").changes
        assert page and indexer.apply("c", page) == 0  # left to the rebuild
        assert indexer.position("c") == before and not _found(indexer, "latecomer")
        release.set()
        rebuild.join(20)
        assert not rebuild.is_alive()
        assert indexer.position("c") == page[-1].commit_seq
        assert _found(indexer, "latecomer") == {f"e:{page[-1].events[-1]}"}
        assert indexer.apply("c", page) == 0  # already held: skipped
        assert indexer.index("c").vectors.count == 12  # @e0 (the creation), ten, the latecomer
    finally:
        store.close()


def test_recall_10_a_hole_in_a_context_index_is_filled_from_its_own_feed(tmp_path):
    """Changes a rebuild that died had left to itself are older than the next change the
    follower brings: the index reads them from the context's feed before applying it."""
    from morphz.services.recall.runtime.indexer import Indexer
    from morphz.services.recall.index.index_directory import IndexDirectory

    store, core = _store_with_events(tmp_path, 3)
    try:
        indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")))
        while indexer.catch_up("c"):
            pass
        held = indexer.position("c")
        for word in ("skipped-one", "skipped-two", "brought"):
            core.append_event("c", "s1", "tool-result", word, caller=IN_PROCESS_CALLER)
        page = store.changes(held, context="c").changes
        assert [c.commit_seq for c in page] == [held + 1, held + 2, held + 3]
        assert indexer.apply("c", page[-1:]) == 3  # the hole, then the change itself
        assert indexer.position("c") == held + 3
        for word in ("skipped", "brought"):
            assert _found(indexer, word)
    finally:
        store.close()


def test_recall_10_an_application_gives_way_to_a_rebuild_that_starts_meanwhile(tmp_path,
                                                                             monkeypatch):
    """The follower's long first application of a backlog stops (writing nothing) when a
    rebuild of the context begins; the rebuild covers it and catches up after."""
    import threading
    from morphz.services.recall.runtime import index_apply
    from morphz.services.recall.runtime.indexer import Indexer
    from morphz.services.recall.index.index_directory import IndexDirectory

    store, _ = _store_with_events(tmp_path, 30)
    try:
        indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")))
        monkeypatch.setattr(index_apply, "SUPERSEDED_CHECK", 10)
        reading, rebuilding = threading.Event(), threading.Event()
        real_doc = index_apply.event_doc

        def slow_doc(ev):
            if ev.seq == 12:  # mid-backlog: a rebuild is asked for now
                reading.set()
                assert rebuilding.wait(10)
            return real_doc(ev)
        monkeypatch.setattr(index_apply, "event_doc", slow_doc)
        page = store.changes(0, context="c").changes
        result = []
        worker = threading.Thread(target=lambda: result.append(indexer.apply("c", page)))
        worker.start()
        assert reading.wait(10)
        indexer._progress["c"] = {"running": True, "done": 0, "total": 0}  # as rebuild() sets
        rebuilding.set()
        worker.join(10)
        assert result == [0] and indexer.position("c") == 0  # gave way, wrote nothing
        indexer._progress["c"]["running"] = False
        assert indexer.apply("c", page) == len(page) and _found(indexer, "n29")
    finally:
        store.close()


def test_recall_10_an_application_past_its_byte_bound_is_written_in_several_commits(
        tmp_path, monkeypatch):
    """A backlog whose text passes APPLY_BYTES is indexed in several index writes, each at
    the version of a whole change it covers, so an application holds a bounded amount
    (a backlog of 32 MiB events was held whole); every event is indexed. A rebuild that
    begins between two writes keeps what was written and leaves the rest to itself."""
    import threading
    from morphz.services.recall.runtime import index_apply
    from morphz.services.recall.runtime.indexer import Indexer
    from morphz.services.recall.index.index_directory import IndexDirectory
    from morphz.services.recall.index.tantivy_index import ContextIndex

    store, _ = _store_with_events(tmp_path, 30)
    try:
        monkeypatch.setattr(index_apply, "APPLY_BYTES", 100)  # a few events' text
        monkeypatch.setattr(index_apply, "READ_AHEAD_BYTES", 300)
        positions: list[int] = []
        real_apply = ContextIndex.apply

        def counting(self, docs, meta, **kw):
            # This test's index only: a session server in this process may write its own
            # (recall applies held changes up to 30 s after their commits).
            if self.path.startswith(str(tmp_path)):
                positions.append(meta["position"])
            return real_apply(self, docs, meta, **kw)
        monkeypatch.setattr(ContextIndex, "apply", counting)
        page = store.changes(0, context="c").changes
        indexer = Indexer(store, IndexDirectory(str(tmp_path / "recall")))
        assert indexer.apply("c", page) == len(page)
        assert len(positions) > 3 and positions == sorted(set(positions))
        assert set(positions) <= {c.commit_seq for c in page} and positions[-1] == page[-1].commit_seq
        assert all(_found(indexer, f"n{i}") for i in range(30))

        # Given way between writes: what was written stays, the count says how much.
        positions.clear()
        again = Indexer(store, IndexDirectory(str(tmp_path / "recall2")))
        real_write = Indexer._write
        gave_way = threading.Event()

        def second_write_sees_a_rebuild(self, context, *args):
            if self is again and len(positions) == 1 and not gave_way.is_set():
                gave_way.set()
                self._progress[context] = {"running": True, "done": 0, "total": 0}
            return real_write(self, context, *args)
        monkeypatch.setattr(Indexer, "_write", second_write_sees_a_rebuild)
        written = again.apply("c", page)
        assert gave_way.is_set() and len(positions) == 1
        done = [c.commit_seq for c in page].index(positions[0]) + 1
        assert written == done and again.position("c") == positions[0]
    finally:
        store.close()
