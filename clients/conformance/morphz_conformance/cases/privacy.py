"""The Privacy extension (PRIV-01..05): an erasure takes the selected content from every
read and keeps each item's place saying who erased it, why and when; the history still
verifies and nothing else changes; the bytes leave the disk and a backup taken before
does not bring them back; a retention policy erases exactly what it names; a context
exports to the import format and round-trips, and a deleted one frees its name.

Each case plants a word of its own (random letters: found nowhere else on a shared
target) and looks for it afterwards through everything the driver offers."""
from __future__ import annotations

import random
import string
from datetime import datetime, timedelta, timezone
from typing import Iterable

from morphz_conformance.driver import Driver, Event, Rejected
from morphz_conformance.registry import CaseRun, NotApplicable, case

REASON = "erasure request (conformance kit)"


def _word(t: CaseRun) -> str:
    """A word no other text on the target holds (registered as secret: never reported)."""
    rng = random.SystemRandom()
    return t.secret("zq" + "".join(rng.choice(string.ascii_lowercase) for _ in range(12)))


def _absent(t: CaseRun, word: str, where: str, texts: Iterable[str]) -> None:
    for text in texts:
        t.check(word not in text, f"the erased word is still in {where}")


def _plant(t: CaseRun, ctx: str, word: str) -> dict[str, str]:
    """Alice's messages (one secret) holding `word` and a frame derived only from them;
    Bob's message and a frame from it; a frame from both."""
    d = t.driver
    refs = {"a": d.append(ctx, "alice", "user-message", f"my order code is {word} thanks",
                          actor="alice").ref,
            "b": d.append(ctx, "alice", "tool-result", f"lookup found order {word}").ref,
            "s": d.append(ctx, "alice", "user-message", f"card pin {word}", secret=True).ref,
            "k": d.append(ctx, "bob", "user-message", "bob prefers green tea",
                          actor="bob").ref}
    refs["tx"] = t.tx(ctx, f'(derive order (from {refs["a"]} {refs["b"]}) (code "{word}")) '
                           f'(derive drink (from {refs["k"]}) (tea green)) '
                           f'(derive both (from {refs["a"]} {refs["k"]}) (people two)) '
                           "(relate order about drink)").event_ref
    return refs


def _kept_place(t: CaseRun, before: Event, after: Event) -> None:
    """An erased event keeps its envelope: which event, whose, when."""
    for field in ("id", "seq", "ref", "kind", "session", "actor", "time", "occurred_at",
                  "causal_refs", "context"):
        t.eq(getattr(after, field), getattr(before, field), f"{before.ref}'s {field} after "
                                                            "its erasure")


@case("PRIV-01", "an erased item is gone from every read and says who erased it, why, when",
      needs=("erase",))
