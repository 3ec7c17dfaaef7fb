"""A context index's writer lock held by a process being started (it holds a copy of the
lock file from its fork until its exec): the index write waits for it, and a lock that
stays held ends in RECALL_INDEX_BUSY, a named retryable reason, never INTERNAL.

The holder here is a real forked child keeping the real tantivy lock file open, as a
spawned worker does between its fork and its exec."""
from __future__ import annotations

import os
import threading

import pytest

from morphz.services.recall.index.tantivy_docs import Doc

from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.shared.errors import MorphzError, Status
from tests.polling import until


def _held_by_child(idx: ContextIndex) -> tuple[int, int]:
    """Fork while a writer holds the lock, then drop it here: the child's copy of the
    lock file keeps the lock until the child exits (on a byte written to the returned
    pipe, or on its own after 60 s if the test died)."""
    writer = idx._index.writer(heap_size=15 << 20, num_threads=1)
    release_r, release_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: wait for the release, touch nothing else
        os.close(release_w)
        import select
        select.select([release_r], [], [], 60)
        os._exit(0)
    os.close(release_r)
    writer.rollback()
    del writer
    return pid, release_w


def _release(pid: int, release_w: int) -> None:
    os.write(release_w, b"x")
    os.close(release_w)
    os.waitpid(pid, 0)


def _doc(n: int) -> Doc:
    return Doc(key=f"e:{n}", kind="event", terms=["lantern"], time_us=n)


def test_an_index_write_waits_while_a_started_process_holds_the_writer_lock(tmp_path):
    idx = ContextIndex(str(tmp_path / "g1"), writer_wait=120)
    pid, release_w = _held_by_child(idx)
    done: dict = {}

    def write() -> None:
        try:
            done["n"] = idx.apply([_doc(1)], {"position": 1})
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            done["error"] = e

    t = threading.Thread(target=write)
    t.start()
    try:
        # Refused at least once while the child holds the lock.
        until(lambda: idx.writer_refusals or not t.is_alive(), what="a refused writer")
        assert idx.writer_refusals > 0, done
    finally:
        _release(pid, release_w)
    t.join(timeout=60)
    assert done == {"n": 1}
    searcher, meta = idx.snapshot()
    assert meta["position"] == 1
    assert searcher.num_docs == 2  # the document and the meta document


def test_an_index_writer_lock_that_stays_held_is_recall_index_busy(tmp_path):
    idx = ContextIndex(str(tmp_path / "g1"), writer_wait=0.2)
    pid, release_w = _held_by_child(idx)
    try:
        with pytest.raises(MorphzError) as refused:
            idx.apply([_doc(1)], {"position": 1})
    finally:
        _release(pid, release_w)
    assert refused.value.reason == "RECALL_INDEX_BUSY"
    assert refused.value.status is Status.UNAVAILABLE
    assert idx.writer_refusals >= 1  # (how many: as the machine's load allows in 0.2 s)
    assert idx.snapshot()[1].get("position", 0) == 0  # nothing half-written
    assert idx.apply([_doc(1)], {"position": 1}) == 1  # and the lock is free again
