"""The Python clients' calls that read a whole context (rebuilds, an erasure, a deletion,
an export) against a real server: each takes a deadline of its own (default an hour,
REBUILD_TIMEOUT) where the others take the client's; a channel hook (`wrap_channel`)
sees every call the client sends; and `retention`, the job applying a context's
retention policy, starts like the other kinds."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from morphz.client import AsyncClient, Client, Credentials, InvalidInputError
from morphz.client.options import REBUILD_TIMEOUT
from tests.polling import until

POLICY = "(retention (kinds tool-result) (days 30))"


class Deadlines(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Notes each call's method and the deadline it was sent with."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, float]] = []

    def intercept_unary_unary(self, continuation, details, request):
        self.sent.append((details.method.rsplit("/", 1)[-1], details.timeout))
        return continuation(details, request)

    intercept_unary_stream = intercept_unary_unary


@pytest.fixture
def recorded(endpoints):
    deadlines = Deadlines()
    with Client(endpoints.transaction, recall=endpoints.recall, encoding=endpoints.encoding,
                credentials=Credentials(), timeout=30,
                wrap_channel=lambda ch: grpc.intercept_channel(ch, deadlines)) as mz:
        yield mz, deadlines


def test_client_long_calls_take_their_own_deadline_and_the_hook_sees_every_call(
        recorded, request):
    mz, deadlines = recorded
    cx = f"py-long-calls-{request.node.name[-8:]}"
    mz.create_context(cx)
    ref = mz.append_event(cx, session="s", kind="tool-result", text="token abc123").ref
    assert mz.rebuild_projections(cx).context == cx
    mz.rebuild_projections(cx, timeout=120)
    mz.rebuild_index(cx, timeout=121)
    pages = list(mz.export(cx, timeout=122))
    assert [e.text for p in pages for e in p.events] == ["token abc123"]
    assert list(mz.erase(cx, refs=[ref], dry_run=True, timeout=123).events) == [ref]
    assert mz.delete_context(cx, reason="done", timeout=600).context == cx
    assert deadlines.sent == [
        ("CreateContext", 30), ("AppendEvent", 30), ("RebuildProjections", REBUILD_TIMEOUT),
        ("RebuildProjections", 120), ("RebuildIndex", 121), ("Export", 122),
        ("Erase", 123), ("DeleteContext", 600)]
    with pytest.raises(InvalidInputError) as refused:
        mz.rebuild_index(cx, timeout=0)
    assert refused.value.details["field"] == "timeout"
    assert len(deadlines.sent) == 8  # refused before anything was sent


def test_clients_start_a_retention_job_as_the_other_kinds(mz, cx, endpoints):
    mz.set_retention(cx, POLICY)
    job = mz.start_job(cx, "retention")
    assert (job.kind, job.context) == ("retention", cx) and job.id.startswith("tx-")
    until(lambda: mz.job(job.id).state == "succeeded", 60, "the retention job")

    async def story():
        async with AsyncClient(endpoints.transaction, recall=endpoints.recall,
                               encoding=endpoints.encoding, credentials=Credentials()) as amz:
            again = await amz.start_job(cx, "retention")
            assert again.kind == "retention"
            status = await amz.rebuild_index(cx, timeout=120)
            assert status.context == cx
    asyncio.run(story())
