"""Hybrid recall (HYB-01 .. HYB-03, HYB-07): the vector leg beside the lexical one, over real
gRPC, a real LMDB store and a real index directory. The server embeds with its default
embedder; these contexts are too small for it to learn from, so it matches surface
features (word prefixes): "launching" reaches "launch" through the vector leg only (no
stemming in the lexical leg)."""
from __future__ import annotations

import grpc
import pytest

from morphz.services.recall.client import RecallClient
from morphz.services.transaction.client import TransactionClient
from morphz.shared.errors import MorphzError

from tests.integration.test_recall import caught_up, found
from tests.polling import until
from tests.security_servers import in_process_too
from tests.topology import ServerProcess


@pytest.fixture(scope="module")
def recall(endpoints):
    channel = grpc.insecure_channel(endpoints.recall)
    yield RecallClient(channel, timeout=30)
    channel.close()


def vectors_caught_up(recall, context) -> dict:
    """Both legs at the store's head (the vector leg follows the lexical one on its own)."""
    caught_up(recall, context)
    st = {}

    def done() -> bool:
        st.update(recall.inspect(context))
        return st["lag"] == 0 and st["vectors"]["lag"] == 0
    until(done, what=st)
    return st


def search(recall, context, query, **kw) -> dict:
    if kw.get("mode") in ("vector", "hybrid"):
        vectors_caught_up(recall, context)
    else:
        caught_up(recall, context)
    return recall.search(context, query, **kw)


def launch_events(mind) -> dict:
    return {
        "both": mind.event("the launch is on hold until legal signs off")["ref"],
        "hold": mind.event("hold the door for the movers")["ref"],
        "launching": mind.event("launching the rocket tomorrow morning")["ref"],
        "other": mind.event("weather report: sunny with light wind")["ref"],
    }


# -- HYB-01 ------------------------------------------------------------------------------
def test_hyb_01_hybrid_fuses_both_legs_scores_with_each_legs_rank(recall, mind):
    refs = launch_events(mind)
    query = "launch hold"
    lexical = found(search(recall, mind.context, query, mode="lexical"))
    vector_hits = search(recall, mind.context, query, mode="vector")["results"]
    vector = [h["ref"] for h in vector_hits]
    hybrid = search(recall, mind.context, query, mode="hybrid")["results"]
    # The legs differ: "launching" is a vector hit only (no shared term).
    assert refs["launching"] in vector and refs["launching"] not in lexical
    assert refs["both"] == lexical[0] == vector[0]
    # Score fusion (hybrid.py): half the lexical part, half the vector score scaled over
    # the leg's candidates, then a share of session neighbours' scores; the hit both legs
    # rank first comes first, every hit of either leg is listed, in score order.
    assert hybrid[0]["ref"] == refs["both"]
    assert set(lexical) | set(vector) <= {h["ref"] for h in hybrid}
    top, low = vector_hits[0]["score"], vector_hits[-1]["score"]
    for h in hybrid:  # a vector hit scores at least its own part
        if h["ref"] in vector:
            part = (vector_hits[vector.index(h["ref"])]["score"] - low) / (top - low)
            assert h["score"] >= 0.5 * part - 1e-6, h
    assert [h["ref"] for h in hybrid] == \
        [h["ref"] for h in sorted(hybrid, key=lambda h: -round(h["score"], 9))]
    for h in hybrid:
        lex_rank = lexical.index(h["ref"]) + 1 if h["ref"] in lexical else 0
        vec_rank = vector.index(h["ref"]) + 1 if h["ref"] in vector else 0
        assert (h["lexical_rank"], h["vector_rank"]) == (lex_rank, vec_rank), h
    # A vector search's hits say their vector rank only; lexical ones carry no ranks.
    v = search(recall, mind.context, query, mode="vector")["results"]
    assert [(h["lexical_rank"], h["vector_rank"]) for h in v] == \
        [(0, i) for i in range(1, len(v) + 1)]
    assert "vector_rank" not in search(recall, mind.context, query, mode="lexical")["results"][0]


def test_hyb_01_unknown_mode_is_refused(recall, mind, expect_rejected):
    mind.event("anything at all")
    expect_rejected("RECALL_MODE_INVALID", recall.search, mind.context, "anything",
                    mode="semantic")


