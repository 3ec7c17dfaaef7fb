"""Recall (RECALL-01 .. RECALL-10) over real gRPC, a real LMDB store and a real index."""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import grpc
import pytest

from morphz.services.recall.client import RecallClient
from morphz.services.storage.client import StorageClient
from morphz.shared.mind.tables import TABLES

CST = timezone(timedelta(hours=8))


@pytest.fixture(scope="module")
def recall(endpoints):
    channel = grpc.insecure_channel(endpoints.recall)
    yield RecallClient(channel, timeout=30)
    channel.close()


def caught_up(recall: RecallClient, context: str) -> dict:
    """Wait (bounded generously: a loaded machine) until both legs have applied every
    commit: the lexical index and the vector leg, which follows it on its own (so a
    default, hybrid search ranks the same candidates from one page to the next); a
    stale vector leg, which never follows, is not waited for."""
    deadline = time.monotonic() + 120
    while True:
        st = recall.inspect(context)
        vectors = st.get("vectors", {})
        # A stale leg (built by another embedder) stays behind; one not built yet is not
        # stale (nothing built it): it is waited for.
        stale = vectors.get("built_by") and not vectors.get("current")
        if st["lag"] == 0 and (vectors.get("lag", 0) == 0 or stale):
            return st
        assert time.monotonic() < deadline, f"index of {context} did not catch up: {st}"
        time.sleep(0.02)


def found(reply: dict) -> list[str]:
    return [h["ref"] or h["id"] for h in reply["results"]]


def search(recall, mind, query="", **kw) -> dict:
    caught_up(recall, mind.context)
    return recall.search(mind.context, query, **kw)


# -- RECALL-01 ---------------------------------------------------------------------------
def test_recall_01_chinese_query_finds_frame_body(recall, mind):
    mind.tx('(create memory/sandbox (note "沙箱权限配置失败"))')
    mind.tx('(create memory/other (note "网络超时"))')
    hits = search(recall, mind, "沙箱 权限", kinds=["frame"])["results"]
    assert hits[0]["id"] == "memory/sandbox"
    assert hits[0]["state"] == "active" and hits[0]["revision"] == 1
    assert "«" in hits[0]["preview"] and "沙箱" in hits[0]["preview"]
    assert "memory/other" not in [h["id"] for h in hits]


def test_recall_01_english_query_finds_mixed_language_text(recall, mind):
    e = mind.event("部署到 cn-hangzhou 时 sandbox permission 检查失败，重试三次后超时")
    mind.event("unrelated: the weather is fine")
    assert found(search(recall, mind, "sandbox permission"))[0] == e["ref"]
    assert found(search(recall, mind, "重试 超时"))[0] == e["ref"]  # ICU alone cuts both words
    assert found(search(recall, mind, "cn-hangzhou"))[0] == e["ref"]


def test_recall_01_identifiers_and_normalization(recall, mind):
    e = mind.event("rolled back to v1.2.3 after @e42 reported ＳＡＮＤＢＯＸ Straße")
    for q in ("v1.2.3", "@e42", "e42", "sandbox", "STRASSE", "ｓａｎｄｂｏｘ"):
        assert found(search(recall, mind, q)) == [e["ref"]], q


def test_recall_01_retired_frame_and_retired_event_are_found(recall, mind):
    log = mind.event("flaky 沙箱 test log: permission denied on /tmp")
    mind.tx('(create memory/old (note "旧的沙箱权限方案 obsolete sandbox plan"))')
    mind.tx(f"(derive memory/new (from memory/old {log['ref']}) (note \"new plan\")) "
            "(relate memory/new supersedes memory/old) "
            f"(retire memory/old {log['ref']})", reason="superseded and digested")
    assert mind.frame("memory/old")["state"] == "retired"
    hits = {h["ref"] or h["id"]: h for h in search(recall, mind, "沙箱 sandbox")["results"]}
    assert hits["memory/old"]["state"] == "retired"
    assert hits[log["ref"]]["state"] == "retired"
    retired = found(search(recall, mind, "沙箱 sandbox", states=["retired"]))
    assert set(retired) == {"memory/old", log["ref"]}
    assert found(search(recall, mind, "沙箱 sandbox", states=["active"])) == []


