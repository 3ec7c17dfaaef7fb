"""The Assembly extension (seed 004; ASM-01..06): scopes that only narrow, must-read
items, frozen snapshots with hashes and ranges, replay and invalidation, scoped search,
and a session's snapshots listed newest first."""
from __future__ import annotations

import hashlib

from morphz_conformance.driver import Scope
from morphz_conformance.registry import CaseRun, case


@case("ASM-01", "a scope can only be narrowed; a read or search outside it is refused")
def asm_01_scope_only_narrows(t: CaseRun):
    d, ctx = t.driver, t.context()
    ask = d.append(ctx, "s1", "user-message", "ship it")
    log = d.append(ctx, "s1", "tool-result", "build ok")
    d.append(ctx, "s2", "user-message", "s2 secret")
    t.tx(ctx, "(create release (goal ship-v1)) (create notes (x 1))")
    t.rejected("SCOPE_VIOLATION", d.encoding, ctx, "s1", scope=Scope(sessions=("s1", "s2")))
    parent = d.encoding(ctx, "s1", scope=Scope(kinds=("user-message", "tool-result"),
                                               frames=("release",)))
    t.eq(set(parent.keys("frame")), {"release"}, "frames in the narrowed scope")
    child = d.encoding(ctx, "s1", parent_snapshot=parent.snapshot,
                       scope=Scope(kinds=("tool-result",)))
    t.eq(set(child.keys("observation")), {log.ref}, "observations in the narrower scope")
    t.rejected("SCOPE_VIOLATION", d.encoding, ctx, "s1", parent_snapshot=child.snapshot,
               scope=Scope(kinds=("user-message",)))
    t.rejected("SCOPE_VIOLATION", d.encoding, ctx, "s1", parent_snapshot=parent.snapshot,
               scope=Scope(frames=("notes",)))
    t.eq(d.snapshot_read(ctx, child.snapshot, log.ref), "build ok", "a read inside the scope")
    t.rejected("SCOPE_VIOLATION", d.snapshot_read, ctx, child.snapshot, ask.ref)
    t.rejected("SCOPE_VIOLATION", d.snapshot_read, ctx, parent.snapshot, "notes")


@case("ASM-02", "must-read items that do not fit fail naming them; nothing is cut silently")
def asm_02_must_read(t: CaseRun):
    d, ctx = t.driver, t.context()
    big = d.append(ctx, "s1", "tool-result", "y" * 60_000).ref
    small = d.append(ctx, "s1", "tool-result", "z" * 5_000).ref
    err = t.rejected("MUST_READ_MISSING", d.encoding, ctx, "s1", budget_bytes=32_768,
                     must_read=[small, big])
    t.eq(err.details.get("missing"), [big], "the rejection names what does not fit")
    e = d.encoding(ctx, "s1", budget_bytes=32_768, must_read=[small])
    t.eq(e.item("observation", small).residency, "full", "a must-read that fits is whole")
    t.check("z" * 5_000 in e.text, "its whole text is in the encoding")


@case("ASM-03", "freeze: an immutable snapshot with a hash and per-item [start, end) ranges")
def asm_03_snapshot_hash_and_ranges(t: CaseRun):
    d, ctx = t.driver, t.context()
    d.append(ctx, "s1", "user-message", "请发布 v1")
    t.tx(ctx, "(create release (goal ship-v1) (stage waiting-tests))")
    approval = d.append(ctx, "s1", "approval", "approved")
    e = d.encoding(ctx, "s1", scope=Scope(kinds=("user-message", "tool-result")))
    t.eq(e.hash, "sha256:" + hashlib.sha256(e.text.encode()).hexdigest(), "the snapshot hash")
    for it in e.items:
        t.check(0 <= it.start < it.end <= len(e.text), f"range of {it.key}")
        line = e.text[it.start:it.end]
        t.check(line.startswith("(") and line.endswith(")"), f"{it.key}'s range is one form")
    t.check((approval.ref, "outside scope: kind") in e.omitted or
            any(k == approval.ref for k, _ in e.omitted),
            f"the omission is recorded with its reason: {e.omitted}")
    t.tx(ctx, "(revise release (goal ship-v1) (stage shipped))")
    t.eq(d.replay_snapshot(ctx, e.snapshot).replay_hash, e.hash,
         "the snapshot is unchanged by later commits")