def test_hyb_01_inspect_shows_both_legs_and_the_embedder(recall, mind):
    launch_events(mind)
    st = vectors_caught_up(recall, mind.context)
    assert st["vectors"]["position"] == st["position"] == st["head"]
    assert st["embedder"] and st["vectors"]["built_by"] == st["embedder"]
    assert st["vectors"]["current"] and st["vectors"]["dimension"] > 0
    assert st["vectors"]["count"] == st["documents"] == st["events"] + st["frames"] >= 4
    assert len(st["vectors"]["fingerprint"]) == 64


# -- vector leg: empty_index / no_match (ASM-05 semantics) ---------------------------------
def test_hyb_asm_05_vector_leg_says_empty_index_then_no_match(recall, mind, expect_rejected):
    # A new context holds its creation event only, with no text: nothing to embed.
    reply = search(recall, mind.context, "launch", mode="vector")
    assert reply["results"] == [] and reply["empty"] == "empty_index"
    mind.event("alpha beta gamma")
    for mode in ("vector", "hybrid"):
        reply = search(recall, mind.context, "zzqx wvvk", mode=mode)
        assert reply["results"] == [] and reply["empty"] == "no_match", mode
    assert found(search(recall, mind.context, "alphabet", mode="vector"))  # can match
    expect_rejected("RECALL_QUERY_INVALID", recall.search, mind.context, "  ", mode="vector")


# -- RECALL-03 with both legs -------------------------------------------------------------
def test_recall_03_a_hybrid_cursor_pages_one_ranking_while_the_vector_leg_moves(recall, mind):
    """The vector leg follows on its own, so a cursor that kept only the lexical searcher
    read a moved vector leg on its next page (a repeated hit, a skipped one). Made
    deterministic: between pages, events the vector leg ranks first are committed and
    applied. Past FUSE_DEPTH (100) lexical hits the pages go on into the lexical leg's
    rest, from the same first page's searcher."""
    notes = [{"session": "s1", "kind": "user-message", "text": f"launch checklist note {i}"}
             for i in range(130)]
    noted = {e["ref"] for e in mind.client.append_events(mind.context, notes)["events"]}
    vectors_caught_up(recall, mind.context)
    query = "launch checklist"
    whole = [h["ref"] for h in recall.search(mind.context, query, limit=100)["results"]]
    reply = recall.search(mind.context, query, limit=45)  # the default mode: hybrid
    assert reply["vector_lag"] == 0 and any(h["vector_rank"] for h in reply["results"])
    paged, pages, later = [h["ref"] for h in reply["results"]], 1, set()
    while reply["next_cursor"]:
        # Closer to the query than any note: the vector leg ranks them first.
        moved = vectors_caught_up(recall, mind.context)
        later |= {e["ref"] for e in mind.client.append_events(mind.context, [
            {"session": "s1", "kind": "user-message", "text": f"launch checklist {pages}{n}"}
            for n in range(3)])["events"]}
        # Both legs at the store's head, past the new events (lag counts from the head).
        now = vectors_caught_up(recall, mind.context)
        assert now["vectors"]["position"] > moved["vectors"]["position"]
        reply = recall.search(mind.context, query, limit=45, cursor=reply["next_cursor"])
        paged += [h["ref"] for h in reply["results"]]
        pages += 1
    assert len(paged) == len(set(paged))  # none repeated
    assert noted <= set(paged) and not later & set(paged)  # none skipped, none added
    assert paged[:100] == whole and pages == 3  # one page's order, before the commits


# -- HYB-03 --------------------------------------------------------------------------------
def test_hyb_03_refs_ids_and_numbers_take_the_exact_path(recall, mind):
    refs = launch_events(mind)
    build = mind.event("build 4711 failed on the launch pad")["ref"]
    mind.event("build 4712 passed")
    mind.tx('(create memory/launch-plan (note "the launch plan"))')
    for mode in ("vector", "hybrid"):
        first = search(recall, mind.context, refs["other"], mode=mode)["results"][0]
        assert first["ref"] == refs["other"], mode
        event_id = mind.client.get_event(mind.context, refs["hold"])["id"]
        assert search(recall, mind.context, event_id, mode=mode)["results"][0]["ref"] == \
            refs["hold"]
        hits = search(recall, mind.context, "memory/launch-plan", mode=mode)["results"]
        assert hits[0]["id"] == "memory/launch-plan"
        hits = search(recall, mind.context, "4711", mode=mode)["results"]
        assert [h["ref"] for h in hits] == [build]  # not 4712, however close it embeds
        assert all(h["vector_rank"] == 0 for h in hits)
        # The named item too passes the search's filters, or it is not there at all.
        other = refs["other"]
        for filters in ({"kinds": ["frame"]}, {"sessions": ["s2"]},
                        {"until": "2000-01-01T00:00:00+00:00"}):
            hits = search(recall, mind.context, other, mode=mode, **filters)["results"]
            assert other not in [h["ref"] for h in hits], (mode, filters)
        hits = search(recall, mind.context, "memory/launch-plan", mode=mode,
                      kinds=["event"])["results"]
        assert "memory/launch-plan" not in [h["id"] for h in hits], mode
        # A word no id could be is only a word: no lookup, no refusal from the store.
        for word in ("a" * 600, "é" * 300):
            hits = search(recall, mind.context, word, mode=mode)["results"]
            assert all(h["lexical_rank"] == 0 for h in hits), mode  # no term, no exact item