def test_recall_01_filters_kind_and_session(recall, mind):
    a = mind.event("deploy report alpha", session="s1")
    b = mind.event("deploy report beta", session="s2")
    mind.tx('(create deploy/notes (text "deploy report"))')
    assert found(search(recall, mind, "deploy report", sessions=["s2"])) == [b["ref"]]
    assert found(search(recall, mind, "deploy report", kinds=["frame"])) == ["deploy/notes"]
    assert set(found(search(recall, mind, "deploy report", kinds=["event"]))) >= \
        {a["ref"], b["ref"]}


def test_recall_01_bad_queries_are_structured_errors(recall, mind, expect_rejected):
    expect_rejected("RECALL_QUERY_INVALID", recall.search, mind.context, "")
    expect_rejected("RECALL_QUERY_INVALID", recall.search, mind.context, "  ,,, !! ")
    expect_rejected("RECALL_LIMIT_INVALID", recall.search, mind.context, "x", limit=101)
    expect_rejected("RECALL_FILTER_INVALID", recall.search, mind.context, "x", kinds=["note"])
    expect_rejected("RECALL_FILTER_INVALID", recall.search, mind.context, "x", states=["gone"])
    expect_rejected("CONTEXT_NOT_FOUND", recall.search, "no-such-context", "x")
    e = search(recall, mind, "nothing-matches-this")
    assert e["results"] == [] and e["empty"] == "no_match"


# -- RECALL-02 ---------------------------------------------------------------------------
def test_recall_02_since_inclusive_until_exclusive_with_offsets(recall, mind, expect_rejected):
    ev = mind.client.get_event(mind.context, mind.event("time boundary probe")["ref"])
    t = datetime.fromisoformat(ev["time"]).astimezone(CST)
    whole = t.replace(microsecond=0)
    iso = lambda d: d.isoformat()  # noqa: E731 - +08:00 offsets throughout
    assert iso(whole).endswith("+08:00")

    def refs(since="", until=""):
        return found(search(recall, mind, since=since, until=until, kinds=["event"]))
    assert ev["ref"] in refs(since=iso(t))                          # since is inclusive
    assert ev["ref"] not in refs(until=iso(t))                      # until is exclusive
    assert ev["ref"] in refs(since=iso(whole), until=iso(whole + timedelta(seconds=1)))
    assert ev["ref"] not in refs(since=iso(whole + timedelta(seconds=1)))
    assert ev["ref"] not in refs(since=iso(whole - timedelta(seconds=1)), until=iso(whole))
    # The same instant in UTC gives the same answer.
    assert ev["ref"] in refs(since=whole.astimezone(timezone.utc).isoformat(),
                             until=(whole + timedelta(seconds=1)).isoformat())
    # Words and time together.
    assert found(search(recall, mind, "boundary", since=iso(whole))) == [ev["ref"]]
    assert found(search(recall, mind, "boundary", until=iso(whole))) == []
    naive = whole.replace(tzinfo=None).isoformat()
    err = expect_rejected("RECALL_TIME_INVALID", recall.search, mind.context, since=naive)
    assert err.details["field"] == "since"
    expect_rejected("RECALL_TIME_INVALID", recall.search, mind.context, until="yesterday")
    expect_rejected("RECALL_TIME_INVALID", recall.search, mind.context,
                    since=iso(whole), until=iso(whole))


