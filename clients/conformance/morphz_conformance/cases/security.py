"""The Security extension (SEC-*): the requirements one principal can check through the
public API (a second principal and no credentials refused, foreign refs, hostile input,
secrets, named limits, the raw store out of reach, namespaces, deadlines)."""
from __future__ import annotations

import threading
import time

from morphz_conformance.driver import DeadlineExceeded, Rejected, Unreachable
from morphz_conformance.registry import CaseRun, case

HOSTILE = (
    "(context-tx (base-version 0) (create f \"unterminated)",
    "(context-tx (base-version 99999999999999999999) (create f))",
    "(context-tx (base-version 0) (explode f))",
    ")" * 10,
    "(" * 5000,
    "(context-tx (base-version 0) (create f (x \x00 \udcff)))".encode("utf-8", "replace").decode(),
)


@case("SEC-01", "every call authenticates a principal; every access is authorized",
      needs=("principals",))
def sec_01_authenticated_and_authorized(t: CaseRun):
    d, ctx = t.driver, t.context()
    ev = d.append(ctx, "s1", "user-message", "the owner's own note")
    t.tx(ctx, "(create plan (goal ship))")
    calls = {"read": lambda x: x.status(ctx),
             "read an event": lambda x: x.event(ctx, ev.ref),
             "write": lambda x: x.append(ctx, "s1", "user-message", "intruder"),
             "commit": lambda x: x.commit(ctx, "(context-tx (base-version 1) (create y (z)))"),
             "recall": lambda x: x.search(ctx, "note"),
             "encode": lambda x: x.encoding(ctx, "s1")}
    # A principal of another namespace (SEC-09) does not even find the context.
    refused = frozenset({"FORBIDDEN", "CONTEXT_NOT_FOUND"})
    for who, reason in (("anonymous", "UNAUTHENTICATED"), ("other", refused)):
        caller = d.as_principal(who)
        try:
            for what, call in calls.items():
                err = t.rejected(reason, call, caller)
                t.check(err.code in ("UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND"),
                        f"{who} {what}: status {err.code}")
        finally:
            caller.close()
    t.eq((t.revision(ctx), d.event(ctx, ev.ref).text), (1, "the owner's own note"),
         "nothing changed by the refused callers")


@case("SEC-05", "the raw storage API is not reachable with a public caller's credentials",
      needs=("raw_store", "principals"))
def sec_05_raw_store_unreachable(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create plan (goal ship))")
    before = d.status(ctx)
    attempts = d.raw_store_attempts(ctx)
    t.check(attempts, "no way to the raw store was tried")
    let_through = sorted(way for way, reason in attempts.items() if not reason)
    t.eq(let_through, [], "raw store access a public caller was allowed")
    after = d.status(ctx)
    t.eq((after.commit_seq, after.revision), (before.commit_seq, before.revision),
         "nothing written to the store")
    t.rejected("FRAME_NOT_FOUND", d.frame, ctx, "kit-raw-write")


@case("SEC-09", "context names live in namespaces: a name taken in one reveals nothing",
      needs=("principals",))
def sec_09_namespaces(t: CaseRun):
    d, ctx = t.driver, t.context()
    first = d.append(ctx, "s1", "user-message", "the first namespace's note")
    before = d.status(ctx)
    other = d.as_principal("other")
    try:
        # The name means another context there: not found, or not theirs to read yet.
        t.rejected(frozenset({"CONTEXT_NOT_FOUND", "FORBIDDEN"}), other.status, ctx)
        other.create_context(ctx)  # the same name, in the other principal's namespace
        mine = other.append(ctx, "s1", "user-message", "the second namespace's note")
        t.eq(other.event(ctx, mine.ref).text, "the second namespace's note",
             "the other namespace's context of that name")
        t.eq(other.status(ctx).revision, 0, "a new, empty context")
    finally:
        other.close()
    t.eq(d.event(ctx, first.ref).text, "the first namespace's note", "the first is untouched")
    t.eq(d.status(ctx).event_count, before.event_count, "the first namespace's context")


