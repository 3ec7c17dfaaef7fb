"""Where the recall indexer's fits run (services/recall/core/fitpool.py): a large sample in
a real spawned worker process, whose fit embeds exactly as one made in this process."""
from __future__ import annotations

import os
import random
import signal
import time

import numpy as np
import pytest

from morphz.services.recall.core.fitpool import Fitter
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
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def fitter():
    f = Fitter(in_worker_min=100)
    yield f
    f.close()


def test_hyb_02_a_fit_in_the_worker_process_embeds_exactly_as_one_made_here(fitter):
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
    # The broken pool is noticed: this fit runs here, the next one in a new worker.
    assert fitter.fitted(base, sample).state() == expected
    assert fitter.worker_pid == first  # no worker answered that one
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
