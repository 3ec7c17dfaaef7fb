"""SC-Durable: restarts, crashes, rebuilds, idempotent retries, resumable imports
(DUR-*), through the Driver and its control hooks."""
from __future__ import annotations

import os
import threading

from morphz_conformance.driver import Driver, Rejected, Unreachable
from morphz_conformance.registry import CaseFailed, CaseRun, case


def _state(d: Driver, ctx: str):
    """Everything observable of a context that a restart or a rebuild must keep."""
    s = d.status(ctx)
    return (s.revision, s.cognitive_tick, s.event_count, dict(s.frames_by_state),
            tuple(d.frames(ctx)))


def _history(t: CaseRun, ctx: str) -> None:
    d = t.driver
    ask = d.append(ctx, "s1", "user-message", "ship v1")
    d.activate(ctx, "s1")
    report = d.append(ctx, "s1", "tool-result", "regression: 120 passed")
    t.tx(ctx, "(create release (goal ship-v1) (stage waiting-tests)) (create old (x))")
    t.tx(ctx, f"(derive test-result (from {report.ref}) (tests passed)) "
              "(revise release (goal ship-v1) (stage packaging)) "
              "(relate test-result supports release) (protect release)")
    t.tx(ctx, "(retire old)", reason="superseded")
    t.tx(ctx, "(checkpoint cp)")
    d.append(ctx, "s1", "user-message", "and tag it", causal_refs=[ask.ref])


def _acknowledged_while(t: CaseRun, ctx: str, fault, tx_text) -> list[int]:
    """Commit `tx_text(i)` for i = 0, 1, ... from a writer thread; once 5 are acknowledged,
    inject `fault` (a kill, a promotion) while commits are in flight. Returns the i's
    acknowledged before the fault cut the writer off: what must then be there once."""
    acknowledged: list[int] = []
    stop, enough = threading.Event(), threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            try:
                t.tx(ctx, tx_text(i))
            except (Rejected, Unreachable):
                return  # the fault cut it off: whether it applied is what we check
            acknowledged.append(i)
            if len(acknowledged) >= 5:
                enough.set()
            i += 1
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    t.check(enough.wait(60), "the writer got no commits acknowledged")
    fault()  # while commits are in flight
    stop.set()
    thread.join(60)
    return acknowledged


@case("DUR-01", "committed transactions survive a normal restart", needs=("stop", "start"))
def dur_01_commits_survive_restart(t: CaseRun):
    d, ctx = t.driver, t.context()
    _history(t, ctx)
    before = _state(d, ctx)
    d.restart()
    t.eq(_state(d, ctx), before, "the context after a restart")
    t.check(d.audit(ctx).match, "the audit matches after a restart")
    t.tx(ctx, "(create after-restart (x))")  # and it goes on committing


@case("DUR-02", "a crash leaves no partial change and loses no acknowledged commit",
      needs=("kill", "start"))
def dur_02_crash_atomic_and_durable(t: CaseRun):
    d, ctx = t.driver, t.context()
    _history(t, ctx)
    acknowledged = _acknowledged_while(t, ctx, d.kill, lambda i: (
        f"(create w{i}-a (n {i})) (create w{i}-b (n {i})) (relate w{i}-a pairs w{i}-b)"))
    d.start()
    frames = {f.id: f for f in d.frames(ctx)}
    for i in acknowledged:
        t.check(f"w{i}-a" in frames and f"w{i}-b" in frames,
                f"acknowledged commit w{i} lost in the crash")
    pairs = {f.split("-")[0] for f in frames if f.startswith("w")}
    for p in pairs:
        t.check(f"{p}-a" in frames and f"{p}-b" in frames,
                f"commit {p} is half applied after the crash")
        t.check(any(r.name == "pairs" for r in frames[f"{p}-a"].relations),
                f"commit {p} lost its relation in the crash")
    t.check(d.audit(ctx).match, f"the audit after the crash: {d.audit(ctx).problems[:3]}")


