"""`morphz context recall ...` and `recall-index ...` as real subprocesses (RECALL-01..10)."""
from __future__ import annotations

import time

from tests.integration.test_cli import run_json


def morphz(address: str, *args: str, expect: int = 0) -> dict:
    return run_json(*args, address=address, expect=expect)


def caught_up(address: str, context: str) -> dict:
    """`recall-index inspect` once both legs hold every commit (bounded: a loaded machine)."""
    deadline = time.monotonic() + 120
    while True:
        st = morphz(address, "context", "recall-index", "inspect", context)
        if st["lag"] == 0 and st.get("vectors", {}).get("lag", 0) == 0:
            return st
        assert time.monotonic() < deadline, f"the index did not catch up: {st}"
        time.sleep(0.05)


def test_recall_cli_search_read_frame_and_index(endpoints, mind):
    address = endpoints.recall  # the recall commands' service
    c = ["--context", mind.context]
    ev = mind.event("部署到 cn-hangzhou 时 sandbox permission 沙箱权限配置失败")
    mind.tx(f'(derive memory/sandbox (from {ev["ref"]}) (note "沙箱权限配置失败"))')
    st = caught_up(address, mind.context)
    assert st["documents"] == st["events"] + st["frames"] and st["frames"] == 1
    hits = morphz(address, "context", "recall", "search", "sandbox permission", "--limit=20",
                  *c)["results"]
    assert ev["ref"] in [h["ref"] for h in hits]
    assert all({"kind", "ref", "id", "state", "score", "time", "preview"} <= set(h) for h in hits)
    frames = morphz(address, "context", "recall", "search", "沙箱 权限", "--kind", "frame", *c)
    assert [h["id"] for h in frames["results"]] == ["memory/sandbox"]
    window = morphz(address, "context", "recall", "search", "--since=2000-08-04T09:00:00+08:00",
                    "--until=2100-08-04T18:00:00+08:00", "--kind", "event", *c)
    assert ev["ref"] in [h["ref"] for h in window["results"]]
    err = morphz(address, "context", "recall", "search", "--since=2026-08-04T09:00:00", *c,
                 expect=1)["error"]
    assert err["reason"] == "RECALL_TIME_INVALID"
    page = morphz(address, "context", "recall", "read", ev["ref"], "--offset", "4", "--limit",
                  "11", *c)
    assert page["text"] == "cn-hangzhou" and page["has_more"]
    graph = morphz(address, "context", "recall", "frame", "memory/sandbox", "--depth=2",
                   "--direction=ancestors", "--include-events", *c)
    assert [n["ref"] or n["id"] for n in graph["nodes"]] == ["memory/sandbox", ev["ref"]]
    assert graph["nodes"][1]["text"].startswith("部署到")
    err = morphz(address, "context", "recall", "frame", "memory/sandbox", "--max-nodes", "129",
                 *c, expect=1)["error"]
    assert err["reason"] == "RECALL_LIMIT_INVALID"
    rebuilt = morphz(address, "context", "recall-index", "rebuild", mind.context)
    assert rebuilt["last_rebuild"]["documents"] == st["documents"] and rebuilt["lag"] == 0


def test_hyb_01_cli_hybrid_search_json_hits_carry_each_legs_rank(endpoints, mind):
    address = endpoints.recall
    c = ["--context", mind.context]
    both = mind.event("the launch is on hold")["ref"]
    only_vector = mind.event("launching tomorrow")["ref"]
    caught_up(address, mind.context)
    hits = morphz(address, "context", "recall", "search", "launch", "--mode", "hybrid",
                  *c)["results"]
    ranks = {h["ref"]: (h["lexical_rank"], h["vector_rank"]) for h in hits}
    assert ranks[both][0] == 1 and ranks[both][1] >= 1
    assert ranks[only_vector][0] == 0 and ranks[only_vector][1] >= 1
    st = morphz(address, "context", "recall-index", "inspect", mind.context)
    assert st["vectors"]["built_by"] == st["embedder"] and st["vectors"]["current"]


def test_recall_13_cli_search_names_the_version_it_must_see(endpoints, mind):
    ev = mind.event("the okapi migration finished")
    seq = mind.status()["commit_seq"]
    found = morphz(endpoints.recall, "context", "recall", "search", "okapi",
                   "--min-commit-seq", str(seq), "--context", mind.context)
    assert [h["ref"] for h in found["results"]] == [ev["ref"]]
    assert found["unclosed_lag"] == 0 and found["index_position"] >= seq
    ahead = morphz(endpoints.recall, "--timeout", "2", "context", "recall", "search", "okapi",
                   "--min-commit-seq", str(seq + 3), "--context", mind.context)
    assert ahead["unclosed_lag"] == 3
