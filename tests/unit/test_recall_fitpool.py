"""Where the recall indexer's fits run (services/recall/runtime/fitpool.py): a large sample in
a real spawned worker process, whose fit embeds exactly as one made in this process, and
which, killed at any point, leaves its work to this process and never a caller waiting."""
from __future__ import annotations

import os
import random
import signal
import time
from types import SimpleNamespace

import numpy as np
import pytest

from morphz.services.recall.runtime.fitpool import Fitter
from morphz.services.recall.embedding.lsa import LsaEmbedder

_WORDS = ["release", "launch", "canary", "rollback", "database", "replica", "deadlock",
          "invoice", "refund", "billing", "发布", "上线", "灰度", "数据库", "副本", "退款"]


def _sample(n: int = 300, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(_WORDS, 6)) + f" ticket-{i % 40}" for i in range(n)]


class _Refusing(LsaEmbedder):
    """Fails its fit (in whichever process it runs)."""

    def fitted(self, corpus):
        raise ValueError("this embedder refuses to learn")


def _gone(pid: int, bound: float = 30.0) -> bool:
    """Whether the process ended within `bound` seconds (a zombie, not yet reaped by
    its parent, has ended)."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def fitter():
    f = Fitter(in_worker_min=100)
    yield f
    f.close()


def _blas_threads() -> list[int]:
    """In the worker: the thread count of each BLAS library numpy loaded there."""
    from threadpoolctl import threadpool_info
    np.ones((2, 2)) @ np.ones((2, 2))
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_the_worker_runs_one_blas_thread(fitter):
    """As the server does (wiring.py): its BLAS's own thread pool would spin beside the
    server's threads on the same cores (on two cores: two threads, before)."""
    fitter.fitted(LsaEmbedder(), _sample())  # starts the worker
    threads = fitter.call(_blas_threads)
    assert threads and set(threads) == {1}


def test_recall_10_a_fit_in_the_worker_process_embeds_exactly_as_one_made_here(fitter):
    """A rebuild or refit gives the same vectors (so the same search results) whether
    its fit ran in the worker or here."""
    base, sample = LsaEmbedder(), _sample()
    here = base.fitted(sample)
    there = fitter.fitted(base, sample)
    assert fitter.worker_pid not in (None, os.getpid())
    assert there.learned and there.state() == here.state()
    queries = ["canary rollback", "灰度 发布", "ticket-7 refund", "nothing known"]
    assert np.array_equal(there.embed_array(queries), here.embed_array(queries))


def test_a_small_sample_and_a_closed_fitter_fit_in_this_process():
    base, sample = LsaEmbedder(), _sample()
    small = Fitter(in_worker_min=len(sample) + 1)
    assert small.fitted(base, sample).state() == base.fitted(sample).state()
    assert small.worker_pid is None
    closed = Fitter(in_worker_min=1)
    closed.close()  # a server stopping: no new worker is started
    assert closed.fitted(base, sample).state() == base.fitted(sample).state()
    assert closed.worker_pid is None


def test_a_fit_that_fails_in_the_worker_fails_here_with_its_error(fitter):
    with pytest.raises(ValueError, match="refuses to learn"):
        fitter.fitted(_Refusing(), _sample())


def test_a_killed_fit_worker_leaves_the_fit_to_this_process_then_is_replaced(fitter):
    base, sample = LsaEmbedder(), _sample()
    expected = base.fitted(sample).state()
    assert fitter.fitted(base, sample).state() == expected
    first = fitter.worker_pid
    os.kill(first, signal.SIGKILL)
    assert _gone(first)
    # The dead worker is seen: this fit runs here, the next one in a new worker.
    done = fitter.calls_done
    assert fitter.fitted(base, sample).state() == expected
    assert fitter.worker_pid == first and fitter.calls_done == done  # made here
    assert fitter.fitted(base, sample).state() == expected
    assert fitter.worker_pid not in (None, first, os.getpid())