def priv_01_erased_content_is_gone_from_every_read(t: CaseRun):
    d, ctx, word = t.driver, t.context(), _word(t)
    refs = _plant(t, ctx, word)
    seen = d.encoding(ctx, "alice")
    t.check(word in seen.text, "the encoding shows the planted word before the erasure")
    t.check(t.search(ctx, word).hits, "a search finds the planted word before the erasure")
    before = {k: d.event(ctx, r) for k, r in refs.items()}

    dry = d.erase(ctx, session="alice", reason=REASON, dry_run=True)
    t.check(dry.dry_run and not dry.erasures, f"a dry run commits nothing: {dry}")
    t.eq(set(dry.events), {refs["a"], refs["b"], refs["s"]}, "what a dry run would erase")
    t.check("order" in dry.frames and "drink" not in dry.frames and "both" not in dry.frames,
            f"a dry run's frames: only those derived only from erased events: {dry.frames}")
    t.eq(d.event(ctx, refs["a"]), before["a"], "an event after a dry run")

    done = d.erase(ctx, session="alice", reason=REASON)
    t.check(done.erasures, "the erasure names the erasure it committed")
    t.eq(set(done.events), set(dry.events), "what the erasure took")
    for key in ("a", "b", "s"):
        ev = d.event(ctx, refs[key])
        _kept_place(t, before[key], ev)
        _absent(t, word, f"{ev.ref}'s text", [ev.text])
        t.check(ev.erased is not None, f"{ev.ref} says it was erased")
        t.check(ev.erased.erasure in done.erasures and ev.erased.reason == REASON
                and ev.erased.by and ev.erased.at,
                f"{ev.ref} says which erasure took it, by whom, why and when: {ev.erased}")
    order = d.frame(ctx, "order")
    _absent(t, word, "the derived frame's body", [order.body])
    t.check(order.erased is not None and order.erased.erasure in done.erasures,
            "the derived frame says it was erased")
    t.eq(order.sources, (refs["a"], refs["b"]), "the erased frame's sources")
    t.check(any(r.name == "about" for r in order.relations), "the erased frame's relation")
    _absent(t, word, "every frame", [f.body for f in d.frames(ctx)])
    _absent(t, word, "a search's hits", [h.preview for h in t.search(ctx, "order").hits])
    t.eq(t.search(ctx, word).keys, [], "a search for the erased word")
    _absent(t, word, "a read", [d.read(ctx, refs[k]).text for k in ("a", "b")])
    walk = d.traverse(ctx, "order", include_bodies=True, include_events=True)
    _absent(t, word, "a traversal", [n.body + n.preview + n.text for n in walk.nodes])
    d.append(ctx, "alice", "user-message", "hello again")
    _absent(t, word, "a new encoding", [d.encoding(ctx, "alice").text])
    _absent(t, word, "a read through the snapshot taken before",
            [_snapshot_read(d, ctx, seen.snapshot, refs["a"])])
    exported = d.export(ctx)
    _absent(t, word, "the export", [x.text for x in exported])
    t.eq(sum(x.erased for x in exported), 3, "erased placeholders in the export")
    if "log" in d.capabilities():
        _absent(t, word, "the target's log", [d.target_log()])


def _snapshot_read(d: Driver, ctx: str, snapshot: str, ref: str) -> str:
    try:
        return d.snapshot_read(ctx, snapshot, ref)
    except Rejected as e:  # refusing to read it is fine too, as long as no text comes back
        return e.message


def _everything(d: Driver, ctx: str, refs: Iterable[str]) -> tuple:
    return {r: d.event(ctx, r) for r in refs}, d.frames(ctx)


@case("PRIV-02", "after an erasure the audit matches with the erased count; the rest is "
      "unchanged", needs=("erase",))
def priv_02_history_verifies_and_the_rest_is_unchanged(t: CaseRun):
    d, ctx, other, word = t.driver, t.context(), t.context(), _word(t)
    refs = _plant(t, ctx, word)
    refs["later"] = d.append(ctx, "bob", "tool-result", "bob's kettle boiled").ref
    kept = {"o1": d.append(other, "alice", "user-message", f"alice elsewhere {word}").ref}
    kept["tx"] = t.tx(other, f'(derive note (from {kept["o1"]}) (x "{word}"))').event_ref
    t.eq(d.audit(ctx).erased, 0, "the erased count before any erasure")
    events, frames = _everything(d, ctx, refs.values())
    other_before = _everything(d, other, kept.values())

    done = d.erase(ctx, session="alice", reason=REASON)
    audit = d.audit(ctx)
    t.check(audit.match, f"the audit after the erasure: {audit.problems[:3]}")
    t.check(audit.erased >= len(done.events) == 3,
            f"the audit counts the erased events: {audit.erased} of {done.events}")
    for key, ref in refs.items():
        now = d.event(ctx, ref)
        if ref in done.events:
            _kept_place(t, events[ref], now)
        elif key != "tx":  # the transaction's bodies of frame `order` went with it
            t.eq(now, events[ref], f"{ref}, not erased")
    after = d.frames(ctx)
    t.eq([f.id for f in after], [f.id for f in frames], "the frames, in order")
    for was, now in zip(frames, after):
        if was.id == "order":
            t.eq((now.sources, now.state, now.relations, now.revision),
                 (was.sources, was.state, was.relations, was.revision),
                 "the erased frame's place in the graph")
        else:
            t.eq(now, was, f"frame {was.id}, not derived only from erased events")
    erased_state = _everything(d, ctx, refs.values())
    d.rebuild(ctx)
    t.eq(_everything(d, ctx, refs.values()), erased_state,
         "the projections rebuilt from the history")
    t.check(d.audit(ctx).match, "the audit after a rebuild")
    t.eq(_everything(d, other, kept.values()), other_before, "another context")
    t.check(d.audit(other).match and d.audit(other).erased == 0, "another context's audit")


