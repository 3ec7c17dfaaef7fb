"""SC-Core's recall requirements (RECALL-01..13) and the audit (AUDIT-01), through the
Driver. Every search names the version it must see (CaseRun.search), so no case waits
on the index by sleeping."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from morphz_conformance.driver import Evaluation
from morphz_conformance.registry import CaseRun, case

CST = timezone(timedelta(hours=8))


def _release_graph(t: CaseRun, ctx: str) -> dict[str, str]:
    """Two release cases derived from tool results, induced into one procedure that
    supersedes and retires them (the README walk-through's graph)."""
    d = t.driver
    a = d.append(ctx, "s1", "tool-result", "npm test: 120 passed; npm run build: ok; dist/")
    b = d.append(ctx, "s1", "tool-result", "pnpm --filter web test: ok; apps/web/dist/")
    t.tx(ctx, f'(derive release-case-a (from {a.ref}) (layout single-package)) '
              f'(derive release-case-b (from {b.ref}) (layout workspace) (artifact "apps/web/dist/"))')
    t.tx(ctx, '(derive release-procedure (from release-case-a release-case-b) '
              '(steps "测试通过后构建，核验本次产物，再打包。")) '
              '(relate release-procedure supersedes release-case-a) '
              '(relate release-procedure supersedes release-case-b) '
              '(retire release-case-a release-case-b)', reason="归纳为可复用流程")
    return {"a": a.ref, "b": b.ref}


@case("RECALL-01", "lexical search over events and frames, retired included, CJK/English/mixed")
def recall_01_lexical_search(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, '(create memory/sandbox (note "沙箱权限配置失败")) (create memory/other (note "网络超时"))')
    mixed = d.append(ctx, "s1", "user-message",
                     "部署到 cn-hangzhou 时 sandbox permission 检查失败，重试三次后超时")
    d.append(ctx, "s1", "user-message", "unrelated: the weather is fine")
    hits = t.search(ctx, "沙箱 权限", kinds=["frame"]).keys
    t.check(hits and hits[0] == "memory/sandbox" and "memory/other" not in hits,
            f"a Chinese query finds the frame body: {hits}")
    for q in ("sandbox permission", "重试 超时", "cn-hangzhou"):
        t.eq(t.search(ctx, q, kinds=["event"]).keys[:1], [mixed.ref], f"query {q!r}")
    t.eq(t.search(ctx, "ＳＡＮＤＢＯＸ", kinds=["event"]).keys[:1], [mixed.ref],
         "full-width letters normalize like the index")
    log = d.append(ctx, "s1", "tool-result", "flaky 沙箱 test log: permission denied")
    t.tx(ctx, f'(derive memory/new (from memory/sandbox {log.ref}) (note "new plan")) '
              '(relate memory/new supersedes memory/sandbox) '
              f'(retire memory/sandbox {log.ref})', reason="superseded")
    retired = set(t.search(ctx, "沙箱 sandbox", states=["retired"]).keys)
    t.eq(retired, {"memory/sandbox", log.ref}, "retired frames and events are found")
    t.rejected("RECALL_QUERY_INVALID", d.search, ctx, "")


@case("RECALL-02", "time range: since inclusive, until exclusive; a time without offset rejected")
def recall_02_time_range(t: CaseRun):
    d, ctx = t.driver, t.context()
    ev = d.event(ctx, d.append(ctx, "s1", "user-message", "time boundary probe").ref)
    at = datetime.fromisoformat(ev.time.replace("Z", "+00:00")).astimezone(CST)
    whole = at.replace(microsecond=0)

    def refs(since="", until=""):
        return t.search(ctx, since=since, until=until, kinds=["event"]).keys
    t.check(ev.ref in refs(since=at.isoformat()), "since is inclusive")
    t.check(ev.ref not in refs(until=at.isoformat()), "until is exclusive")
    t.check(ev.ref in refs(since=whole.isoformat(),
                           until=(whole + timedelta(seconds=1)).isoformat()), "inside the range")
    t.check(ev.ref in refs(since=whole.astimezone(timezone.utc).isoformat(),
                           until=(whole + timedelta(seconds=1)).isoformat()),
            "the same instant in another offset")
    t.rejected("RECALL_TIME_INVALID", d.search, ctx, since=whole.replace(tzinfo=None).isoformat())
    t.rejected("RECALL_TIME_INVALID", d.search, ctx, until="yesterday")


@case("RECALL-03", "cursors are opaque, page the same evidence set, bound to the parameters")
def recall_03_cursors(t: CaseRun):
    d, ctx = t.driver, t.context()
    refs = {d.append(ctx, "s1", "user-message", f"incident report number {i} 故障报告").ref
            for i in range(13)}
    first = t.search(ctx, "incident 故障", limit=5)
    seen, page, pages = list(first.keys), first, 1
    while page.next_cursor:
        page = d.search(ctx, "incident 故障", limit=5, cursor=page.next_cursor)
        seen += page.keys
        pages += 1
    t.eq((pages, len(seen), set(seen)), (3, 13, refs), "pages, hits, the evidence set")
    t.rejected("RECALL_CURSOR_INVALID", d.search, ctx, "other words", limit=5,
               cursor=first.next_cursor)
    t.rejected("RECALL_CURSOR_INVALID", d.search, ctx, "incident 故障", limit=6,
               cursor=first.next_cursor)
    late = d.append(ctx, "s1", "user-message", "incident report number 99").ref
    rest, page = [], first
    while page.next_cursor:
        page = d.search(ctx, "incident 故障", limit=5, cursor=page.next_cursor)
        rest += page.keys
    t.check(late not in rest and list(first.keys) + rest == seen,
            "a cursor keeps paging the set its first page saw")


@case("RECALL-04", "full content in pages by @eN or full id")
def recall_04_paged_reads(t: CaseRun):
    d, ctx = t.driver, t.context()
    text = "".join(f"第{i}行 line {i} of the build log\n" for i in range(800))
    ev = d.append(ctx, "s1", "tool-result", text)
    chunks, offset = [], 0
    while True:
        page = d.read(ctx, ev.ref, offset=offset, limit=7000)
        t.eq((page.total_chars, page.offset), (len(text), offset), "page position")
        chunks.append(page.text)
        if not page.has_more:
            break
        offset = page.next_offset
    t.eq("".join(chunks), text, "the pages put together")
    by_id = d.read(ctx, ev.id, limit=100)
    t.eq((by_id.ref, by_id.text), (ev.ref, text[:100]), "a read by full id")
    t.tx(ctx, '(create memory/log (summary "build ok"))')
    frame = d.read(ctx, "memory/log")
    t.eq((frame.kind, frame.text), ("frame", d.frame(ctx, "memory/log").body), "a frame read")
    t.rejected("EVENT_NOT_FOUND", d.read, ctx, "@e999999")


@case("RECALL-05", "BFS traversal: ancestors, descendants, both; cycles visited once")
def recall_05_traversal(t: CaseRun):
    d, ctx = t.driver, t.context()
    ev = _release_graph(t, ctx)
    up = d.traverse(ctx, "release-procedure", depth=2, direction="ancestors")
    depths = {n.key: n.depth for n in up.nodes}
    t.eq(depths, {"release-procedure": 0, "release-case-a": 1, "release-case-b": 1,
                  ev["a"]: 2, ev["b"]: 2}, "ancestors by depth")
    t.eq([n.depth for n in up.nodes], sorted(n.depth for n in up.nodes), "breadth first")
    edges = {(e.kind, e.source, e.target, e.name) for e in up.edges}
    t.check(("relation", "release-procedure", "release-case-b", "supersedes") in edges,
            f"the relation edge: {edges}")
    down = d.traverse(ctx, "release-case-b", depth=2, direction="descendants")
    t.eq({n.key for n in down.nodes}, {"release-case-b", "release-procedure"}, "descendants")
    both = d.traverse(ctx, "release-case-a", depth=2, direction="both")
    t.eq({n.key: n.depth for n in both.nodes},
         {"release-case-a": 0, ev["a"]: 1, "release-procedure": 1, "release-case-b": 2}, "both")
    t.tx(ctx, "(relate release-case-a informs release-procedure)")
    cyc = [n.key for n in d.traverse(ctx, "release-procedure", depth=4, direction="both").nodes]
    t.eq((len(cyc), len(set(cyc))), (5, 5), "a cycle: each node once")


@case("RECALL-06", "traversal limits: depth <= 4, max_nodes <= 128, byte pages of whole nodes")
def recall_06_traversal_limits(t: CaseRun):
    d, ctx = t.driver, t.context()
    _release_graph(t, ctx)
    t.rejected("RECALL_LIMIT_INVALID", d.traverse, ctx, "release-procedure", depth=5)
    t.rejected("RECALL_LIMIT_INVALID", d.traverse, ctx, "release-procedure", max_nodes=129)
    whole = d.traverse(ctx, "release-procedure", depth=2)
    seen, page = [], d.traverse(ctx, "release-procedure", depth=2, max_nodes=2)
    while True:
        t.check(len(page.nodes) <= 2, "a page holds at most max_nodes")
        seen += page.nodes
        if not page.next_cursor:
            break
        page = d.traverse(ctx, "release-procedure", depth=2, max_nodes=2,
                          cursor=page.next_cursor)
    t.eq(seen, list(whole.nodes), "pages by node count")
    big = "x" * 30000
    log = d.append(ctx, "s1", "tool-result", big)
    t.tx(ctx, f"(derive big-case (from {log.ref}) (note big))")
    pages, cursor = [], ""
    while True:
        p = d.traverse(ctx, "big-case", include_events=True, max_bytes=4096, cursor=cursor)
        pages.append(p)
        cursor = p.next_cursor
        if not cursor:
            break
    t.eq([len(p.nodes) for p in pages], [1, 1], "a big node alone on its page")
    t.eq(pages[1].nodes[0].text, big, "a big node is never split")


@case("RECALL-07", "nodes carry body, revision, sources, state; event leaves ref and preview")
def recall_07_nodes(t: CaseRun):
    d, ctx = t.driver, t.context()
    ev = _release_graph(t, ctx)
    nodes = {n.key: n for n in d.traverse(ctx, "release-procedure", include_bodies=True).nodes}
    proc = nodes["release-procedure"]
    t.eq((proc.kind, proc.revision, proc.state, proc.sources),
         ("frame", 1, "active", ("release-case-a", "release-case-b")), "the frame node")
    t.eq(proc.body, d.frame(ctx, "release-procedure").body, "the frame node's body")
    t.eq(nodes["release-case-b"].state, "retired", "a retired node's state")
    leaf = nodes[ev["a"]]
    t.check(leaf.kind == "event" and leaf.text == "" and leaf.preview.startswith("npm test"),
            f"an event leaf carries its ref and preview: {leaf}")
    full = {n.key: n for n in d.traverse(ctx, "release-procedure", include_events=True).nodes}
    t.eq(full[ev["a"]].text, d.event(ctx, ev["a"]).text, "include_events: the full text")


@case("RECALL-08", "a traversal cursor is bound to the query and the mind version")
def recall_08_traversal_cursor_stale(t: CaseRun):
    d, ctx = t.driver, t.context()
    _release_graph(t, ctx)
    page = d.traverse(ctx, "release-procedure", max_nodes=2)
    t.check(page.next_cursor, "a first page with more to come")
    t.rejected("RECALL_CURSOR_INVALID", d.traverse, ctx, "release-case-a", max_nodes=2,
               cursor=page.next_cursor)
    t.tx(ctx, "(relate release-case-a informs release-case-b)")
    t.rejected("RECALL_CURSOR_STALE", d.traverse, ctx, "release-procedure", max_nodes=2,
               cursor=page.next_cursor)


@case("RECALL-09", "a recall for an evaluation arrives as a new observation; no frame changes")
def recall_09_recall_is_an_observation(t: CaseRun):
    d, ctx = t.driver, t.context()
    _release_graph(t, ctx)
    d.append(ctx, "s1", "user-message", "what did the workspace build produce?")
    act = d.activate(ctx, "s1")
    frames, revision = d.frames(ctx), t.revision(ctx)
    ev = Evaluation("s1", act.id)
    s = t.search(ctx, "workspace artifact", evaluation=ev)
    r = d.read(ctx, "release-case-b", evaluation=ev)
    for ref in (s.observation_ref, r.observation_ref):
        obs = d.event(ctx, ref)
        t.eq((obs.kind, obs.session), ("recall", "s1"), "the recall observation")
    t.eq((d.frames(ctx), t.revision(ctx)), (frames, revision), "no frame changed")
    nxt = d.activate(ctx, "s1")
    t.eq(set(nxt.claimed), {s.observation_ref, r.observation_ref}, "they arrive as inputs")
    t.check(not nxt.tick_advanced, "recall observations do not advance the tick")


@case("RECALL-10", "the index is derived: inspect shows its lag; rebuild changes nothing else")
def recall_10_index_is_derived(t: CaseRun):
    d, ctx = t.driver, t.context()
    _release_graph(t, ctx)
    t.tx(ctx, '(create memory/sandbox (note "沙箱权限配置失败 sandbox"))')
    before = t.search(ctx, "sandbox 沙箱 release", limit=50).keys
    st = d.index_status(ctx)
    t.eq((st.position, st.lag), (st.head, 0), "the index caught up with the store")
    frames, status = d.frames(ctx), d.status(ctx)
    d.rebuild_index(ctx)
    t.eq((d.frames(ctx), d.status(ctx).revision, d.status(ctx).event_count),
         (frames, status.revision, status.event_count), "the rebuild changed no event or frame")
    t.eq(sorted(t.search(ctx, "sandbox 沙箱 release", limit=50).keys), sorted(before),
         "the same results after the rebuild")
    e = d.append(ctx, "s1", "user-message", "post-rebuild note")
    t.eq(t.search(ctx, "post-rebuild").keys, [e.ref], "commits after the rebuild are indexed")


@case("RECALL-11", "an occurred time (explicit offset) is kept apart and filtered on")
def recall_11_occurred_time(t: CaseRun):
    d, ctx = t.driver, t.context()
    old = d.append(ctx, "s1", "external", "incident at the source",
                   occurred_at="2020-05-01T10:00:00+08:00")
    now = d.append(ctx, "s1", "external", "incident recorded now")
    t.rejected("CONTEXT_INPUT_INVALID", d.append, ctx, "s1", "external", "x",
               occurred_at="2020-05-01T10:00:00")
    hits = t.search(ctx, since="2020-05-01T00:00:00+08:00", until="2020-05-02T00:00:00+08:00",
                    kinds=["event"])
    t.eq(hits.keys, [old.ref], "the range filters on occurred time")
    t.eq(hits.hits[0].time_basis, "occurred", "the hit says which time it used")
    recent = t.search(ctx, "incident recorded", since="2021-01-01T00:00:00Z", kinds=["event"])
    t.check(now.ref in recent.keys and old.ref not in recent.keys,
            "recorded time where none was given")
    t.eq(recent.hits[recent.keys.index(now.ref)].time_basis, "recorded", "its basis")


@case("RECALL-12", "a search never finds its own earlier results")
def recall_12_no_self_results(t: CaseRun):
    d, ctx = t.driver, t.context()
    target = d.append(ctx, "s1", "user-message", "the sandbox quota is 40 GiB per tenant")
    act = d.activate(ctx, "s1")
    first = t.search(ctx, "sandbox quota", evaluation=Evaluation("s1", act.id))
    t.eq(first.keys, [target.ref], "the first search")
    t.check("sandbox" in d.event(ctx, first.observation_ref).text,
            "the observation holds the hit's words")
    second = t.search(ctx, "sandbox quota", evaluation=Evaluation("s1", act.id))
    t.eq(second.keys, [target.ref], "the second search does not find the first's results")


@case("RECALL-13", "a search after one's own write sees it")
def recall_13_read_your_writes(t: CaseRun):
    d, ctx = t.driver, t.context()
    for i in range(8):
        w = d.append(ctx, "s1", "user-message", f"note number {i} marker{i}")
        page = d.search(ctx, f"marker{i}", min_commit_seq=w.commit_seq)
        t.check(w.ref in page.keys or page.unclosed_lag > 0,
                f"the search after write {i} neither saw it nor named the lag it left")


@case("AUDIT-01", "audit replays the events; a tampered projection is reported, not repaired",
      needs=("tamper",))
def audit_01_tampering_reported(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create release (goal ship-v1) (stage waiting-tests)) (create other (x))")
    ev = d.append(ctx, "s1", "tool-result", "report")
    d.activate(ctx, "s1")
    t.tx(ctx, f"(derive test-result (from {ev.ref}) (tests passed)) "
              f"(relate test-result supports release) (retire {ev.ref} other)", reason="r")
    t.check(d.audit(ctx).match, f"the audit of an untouched context: {d.audit(ctx).problems}")
    d.tamper_frame(ctx, "release", "(goal ship-v1) (stage shipped)")
    report = d.audit(ctx)
    t.check(not report.match, "the audit did not report the tampered frame")
    t.check(any("release" in p for p in report.problems),
            f"the audit names the tampered frame: {report.problems}")
    t.eq(d.frame(ctx, "release").body, "(goal ship-v1) (stage shipped)",
         "reported, not silently repaired")
    t.check(not d.audit(ctx).match, "a second audit still reports it")