# -- RECALL-03 ---------------------------------------------------------------------------
def test_recall_03_cursor_pages_through_the_same_set(recall, mind, expect_rejected):
    refs = {mind.event(f"incident report number {i} 故障报告")["ref"] for i in range(23)}
    first = search(recall, mind, "incident 故障", limit=5, mode="lexical")
    pages, seen, reply = 1, found(first), first
    while reply["next_cursor"]:
        reply = recall.search(mind.context, "incident 故障", limit=5, mode="lexical",
                              cursor=reply["next_cursor"])
        seen += found(reply)
        pages += 1
    assert pages == 5 and len(seen) == len(set(seen)) == 23 and set(seen) == refs
    # Time-only paging, oldest first.
    since = "2000-01-01T00:00:00+08:00"
    page1 = search(recall, mind, since=since, limit=10, kinds=["event"])
    page2 = recall.search(mind.context, since=since, limit=10, kinds=["event"],
                          cursor=page1["next_cursor"])
    seqs = [int(r[2:]) for r in found(page1) + found(page2)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 20
    # A cursor is bound to its parameters and is opaque.
    cur = first["next_cursor"]
    expect_rejected("RECALL_CURSOR_INVALID", recall.search, mind.context, "other words",
                    limit=5, cursor=cur)
    expect_rejected("RECALL_CURSOR_INVALID", recall.search, mind.context, "incident 故障",
                    limit=6, cursor=cur)
    expect_rejected("RECALL_CURSOR_INVALID", recall.search, mind.context, "incident 故障",
                    limit=5, cursor=cur[:-3] + "abc")
    # Once the index moved on, the cursor still pages the set its first page saw: the
    # new report is in no page of it, and nothing is mixed from two sets (a cursor past
    # its kept searcher is refused as stale: tests/unit/test_recall_pins.py).
    late = mind.event("incident report number 99")["ref"]
    caught_up(recall, mind.context)
    rest, reply = [], {"next_cursor": cur}
    while reply["next_cursor"]:
        reply = recall.search(mind.context, "incident 故障", limit=5, mode="lexical",
                              cursor=reply["next_cursor"])
        rest += found(reply)
    assert found(first) + rest == seen and late not in rest
    assert late in found(search(recall, mind, "incident 故障", limit=30, mode="lexical"))


# -- RECALL-04 ---------------------------------------------------------------------------
def test_recall_04_full_content_in_pages_by_ref_and_id(recall, mind, expect_rejected):
    text = "".join(f"第{i}行 line {i} of the build log\n" for i in range(2000))
    ev = mind.event(text, kind="tool-result")
    chunks, offset = [], 0
    while True:
        page = recall.read(mind.context, ev["ref"], offset=offset, limit=7000)
        assert page["total_chars"] == len(text) and page["offset"] == offset
        chunks.append(page["text"])
        if not page["has_more"]:
            break
        offset = page["next_offset"]
    assert "".join(chunks) == text and len(chunks) == -(-len(text) // 7000)
    by_id = recall.read(mind.context, ev["id"], limit=100)
    assert by_id["ref"] == ev["ref"] and by_id["text"] == text[:100]
    assert by_id["event_kind"] == "tool-result" and by_id["kind"] == "event"
    mind.tx('(create memory/log (summary "build ok"))')
    frame = recall.read(mind.context, "memory/log")
    assert frame["kind"] == "frame" and frame["text"] == mind.frame("memory/log")["body"]
    expect_rejected("EVENT_NOT_FOUND", recall.read, mind.context, "@e999999")
    expect_rejected("FRAME_NOT_FOUND", recall.read, mind.context, "no-such-thing")
    expect_rejected("RECALL_LIMIT_INVALID", recall.read, mind.context, ev["ref"],
                    limit=(1 << 20) + 1)
    expect_rejected("RECALL_LIMIT_INVALID", recall.read, mind.context, ev["ref"],
                    offset=len(text) + 1)


# -- the release graph of the README walk-through ------------------------------------------
def release_graph(mind) -> dict:
    a = mind.event("npm test: 120 passed; npm run build: ok; dist/ verified", kind="tool-result")
    b = mind.event("pnpm --filter web test: ok; pnpm --filter web build: ok; apps/web/dist/",
                   kind="tool-result")
    mind.tx(f'(derive release-case-a (from {a["ref"]}) (layout single-package) '
            f'(test "npm test") (build "npm run build") (artifact "dist/")) '
            f'(derive release-case-b (from {b["ref"]}) (layout workspace) '
            f'(test "pnpm --filter web test") (artifact "apps/web/dist/"))')
    mind.tx('(derive release-procedure (from release-case-a release-case-b) '
            '(steps "测试通过后构建，核验本次产物，再打包。") '
            '(applicability "先核对当前项目布局和脚本，再选择对应分支。")) '
            '(relate release-procedure supersedes release-case-a) '
            '(relate release-procedure supersedes release-case-b) '
            '(retire release-case-a release-case-b)', reason="将两次发布经验归纳为可复用流程")
    return {"a": a["ref"], "b": b["ref"]}


def by_id(reply: dict) -> dict:
    return {n["ref"] or n["id"]: n for n in reply["nodes"]}


# -- RECALL-05 ---------------------------------------------------------------------------
def test_recall_05_bfs_ancestors_descendants_both_and_cycles(recall, mind):
    ev = release_graph(mind)
    up = recall.traverse(mind.context, "release-procedure", depth=2, direction="ancestors")
    nodes = by_id(up)
    assert [n["depth"] for n in up["nodes"]] == sorted(n["depth"] for n in up["nodes"])
    assert {k: n["depth"] for k, n in nodes.items()} == {
        "release-procedure": 0, "release-case-a": 1, "release-case-b": 1, ev["a"]: 2, ev["b"]: 2}
    assert nodes["release-case-a"]["state"] == "retired"  # retired nodes stay reachable
    edges = {(e["kind"], e["from"], e["to"], e["name"]) for e in up["edges"]}
    assert ("source", "release-case-a", ev["a"], "sources") in edges
    assert ("relation", "release-procedure", "release-case-b", "supersedes") in edges
    assert len(up["edges"]) == len(edges)
    shallow = recall.traverse(mind.context, "release-procedure", depth=1)
    assert set(by_id(shallow)) == {"release-procedure", "release-case-a", "release-case-b"}
    # descendants: who cites a case, who relates to it.
    down = recall.traverse(mind.context, "release-case-b", depth=2, direction="descendants")
    assert set(by_id(down)) == {"release-case-b", "release-procedure"}
    assert recall.traverse(mind.context, "release-procedure", direction="descendants",
                           depth=4)["nodes"][1:] == []
    # both: from a case, up to its event and down to the procedure, then on to the other case.
    both = by_id(recall.traverse(mind.context, "release-case-a", depth=2, direction="both"))
    assert {k: n["depth"] for k, n in both.items()} == {
        "release-case-a": 0, ev["a"]: 1, "release-procedure": 1, "release-case-b": 2}
    # A cycle: each node is expanded once, the traversal ends.
    mind.tx("(relate release-case-a informs release-procedure)")
    cyc = recall.traverse(mind.context, "release-procedure", depth=4, direction="both")
    ids = [n["ref"] or n["id"] for n in cyc["nodes"]]
    assert len(ids) == len(set(ids)) == 5
    assert ("relation", "release-case-a", "release-procedure", "informs") in \
        {(e["kind"], e["from"], e["to"], e["name"]) for e in cyc["edges"]}


# -- RECALL-06 ---------------------------------------------------------------------------
def test_recall_06_limits_and_pages_of_whole_nodes(recall, mind, expect_rejected):
    release_graph(mind)
    expect_rejected("RECALL_LIMIT_INVALID", recall.traverse, mind.context,
                    "release-procedure", depth=5)
    expect_rejected("RECALL_LIMIT_INVALID", recall.traverse, mind.context,
                    "release-procedure", max_nodes=129)
    expect_rejected("RECALL_DIRECTION_INVALID", recall.traverse, mind.context,
                    "release-procedure", direction="sideways")
    expect_rejected("FRAME_NOT_FOUND", recall.traverse, mind.context, "no-such-frame")
    assert len(recall.traverse(mind.context, "release-procedure", max_nodes=128)["nodes"]) == 5
    whole = recall.traverse(mind.context, "release-procedure", depth=2)
    # Paging by node count returns every node exactly once, in the same order.
    seen, edges, reply = [], [], recall.traverse(mind.context, "release-procedure", depth=2,
                                                 max_nodes=2)
    while True:
        assert len(reply["nodes"]) <= 2
        seen += reply["nodes"]
        edges += reply["edges"]
        if not reply["next_cursor"]:
            break
        reply = recall.traverse(mind.context, "release-procedure", depth=2, max_nodes=2,
                                cursor=reply["next_cursor"])
    assert seen == whole["nodes"] and edges == whole["edges"]
    # Paging by bytes never splits a node: a big event arrives whole, alone on its page.
    big = "x" * 30000
    log = mind.event(big, kind="tool-result")
    mind.tx(f"(derive big-case (from {log['ref']}) (note big))")
    pages, cursor = [], ""
    while True:
        page = recall.traverse(mind.context, "big-case", include_events=True, max_bytes=4096,
                               cursor=cursor)
        pages.append(page)
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert [len(p["nodes"]) for p in pages] == [1, 1]
    assert pages[1]["nodes"][0]["text"] == big and pages[1]["page_bytes"] > 4096


# -- RECALL-07 ---------------------------------------------------------------------------
def test_recall_07_nodes_carry_body_revision_sources_state(recall, mind):
    ev = release_graph(mind)
    nodes = by_id(recall.traverse(mind.context, "release-procedure", include_bodies=True))
    proc = nodes["release-procedure"]
    assert proc["kind"] == "frame" and proc["revision"] == 1 and proc["state"] == "active"
    assert proc["sources"] == ["release-case-a", "release-case-b"]
    assert proc["body"] == mind.frame("release-procedure")["body"]
    assert nodes["release-case-b"]["state"] == "retired"
    leaf = nodes[ev["a"]]
    assert leaf["kind"] == "event" and leaf["ref"] == ev["a"] and leaf["text"] == ""
    assert leaf["preview"].startswith("npm test: 120 passed") and leaf["event_kind"] == "tool-result"
    full = by_id(recall.traverse(mind.context, "release-procedure", include_events=True))
    assert full[ev["a"]]["text"] == mind.client.get_event(mind.context, ev["a"])["text"]
    no_bodies = by_id(recall.traverse(mind.context, "release-procedure"))
    assert no_bodies["release-procedure"]["body"] == "" and \
        "测试通过后构建" in no_bodies["release-procedure"]["preview"]


# -- RECALL-08 ---------------------------------------------------------------------------
def test_recall_08_traversal_cursor_bound_to_query_and_mind_version(recall, mind,
                                                                     expect_rejected):
    release_graph(mind)
    page = recall.traverse(mind.context, "release-procedure", max_nodes=2)
    cursor = page["next_cursor"]
    assert cursor and page["version"]
    expect_rejected("RECALL_CURSOR_INVALID", recall.traverse, mind.context,
                    "release-procedure", max_nodes=2, direction="both", cursor=cursor)
    expect_rejected("RECALL_CURSOR_INVALID", recall.traverse, mind.context,
                    "release-case-a", max_nodes=2, cursor=cursor)
    # Appending an input does not change the graph: the cursor still works.
    mind.event("an unrelated message")
    second = recall.traverse(mind.context, "release-procedure", max_nodes=2, cursor=cursor)
    whole = recall.traverse(mind.context, "release-procedure", max_nodes=4)
    assert [n["id"] for n in second["nodes"]] == [n["id"] for n in whole["nodes"][2:4]]
    mind.tx("(relate release-case-a informs release-case-b)")
    err = expect_rejected("RECALL_CURSOR_STALE", recall.traverse, mind.context,
                          "release-procedure", max_nodes=2, cursor=cursor)
    assert err.details["issued"] == page["version"]
    restarted = recall.traverse(mind.context, "release-procedure", max_nodes=2)
    assert restarted["version"] != page["version"]


# -- RECALL-09 ---------------------------------------------------------------------------
def test_recall_09_recall_for_an_evaluation_is_a_new_observation(recall, mind, expect_rejected):
    release_graph(mind)
    mind.event("what did the workspace build produce?")
    act = mind.activate()
    frames_before = mind.client.list_frames(mind.context)
    status_before = mind.status()
    evaluation = {"session": "s1", "activation": act["id"]}
    s = search(recall, mind, "workspace 产物 artifact", evaluation=evaluation)
    t = recall.traverse(mind.context, "release-procedure", evaluation=evaluation)
    r = recall.read(mind.context, "release-case-b", evaluation=evaluation)
    for reply, op in ((s, "search"), (t, "frame"), (r, "read")):
        obs = mind.client.get_event(mind.context, reply["observation_ref"])
        assert obs["kind"] == "recall" and obs["session"] == "s1" and obs["state"] == "active"
        assert f'"recall": "{op}"' in obs["text"]
    assert mind.client.list_frames(mind.context) == frames_before
    after = mind.status()
    assert after["revision"] == status_before["revision"]
    assert after["frames_by_state"] == status_before["frames_by_state"]
    # Recall observations arrive in the inbox and never advance the cognitive clock.
    nxt = mind.activate()
    assert set(nxt["claimed"]) == {s["observation_ref"], t["observation_ref"],
                                   r["observation_ref"]}
    assert nxt["tick_advanced"] is False
    # Without an evaluation nothing is recorded.
    assert recall.read(mind.context, "release-case-b")["observation_ref"] == ""
    expect_rejected("RECALL_ACTIVATION_INVALID", recall.search, mind.context, "x",
                    evaluation={"session": "s1", "activation": "a999"})
    expect_rejected("RECALL_ACTIVATION_INVALID", recall.search, mind.context, "x",
                    evaluation={"session": "s1"})
    expect_rejected("RECALL_ACTIVATION_INVALID", recall.search, mind.context, "x",
                    evaluation={"session": "s2", "activation": act["id"]})


# -- RECALL-10 ---------------------------------------------------------------------------
def _authoritative(storage: str, context: str) -> dict:
    channel = grpc.insecure_channel(storage)
    try:
        with StorageClient(channel, timeout=30).reader(context) as r:
            return {t: list(r.scan(t)) for t in TABLES}
    finally:
        channel.close()


QUERIES = ["沙箱 权限", "sandbox permission", "release 发布", "npm test", "测试 通过",
           "workspace", "cn-hangzhou", "incident"]


def _answers(recall, context: str) -> list:
    """Per query the set of hits (BM25 statistics of the live index still count frame
    versions replaced since its last merge, so scores may differ in the last digits),
    and the exact time-ordered listing."""
    return [sorted((h["ref"] or h["id"], h["state"], h["preview"]) for h in
                   recall.search(context, q, limit=50)["results"]) for q in QUERIES] + \
        [found(recall.search(context, since="2000-01-01T00:00:00+08:00", limit=100))]


def test_recall_10_index_is_derived_and_rebuild_changes_nothing(recall, mind, endpoints):
    release_graph(mind)
    mind.event("部署到 cn-hangzhou 时沙箱权限配置失败 sandbox permission denied")
    mind.tx('(create memory/sandbox (note "沙箱权限配置失败"))')
    mind.tx('(revise memory/sandbox (note "沙箱权限配置失败，已修复 sandbox permission fixed"))')
    head = mind.status()["commit_seq"]
    st = caught_up(recall, mind.context)
    assert st["position"] == st["head"] == head and st["lag"] == 0
    assert st["frames"] == 4 and st["events"] == mind.status()["event_count"]
    assert st["documents"] == st["events"] + st["frames"] and st["terms"] > 0
    assert st["last_rebuild"] is None
    before_answers = _answers(recall, mind.context)
    assert found(recall.search(mind.context, "沙箱 权限", mode="lexical"))[0] == "memory/sandbox"
    before = _authoritative(endpoints.storage, mind.context)
    rebuilt = recall.rebuild(mind.context)
    assert _authoritative(endpoints.storage, mind.context) == before  # not one authoritative byte
    assert rebuilt["last_rebuild"]["documents"] == st["documents"]
    assert rebuilt["documents"] == st["documents"] and rebuilt["position"] == head
    caught_up(recall, mind.context)  # the vector leg, rebuilt too, follows on its own
    assert _answers(recall, mind.context) == before_answers
    assert found(recall.search(mind.context, "沙箱 权限", mode="lexical"))[0] == "memory/sandbox"
    # Commits after the rebuild are picked up again from the change feed.
    e = mind.event("post-rebuild 沙箱 note")
    assert found(search(recall, mind, "post-rebuild", mode="lexical")) == [e["ref"]]


def test_recall_10_follower_resumes_exactly_after_restart(fresh_servers):
    from morphz.services.transaction.client import TransactionClient
    servers = fresh_servers()

    def start():
        at = servers.start().endpoints
        channels = grpc.insecure_channel(at.transaction), grpc.insecure_channel(at.recall)
        return channels, TransactionClient(channels[0]), RecallClient(channels[1])

    channels, tx, rc = start()
    tx.create_context("c")
    for i in range(5):
        tx.append_event("c", "s1", "user-message", f"before restart {i}")
    first = caught_up(rc, "c")
    for ch in channels:
        ch.close()
    servers.stop()
    channels, tx, rc = start()
    try:
        assert rc.inspect("c")["position"] == first["position"]  # persisted with the index
        for i in range(3):
            tx.append_event("c", "s1", "user-message", f"after restart {i}")
        st = caught_up(rc, "c")
        assert st["events"] == first["events"] + 3 and st["documents"] == st["events"]
        assert len(rc.search("c", "restart", limit=100)["results"]) == 8
    finally:
        for ch in channels:
            ch.close()
        servers.stop()



def test_recall_05_traverses_from_a_frame_with_the_longest_valid_id(recall, mind):
    """Frame ids may be up to 200 characters (context-tx): traversal takes any of them."""
    long_id = "f" * 200
    mind.tx(f"(create {long_id} (note long id))")
    walk = recall.traverse(mind.context, long_id, depth=1, direction="both")
    assert [n["id"] for n in walk["nodes"]] == [long_id]
