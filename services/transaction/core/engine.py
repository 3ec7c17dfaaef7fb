"""TransactionCore: the transaction service's one entry point, free of gRPC and LMDB.

Every write goes through the core's Writer (writes/writer.py): built on the context's
state as one event, applied by the reducer and committed under the context's fencing
token. The read entry points read one view each (reads/).

Every entry point takes the `caller` (shared/auth.py): the principal the request was
authenticated as, IN_PROCESS_CALLER for code holding the core itself. Each checks it
against the context's policy (shared/policy.py) in the same read view as the request,
before the context's existence, where the request is understood: the session written
as, the target of a message, the session of an activation, the evaluation a transaction
is committed for, the sessions whose evidence an event read may show.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from typing import Callable, Iterator, Optional, Sequence, Union

from opentelemetry import trace

from morphz.shared.storage.api import Store
from morphz.shared.storage.owner_cache import OwnerCache
from morphz.shared.mind import records as R
from morphz.services.transaction.core import (
    erasure, export, payloads as P, retention, rules as rulebook)
from morphz.services.transaction.core.export import ExportPage
from morphz.services.transaction.core.erase_select import Plan, Selector
from morphz.services.transaction.core.erasure import erasure_result, showing_snapshots
from morphz.services.transaction.core.builds import Batch, Proposed, RawWrite
from morphz.services.transaction.core.reads import contexts, events as event_reads, frames
from morphz.services.transaction.core.writes import (
    activations, append as appends, commit as commits, erase)
from morphz.services.transaction.core.writes.writer import Writer
from morphz.shared.process.cycles import cycles_paused
from morphz.services.transaction.core.ownership import SOLE_OWNER, Ownership
from morphz.services.transaction.core.replay import audit_report, rebuild_plan
from morphz.shared.mind.strays import orphans
from morphz.shared.process.faults import NO_FAULTS, Faults
from morphz.services.transaction.core.results import (
    ActivationResult, AppendBatchResult, AppendResult, AuditResult, CommitResult, ContextList,
    DeleteResult, ErasureResult, EventResult, FrameListResult, FrameResult, PolicyResult,
    RebuildResult, Reclaimed, RetentionResult, RetentionState, StatusResult)
from morphz.shared.mind.state import MindState
from morphz.shared.mind.view import MindView
from morphz.services.transaction.core.txlang import Tx
from morphz.shared import policy
from morphz.shared.auth import Caller
from morphz.services.transaction.core import policy_change
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.limits import echo
from morphz.shared import namespaces
from morphz.shared.names import check_name
from morphz.shared.occurred import check_occurred_at
from morphz.shared.process.telemetry import NO_TRACING
from morphz.shared.values import ContextName
from morphz.services.transaction.core.requests import AppendItem

log = logging.getLogger(__name__)
# Administrators' acts on whole contexts (a deletion): the server's admin log.
admin_log = logging.getLogger("morphz.admin")
# A context's name as an entry point takes it: checked at the edge (the servicer parses a
# ContextName), or a string a caller holding the core gives, checked on entry.
Context = Union[ContextName, str]
MAX_WINDOW = 1 << 20
# A transaction this big commits with the cycle collector paused (cycles.py): its parse
# tree and records live until it ends, and collections in between only walk them again.
BIG_TX_CHARS = 16 << 10
BIG_TX_OPS = 256
MAX_BATCH_EVENTS = 10_000  # append_events: items in one commit


class TransactionCore:
    def __init__(self, store: Store, *, clock: Callable[[], datetime] = None,
                 new_id: Callable[[], str] = None,
                 tracer: Optional[trace.Tracer] = None, faults: Faults = NO_FAULTS,
                 rules_version: int = rulebook.CURRENT,
                 owners: Ownership = SOLE_OWNER,
                 shard_of: Callable[[str], str] = lambda context: "",
                 cache: Optional[OwnerCache] = None,
                 retention_schedule: retention.Schedule = retention.ON_DEMAND,
                 writer: Optional[Writer] = None) -> None:
        """`writer`: how writes reach the store (writes/writer.py); by default one over
        `store`, reading the write path's rows from `cache` where given (a remote store),
        fenced by `owners`."""
        self._store = store
        # When the service's timer applies retention policies (status shows the next time;
        # the default, 0: a core with no timer, applied only on demand).
        self._retention = retention_schedule
        self._owners = owners  # which contexts this instance may write, and their tokens
        self._shard_of = shard_of  # the storage shard a context is placed on ("": one store)
        # The rules new events are decided under (an older version only to reproduce old
        # histories in tests); replay always uses each event's own version.
        self._rules = rulebook.rules(rules_version)
        self._tracer = tracer or NO_TRACING
        self._faults = faults
        self._clock = clock or (lambda: datetime.now().astimezone())
        self._writer = writer or Writer(store, cache=cache, owners=owners, tracer=self._tracer,
                                        faults=faults, clock=self._clock, new_id=new_id)

    # -- contexts ----------------------------------------------------------------------
    def create_context(self, context: Context, window: int = 0, *,
                       caller: Caller) -> StatusResult:
        context = _context(context)
        namespaces.check_create(context, caller)
        if not 0 <= window <= MAX_WINDOW:
            raise MorphzError("CONTEXT_INPUT_INVALID", f"window must be 0..{MAX_WINDOW}",
                              field="window")

        def build(m: MindState) -> Proposed:
            if m.meta() is not None:
                raise MorphzError("CONTEXT_EXISTS", f"context {context} exists", context=context)
            stray = orphans(m)
            if stray:
                log.warning("context %s had %d row(s) but was never created: moved aside "
                            "into its quarantine table", context[:80], len(stray))
            for table, key in stray:
                m.quarantine(table, key)
            # An authenticated creator (not a service) administers it.
            admin = caller.principal if caller.authenticated and not caller.service else ""
            return self._writer.event(m, context, R.CONTEXT_CREATED,
                                      P.Created(window or R.DEFAULT_WINDOW, admin, counts=True),
                                      actor="runtime")
        self._writer.write(context, build)
        return self.status(context, caller=caller)

    def status(self, context: Context, *, caller: Caller) -> StatusResult:
        context = _context(context)
        with self._store.reader(context) as reader:
            return contexts.status(MindState(reader), context, reader.commit_seq,
                                   self._shard_of(context), self._owners, self._retention,
                                   self._clock, caller)

    # -- events and activations --------------------------------------------------------------
    def append_event(self, context: Context, session: str, kind: str, text: str, *,
                     request_id: str = "", actor: str = "", causal_refs: list[str] = (),
                     activation: str = "", target_session: str = "", secret: bool = False,
                     occurred_at: str = "", caller: Caller) -> AppendResult:
        """An input, an action of an open activation (`activation`), or a message to
        another session (`target_session`); causal.py decides where it belongs.
        `secret`: the text is shown only where a request reveals secrets (secrets.py).
        `occurred_at`: when it happened where it came from (ISO 8601 with an offset)."""
        context = _context(context)
        step = appends.append_step(self._writer, context, session, kind, text, request_id=request_id,
                                 actor=actor, causal_refs=causal_refs, activation=activation,
                                 target_session=target_session, secret=secret,
                                 occurred_at=occurred_at, caller=caller)
        return appends.append_result(*self._writer.write(context, step, with_seq=True))

    def append_events(self, context: Context, events: Sequence[AppendItem], *,
                      caller: Caller) -> AppendBatchResult:
        """Many appends in one commit (an import): all of them or none. Each item takes
        append_event's keywords plus session, kind, text; each keeps its own request id,
        so a batch sent again applies only the items not yet applied."""
        context = _context(context)
        if not 0 < len(events) <= MAX_BATCH_EVENTS:
            raise MorphzError("CONTEXT_INPUT_INVALID", f"give 1..{MAX_BATCH_EVENTS} events",
                              field="events", count=len(events))
        steps = []
        for i, item in enumerate(events):
            try:
                steps.append(appends.append_step(self._writer, context, caller=caller, **vars(item)))
            except MorphzError as e:
                e.details.setdefault("index", i)
                raise

        def check(m: MindState) -> None:
            policy.check_any(m, context, caller, policy.WRITE)
            m.require_meta(context)
        reply, seq = self._writer.write(context, Batch(steps, check), with_seq=True)
        # One commit: every item's read-your-writes position is the batch's (RECALL-13).
        return AppendBatchResult(tuple(replace(r, commit_seq=seq) for r in reply.events))

    def activate(self, context: Context, session: str, *, caller: Caller) -> ActivationResult:
        context = _context(context)
        check_name(session, "session")

        build = activations.activate_build(self._writer, self._rules.version, context, session, caller)
        return ActivationResult.of(self._writer.write(context, build)[0])

    def deliver(self, context: Context, activation: str, *,
                caller: Caller) -> ActivationResult:
        context = _context(context)
        check_name(activation, "activation")

        build = activations.deliver_build(self._writer, context, activation, caller)
        done = self._writer.write(context, build)[0]
        return done if isinstance(done, ActivationResult) else ActivationResult.of(done)

    # -- transactions ------------------------------------------------------------------------
    def commit(self, context: Context, tx: Union[str, Tx], *, session: str = "",
               request_id: str = "", activation: str = "", caller: Caller,
               deadline: Deadline = NEVER) -> CommitResult:
        """Commit a transaction. `session`: the session whose evaluation made it (it
        reads that session's attention); `activation`: the evaluation that read the Mind,
        whose tick is the read tick unless the transaction declares `(base-tick T)`.
        Past `deadline` after parsing or validation it is not submitted (SEC-07)."""
        context = _context(context)
        if session:
            check_name(session, "session")
        if activation:
            check_name(activation, "activation")
        if request_id:
            check_name(request_id, "request_id")
        big = len(tx) >= BIG_TX_CHARS if isinstance(tx, str) else len(tx.ops) >= BIG_TX_OPS
        with cycles_paused(big):
            return self._commit(context, tx, session, request_id, activation, caller,
                                deadline)

    def _commit(self, context: str, tx: Union[str, Tx], session: str, request_id: str,
                activation: str, caller: Caller, deadline: Deadline) -> CommitResult:
        parsed = commits.parse(tx, self._tracer)
        deadline.check("the commit")  # parsed: before waiting for the context's writers
        # parsed.to_dict(): the stored form, hashed for a request id too
        build = commits.commit_build(self._writer, self._tracer, self._rules.version, context,
                             parsed, parsed.to_dict(), session, request_id, activation,
                             caller)
        done, seq = self._writer.write(context, build, with_seq=True, deadline=deadline)
        return replace(done, commit_seq=seq) if isinstance(done, CommitResult) \
            else CommitResult.of(done, commit_seq=seq)

    # -- reads ----------------------------------------------------------------------------------
    def get_frame(self, context: Context, frame_id: str, at_revision: int = 0,
                  *, reveal_secrets: bool = False, caller: Caller) -> FrameResult:
        context = _context(context)
        with self._store.reader(context) as reader:
            return frames.get_frame(MindState(reader), context, frame_id, at_revision,
                                    reveal_secrets, caller)

    def list_frames(self, context: Context, *, reveal_secrets: bool = False, max_bytes: int = 0,
                    cursor: str = "", caller: Caller,
                    deadline: Deadline = NEVER) -> FrameListResult:
        """Frames in projection order: all of them (max_bytes 0), or a page of about
        max_bytes and the cursor of the next (frame_pages.py)."""
        context = _context(context)
        frames.check_page_bytes(max_bytes)
        with self._store.reader(context) as reader:
            return frames.list_frames(MindView(reader), context, reveal_secrets, max_bytes,
                                      cursor, caller, deadline)

    def get_event(self, context: Context, ref_or_id: str, *, reveal_secrets: bool = False,
                  caller: Caller) -> EventResult:
        context = _context(context)
        with self._store.reader(context) as reader:
            return event_reads.get_event(MindState(reader), context, ref_or_id,
                                         reveal_secrets, caller)


    # -- audit ----------------------------------------------------------------------------------
    def audit(self, context: Context, *, caller: Caller,
              deadline: Deadline = NEVER) -> AuditResult:
        """Replay every event through the reducer into memory and compare each table.
        A difference is reported, never repaired (rebuild_projections repairs). The
        replay stops at `deadline` (SEC-07)."""
        context = _context(context)
        with self._store.reader(context) as reader, self._tracer.start_as_current_span("audit"):
            m = MindState(reader)
            policy.check(m, context, caller, policy.ADMIN)
            m.require_meta(context)
            return audit_report(context, m, deadline)

    def rebuild_projections(self, context: Context, *, caller: Caller,
                            deadline: Deadline = NEVER) -> RebuildResult:
        """Recompute every projection from the events and write the differences in one
        atomic commit: the same revision, tick and active state as before the damage.
        Past `deadline` the replay stops and nothing is written (SEC-07)."""
        context = _context(context)

        def build(m: MindState) -> RawWrite:
            policy.check(m, context, caller, policy.ADMIN)
            m.require_meta(context)
            with self._tracer.start_as_current_span("rebuild_projections"):
                reply, writes = rebuild_plan(context, m, deadline)
                self._faults.hit("mid-rebuild")
            deadline.check("the rebuild")
            return RawWrite(reply, writes)
        return self._writer.write(context, build)[0]

    # -- erasure (docs/privacy.md) ------------------------------------------------------------
    def erase(self, context: Context, selector: Selector, reason: str, *,
              dry_run: bool = False, caller: Caller,
              deadline: Deadline = NEVER) -> ErasureResult:
        """Remove the content of the events `selector` names and of what was derived
        only from them (erase_select.py, erasure.py), recorded as an `erasure` event;
        then the store is rewritten so no file keeps the bytes (Store.reclaim). The
        `erase` right (administrators hold it) and a reason are required. `dry_run`:
        what it would take, nothing changed. A selection past ERASE_BATCH events is
        erased in steps, each its own commit and erasure event."""
        context = _context(context)
        sel = selector.check()
        if dry_run:
            with self._store.reader(context) as reader:
                return erase.erase_dry_run(MindState(reader), context, sel, caller, deadline)
        reason = erasure.check_reason(reason)
        steps: list[tuple[Plan, str]] = []
        reclaimed: dict = {}
        try:
            commit_seq = erase.erase_steps(self._writer, context, sel, reason, caller, deadline,
                                     steps)
        finally:
            if steps:  # what committed steps took leaves the disk, whatever stopped the rest
                reclaimed = self._store.reclaim(context)
                log.info("erasure of %s by %s: %s (%d events, %d frame versions); store "
                         "rewritten in %s ms", context[:80], echo(caller.principal or "runtime"),
                         " ".join(at for _, at in steps), sum(len(p.events) for p, _ in steps),
                         sum(len(p.versions) for p, _ in steps),
                         reclaimed.get("duration_ms", 0))
        if not steps:
            return erasure_result(context, [], [], ())
        with self._store.reader(context) as reader:
            shown = showing_snapshots(MindView(reader), [p for p, _ in steps])
        return erasure_result(context, [p for p, _ in steps], [at for _, at in steps], shown,
                              commit_seq, reclaimed)

    def export(self, context: Context, *, since: str = "", until: str = "",
               reveal_secrets: bool = False, caller: Caller,
               deadline: Deadline = NEVER) -> Iterator[ExportPage]:
        """The context's events as import's lines, a page at a time (export.py), those
        that occurred in [since, until). Readers of the whole context; secrets' text only
        with reveal. Each page is read on its own; the deadline is looked at before each."""
        context = _context(context)
        window = export.Window(check_occurred_at(since), check_occurred_at(until))
        with self._store.reader(context) as reader:
            m = MindView(reader)
            policy.check(m, context, caller, policy.READ)
            if reveal_secrets:
                policy.check(m, context, caller, policy.REVEAL)
            total = m.require_meta(context).next_seq

        def read_page(first: int, count: int) -> list[R.Event]:
            deadline.check("the export")
            with self._store.reader(context) as page_reader:
                return export.events_of(MindView(page_reader), first, count)
        return export.pages(read_page, total, window, reveal_secrets)

    def delete_context(self, context: Context, reason: str, *,
                       caller: Caller) -> DeleteResult:
        """Remove the context whole (PRIV-05): every row, its snapshots and its change
        feed (Store.delete_context); recall drops its index and vectors as it follows the
        feed; the name answers CONTEXT_NOT_FOUND and may be created again. Administrators,
        with a reason, written to the server's admin log; the store is then rewritten so
        its file shrinks (Store.reclaim)."""
        context = _context(context)
        reason = erasure.check_reason(reason)

        def check(m: MindState) -> int:
            policy.check(m, context, caller, policy.ADMIN)
            return m.require_meta(context).next_seq
        events = self._writer.delete(context, check)
        reclaimed = self._store.reclaim(context)
        admin_log.info("context %s deleted by %s (%d events): %s", context[:80],
                       echo(caller.principal or "runtime"), events, echo(reason, 200))
        return DeleteResult(context, events, Reclaimed(**reclaimed) if reclaimed else None)

    # -- policy -----------------------------------------------------------------------------
    def set_policy(self, context: Context, op: str, principal: str, rights: list[str],
                   session: str = "", *, retention_policy: str = "",
                   caller: Caller) -> PolicyResult:
        """Grant or revoke rights (shared/policy.py), or (op retention) set the retention
        policy (`retention_policy`: its text, or `none`; core/retention.py), as a
        `policy` event: chained, audited and replayed like every other. Administrators
        only."""
        context = _context(context)
        change = policy_change.check_change(op, principal, list(rights), session,
                                            retention_policy)
        made = []

        def build(m: MindState) -> Proposed:
            policy.check(m, context, caller, policy.ADMIN)
            m.require_meta(context)
            made[:] = [self._writer.event(m, context, R.POLICY, change,
                                          actor=caller.principal or "runtime")]
            return made[0]
        self._writer.write(context, build)
        # Not get_policy: its admin check would refuse an admin who just revoked their own.
        with self._store.reader(context) as reader:
            return policy_change.view(MindState(reader), context, R.ref(made[0].event.seq),
                                      self._retention, self._clock())

    def get_policy(self, context: Context, *, caller: Caller) -> PolicyResult:
        context = _context(context)
        with self._store.reader(context) as reader:
            return contexts.policy_view(MindState(reader), context, self._retention,
                                        self._clock, caller)

    def retention_policy(self, context: Context, *, caller: Caller) -> RetentionState:
        """The context's retention policy, as those who may apply it (the erase right)
        see it: who may run a retention job (jobs.py), and whether the timer has one to
        apply."""
        context = _context(context)
        with self._store.reader(context) as reader:
            return contexts.retention_state(MindState(reader), context, self._retention,
                                            self._clock, caller)

    def apply_retention(self, context: Context, *, caller: Caller,
                        deadline: Deadline = NEVER) -> RetentionResult:
        """Apply the context's retention policy now (core/retention.py): erase what it
        names, by `caller`, who needs the erase right (the retention timer's caller is the
        server's own), with a reason naming the policy; nothing due, nothing written.
        RETENTION_NOT_SET where the context has none."""
        context = _context(context)
        with self._store.reader(context) as reader:
            m = MindState(reader)
            policy.check(m, context, caller, policy.ERASE)
            m.require_meta(context)
            kept = retention.from_row(m.policy_row(retention.ROW))
        if kept is None:
            raise MorphzError("RETENTION_NOT_SET", f"context {context[:80]} has no retention "
                              "policy: set one with `morphz context policy retention`",
                              context=context[:80])
        rule, set_at = kept
        now = self._clock()
        done = self.erase(context, rule.selector(now), f"retention policy {rule.text()} (set "
                          f"at {set_at}), applied {now.isoformat(timespec='seconds')}",
                          caller=caller, deadline=deadline)
        return RetentionResult(context, rule.text(), rule.cutoff(now).isoformat(),
                               len(done.events), done.erasures, done.commit_seq,
                               done.reclaimed)

    def list_contexts(self, *, caller: Caller) -> ContextList:
        """The contexts the caller may read (every one for an unrestricted caller)."""
        names = []
        for context in self._store.contexts():
            with self._store.reader(context) as reader:
                if contexts.readable(MindState(reader), caller):
                    names.append(context)
        return ContextList(tuple(names))

    def startup_check(self) -> list[str]:
        """Cheap structural checks of every context, run when a server starts: the event
        sequence must end where the context's meta says."""
        problems = []
        for context in self._store.contexts():
            with self._store.reader(context) as reader:
                problem = contexts.startup_problem(MindState(reader), context)
                if problem:
                    problems.append(problem)
        return problems


def _context(context: Context) -> str:
    """A context's name, checked once: a ContextName was checked where it entered (the
    servicer), a string from a caller holding the core is checked here."""
    if isinstance(context, ContextName):
        return context.value
    return check_name(context, "context")  # what ContextName.parse checks