@case("ASM-04", "replay gives the same hash; changed or revoked sources invalidate new use")
def asm_04_replay_and_invalidation(t: CaseRun):
    d, ctx = t.driver, t.context()
    d.append(ctx, "s1", "user-message", "ship v1")
    report = d.append(ctx, "s1", "tool-result", "regression: 120 passed")
    t.tx(ctx, "(create notes (n 0))")
    e = d.encoding(ctx, "s1")
    t.check(d.check_snapshot(ctx, e.snapshot).current, "a fresh snapshot is current")
    for i in range(1, 20):
        t.tx(ctx, f"(revise notes (n {i}))")
    t.tx(ctx, f"(retire {report.ref})", reason="digested")
    replay = d.replay_snapshot(ctx, e.snapshot)
    t.check(replay.match and replay.ranges_match and replay.replay_hash == e.hash,
            f"replay 20 commits later: {replay}")
    check = d.check_snapshot(ctx, e.snapshot)
    t.check(not check.current and not check.valid_for_new_use, "changed inputs invalidate it")
    t.eq({k for k, _ in check.changed} >= {"notes", report.ref}, True,
         f"each changed input is named: {check.changed}")
    t.tx(ctx, "(retire-session s1)", reason="done")
    t.check(("s1", "access_revoked") in d.check_snapshot(ctx, e.snapshot).changed,
            "revoked access is named")
    t.rejected("SNAPSHOT_INVALID", d.snapshot_read, ctx, e.snapshot, report.ref)
    t.eq(d.replay_snapshot(ctx, e.snapshot).replay_hash, e.hash, "it stays replayable")


@case("ASM-05", "a blank query is rejected; an empty result says empty_index or no_match")
def asm_05_blank_and_empty(t: CaseRun):
    d, ctx = t.driver, t.context()
    d.append(ctx, "s9", "user-message", "warm up")
    empty = d.encoding(ctx, "s9", scope=Scope(kinds=("approval",)))
    t.rejected("CONTEXT_INPUT_INVALID", d.snapshot_search, ctx, empty.snapshot, "  ")
    t.eq(d.snapshot_search(ctx, empty.snapshot, "anything").empty_reason, "empty_index",
         "nothing in scope")
    d.append(ctx, "s1", "tool-result", "regression: 120 passed")
    e = d.encoding(ctx, "s1")
    miss = d.snapshot_search(ctx, e.snapshot, "kubernetes")
    t.eq((miss.empty_reason, miss.keys), ("no_match", ()), "nothing matches")
    t.check(d.snapshot_search(ctx, e.snapshot, "PASSED").keys, "a match is found")


@case("ASM-06", "a session's snapshots are listed newest first, paged, each with its hash, "
      "activation, budget use and pressure")
def asm_06_snapshots_listed_newest_first(t: CaseRun):
    """Five evaluations of s1 and two of s2, interleaved: s1's listing in pages of two
    holds exactly s1's five, newest first, each as Compile answered it; an activation's
    listing holds its own. (That a page costs the same however many snapshots the context
    holds is not observable from outside without timing; the implementation's own tests
    count what a page reads.)"""
    d, ctx = t.driver, t.context()
    compiled = {"s1": [], "s2": []}
    for i in range(7):
        session = "s2" if i in (2, 5) else "s1"
        d.append(ctx, session, "user-message", f"step {i} of {session}")
        compiled[session].append(d.encoding(ctx, session))
    pages, cursor = [], ""
    while True:
        page = d.list_snapshots(ctx, session="s1", limit=2, cursor=cursor)
        pages.append(page.entries)
        cursor = page.next_cursor
        if not cursor:
            break
        t.check(len(pages) < 10, "the listing's cursor never ends")
    t.eq([len(p) for p in pages], [2, 2, 1], "pages of two")
    listed = [e for p in pages for e in p]
    newest_first = compiled["s1"][::-1]
    t.eq([e.snapshot for e in listed], [e.snapshot for e in newest_first],
         "s1's snapshots, newest first")
    for entry, enc in zip(listed, newest_first):
        t.eq((entry.hash, entry.activation, entry.session),
             (enc.hash, enc.activation, "s1"), f"{enc.snapshot}'s hash, activation, session")
        t.eq((entry.bytes, entry.limit_bytes, entry.level),
             (enc.bytes, enc.pressure.limit_bytes, enc.pressure.level),
             f"{enc.snapshot}'s budget use and pressure")
    times = [e.time for e in listed]
    t.check(all(times), "every entry says when it was frozen")
    one = compiled["s2"][1]
    own = d.list_snapshots(ctx, activation=one.activation)
    t.eq([e.snapshot for e in own.entries], [one.snapshot], "an activation's snapshots")
    t.rejected("ENCODING_CURSOR_INVALID", d.list_snapshots, ctx, session="s2",
               cursor="not-a-cursor")