def test_hyb_03_vector_hits_pass_the_state_and_session_filters(recall, mind):
    log = mind.event("launching checklist draft, superseded")["ref"]
    mind.tx('(create memory/old (note "old plan"))')
    mind.tx(f"(derive memory/new (from memory/old {log}) (note \"new plan\")) "
            f"(retire memory/old {log})", reason="digested")
    other = mind.event("launching from the other session", session="s2")["ref"]
    for mode in ("vector", "hybrid"):
        every = {h["ref"]: h for h in search(recall, mind.context, "launch",
                                             mode=mode)["results"]}
        assert every[log]["state"] == "retired" and other in every, mode  # found at all
        active = found(search(recall, mind.context, "launch", mode=mode, states=["active"]))
        assert log not in active and other in active, mode
        s1 = found(search(recall, mind.context, "launch", mode=mode, sessions=["s1"]))
        assert other not in s1 and log in s1, mode


def test_hyb_03_vector_hits_respect_an_evaluations_visibility(recall, mind):
    other = mind.event("launching plan private to session two", session="s2")["ref"]
    mind.event("what is the plan?")
    act = mind.activate("s1")
    evaluation = {"session": "s1", "activation": act["id"]}
    for mode in ("vector", "hybrid"):
        assert other in found(search(recall, mind.context, "launch", mode=mode))  # operator
        seen = found(search(recall, mind.context, "launch", mode=mode, evaluation=evaluation))
        assert other not in seen, mode


@in_process_too
def test_hyb_03_no_vector_search_without_the_recall_right(mtls_server, certs):
    from tests.security_servers import PRINCIPALS
    assert "carol" in PRINCIPALS  # carol holds no grant anywhere
    context = "hyb-03-authz"
    with mtls_server.channel() as ch:
        alice = TransactionClient(ch, timeout=30)
        alice.create_context(context)
        mine = alice.append_event(context, "s1", "user-message", "launching the rocket")["ref"]
        theirs = alice.append_event(context, "s2", "user-message", "launching a balloon")["ref"]
        owner = RecallClient(ch, timeout=30)
        assert set(found(search(owner, context, "launch", mode="vector"))) == {mine, theirs}
    with mtls_server.channel(certs.client("carol")) as ch:
        carol = RecallClient(ch, timeout=30)
        reasons = set()
        for mode in ("lexical", "vector", "hybrid"):
            with pytest.raises(MorphzError) as info:
                carol.search(context, "launch", mode=mode)
            reasons.add(info.value.reason)
        assert reasons == {"FORBIDDEN"}  # refused alike, whatever the mode
    # Granted recall, carol finds both through the vector leg, as the owner does.
    with mtls_server.channel() as ch:
        TransactionClient(ch, timeout=30).set_policy(context, "grant", "carol", ["recall"])
    with mtls_server.channel(certs.client("carol")) as ch:
        carol = RecallClient(ch, timeout=30)
        assert set(found(carol.search(context, "launch", mode="vector"))) == {mine, theirs}