@case("PRIV-03", "erased bytes leave the disk and a backup taken before does not bring them "
      "back", needs=("erase", "data", "backup"))
def priv_03_erased_bytes_leave_the_disk(t: CaseRun):
    d, ctx, word, kept_word = t.driver, t.context(), _word(t), _word(t)
    gone = d.append(ctx, "alice", "user-message", f"my code word is {word}").ref
    t.tx(ctx, f'(derive code (from {gone}) (word "{word}"))')
    t.check(t.search(ctx, word).hits, "the index holds the word before the erasure")
    if not d.stored_bytes(word.encode()):
        raise NotApplicable("the planted word is not found as bytes in the target's data even "
                            "before the erasure (compressed or encrypted at rest): the kit "
                            "cannot tell whether it leaves")
    d.backup()
    d.append(ctx, "bob", "user-message", f"bob's word is {kept_word}")
    t.search(ctx, kept_word)
    done = d.erase(ctx, session="alice", reason=REASON)
    t.eq(list(done.events), [gone], "the erasure")
    t.eq(d.stored_bytes(word.encode()), [], "files holding the erased word once it is done")
    t.check(d.stored_bytes(kept_word.encode()),
            "the byte search still finds a word written since (it sees the live data)")

    d.restore_backup()  # the backup holds the word; the erasure made since must hold
    ev = d.event(ctx, gone)
    _absent(t, word, "the event restored from the backup", [ev.text])
    t.check(ev.erased is not None, "the restored event says it was erased")
    _absent(t, word, "the restored frame", [d.frame(ctx, "code").body])
    t.eq(t.search(ctx, word).keys, [], "a search of the restored target for the word")
    t.check(d.audit(ctx).match, "the restored target's audit")
    t.eq(d.stored_bytes(word.encode()), [], "files holding the erased word after the restore")


def _ago(now: datetime, days: int) -> str:
    return (now - timedelta(days=days, hours=1)).isoformat(timespec="seconds")


KEPT = {"p80": "protected", "c70": "an active frame's source", "u80": "a kind not named",
        "t10": "younger than the policy's days"}


@case("PRIV-04", "a retention policy erases exactly what it names, never protected items "
      "nor active frames' sources", needs=("retention",))