@case("SEC-02", "stable refs are scoped to their context: a foreign id reads nothing")
def sec_02_refs_scoped_to_context(t: CaseRun):
    d = t.driver
    mine, theirs = t.context(), t.context()
    ev = d.append(theirs, "s1", "user-message", "their private note")
    t.tx(theirs, "(create their-frame (x 1))")
    d.append(mine, "s1", "user-message", "mine")
    missing = t.rejected("EVENT_NOT_FOUND", d.event, mine, "@e999999")
    foreign = t.rejected("EVENT_NOT_FOUND", d.event, mine, ev.id)
    t.eq(foreign.code, missing.code, "a foreign id answers as a missing one")
    t.check("their private note" not in foreign.message, "the rejection reveals nothing")
    t.rejected("FRAME_NOT_FOUND", d.frame, mine, "their-frame")
    t.rejected("SOURCE_NOT_FOUND", t.tx, mine, f"(derive x (from {ev.id}) (y))")


@case("SEC-03", "hostile input gets a structured error; the server keeps serving, nothing lost")
def sec_03_hostile_input(t: CaseRun):
    d, ctx = t.driver, t.context()
    t.tx(ctx, "(create kept (v 1))")
    for text in HOSTILE:
        try:
            d.commit(ctx, text)
        except Rejected as e:
            t.check(e.reason in {"TX_PARSE_ERROR", "TX_INVALID", "TX_UNKNOWN_OP", "TX_CONFLICT",
                                 "CONTEXT_INPUT_INVALID", "TX_LIMIT_EXCEEDED"},
                    f"{text[:40]!r}: reason {e.reason}")
            t.check(e.code in {"INVALID_ARGUMENT", "ABORTED", "RESOURCE_EXHAUSTED"},
                    f"{text[:40]!r}: status {e.code}, not a server fault")
        else:
            t.check(False, f"the hostile transaction {text[:40]!r} was accepted")
    t.rejected("CONTEXT_INPUT_INVALID", d.append, ctx, "bad session id!", "user-message", "x")
    t.eq((t.revision(ctx), d.frame(ctx, "kept").body), (1, "(v 1)"), "what was committed")
    t.eq(t.tx(ctx, "(revise kept (v 2))").revision, 2, "the server still commits")
    t.check(d.audit(ctx).match, "the audit matches")


@case("SEC-04", "secrets never enter an agent-visible encoding, reads or search unrevealed")
def sec_04_secrets_stay_marked(t: CaseRun):
    d, ctx = t.driver, t.context()
    secret = t.secret("launch code 7731-KIT-SECRET")
    ev = d.append(ctx, "s1", "user-message", secret, secret=True)
    shown = d.event(ctx, ev.ref)
    t.check(shown.secret and secret not in shown.text,
            "an event read without the reveal right shows its marker")
    t.check(ev.ref in shown.text, f"the marker names the event: {shown.text!r}")
    e = d.encoding(ctx, "s1")
    t.check(ev.ref in e.keys("observation") and secret not in e.text,
            "the encoding shows the secret observation as its marker")
    hits = t.search(ctx, "launch code 7731")
    t.check(all(secret not in h.preview for h in hits.hits), "search previews reveal nothing")
    t.check(secret not in d.read(ctx, ev.ref).text, "a recall read reveals nothing")


@case("SEC-06", "every limit is explicit; exceeding it names the limit; others go on")
def sec_06_limits_named(t: CaseRun):
    d, ctx = t.driver, t.context()
    d.append(ctx, "s1", "user-message", "limits")
    t.tx(ctx, "(create f (x))")
    for reason, call, field, maximum in (
            ("RECALL_LIMIT_INVALID", lambda: d.search(ctx, "x", limit=101), "limit", 100),
            ("RECALL_LIMIT_INVALID", lambda: d.traverse(ctx, "f", max_nodes=129),
             "max_nodes", 128),
            ("RECALL_LIMIT_INVALID", lambda: d.traverse(ctx, "f", depth=5), "depth", 4)):
        err = t.rejected(reason, call)
        t.eq((err.details.get("field"), err.details.get("maximum")), (field, maximum),
             f"the {field} limit is named")
    t.eq(t.tx(ctx, "(revise f (y))").revision, 2, "the server goes on serving")


def _state(d, ctx: str):
    s = d.status(ctx)
    return (s.revision, s.cognitive_tick, s.event_count, dict(s.frames_by_state),
            tuple(d.frames(ctx)))


@case("SEC-07", "expensive calls past their deadline answer DEADLINE_EXCEEDED; the target "
      "keeps serving and nothing is left half-done", needs=("deadline",))
