"""Beside: a hybrid search's lexical leg runs on a helper thread while the vector leg runs
on the request's, inline when no helper is free; neither leg outlives the call. Real
threads; each wait is bounded, so a leg that does not overlap fails the test instead of
hanging it."""
from __future__ import annotations

import threading

import pytest

from morphz.services.recall.runtime.beside import INLINE, Beside

WAIT = 5.0


def test_the_first_part_runs_beside_the_second():
    beside = Beside(2)
    first_in, second_in = threading.Event(), threading.Event()

    def first():  # each waits for the other to have started: only overlap gets through
        first_in.set()
        return second_in.wait(WAIT), threading.current_thread()

    def second():
        second_in.set()
        return first_in.wait(WAIT)

    try:
        (saw_second, thread), saw_first = beside.both(first, second)
    finally:
        beside.close()
    assert saw_second and saw_first
    assert thread is not threading.current_thread()


def test_with_every_helper_busy_the_part_runs_inline():
    beside = Beside(1)
    busy, release = threading.Event(), threading.Event()
    held = threading.Thread(target=beside.both,
                            args=(lambda: (busy.set(), release.wait(WAIT)), lambda: None))
    held.start()
    try:
        assert busy.wait(WAIT)  # the only helper runs the first call's first part
        thread, _ = beside.both(threading.current_thread, lambda: None)
        assert thread is threading.current_thread()
    finally:
        release.set()
        held.join(WAIT)
        beside.close()


def test_a_helper_is_free_again_once_its_part_ends():
    beside = Beside(1)
    try:
        for _ in range(3):  # one helper, three calls after one another: each gets it
            thread, _ = beside.both(threading.current_thread, lambda: None)
            assert thread is not threading.current_thread()
    finally:
        beside.close()


def test_an_error_of_either_part_is_raised_once_both_have_ended():
    beside = Beside(1)
    ended = threading.Event()

    def slow_first():
        ended.wait(0.2)
        ended.set()
        return 1

    def failing_second():
        raise ValueError("second")

    def failing_first():
        raise KeyError("first")

    try:
        with pytest.raises(ValueError):
            beside.both(slow_first, failing_second)
        assert ended.is_set()  # the first part had ended when the error came out
        with pytest.raises(KeyError):
            beside.both(failing_first, lambda: 2)
    finally:
        beside.close()


def test_inline_and_closed_run_both_parts_on_the_caller():
    beside = Beside(1)
    beside.close()
    for runner in (INLINE, beside):
        thread, value = runner.both(threading.current_thread, lambda: 7)
        assert thread is threading.current_thread() and value == 7