def priv_04_retention_erases_exactly_what_it_names(t: CaseRun):
    d, ctx, now = t.driver, t.context(), datetime.now(timezone.utc)
    plan = {"t10": ("tool-result", 10), "t45": ("tool-result", 45),
            "t80": ("tool-result", 80), "x60": ("external", 60), "u80": ("user-message", 80),
            "p80": ("tool-result", 80), "c70": ("tool-result", 70),
            "r75": ("tool-result", 75)}
    refs = {k: d.append(ctx, "s1", kind, f"reading {k} of the {kind} feed",
                        occurred_at=_ago(now, age)).ref for k, (kind, age) in plan.items()}
    t.tx(ctx, f'(protect {refs["p80"]}) (derive cited (from {refs["c70"]}) (why "relied on")) '
              f'(derive digest (from {refs["r75"]}) (why "summed up"))')
    t.tx(ctx, "(retire digest)", reason="done with it")
    d.set_retention(ctx, kinds=("tool-result", "external"), days=30)
    events, frames = _everything(d, ctx, refs.values())

    d.apply_retention(ctx)
    due = {refs[k] for k in ("t45", "t80", "x60", "r75")}
    for key, ref in refs.items():
        ev = d.event(ctx, ref)
        if ref in due:
            _kept_place(t, events[ref], ev)
            t.check(ev.erased is not None and f"{key} of the" not in ev.text,
                    f"{key} ({plan[key][0]}, {plan[key][1]} days old) erased by the policy")
        else:
            t.eq(ev, events[ref], f"{key} ({KEPT.get(key, 'not due')}), unchanged")
    t.eq(d.frames(ctx), frames, "the frames (a policy takes raw content only)")
    t.check(d.audit(ctx).match, "the audit after the policy applied")
    applied = _everything(d, ctx, refs.values())
    d.apply_retention(ctx)  # applied again: nothing more is due
    t.eq(_everything(d, ctx, refs.values()), applied, "the context, the policy applied again")


@case("PRIV-05", "a context exports to the import format and round-trips; a deleted one "
      "leaves nothing and frees its name", needs=("export", "delete"))
def priv_05_export_round_trips_and_delete_frees_the_name(t: CaseRun):
    d, ctx, word = t.driver, t.context(), _word(t)
    now = datetime.now(timezone.utc)
    refs = [d.append(ctx, "alice", "user-message", f"alice asks about the {word} invoice",
                     actor="alice", occurred_at=_ago(now, 3)).ref,
            d.append(ctx, "alice", "tool-result", "invoice 1182 is paid",
                     occurred_at=_ago(now, 2)).ref,
            d.append(ctx, "bob", "external", "the bank confirmed the invoice transfer").ref,
            d.append(ctx, "bob", "user-message", "thanks, bob", actor="bob").ref]
    exported = d.export(ctx)
    t.eq(len(exported), len(refs), "exported observations")
    for x, ref in zip(exported, refs):
        ev = d.event(ctx, ref)
        t.eq((x.kind, x.session, x.actor, x.text, x.erased), (ev.kind, ev.session, ev.actor,
                                                               ev.text, False), f"{ref} exported")
        t.eq(_instant(x.occurred_at), _instant(ev.occurred_at or ev.time),
             f"{ref}'s time exported")
    copy = t.context()
    d.import_events(copy, [x.record() for x in exported])
    t.eq(d.export(copy), exported, "the export of the imported copy")
    for query in ("invoice", word, "bob"):
        t.eq(_hit_texts(t, copy, query), _hit_texts(t, ctx, query), f"search {query!r}")

    holds = "data" in d.capabilities() and bool(d.stored_bytes(word.encode()))
    fresh = d.status(t.context()).event_count
    for name in (ctx, copy):
        d.delete_context(name, reason="kit: customer offboarded")
        for call in (d.status, d.frames, d.export):
            t.rejected("CONTEXT_NOT_FOUND", call, name)
        t.rejected("CONTEXT_NOT_FOUND", d.event, name, refs[0])
        t.rejected("CONTEXT_NOT_FOUND", d.search, name, "invoice")
    if holds:
        t.eq(d.stored_bytes(word.encode()), [], "files holding a deleted context's word")
    d.create_context(ctx)  # the name is free, and the new context holds nothing of the old
    t.eq(d.status(ctx).event_count, fresh, "events of a context created again")
    t.eq(d.frames(ctx), [], "frames of a context created again")
    t.eq(t.search(ctx, "invoice").keys, [], "a search of the context created again")
    t.eq(d.export(ctx), [], "the export of the context created again")


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _hit_texts(t: CaseRun, ctx: str, query: str) -> list[tuple[str, str]]:
    return sorted((h.kind, t.driver.event(ctx, h.ref).text if h.kind == "event" else h.id)
                  for h in t.search(ctx, query, limit=50).hits)