# -- HYB-02 --------------------------------------------------------------------------------
@in_process_too
def test_hyb_02_another_embedder_is_refused_as_stale_until_rebuild(tmp_path):
    context = "hyb-02"
    server = ServerProcess(tmp_path / "data").start()
    try:
        with server.channel() as ch:
            tx = TransactionClient(ch, timeout=30)
            tx.create_context(context)
            for text in ("the launch is on hold", "launching tomorrow", "hold the door",
                         "weather report", "release paused until legal signs off"):
                tx.append_event(context, "s1", "user-message", text)
            before = search(RecallClient(ch, timeout=30), context, "launch", mode="hybrid")
            assert before["results"]
            before_status = RecallClient(ch, timeout=30).inspect(context)
        server.stop()
        server.args = ["--embedder", "hashing:128"]  # another identity, same index folder
        server.start()
        with server.channel() as ch:
            recall = RecallClient(ch, timeout=60)
            for mode in ("vector", "hybrid"):
                with pytest.raises(MorphzError) as info:
                    search(recall, context, "launch", mode=mode)
                assert info.value.reason == "RECALL_INDEX_STALE", mode
                assert "rebuild" in info.value.message
            assert found(search(recall, context, "launch", mode="lexical"))  # still answers
            # A search naming no mode (hybrid by default) falls back to the lexical leg.
            assert found(search(recall, context, "launch")) == \
                found(search(recall, context, "launch", mode="lexical"))
            st = recall.inspect(context)
            assert st["embedder"] == "hashing@1/128" and not st["vectors"]["current"]
            assert st["vectors"]["built_by"] == before_status["embedder"] != st["embedder"]
            # New events keep the lexical leg up to date, never the stale vector leg.
            TransactionClient(ch, timeout=30).append_event(context, "s1", "user-message",
                                                           "launch window moved")
            assert len(found(search(recall, context, "launch window"))) >= 1
            after = recall.inspect(context)
            # The stale leg stays where it was: one commit behind now.
            assert after["vectors"]["lag"] == st["vectors"]["lag"] + 1 == 1
            assert (dict(after["vectors"], lag=0) == dict(st["vectors"], lag=0)
                    and after["events"] == st["events"] + 1)
            recall.rebuild(context)
            first = vectors_caught_up(recall, context)  # the new leg fills on its own
            assert first["vectors"]["current"] and first["vectors"]["built_by"] == "hashing@1/128"
            assert first["vectors"]["count"] == first["documents"] == after["documents"]
            one = search(recall, context, "launch", mode="hybrid")
            assert one["results"]
            recall.rebuild(context)
            second = vectors_caught_up(recall, context)
            two = search(recall, context, "launch", mode="hybrid")
            assert two["results"] == one["results"]
            assert second["vectors"]["fingerprint"] == first["vectors"]["fingerprint"]
    finally:
        server.kill()


# -- HYB-04 / HYB-05 ---------------------------------------------------------------------
def test_hyb_04_a_server_with_the_default_embedder_recalls_by_meaning_across_languages(tmp_path):
    """The real default embedder (e5 on ONNX Runtime), named explicitly: the rest of the
    suite's servers embed with hashing (tests/conftest.py)."""
    context = "hyb-04"
    server = ServerProcess(tmp_path / "data", args=["--embedder", "default"]).start()
    try:
        with server.channel() as ch:
            tx = TransactionClient(ch, timeout=30)
            tx.create_context(context)
            refs = {text: tx.append_event(context, "s1", "user-message", text)["ref"] for text in (
                "Release 2.3 paused until legal signs off on the new terms of service",
                "数据库连接池耗尽，查询排队超过 2 秒",
                "lunch order for the team: noodles from the place downstairs",
                "the printer on the third floor is out of toner again",
                "用户喜欢简短的回答，先给结论再给细节")}
            recall = RecallClient(ch, timeout=60)
            st = vectors_caught_up(recall, context)  # it follows on its own (HYB-06)
            assert st["embedder"].startswith("e5-small@") and "+" in st["embedder"]
            assert st["embedder_note"] == ""
            # No query shares a word with its memory. The vector leg finds it first (but
            # for the English query of the Chinese pool note, which e5-small puts second,
            # 0.004 below the English release note, as it does the bare texts), and the
            # default mode (hybrid) keeps it in its top three (HYB-05), where neighbour
            # smoothing may lift a note of the same session past it.
            for query, text, rank in (("why did we hold the launch", 0, 1),
                                      ("回复尽量简洁", 4, 1),
                                      ("too many open sessions to Postgres", 1, 2),
                                      ("the user likes brief replies", 4, 1)):
                want = refs[list(refs)[text]]
                hits = search(recall, context, query, mode="vector")["results"]
                assert want in [h["ref"] for h in hits[:rank]], (query, hits)
                hits = search(recall, context, query)["results"]
                top = [h["ref"] for h in hits[:3]]
                assert want in top, (query, hits)
                assert hits[top.index(want)]["vector_rank"] == rank  # the vector leg's
            # An exact match stays first (HYB-05): the lexical leg holds the whole query.
            hits = search(recall, context, "printer toner")["results"]
            assert hits[0]["ref"] == refs[list(refs)[3]] and hits[0]["lexical_rank"] == 1
    finally:
        server.kill()
