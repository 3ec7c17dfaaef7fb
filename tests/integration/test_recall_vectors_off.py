"""HYB-06: a server started with its vector leg off (`morphz serve --embedder none`, the
baseline of the recall benchmark's steady-state rows) embeds nothing and keeps no leg:
a vector search is refused with RECALL_VECTORS_OFF, a hybrid search (named or by
default) answers from the lexical leg, as while a leg is unbuilt. A real server process
over a real data directory, real gRPC."""
from __future__ import annotations

import os

from morphz.services.recall.client import RecallClient

from tests.polling import until


def test_hyb_06_with_the_vector_leg_off_vector_search_is_refused_and_hybrid_is_lexical(
        server_process, expect_rejected):
    srv = server_process({"MORPHZ_EMBEDDER": "none"}).start()
    tx = srv.client()
    recall = RecallClient(srv.channel(), timeout=30)
    tx.create_context("off")
    ref = tx.append_event("off", "s1", "user-message", "the sandbox quota is 40 GiB")["ref"]
    until(lambda: recall.inspect("off")["lag"] == 0, what="the lexical leg indexed it")

    err = expect_rejected("RECALL_VECTORS_OFF", recall.search, "off", "sandbox quota",
                          mode="vector")
    assert err.details["field"] == "mode"
    for mode in ("hybrid", ""):  # named, and the default mode
        reply = recall.search("off", "sandbox quota", mode=mode)
        assert [h["ref"] for h in reply["results"]] == [ref]
        assert reply["results"][0]["vector_rank"] == 0  # no vector leg took part
        assert reply["vector_lag"] == 0
    assert recall.rebuild("off")["documents"] >= 1  # a rebuild starts no leg either
    st = recall.inspect("off")
    assert st["embedder"] == "none" and "off" in st["embedder_note"]
    assert st["vectors"]["count"] == 0 and st["vectors"]["built_by"] == ""
    assert not os.path.exists(os.path.join(srv.data_dir, "recall", "vector-cache"))
