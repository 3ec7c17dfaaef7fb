"""RECALL-13 through morphz.client (the real Python client over gRPC): a search made
after the client's own write sees it (the client sends its last write's commit_seq as
min_commit_seq), and a search naming a version the index cannot reach in time answers
with the lag it could not close, not an error. The TypeScript client's counterpart is in
clients/typescript/test/client.test.ts."""
from __future__ import annotations

import asyncio
import time

from morphz.client import AsyncClient, Client, Credentials

ROUNDS = 50


def refs(reply) -> list[str]:
    return [h.ref for h in reply.results]


def test_recall_13_fifty_appends_then_a_search_finds_the_fiftieth(mz, cx):
    # The reproduction: before, the index was some 44 commits behind here.
    for i in range(ROUNDS):
        last = mz.append_event(cx, session="s1", kind="user-message",
                               text=f"note number {i} marker{i}")
    assert last.commit_seq > 0
    assert mz.positions.of(cx) == last.commit_seq
    reply = mz.search(cx, f"marker{ROUNDS - 1}")  # the default mode (hybrid) finds more
    assert last.ref in refs(reply)
    assert reply.unclosed_lag == 0
    assert reply.index_position >= last.commit_seq


def test_recall_13_every_search_right_after_its_append_finds_it(mz, cx):
    # Each search follows its append at once: without read-your-writes, the follower
    # (resting between applications) left some of these unindexed.
    missed = []
    for i in range(ROUNDS):
        event = mz.append_event(cx, session="s1", kind="user-message", text=f"item{i} here")
        reply = mz.search(cx, f"item{i}")
        if event.ref not in refs(reply):
            missed.append((i, reply.lag))
    assert missed == []


def test_recall_13_a_commit_is_read_by_the_next_search(mz, cx):
    mz.append_event(cx, session="s1", kind="user-message", text="start")
    receipt = mz.commit(cx, "(context-tx (base-version 0) (create plan (goal zebrafish)))")
    assert receipt.commit_seq == mz.positions.of(cx) > 0
    reply = mz.search(cx, "zebrafish", kinds=["frame"])
    assert [h.id for h in reply.results] == ["plan"]


def test_recall_13_a_version_not_reached_in_time_answers_its_lag(endpoints, cx):
    # A version past the context's: no wait can close it; the reply says by how much,
    # within the call's deadline, instead of failing.
    with Client(endpoints.transaction, recall=endpoints.recall, credentials=Credentials(),
                timeout=2.0) as short:
        head = short.status(cx).commit_seq
        started = time.monotonic()
        reply = short.search(cx, "anything", min_commit_seq=head + 5)
        took = time.monotonic() - started
    assert reply.unclosed_lag == 5
    assert reply.index_position == head
    assert took < 2.0


def test_recall_13_zero_asks_for_no_wait(mz, cx):
    mz.append_event(cx, session="s1", kind="user-message", text="whatever")
    reply = mz.search(cx, "whatever", min_commit_seq=0)
    assert reply.unclosed_lag == 0  # nothing was asked for: nothing unclosed


def test_recall_13_the_async_client_reads_its_writes_too(endpoints, cx):
    async def story() -> list:
        async with AsyncClient(endpoints.transaction, recall=endpoints.recall,
                               credentials=Credentials()) as amz:
            missed = []
            for i in range(20):
                event = await amz.append_event(cx, session="s1", kind="user-message",
                                               text=f"async{i} entry")
                reply = await amz.search(cx, f"async{i}")
                if event.ref not in refs(reply):
                    missed.append(i)
            return missed
    assert asyncio.run(story()) == []
