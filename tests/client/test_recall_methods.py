"""Every recall method of both Python clients (Client and AsyncClient) against the
session's real servers: search in each mode, read, traverse, walk, inspect_index and
rebuild_index, each answer checked. rebuild_index raised TypeError after the server had
rebuilt (issue 53: the client's read-your-writes bookkeeping took the reply's `events`,
an int there, for a batch's list of writes)."""
from __future__ import annotations

import asyncio

from morphz.client import AsyncClient, Credentials, Tx


def _story(mz, cx) -> dict:
    """A request, a tool result, a frame derived from it: what the methods read."""
    ask = mz.append_event(cx, session="main", kind="user-message",
                          text="Ship v1 once the regression tests pass.")
    act = mz.activate(cx, session="main")
    call = mz.record_action(cx, session="main", activation=act.id, text="npm test")
    report = mz.tool_result(cx, call=call.ref, text="regression suite: 120 passed, 0 failed")
    receipt = mz.commit(cx, Tx(0, "digested").derive("test-result", "(tests passed)",
                                                     sources=[report.ref]),
                        session="main", activation=act.id)
    return {"ask": ask.ref, "report": report.ref, "receipt": receipt}


def test_recall_10_sync_client_calls_every_recall_method(mz, cx):
    s = _story(mz, cx)
    for mode in ("lexical", "vector", "hybrid", ""):
        hits = mz.search(cx, "regression suite", mode=mode)  # reads this client's writes
        assert s["report"] in [h.ref for h in hits.results], mode
    assert mz.read(cx, s["report"], limit=10).text == "regression"
    one = mz.traverse(cx, "test-result", depth=1, include_events=True)
    assert {n.id if n.kind == "frame" else n.ref for n in one.nodes} == \
        {"test-result", s["report"]}
    assert [p.nodes[0].depth for p in mz.walk(cx, "test-result", depth=1, max_nodes=1)] == [0, 1]
    before = mz.inspect_index(cx)
    assert before.context == cx and before.position == s["receipt"].commit_seq
    rebuilt = mz.rebuild_index(cx)  # raised TypeError here, after the server rebuilt
    assert rebuilt.context == cx and rebuilt.position == before.position
    assert rebuilt.documents == before.documents
    # The client's own writes still set what its searches read (unchanged by the rebuild).
    assert mz.positions.of(cx) == s["receipt"].commit_seq
    assert s["report"] in [h.ref for h in mz.search(cx, "regression").results]


def test_recall_10_async_client_calls_every_recall_method(mz, cx, endpoints):
    s = _story(mz, cx)
    written = s["receipt"].commit_seq  # another client's writes: named, not known

    async def calls():
        async with AsyncClient(endpoints.transaction, recall=endpoints.recall,
                               encoding=endpoints.encoding, credentials=Credentials()) as amz:
            found = {mode: [h.ref for h in (await amz.search(
                cx, "regression suite", mode=mode, min_commit_seq=written)).results]
                for mode in ("lexical", "vector", "hybrid")}
            page = await amz.read(cx, s["report"], limit=10)
            one = await amz.traverse(cx, "test-result", depth=1)
            walked = [p async for p in amz.walk(cx, "test-result", depth=1, max_nodes=1)]
            inspected = await amz.inspect_index(cx)
            rebuilt = await amz.rebuild_index(cx)
            return found, page, one, walked, inspected, rebuilt
    found, page, one, walked, inspected, rebuilt = asyncio.run(calls())
    assert all(s["report"] in refs for refs in found.values()), found
    assert page.text == "regression" and page.has_more
    assert [n.id for n in one.nodes if n.kind == "frame"] == ["test-result"]
    assert [p.nodes[0].depth for p in walked] == [0, 1]
    assert rebuilt.context == cx and rebuilt.position == inspected.position