def test_an_idle_fit_worker_stops():
    f = Fitter(in_worker_min=100, idle_seconds=0.2)
    try:
        f.fitted(LsaEmbedder(), _sample())
        assert f.worker_pid is not None
        assert _gone(f.worker_pid)
    finally:
        f.close()


def test_a_busy_fit_worker_keeps_one_idle_timer_and_stops_once_idle():
    """Calls in a row (a refit's batches) keep the worker and share one idle timer (a
    timer thread per call lived its whole idle time); once idle, it stops."""
    import threading

    # Idle time 27x the pause between calls (it was 13x, 2 s: a pause on a machine
    # loaded past its cores outlasted it in CI).
    f = Fitter(in_worker_min=100, idle_seconds=4.0)
    try:
        before = threading.active_count()
        pid = f.call(os.getpid)
        for _ in range(32):
            assert f.call(os.getpid) == pid  # the same worker, still there
            time.sleep(0.15)  # 4.8 s in all: past the idle time, never idle that long
        assert threading.active_count() <= before + 1
        assert _gone(pid)
    finally:
        f.close()


def _stored_events(tmp_path, n: int) -> list[bytes]:
    """n events as the store holds them (their JSON bytes), written by the real core."""
    from morphz.services.storage.lmdb import LmdbStore
    from morphz.services.transaction.core.engine import TransactionCore
    from morphz.shared.auth import IN_PROCESS_CALLER as ME

    store = LmdbStore(str(tmp_path / "store"), sync=False)
    try:
        core = TransactionCore(store)
        core.create_context("c", caller=ME)
        for text in _sample(n):
            core.append_event("c", "s1", "user-message", text, caller=ME)
        with store.reader("c") as r:
            return list(r.scan_values("events"))
    finally:
        store.close()


def test_recall_10_a_refits_batches_embedded_by_the_worker_equal_those_made_here(
        fitter, tmp_path, monkeypatch):
    """A refit's re-embedding (event_batches with the fit worker) gives exactly the
    vectors and vector documents of the same batches made in this process."""
    from morphz.services.recall.runtime import tokenpool

    monkeypatch.setattr(tokenpool, "BATCH", 64)  # several batches
    raws = _stored_events(tmp_path, 300)
    base = LsaEmbedder()
    fitted = base.fitted(_sample())

    def batches(worker):
        return list(tokenpool.event_batches(iter(raws), len(raws), base=base, fitted=fitted,
                                            lexical=False, worker=worker))
    here = batches(None)
    there = batches(fitter)
    assert fitter.calls_done == len(there) == 5  # every batch came from the worker
    assert [b.vec_docs for b in there] == [b.vec_docs for b in here]
    assert all(np.array_equal(a.vectors, b.vectors) for a, b in zip(there, here))
    assert sum(len(b.vec_docs) for b in there) == len(raws)


def test_a_worker_killed_while_it_works_leaves_the_call_to_this_process(fitter):
    """SIGKILL while the worker computes: the caller is told (WorkerUnavailable: the pipe
    only the worker wrote to ends) and does the work itself; it never waits forever."""
    import threading

    from morphz.services.recall.runtime.fitpool import WorkerUnavailable

    fitter.call(os.getpid)  # the worker is up
    pid = fitter.call(os.getpid)
    killer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
    killer.start()
    with pytest.raises(WorkerUnavailable):
        fitter.call(time.sleep, 30)
    killer.join()
    assert fitter.call(os.getpid) not in (pid, os.getpid())  # a new worker


