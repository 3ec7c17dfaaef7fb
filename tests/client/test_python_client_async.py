"""AsyncClient (grpc.aio) against a real server, and both clients' credentials against
a `morphz serve` requiring mutual TLS and knowing bearer tokens."""
from __future__ import annotations

import asyncio
import json

import pytest

from morphz.client import AsyncClient, AuthError, Client, ConflictError, Credentials, Tx
from tests.certs import dev_certs
from tests.topology import ServerProcess

TOKEN = "alice-token-0123456789"


def run(coro):
    return asyncio.run(coro)


def test_core_21_async_client_writes_reads_and_walks(endpoints, cx):
    async def story():
        async with AsyncClient(endpoints.transaction, recall=endpoints.recall,
                               encoding=endpoints.encoding, credentials=Credentials()) as mz:
            await mz.append_event(cx, session="main", kind="user-message", text="Ship v1.")
            enc = await mz.compile(cx, session="main")
            plan = Tx(enc.revision).create("release", "(goal ship-v1) (stage waiting-tests)")
            first = await mz.commit(cx, plan, session="main", activation=enc.activation)
            report = await mz.tool_result(cx, session="main", text="120 passed, 0 failed")
            await mz.activate(cx, session="main")
            await mz.append_event(cx, session="chat", kind="user-message", text="Pause it.")
            await mz.activate(cx, session="chat")
            # Two sessions revise `release` from the same base at once: one conflicts.
            results = await asyncio.gather(*(
                mz.commit(cx, Tx(first.revision).revise("release", f"(goal ship-v1) {body}"),
                          session=session)
                for session, body in (("main", "(stage packaging)"),
                                      ("chat", "(stage paused)"))), return_exceptions=True)
            conflicts = [r for r in results if isinstance(r, ConflictError)]
            assert len(conflicts) == 1 and "frame:release" in conflicts[0].boundaries
            derived = await mz.commit(cx, Tx(first.revision + 1, "digested").derive(
                "test-result", "(tests passed)", sources=[report.ref]).retire(report.ref))
            assert derived.rebased is False and derived.revision == first.revision + 2
            pages = [p async for p in mz.walk(cx, "test-result", depth=1, max_nodes=1,
                                              include_events=True)]
            assert [n.ref for p in pages for n in p.nodes if n.kind == "event"] == [report.ref]
            pages = [p async for p in mz.frame_pages(cx, max_bytes=1)]  # a frame a page
            assert [[f.id for f in p.frames] for p in pages] == [["release"], ["test-result"]]
            again = await mz.compile(cx, session="main", activation=enc.activation)
            listed = [e.snapshot for p in [p async for p in mz.snapshot_pages(
                cx, session="main", limit=1)] for e in p.snapshots]
            assert listed == [again.snapshot, enc.snapshot]
            first_page = await mz.list_snapshots(cx, activation=enc.activation, limit=1)
            assert first_page.snapshots[0].snapshot == again.snapshot
            step = await mz.evaluation(cx, enc.activation)
            assert [t.revision for t in step.transactions] == [first.revision]
            assert (await mz.rebuild_projections(cx)).context == cx
            return (await mz.status(cx)).revision
    assert run(story()) == 3


@pytest.fixture(scope="module")
def secured_server(tmp_path_factory):
    """Mutual TLS (certificates of a dev CA) and a bearer token file."""
    certs = dev_certs(tmp_path_factory.mktemp("ca"), "alice")
    tokens = tmp_path_factory.mktemp("tokens") / "tokens.json"
    tokens.write_text(json.dumps({TOKEN: "alice"}))
    client_auth = certs.client("alice", token=TOKEN)
    proc = ServerProcess(tmp_path_factory.mktemp("secured") / "data",
                         args=[*certs.server_flags(), "--tokens", str(tokens)],
                         auth=client_auth).start()
    yield proc, certs
    proc.kill()


def test_sec_01_client_presents_tls_client_certificates_and_tokens(secured_server):
    proc, certs = secured_server
    mtls = dict(tls_ca=certs.path("ca.crt"), tls_cert=certs.path("alice.crt"),
                tls_key=certs.path("alice.key"))
    with Client(proc.address, credentials=Credentials(**mtls, token=TOKEN)) as mz:
        assert mz.create_context("secured").context == "secured"
    with Client(proc.address, credentials=Credentials(**mtls)) as mz:  # the certificate alone
        assert mz.status("secured").revision == 0
    with Client(proc.address, credentials=Credentials(**mtls, token="wrong")) as mz:
        with pytest.raises(AuthError) as info:
            mz.status("secured")
        assert info.value.reason == "UNAUTHENTICATED"

    async def aio() -> int:
        pem = {k: open(v, "rb").read() for k, v in mtls.items()}  # PEM bytes work too
        async with AsyncClient(proc.address,
                               credentials=Credentials(**pem, token=TOKEN)) as mz:
            return (await mz.status("secured")).revision
    assert run(aio()) == 0