def sec_07_deadlines_stop_expensive_calls(t: CaseRun):
    d, ctx = t.driver, t.context()
    for i in range(24):  # a history whose replay takes a while: 12 MiB of text
        d.append(ctx, "s1", "tool-result", f"{i:04d} " + "x" * (512 << 10))
    t.tx(ctx, "(create plan (goal ship))")
    before = _state(d, ctx)
    took = []
    for _ in range(2):  # the second warm: a first audit's cold reads made a tenth too long
        started = time.monotonic()
        t.check(d.audit(ctx).match, "the audit with time enough")
        took.append(time.monotonic() - started)
    # A tenth of what the faster full audit took: the calls below cannot finish in it.
    short = d.with_deadline(max(0.001, min(took) / 10))
    try:
        outcomes: list[str] = []

        def expensive(call) -> None:
            try:
                call()
                outcomes.append("answered")
            except DeadlineExceeded:
                outcomes.append("DEADLINE_EXCEEDED")
            except Rejected as e:  # a budget of expensive calls may refuse some at once
                outcomes.append("budget" if e.code == "RESOURCE_EXHAUSTED"
                                else f"Rejected {e.reason}")
            except Unreachable as e:
                outcomes.append(f"{type(e).__name__} {getattr(e, 'reason', e)}")
        calls = [lambda: short.audit(ctx)] * 6 + [lambda: short.rebuild(ctx)] * 2
        threads = [threading.Thread(target=expensive, args=(c,)) for c in calls]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        t.check(len(outcomes) == len(calls) and "DEADLINE_EXCEEDED" in outcomes and
                set(outcomes) <= {"DEADLINE_EXCEEDED", "budget"},
                f"expensive calls past a short deadline (DEADLINE_EXCEEDED, or refused "
                f"RESOURCE_EXHAUSTED by a budget): {sorted(outcomes)}")
    finally:
        short.close()
    # The target goes on serving, and the interrupted rebuilds left nothing half-done.
    t.eq(_state(d, ctx), before, "the context after the deadlines")
    audit = d.audit(ctx)
    t.check(audit.match, f"the audit after interrupted rebuilds: {audit.problems[:3]}")
    d.append(ctx, "s1", "user-message", "writes go on")


STALLED = 40            # connections that ask for a large reply and never read it
STALLED_REPLY = 16 << 20  # bytes of that reply
ANSWER_BOUND = 120.0    # seconds the target may take to answer (or end) every stalled call


@case("SEC-08", "replies held for clients that do not read are bounded, not one per "
      "connection", needs=("stall", "memory"))
def sec_08_replies_held_for_stalled_clients_are_bounded(t: CaseRun):
    d, ctx = t.driver, t.context()
    ref = d.append(ctx, "s1", "tool-result", "x" * STALLED_REPLY).ref
    t.eq(len(d.event(ctx, ref).text), STALLED_REPLY, "a reader's reply")
    idle = d.target_memory()
    calls = d.stalled_reads(ctx, ref, STALLED)
    try:
        deadline = time.monotonic() + ANSWER_BOUND
        while True:  # until the target has made (and holds) or ended every reply
            for c in calls:
                c.poll()
            if all(c.answered for c in calls):
                break
            t.check(time.monotonic() < deadline,
                    f"{sum(not c.answered for c in calls)} stalled calls never answered")
            time.sleep(0.1)
        held = d.target_memory() - idle
        # One reply per connection would be STALLED x 16 MiB; a bound set by configuration
        # holds a few replies' worth whatever the number of connections.
        t.check(held < STALLED * STALLED_REPLY // 3,
                f"{held >> 20} MiB held for {STALLED} calls that never read "
                f"{STALLED_REPLY >> 20} MiB replies")
        # A reader meanwhile is served, or refused with a named limit (retry later).
        try:
            t.eq(len(d.event(ctx, ref).text), STALLED_REPLY, "a reader's reply meanwhile")
        except Rejected as e:
            t.eq(e.code, "RESOURCE_EXHAUSTED", f"the refusal of a reader meanwhile ({e.reason})")
    finally:
        for c in calls:
            c.close()
    # The stalled clients gone, what was held for them is let go: readers are served.
    deadline = time.monotonic() + ANSWER_BOUND
    while True:
        try:
            t.eq(len(d.event(ctx, ref).text), STALLED_REPLY, "a reader's reply afterwards")
            break
        except Rejected as e:
            t.check(e.code == "RESOURCE_EXHAUSTED" and time.monotonic() < deadline,
                    f"readers still refused after the stalled clients left: {e.reason}")
            time.sleep(0.2)
    d.append(ctx, "s1", "user-message", "writes go on")