def test_a_worker_that_cannot_start_is_not_started_again_at_every_call(monkeypatch):
    """A worker that dies before answering anything (a program without a `__main__`
    guard: spawn runs it again) leaves the work here, and no worker is started again
    until START_BACKOFF_SECONDS have passed; one that had answered is replaced at once."""
    import multiprocessing

    from morphz.services.recall.runtime import fitpool
    from morphz.services.recall.runtime.worker_process import WorkerProcess

    starts: list[WorkerProcess] = []

    class Stillborn(WorkerProcess):
        def __init__(self, name: str) -> None:  # a process that exits before serving
            ctx = multiprocessing.get_context("spawn")
            self.conn, theirs = ctx.Pipe()
            self.proc = ctx.Process(target=os._exit, args=(3,), daemon=True, name=name)
            self.proc.start()
            theirs.close()
            self.answered = 0
            starts.append(self)
    monkeypatch.setattr(fitpool, "WorkerProcess", Stillborn)
    monkeypatch.setattr(fitpool, "START_BACKOFF_SECONDS", 1.0)
    # The backoff on a clock the test moves: three fits on a loaded machine outlasted
    # a backoff of 1 s of real time, and a worker was started again before the test said.
    now = [1000.0]
    monkeypatch.setattr(fitpool, "time", SimpleNamespace(monotonic=lambda: now[0]))
    f = Fitter(in_worker_min=100)
    try:
        base, sample = LsaEmbedder(), _sample()
        here = base.fitted(sample)
        for _ in range(3):
            got = f.fitted(base, sample)  # fitted here
            assert np.array_equal(got.embed_array(sample[:5]), here.embed_array(sample[:5]))
        assert len(starts) == 1 and not f.takes(len(sample))
        now[0] += 1.1
        assert f.takes(len(sample))
        f.fitted(base, sample)
        assert len(starts) == 2
    finally:
        f.close()


def _record_stops(monkeypatch) -> list[str]:
    """The names of the threads that stop (close the pipe of) a worker, as they do."""
    import threading

    from morphz.services.recall.runtime.worker_process import WorkerProcess
    stopped_by: list[str] = []
    stop = WorkerProcess.stop

    def recorded_stop(self):
        stopped_by.append(threading.current_thread().name)
        stop(self)
    monkeypatch.setattr(WorkerProcess, "stop", recorded_stop)
    return stopped_by


def test_closing_the_fitter_during_a_call_ends_it_and_leaves_the_pipe_to_the_caller(
        monkeypatch, caplog):
    """close() while a call waits on the worker: the worker is killed (the call raises
    WorkerUnavailable, not the 30 s of work later), and the pipe is closed by the
    calling thread, never under its poll or read (a descriptor closed there may be
    reused by a file opened meanwhile). No warning of a dead worker: it was stopped."""
    import logging
    import threading

    from morphz.services.recall.runtime.fitpool import WorkerUnavailable

    stopped_by = _record_stops(monkeypatch)
    caplog.set_level(logging.WARNING, logger="morphz.recall.fitpool")
    fitter = Fitter(in_worker_min=1)
    try:
        pid = fitter.call(os.getpid)
        outcome: list = []

        def caller():
            try:
                outcome.append(fitter.call(time.sleep, 30))
            except WorkerUnavailable as e:
                outcome.append(e)
        t = threading.Thread(target=caller, name="the-caller")
        t.start()
        time.sleep(0.5)  # the call is on the pipe
        fitter.close()
        t.join(20)
        assert not t.is_alive(), "the call outlived close() by 20 s"
        assert len(outcome) == 1 and isinstance(outcome[0], WorkerUnavailable)
        assert stopped_by == ["the-caller"]
        assert _gone(pid)
        with pytest.raises(WorkerUnavailable):
            fitter.call(os.getpid)  # closed: no worker is started again
        assert stopped_by == ["the-caller"]
        assert not [r for r in caplog.records if r.name == "morphz.recall.fitpool"]
    finally:
        fitter.close()


def test_closing_an_idle_fitter_stops_its_worker_in_the_closing_thread(monkeypatch):
    import threading

    stopped_by = _record_stops(monkeypatch)
    fitter = Fitter(in_worker_min=1)
    pid = fitter.call(os.getpid)
    fitter.close()
    assert stopped_by == [threading.current_thread().name]
    assert _gone(pid, bound=10)
    assert not fitter.takes(10_000)
