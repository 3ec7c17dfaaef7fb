"""The Python clients' erasure (docs/privacy.md) against a real server: a dry run says
what would go and changes nothing; the erasure takes it, says who, why and when on every
item, and leaves the rest as it was (PRIV-01, PRIV-02)."""
from __future__ import annotations

import asyncio

import pytest

from morphz.client import AsyncClient, Client, Credentials, MorphzError


def _plant(mz: Client, cx: str) -> tuple[str, str]:
    gone = mz.append_event(cx, session="alice", kind="user-message",
                           text="alice's address is 12 Elm Row").ref
    kept = mz.append_event(cx, session="bob", kind="user-message", text="bob likes tea").ref
    mz.commit(cx, f"(context-tx (base-version 0) (derive address (from {gone}) (street elm)))")
    return gone, kept


def test_priv_01_client_erase_dry_run_then_erasure(mz, cx):
    gone, kept = _plant(mz, cx)
    dry = mz.erase(cx, session="alice", dry_run=True)
    assert dry.dry_run and list(dry.events) == [gone] and list(dry.frames) == ["address"]
    assert mz.event(cx, gone).text == "alice's address is 12 Elm Row"  # nothing changed
    with pytest.raises(MorphzError) as refused:
        mz.erase(cx, session="alice")
    assert refused.value.reason == "ERASE_REASON_REQUIRED"
    done = mz.erase(cx, session="alice", reason="right to erasure")
    assert list(done.events) == [gone] and len(done.erasures) == 1
    assert done.reclaimed.bytes_after > 0
    ev = mz.event(cx, gone, reveal_secrets=True)
    assert ev.text == f"[erased {done.erasures[0]}]"
    assert (ev.erased.erasure, ev.erased.reason) == (done.erasures[0], "right to erasure")
    assert ev.erased.at and mz.frame(cx, "address").erased.erasure == done.erasures[0]
    assert mz.event(cx, kept).text == "bob likes tea" and not mz.event(cx, kept).HasField(
        "erased")
    report = mz.audit(cx)
    assert report.match and report.chain.erased == 1 + 1  # the event, and the transaction


def test_priv_01_async_client_erases_by_ref(endpoints, cx):
    async def story():
        async with AsyncClient(endpoints.transaction, recall=endpoints.recall,
                               encoding=endpoints.encoding, credentials=Credentials()) as mz:
            gone = (await mz.append_event(cx, session="s", kind="tool-result",
                                          text="token abc123")).ref
            done = await mz.erase(cx, refs=[gone], reason="leaked token")
            assert list(done.events) == [gone]
            assert (await mz.event(cx, gone)).text == f"[erased {done.erasures[0]}]"
    asyncio.run(story())


def test_priv_05_client_deletes_a_context_and_its_name_is_free(mz, cx):
    mz.append_event(cx, session="s", kind="user-message", text="short-lived")
    done = mz.delete_context(cx, reason="a test context")
    assert (done.context, done.event_count) == (cx, 2) and done.reclaimed.engine
    with pytest.raises(MorphzError) as info:
        mz.status(cx)
    assert info.value.reason == "CONTEXT_NOT_FOUND"
    assert mz.create_context(cx).event_count == 1


def test_priv_05_async_client_deletes_a_context(endpoints, cx):
    async def story():
        async with AsyncClient(endpoints.transaction, credentials=Credentials()) as mz:
            assert (await mz.delete_context(cx, reason="gone")).context == cx
            assert cx not in await mz.contexts()
    asyncio.run(story())


def test_priv_05_client_exports_the_events_with_erased_ones_as_placeholders(mz, cx):
    gone = mz.append_event(cx, session="a", kind="user-message",
                           text="my number is 555-0101").ref
    mz.append_event(cx, session="a", kind="tool-result", text="weather: rain")
    mz.erase(cx, refs=[gone], reason="asked to forget")
    pages = list(mz.export(cx))
    events = [e for p in pages for e in p.events]
    assert pages[-1].done == pages[-1].total and pages[-1].total >= 2
    assert {e.ref: e.erased for e in events}[gone]
    assert not any("555-0101" in e.text for e in events)
    assert ("tool-result", "weather: rain") in {(e.kind, e.text) for e in events}
    with pytest.raises(MorphzError) as info:
        list(mz.export("no-such-context"))
    assert info.value.reason == "CONTEXT_NOT_FOUND"


def test_priv_05_async_client_exports(endpoints, cx):
    async def story():
        async with AsyncClient(endpoints.transaction, credentials=Credentials()) as mz:
            await mz.append_event(cx, session="s", kind="user-message", text="hello there")
            pages = [p async for p in mz.export(cx)]
            texts = [e.text for p in pages for e in p.events]
            assert "hello there" in texts
    asyncio.run(story())


def test_priv_04_client_sets_and_reads_a_retention_policy(mz, cx):
    policy = mz.set_retention(cx, "(retention (days 30) (kinds external tool-result))")
    assert (set(policy.retention.kinds), policy.retention.days) == (
        {"tool-result", "external"}, 30)
    assert policy.retention.set_at == policy.event_ref
    read = mz.policy(cx)
    assert read.retention.policy == policy.retention.policy
    assert mz.status(cx).retention.policy == policy.retention.policy
    with pytest.raises(MorphzError) as bad:
        mz.set_retention(cx, "(retention (kinds user-message) (days 0))")
    assert bad.value.reason == "CONTEXT_INPUT_INVALID"
    assert not mz.set_retention(cx, "none").HasField("retention")
    assert not mz.policy(cx).HasField("retention")