@case("DUR-03", "rebuilding projections from events gives the same revision and state")
def dur_03_rebuild_gives_same_state(t: CaseRun):
    d, ctx = t.driver, t.context()
    _history(t, ctx)
    before = _state(d, ctx)
    d.rebuild(ctx)
    t.eq(_state(d, ctx), before, "the context after a rebuild")
    t.check(d.audit(ctx).match, "the audit matches after a rebuild")


@case("DUR-04", "a retried request id is idempotent; the same id with another payload rejected")
def dur_04_idempotent_retries(t: CaseRun):
    d, ctx = t.driver, t.context()
    base, rid = t.revision(ctx), t.request_id("dur04-commit")
    first = t.tx(ctx, "(create f (x 1))", base=base, request_id=rid)
    again = t.tx(ctx, "(create f (x 1))", base=base, request_id=rid)
    t.check(again.replayed and not first.replayed, "the retry is answered as a replay")
    t.eq((again.revision, again.results, again.event_ref),
         (first.revision, first.results, first.event_ref), "the retry's receipt")
    t.eq(t.revision(ctx), first.revision, "no second effect on the revision")
    t.rejected("IDEMPOTENCY_MISMATCH", t.tx, ctx, "(create g (x 2))", base=base,
               request_id=rid)
    rid = t.request_id("dur04-append")
    ev = d.append(ctx, "s1", "user-message", "hello", request_id=rid)
    count = d.status(ctx).event_count
    ev2 = d.append(ctx, "s1", "user-message", "hello", request_id=rid)
    t.eq((ev2.replayed, ev2.ref, ev2.id), (True, ev.ref, ev.id), "a retried append")
    t.eq(d.status(ctx).event_count, count, "events after the retried append")
    t.rejected("IDEMPOTENCY_MISMATCH", d.append, ctx, "s1", "user-message", "bye",
               request_id=rid)


@case("DUR-09", "an import is resumable: run again after a kill, each record applies once",
      needs=("kill", "start"))
def dur_09_resumable_import(t: CaseRun):
    d, ctx = t.driver, t.context()
    records = [{"session": "import", "kind": "external", "text": f"imported record {i}",
                "request_id": t.request_id(f"dur09-{i}")} for i in range(40)]
    count = d.status(ctx).event_count
    first = d.import_events(ctx, records[:15])
    d.kill()
    d.start()
    again = d.import_events(ctx, records)
    t.eq([a.replayed for a in again], [True] * 15 + [False] * 25,
         "records applied before the kill are replays, the rest new")
    t.eq([a.ref for a in again[:15]], [a.ref for a in first], "replays name the first refs")
    t.eq(d.status(ctx).event_count - count, 40, "each record applied exactly once")
    t.check(d.audit(ctx).match, "the audit matches after the resumed import")


@case("DUR-07", "a full store refuses every write STORAGE_FULL, reads go on, nothing is lost",
      needs=("space",))
def dur_07_full_store(t: CaseRun):
    d, ctx = t.driver, t.context()
    before = "acknowledged before the space ran low"
    acked = [(d.append(ctx, "s1", "user-message", before).ref, before)]
    d.limit_space()
    try:
        for i in range(5000):
            text = f"{i:06d} " + os.urandom(48 << 10).hex()  # incompressible
            try:
                acked.append((d.append(ctx, "s1", "tool-result", text).ref, text))
            except Rejected as e:
                t.eq(e.reason, "STORAGE_FULL", "the refusal of a write past the space")
                break
        else:
            raise CaseFailed("the store never filled up")
        t.rejected("STORAGE_FULL", d.append, ctx, "s1", "user-message", "one more")
        t.rejected("STORAGE_FULL", t.tx, ctx, "(create f (x 1))")
        t.rejected("STORAGE_FULL", d.create_context, f"{ctx}-another")
        for ref, text in acked[:2] + acked[-2:]:
            t.eq(d.event(ctx, ref).text, text, f"{ref} read while full")
    finally:
        d.free_space()
    for ref, text in acked:
        t.eq(d.event(ctx, ref).text, text, f"acknowledged {ref} after space returned")
    d.append(ctx, "s1", "user-message", "writes resume")
    t.check(d.audit(ctx).match, "the audit matches")


