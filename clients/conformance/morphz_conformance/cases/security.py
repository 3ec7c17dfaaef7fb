"""The Security extension (SEC-*): the requirements a single principal can check. Those
needing a second principal, the raw storage API or resource exhaustion need driver hooks
the kit does not have yet (their ids are reported without a case)."""
from __future__ import annotations

from morphz_conformance.driver import Rejected
from morphz_conformance.registry import CaseRun, case

HOSTILE = (
    "(context-tx (base-version 0) (create f \"unterminated)",
    "(context-tx (base-version 99999999999999999999) (create f))",
    "(context-tx (base-version 0) (explode f))",
    ")" * 10,
    "(" * 5000,
    "(context-tx (base-version 0) (create f (x \x00 \udcff)))".encode("utf-8", "replace").decode(),
)


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
