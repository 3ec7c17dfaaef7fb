"""The client's retries against a real `morphz serve` process that dies by SIGKILL in
the middle of a call: after the write is durable and before its reply
(MORPHZ_FAULT=after-commit-before-reply). A write carrying a request id is sent again
until the server is back on the same data and is answered with the original receipt,
applied once; a call that is not idempotent is never sent twice."""
from __future__ import annotations

import asyncio
import concurrent.futures
import time

import pytest

from morphz.client import (AsyncClient, Client, Credentials, RetryPolicy, Tx,
                           UnavailableError)
from tests.topology import ServerProcess

FAULT = "after-commit-before-reply"
# Long enough to outlast a restart on a loaded machine; each wait is short so the
# retry lands soon after the server is back.
PATIENT = RetryPolicy(attempts=400, initial_backoff=0.05, max_backoff=0.25)


def restart_on_the_same_port(proc: ServerProcess) -> None:
    proc.proc.wait(timeout=60)  # it killed itself at the fault point
    proc.listen = proc.address
    proc.start(MORPHZ_FAULT="")


@pytest.fixture
def dying_server(tmp_path):
    """`make(nth)`: a server whose nth write dies after its commit, before replying."""
    procs = []

    def make(nth: int) -> ServerProcess:
        procs.append(ServerProcess(tmp_path / "data").start(MORPHZ_FAULT=f"{FAULT}:{nth}"))
        return procs[-1]
    yield make
    for p in procs:
        p.kill()


def test_dur_04_client_commit_retried_across_a_sigkill_returns_the_original_receipt(
        dying_server):
    proc = dying_server(3)  # writes: create the context, an input, then the commit
    pool = concurrent.futures.ThreadPoolExecutor(1)
    with Client(proc.address, credentials=Credentials(), timeout=10, retry=PATIENT) as mz:
        mz.create_context("c")
        mz.append_event("c", session="main", kind="user-message", text="Ship v1.")
        tx = Tx(0).create("release", "(goal ship-v1) (stage waiting-tests)")
        pending = pool.submit(mz.commit, "c", tx, session="main", request_id="plan-1")
        restart_on_the_same_port(proc)
        receipt = pending.result(timeout=120)
        # The first attempt was applied before the kill: the retry is its replay.
        assert receipt.replayed and receipt.revision == 1
        assert [(r.op, r.outcome) for r in receipt.results] == [("create", "created")]
        event = mz.event("c", receipt.event_ref)
        assert (event.kind, event.request_id) == ("context-tx", "plan-1")
        again = mz.commit("c", tx, session="main", request_id="plan-1")
        assert (again.revision, again.event_ref, again.results) == \
            (receipt.revision, receipt.event_ref, receipt.results)
        status = mz.status("c")  # applied once: one revision, one transaction event
        assert (status.revision, status.event_count) == (1, 3)
        assert mz.frame("c", "release").revision == 1 and mz.audit("c").match
    pool.shutdown()


def test_dur_04_client_writes_go_on_through_an_external_sigkill(tmp_path):
    """Commits in a loop while the test SIGKILLs the server and restarts it: each one
    lands exactly once, whichever moment the kill hit."""
    proc = ServerProcess(tmp_path / "data").start()
    count, pool = 40, concurrent.futures.ThreadPoolExecutor(1)
    try:
        with Client(proc.address, credentials=Credentials(), timeout=10, retry=PATIENT) as mz:
            mz.create_context("c")

            def write() -> list:
                return [mz.commit("c", Tx(i).create(f"f{i}", f"(n {i})"),
                                  request_id=f"w-{i}") for i in range(count)]
            receipts = pool.submit(write)
            deadline = time.monotonic() + 60
            while mz.status("c").revision < 5:
                assert time.monotonic() < deadline and not receipts.done()
                time.sleep(0.01)
            proc.kill()  # SIGKILL, wherever the writer is
            proc.listen = proc.address
            proc.start()
            done = receipts.result(timeout=120)
            assert [r.revision for r in done] == list(range(1, count + 1))
            status = mz.status("c")
            assert (status.revision, status.event_count) == (count, count + 1)
            assert len(mz.frames("c").frames) == count and mz.audit("c").match
    finally:
        pool.shutdown(wait=False)
        proc.kill()


def test_dur_04_async_client_append_waits_out_a_restart(tmp_path):
    proc = ServerProcess(tmp_path / "data").start()
    try:
        with Client(proc.address, credentials=Credentials()) as mz:
            mz.create_context("c")
        proc.kill()
        proc.listen = proc.address

        async def append_while_down():
            async with AsyncClient(proc.address, credentials=Credentials(),
                                   retry=PATIENT) as mz:
                pending = asyncio.ensure_future(mz.append_event(
                    "c", session="main", kind="user-message", text="hello", request_id="r1"))
                await asyncio.sleep(0.5)  # it is failing and retrying meanwhile
                assert not pending.done()
                await asyncio.get_running_loop().run_in_executor(None, proc.start)
                return await asyncio.wait_for(pending, 120), await mz.status("c")
        event, status = asyncio.run(append_while_down())
        assert (event.ref, event.replayed, status.event_count) == ("@e1", False, 2)
    finally:
        proc.kill()


def test_client_never_retries_an_activation_lost_to_a_sigkill(dying_server):
    proc = dying_server(3)  # writes: create the context, an input, then the activation
    pool = concurrent.futures.ThreadPoolExecutor(1)
    with Client(proc.address, credentials=Credentials(), timeout=10, retry=PATIENT) as mz:
        mz.create_context("c")
        mz.append_event("c", session="main", kind="user-message", text="Ship v1.")
        pending = pool.submit(mz.activate, "c", session="main")
        started = time.monotonic()
        with pytest.raises(UnavailableError):
            pending.result(timeout=120)  # at once: the patient policy does not apply
        assert time.monotonic() - started < 10
        restart_on_the_same_port(proc)
        # The lost call claimed the input once (a1); a retry would have claimed a2.
        mz.append_event("c", session="main", kind="user-message", text="Then pause.")
        assert mz.activate("c", session="main").id == "a2"
    pool.shutdown()