@case("DUR-05", "history decided under an earlier rules version still audits as matching",
      needs=("rules", "restart"))
def dur_05_old_history_replays_under_its_own_rules(t: CaseRun):
    d = t.driver
    d.restart_with_older_rules()
    try:
        # A history whose decisions a rules change may alter: a rollback, a revise based
        # before it, a retirement by the organizing window.
        ctx = t.context(window=1)
        t.tx(ctx, "(create a (v original)) (create b (x))")
        t.tx(ctx, "(checkpoint cp)")
        t.tx(ctx, "(revise a (v changed))")
        stale_base = t.revision(ctx)
        t.tx(ctx, "(rollback cp)")
        try:  # whatever the earlier rules decide for it is history now
            t.tx(ctx, "(revise a (v stale))", base=stale_base)
        except Rejected:
            pass
        t.tx(ctx, "(retire b)", reason="done")
        d.append(ctx, "s1", "tool-result", "out")
        d.activate(ctx, "s1")
        before = _state(d, ctx)
        t.check(d.audit(ctx).match, "the audit under the earlier rules")
    finally:
        d.restart()  # the current rules
    t.eq(_state(d, ctx), before, "the context under the current rules")
    audit = d.audit(ctx)
    t.check(audit.match, f"old history audited under the current rules: {audit.problems[:3]}")
    t.tx(ctx, "(create after-rules-change (x))")  # a mixed history audits too
    t.check(d.audit(ctx).match, "the audit of a history decided under two rules versions")


@case("DUR-06", "an online backup restores every commit acknowledged before it began",
      needs=("backup",))
def dur_06_online_backup_restores(t: CaseRun):
    d, ctx = t.driver, t.context()
    _history(t, ctx)
    before = [(d.append(ctx, "s1", "user-message", f"before the backup {i}").ref,
               f"before the backup {i}") for i in range(5)]
    t.tx(ctx, "(create before-backup (x 1))")
    writes, errors = [], []
    stop, under_way = threading.Event(), threading.Event()

    def writer():  # the backup is online: writes go on while it is taken
        i = 0
        while not stop.is_set():
            try:
                writes.append(d.append(ctx, "s2", "tool-result", f"while backing up {i}"))
            except (Rejected, Unreachable) as e:
                errors.append(e)
                return
            under_way.set()
            i += 1
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        t.check(under_way.wait(60), "no write was acknowledged before the backup")
        d.backup()
    finally:
        stop.set()
        thread.join(60)
    t.check(not errors, f"a write refused while the backup ran: {errors[:1]}")
    after = d.append(ctx, "s1", "user-message", "after the backup").ref
    t.tx(ctx, "(create after-backup (x 1))")
    d.restore_backup()
    for ref, text in before:
        t.eq(d.event(ctx, ref).text, text, f"acknowledged {ref} in the restored store")
    t.eq(d.frame(ctx, "before-backup").body, "(x 1)", "a commit before the backup, restored")
    # What was written after the backup is not in it: the restore is the backup's.
    t.rejected("EVENT_NOT_FOUND", d.event, ctx, after)
    t.rejected("FRAME_NOT_FOUND", d.frame, ctx, "after-backup")
    audit = d.audit(ctx)
    t.check(audit.match, f"the audit of the restored store: {audit.problems[:3]}")
    d.append(ctx, "s1", "user-message", "writes go on after the restore")


@case("DUR-08", "with replicated storage every acknowledged commit survives a promotion once",
      needs=("replication",))
def dur_08_acknowledged_commits_survive_promotion(t: CaseRun):
    d, ctx = t.driver, t.context()
    _history(t, ctx)
    acknowledged = _acknowledged_while(t, ctx, d.promote_standby,
                                       lambda i: f"(create r{i} (n {i}))")
    frames = [f.id for f in d.frames(ctx)]
    for i in acknowledged:
        t.eq(frames.count(f"r{i}"), 1, f"acknowledged commit r{i} after the promotion")
    audit = d.audit(ctx)
    t.check(audit.match, f"the audit after the promotion: {audit.problems[:3]}")
    t.tx(ctx, "(create after-promotion (x))")
