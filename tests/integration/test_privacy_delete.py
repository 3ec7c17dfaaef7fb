"""Deleting a context (PRIV-05; docs/privacy.md): nothing of it is left (events, Mind,
snapshots, index, vectors, jobs), its name answers CONTEXT_NOT_FOUND and may be created
again, the store's file shrinks, and the deletion is in the server's admin log."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from morphz.services.encoding.client import EncodingClient
from morphz.services.recall.client import RecallClient
from morphz.shared.errors import MorphzError
from morphz.shared.grpc.auth import PLAINTEXT
from tests.integration.test_cli import run_cli
from tests.polling import until
from tests.topology import ServerProcess


def _missing(call, *args) -> str:
    with pytest.raises(MorphzError) as info:
        call(*args)
    return info.value.reason


def test_priv_05_a_deleted_context_answers_not_found_everywhere_and_its_name_is_free(
        client, endpoints, ctx):
    ref = client.append_event(ctx, "s1", "user-message", "the goose flies at dawn")["ref"]
    client.commit(ctx, f"(context-tx (base-version 0) (derive goose (from {ref}) (at dawn)))")
    with PLAINTEXT.channel(endpoints.recall) as rch, PLAINTEXT.channel(endpoints.encoding) as ech:
        recall = RecallClient(rch, timeout=60)
        snapshot = EncodingClient(ech, timeout=60).compile(ctx, "s1")["snapshot"]
        until(lambda: recall.search(ctx, "goose")["results"], 60, "indexed")
        job = client.start_job(ctx, "audit")["id"]
        with pytest.raises(MorphzError) as refused:
            client.delete_context(ctx, " ")
        assert refused.value.reason == "ERASE_REASON_REQUIRED"
        done = client.delete_context(ctx, "test context no longer needed")
        assert done["context"] == ctx and done["event_count"] == 4  # with the compile's activation
        assert done["reclaimed"]["engine"] in ("lmdb", "postgres")
        for call, args in ((client.status, (ctx,)), (client.get_event, (ctx, ref)),
                           (client.get_frame, (ctx, "goose")), (client.audit, (ctx,)),
                           (recall.search, (ctx, "goose")),
                           (EncodingClient(ech, timeout=60).replay, (ctx, snapshot))):
            assert _missing(call, *args) == "CONTEXT_NOT_FOUND", call
        assert _missing(client.get_job, job) == "JOB_NOT_FOUND"
        assert ctx not in client.list_contexts()["contexts"]
        assert _missing(client.delete_context, ctx, "again") == "CONTEXT_NOT_FOUND"
        # The name is free: a new context under it holds nothing of the old one (once
        # recall took the deletion from the feed: it never holds one back).
        probe = f"{ctx}-probe"  # a context to ask how far recall's feed is
        client.create_context(probe)
        until(lambda: recall.inspect(probe)["feed_lag"] == 0, 60, "recall took the deletion")
        client.create_context(ctx)
        assert client.status(ctx)["event_count"] == 1
        assert client.audit(ctx)["match"]
        client.append_event(ctx, "s1", "user-message", "a new beginning")
        until(lambda: recall.search(ctx, "beginning")["results"], 60, "the new one indexed")
        assert not recall.search(ctx, "goose", mode="lexical")["results"], (
            recall.inspect(ctx), recall.search(ctx, "goose", mode="lexical"))


def test_priv_05_delete_frees_the_space_and_is_written_to_the_admin_log(tmp_path):
    srv = ServerProcess(tmp_path / "data", {"MORPHZ_EMBEDDER": "hashing"}).start()
    data = Path(srv.data_dir)
    try:
        c = srv.client()
        c.create_context("bulky")
        c.create_context("stays")
        c.append_event("stays", "s1", "user-message", "the other context's words")
        for start in range(0, 2000, 500):
            c.append_events("bulky", [{"session": "s1", "kind": "tool-result",
                                       "text": f"log line {i} " + "x" * 1000}
                                      for i in range(start, start + 500)])
        recall = RecallClient(srv.channel(), timeout=60)
        until(lambda: recall.inspect("bulky")["lag"] == 0, 60, "indexed")
        folder = data / "recall" / b"bulky".hex()  # IndexDirectory's name for it
        assert folder.is_dir()
        size = (data / "store" / "data.mdb").stat().st_size
        proc = run_cli("context", "delete", "bulky", "--reason", "customer left",
                       "--format=json", address=srv.address, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        done = json.loads(proc.stdout)
        assert done["event_count"] == 2001
        assert done["reclaimed"]["bytes_after"] < done["reclaimed"]["bytes_before"] / 2
        assert (data / "store" / "data.mdb").stat().st_size < size / 2
        until(lambda: not folder.exists(), 60, "recall dropped the index")
        assert c.get_event("stays", "@e1")["text"] == "the other context's words"
        c.close()
    finally:
        assert srv.stop() == 0
    assert "context bulky deleted by" in srv.stderr() and "customer left" in srv.stderr()
