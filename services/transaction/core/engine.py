"""TransactionCore: the transaction service's one entry point, free of gRPC and LMDB.

Every write follows the same path: make sure this instance owns the context (its
fencing token; ownership.py), open a reader, build one event, apply it with the reducer
to a candidate MindState, hand the resulting batch to storage with the physical version
it was computed from and the token. If another writer got there first, redo it.

Every entry point takes the `caller` (shared/auth.py): the principal the request was
authenticated as, IN_PROCESS_CALLER for code holding the core itself. Each checks it
against the context's policy (shared/policy.py) in the same read view as the request,
before the context's existence, where the request is understood: the session written
as, the target of a message, the session of an activation, the evaluation a transaction
is committed for, the sessions whose evidence an event read may show.
"""
from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import replace
from datetime import datetime
from typing import Callable, Iterator, Optional, Sequence, Union

from opentelemetry import trace

from morphz.shared.storage.api import StaleCommit, StaleRead, Store, Write
from morphz.shared.storage.owner_cache import OwnerCache
from morphz.shared.mind import records as R, secrets
from morphz.services.transaction.core import (
    chain, erasure, export, payloads as P, read_views, retention, rules as rulebook)
from morphz.services.transaction.core.export import ExportPage
from morphz.services.transaction.core.erase_select import Plan, Selector, plan
from morphz.services.transaction.core.erasure import erasure_result, showing_snapshots
from morphz.services.transaction.core.builds import (
    Batch, Build, Proposed, RawWrite, apply_batch, payload_hash)
from morphz.services.transaction.core.boundaries import check_base
from morphz.services.transaction.core.causal import Append, check_shape, route
from morphz.shared.process.cycles import cycles_paused
from morphz.services.transaction.core.ownership import SOLE_OWNER, Ownership
from morphz.services.transaction.core.pipeline import ContextPipeline
from morphz.services.transaction.core.replay import audit_report, rebuild_plan
from morphz.shared.mind.strays import orphans
from morphz.shared.process.faults import NO_FAULTS, Faults
from morphz.services.transaction.core.reducer import Applied, apply_event
from morphz.services.transaction.core.results import (
    ActivationResult, AppendBatchResult, AppendResult, AuditResult, CommitResult, ContextList,
    DeleteResult, ErasureResult, EventResult, FrameListResult, FrameResult, PolicyResult,
    RebuildResult, Reclaimed, Result, RetentionResult, RetentionState, SessionStatus,
    StatusResult)
from morphz.shared.mind.receipts import AppendReceipt, TxReceipt
from morphz.shared.mind.state import MindState
from morphz.shared.mind.view import MindView
from morphz.shared.mind.visibility import Viewer
from morphz.services.transaction.core.txlang import Tx, parse_text
from morphz.shared import cursor as cursors, policy
from morphz.shared.auth import Caller
from morphz.services.transaction.core import frame_pages, policy_change
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.limits import COMMIT_BYTES, EVENT_TEXT_BYTES, MESSAGE_BYTES, echo, utf8_len
from morphz.shared import namespaces
from morphz.shared.names import check_label, check_name
from morphz.shared.occurred import check_occurred_at
from morphz.shared.process.telemetry import NO_TRACING
from morphz.shared.values import ContextName, EventRef
from morphz.services.transaction.core.requests import AppendItem

log = logging.getLogger(__name__)
# Administrators' acts on whole contexts (a deletion): the server's admin log.
admin_log = logging.getLogger("morphz.admin")
# A context's name as an entry point takes it: checked at the edge (the servicer parses a
# ContextName), or a string a caller holding the core gives, checked on entry.
Context = Union[ContextName, str]
MAX_TEXT_BYTES = EVENT_TEXT_BYTES.max
MAX_WINDOW = 1 << 20
# A transaction this big commits with the cycle collector paused (cycles.py): its parse
# tree and records live until it ends, and collections in between only walk them again.
BIG_TX_CHARS = 16 << 10
BIG_TX_OPS = 256
_WRITE_ATTEMPTS = 64
_STOPPED = ("DEADLINE_EXCEEDED", "CANCELLED")  # a deadline's reasons: no retry on storage's rows
MAX_BATCH_EVENTS = 10_000  # append_events: items in one commit


class TransactionCore:
    def __init__(self, store: Store, *, clock: Callable[[], datetime] = None,
                 new_id: Callable[[], str] = None,
                 tracer: Optional[trace.Tracer] = None, faults: Faults = NO_FAULTS,
                 rules_version: int = rulebook.CURRENT,
                 owners: Ownership = SOLE_OWNER,
                 shard_of: Callable[[str], str] = lambda context: "",
                 cache: Optional[OwnerCache] = None,
                 retention_schedule: retention.Schedule = retention.ON_DEMAND) -> None:
        self._store = store
        # When the service's timer applies retention policies (status shows the next time;
        # the default, 0: a core with no timer, applied only on demand).
        self._retention = retention_schedule
        # The write path's rows over a remote store (owner_cache.py); only it reads there.
        self._cache = cache
        self._writes: Union[Store, OwnerCache] = cache or store
        self._owners = owners  # which contexts this instance may write, and their tokens
        self._shard_of = shard_of  # the storage shard a context is placed on ("": one store)
        # The rules new events are decided under (an older version only to reproduce old
        # histories in tests); replay always uses each event's own version.
        self._rules = rulebook.rules(rules_version)
        self._tracer = tracer or NO_TRACING
        self._faults = faults
        self._pipelines: dict[str, ContextPipeline] = {}
        self._pipelines_lock = threading.Lock()
        self._clock = clock or (lambda: datetime.now().astimezone())
        self._new_id = new_id or (lambda: uuid.uuid4().hex)

    # -- the write path ------------------------------------------------------------
    def _pipeline(self, context: str) -> ContextPipeline:
        with self._pipelines_lock:
            return self._pipelines.setdefault(context, ContextPipeline())

    def _write(self, context: str, build: Build, with_seq: bool = False,
               deadline: Deadline = NEVER) -> tuple[Union[Applied, Result], int]:
        """`build` returns the event to apply, or a finished reply (idempotent retry).
        (what applying the event gave, or the finished reply; the commit_seq or 0).
        A transaction committed for a session may name only what that session sees.
        `with_seq`: the reply says the context's `commit_seq` once the write is durable
        (a retry's: the context's then), for a search that must read it (RECALL-13).
        `deadline`: looked at once the event is validated, before its writes are
        submitted; once submitted, a write completes whatever the deadline (SEC-07).

        The event is applied to the durable state plus this context's commits still in
        flight, submitted in order, and answered only once durable (see pipeline.py)."""
        pipe = self._pipeline(context)
        cached = self._cache is not None  # False: read from storage itself
        for _ in range(_WRITE_ATTEMPTS):
            try:
                with pipe.lock:
                    # First: a context this instance may not write is refused unread.
                    fence = self._owners.token(context)
                    if not fence:  # unfenced: never computed over commits in flight
                        self._settle_in_flight(pipe)
                    try:
                        ev, reply, writes, ticket, seq = self._submit(pipe, context, fence,
                                                                      build, cached, deadline)
                    except MorphzError as e:
                        # Refused by the rules on cached rows: answer only what storage's
                        # own rows refuse too (owner_cache.py). The cache stays: if the
                        # store's rows pass, the commit made on them outdates it.
                        if not cached or e.reason in _STOPPED:
                            raise
                        cached = False
                        continue
                if isinstance(ev, Result):
                    if ticket is not None:
                        self._writes.wait(ticket)
                    return ev, self._commit_seq_of(context, ev, seq) if with_seq else 0
                failed = True
                try:
                    with self._tracer.start_as_current_span("storage.commit") as span:
                        span.set_attribute("morphz.writes", len(writes))
                        if span.is_recording():  # sizes only: the values hold the texts
                            span.set_attribute("morphz.bytes", sum(
                                len(w.value) for w in writes if w.value is not None))
                        self._writes.wait(ticket)
                    failed = False
                except MorphzError as e:
                    if e.reason == "FENCED":  # a newer owner committed: ask etcd again
                        self._owners.fenced(context, fence)
                    if e.reason == "STORAGE_APPEND_ONLY" and e.details.get("table") == "events":
                        raise MorphzError(
                            "CONTEXT_DAMAGED", f"a row no commit wrote takes the next event "
                            f"of {context[:80]}; rebuild-projections moves it aside",
                            context=context[:80]) from e
                    raise
                finally:
                    with pipe.lock:
                        pipe.done(ticket, failed)
                self._faults.hit("after-commit-before-reply")
                return reply, seq if with_seq else 0
            except (StaleCommit, StaleRead):
                continue
        raise MorphzError("CONCURRENT_UPDATE", "too many concurrent writers; try again",
                          context=context)

    def _settle_in_flight(self, pipe: ContextPipeline) -> None:
        """Under pipe.lock (released while waiting): wait until none of the context's
        commits is in flight (pipeline.py: why an unfenced writer must)."""
        while (last := pipe.last_ticket()) is not None:
            pipe.lock.release()
            try:
                self._store.wait(last)  # its own writer reports how it ended
            except Exception:  # noqa: BLE001, S110 - its writer's to report, not ours
                pass
            finally:
                pipe.lock.acquire()
            pipe.settled.wait_for(lambda: pipe.last_ticket() is not last)

    def _commit_seq_of(self, context: str, replayed: Result, at_most: int) -> int:
        """The commit_seq the replayed write's event was committed at (a retry answers as
        the original did), read from the context's change feed; `at_most`, the context's
        version now, where the feed does not say (the write is durable by then)."""
        if isinstance(replayed, AppendResult):
            seq = replayed.seq
        elif isinstance(replayed, CommitResult):
            seq = R.parse_ref(replayed.event_ref)
        else:
            return at_most
        after = seq  # the event's commit comes after at least `seq` others
        while after < at_most:
            page = self._store.changes(after, context=context).changes
            if not page:
                break
            for change in page:
                if seq in change.events:
                    return change.commit_seq
            after = page[-1].commit_seq
        return at_most

    def _submit(self, pipe: ContextPipeline, context: str, fence: int,
                build: Build, cached: bool, deadline: Deadline = NEVER) -> tuple:
        """Under pipe.lock: compute `build`'s event on the durable rows (the cache's, or
        with `cached` False storage's) plus the context's commits in flight and submit
        its writes. (what build gave, what applying it gave, writes, ticket, commit_seq
        after it); for a replayed reply (a Result) the ticket to wait for is the last one
        in flight."""
        reads = self._cache.reader(context, fence) if cached else self._store.reader(context)
        with reads as durable, \
                self._tracer.start_as_current_span("mind.validate_apply") as span:
            span.set_attribute("morphz.context", context)
            reader = pipe.reader(durable)
            m = MindState(reader)
            ev = build(m)
            if isinstance(ev, Result):
                return ev, None, None, pipe.last_ticket(), reader.commit_seq
            if isinstance(ev, RawWrite):  # a record outside the Mind
                reply, writes = ev.reply, ev.writes
            elif isinstance(ev, Batch):
                reply = apply_batch(m, ev)
                if reply is None:  # every item was applied before: nothing to write
                    return (AppendBatchResult(tuple(ev.replies)), None, None,
                            pipe.last_ticket(), reader.commit_seq)
                writes = m.writes()
            else:
                e = ev.event
                sees = Viewer(m, e.session).sees_seq \
                    if e.kind == R.CONTEXT_TX and e.session else None
                chain.link(m, e)
                reply = apply_event(m, e, sees, payload=ev.payload)
                writes = m.writes()
            _check_size(writes)
            # Validated: the last moment a caller that gave up stops it, all of it unsent.
            deadline.check("the commit")
            self._faults.hit("after-token-before-submit")
            ticket = self._writes.submit(context, reader.commit_seq, writes, fence=fence,
                                         timeout=deadline.remaining())
            pipe.push(reader.commit_seq + 1, writes, ticket)
            return ev, reply, writes, ticket, reader.commit_seq + 1

    def _event(self, m: MindState, context: str, kind: str, payload: P.Payload,
               data: Optional[dict] = None, **fields) -> Proposed:
        """The next event of `context`, its data the stored form of `payload` (`data`:
        that form when the caller has it already)."""
        meta = m.meta()
        seq = meta.next_seq if meta else 0
        return Proposed(R.Event(seq=seq, id=self._new_id(), kind=kind, context=context,
                                time=self._clock().isoformat(timespec="microseconds"),
                                data=payload.to_data() if data is None else data, **fields),
                        payload)

    @staticmethod
    def _replay(m: MindState, request_id: str, request_hash: str) -> Optional[Result]:
        """The original answer if this request id was already applied with this payload
        (`request_hash`: payload_hash of the request)."""
        if not request_id:
            return None
        check_name(request_id, "request_id")
        rec = m.idempotency(request_id)
        if rec is None:
            return None
        if rec.hash != request_hash:
            raise MorphzError("IDEMPOTENCY_MISMATCH",
                              f"request id {request_id} was used with a different payload",
                              request_id=request_id)
        if isinstance(rec.receipt, TxReceipt):
            return CommitResult.of(rec.receipt, replayed=True)
        return AppendResult.of(rec.receipt, replayed=True)

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
            return self._event(m, context, R.CONTEXT_CREATED,
                               P.Created(window or R.DEFAULT_WINDOW, admin, counts=True),
                               actor="runtime")
        self._write(context, build)
        return self.status(context, caller=caller)

    def status(self, context: Context, *, caller: Caller) -> StatusResult:
        context = _context(context)
        with self._store.reader(context) as reader:
            m = MindState(reader)
            policy.check_any(m, context, caller, policy.READ)
            readable = policy.sessions(m, caller, policy.READ)
            meta = m.require_meta(context)
            by_state = {R.ACTIVE: 0, R.RETIRING: 0, R.RETIRED: 0}
            for state in m.frame_states():
                by_state[state] += 1
            sessions = tuple(SessionStatus(s.id, s.state, s.level, m.pending_count(s),
                                           m.waiting_count(s), len(m.open_calls(s.id)))
                             for s in m.sessions() if readable is None or s.id in readable)
            return StatusResult(context, meta.revision, meta.tick, meta.window, by_state,
                                sessions, meta.next_seq, reader.commit_seq,
                                self._shard_of(context), **self._owners.describe(context),
                                retention=policy_change.retention_view(
                                    m, self._retention, self._clock()))

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
        step = self._append_step(context, session, kind, text, request_id=request_id,
                                 actor=actor, causal_refs=causal_refs, activation=activation,
                                 target_session=target_session, secret=secret,
                                 occurred_at=occurred_at, caller=caller)
        return _append_result(*self._write(context, step, with_seq=True))

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
                steps.append(self._append_step(context, caller=caller, **vars(item)))
            except MorphzError as e:
                e.details.setdefault("index", i)
                raise

        def check(m: MindState) -> None:
            policy.check_any(m, context, caller, policy.WRITE)
            m.require_meta(context)
        reply, seq = self._write(context, Batch(steps, check), with_seq=True)
        # One commit: every item's read-your-writes position is the batch's (RECALL-13).
        return AppendBatchResult(tuple(replace(r, commit_seq=seq) for r in reply.events))

    def _append_step(self, context: str, session: str, kind: str, text: str, *,
                     request_id: str, actor: str, causal_refs: list[str], activation: str,
                     target_session: str, secret: bool, occurred_at: str,
                     caller: Caller) -> Callable[[MindState], Union[Proposed, AppendResult]]:
        """Checks one append and returns the `build` that applies it."""
        req = Append(session, kind, list(causal_refs), activation, target_session)
        check_shape(req)
        size = utf8_len(text)  # (a 30 MB text is not copied to be measured)
        if size > MAX_TEXT_BYTES:
            raise MorphzError("CONTEXT_INPUT_INVALID", f"text exceeds {MAX_TEXT_BYTES} bytes",
                              field="text", **EVENT_TEXT_BYTES.details(size=size))
        check_label(actor, "actor")
        if request_id:
            check_name(request_id, "request_id")
        occurred = check_occurred_at(occurred_at)
        refs = req.refs
        payload = {"session": session, "kind": kind, "text": text, "actor": actor, "refs": refs}
        # Only when set, so requests made before these fields keep their payload hash.
        payload.update({k: v for k, v in (("activation", activation),
                                          ("target_session", target_session),
                                          ("secret", secret), ("occurred_at", occurred)) if v})

        request_hash = payload_hash(payload) if request_id else ""

        def build(m: MindState) -> Union[Proposed, AppendResult]:
            policy.check_any(m, context, caller, policy.WRITE)
            m.require_meta(context)
            done = self._replay(m, request_id, request_hash)
            if done is not None:
                return done
            owner, routed = route(m, req)
            for sid in (owner, target_session):  # a message writes into its target too
                if sid:
                    policy.check(m, context, caller, policy.WRITE, sid)
            data = P.Input(routed.activation, routed.target_session, routed.call,
                           request_hash, secret, occurred)  # (dataclasses.replace: 2x the cost)
            return self._event(m, context, kind, data, session=owner, actor=actor or kind,
                               causal_refs=refs, text=text, request_id=request_id)
        return build

    def activate(self, context: Context, session: str, *, caller: Caller) -> ActivationResult:
        context = _context(context)
        check_name(session, "session")

        def build(m: MindState) -> Proposed:
            policy.check(m, context, caller, policy.WRITE, session)
            meta = m.require_meta(context)
            return self._event(m, context, R.ACTIVATION,
                               P.Activation(f"a{meta.activations + 1}", self._rules.version),
                               session=session, actor="runtime")
        return ActivationResult.of(self._write(context, build)[0])

    def deliver(self, context: Context, activation: str, *,
                caller: Caller) -> ActivationResult:
        context = _context(context)
        check_name(activation, "activation")

        def build(m: MindState) -> Union[Proposed, ActivationResult]:
            policy.check_any(m, context, caller, policy.WRITE)
            m.require_meta(context)
            act = m.activation(activation)
            if act is None or not policy.allowed(m, caller, policy.WRITE, act.session):
                raise MorphzError("ACTIVATION_NOT_FOUND", f"no activation {activation}",
                                  activation=activation)
            if act.delivered:  # delivering twice is a retry, not an error
                return ActivationResult.of(act)
            return self._event(m, context, R.DELIVERY, P.Delivery(activation),
                               session=act.session, actor="runtime")
        done = self._write(context, build)[0]
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
        with self._tracer.start_as_current_span("tx.parse") as span:
            parsed = parse_text(tx) if isinstance(tx, str) else tx
            if isinstance(tx, str):
                span.set_attribute("morphz.tx.chars", len(tx))
            span.set_attribute("morphz.tx.ops", len(parsed.ops))
        deadline.check("the commit")  # parsed: before waiting for the context's writers
        tx_data = parsed.to_dict()  # the stored form, hashed for a request id too
        request_hash = ""
        if request_id:  # only a retry is ever compared with it
            payload = {"session": session, "tx": tx_data}
            if activation:  # absent otherwise: earlier payload hashes stay valid
                payload["activation"] = activation
            request_hash = payload_hash(payload)

        def build(m: MindState) -> Union[Proposed, CommitResult]:
            policy.check_any(m, context, caller, policy.WRITE)
            meta = m.require_meta(context)
            done = self._replay(m, request_id, request_hash)
            if done is not None:
                return done
            act = m.activation(activation) if activation else None
            if act is not None and not policy.allowed(m, caller, policy.WRITE, act.session):
                act = None  # another session's activation reads as a missing one
            evaluating, read_tick = _read_point(m, parsed, session, activation, meta.tick,
                                                act)
            # For a session, its writers; for no session (the shared Mind), the context's;
            # retiring or restoring a session is a write to that session too.
            policy.check(m, context, caller, policy.WRITE, evaluating)
            for op in parsed.ops:
                if op.op in ("retire-session", "restore-session"):
                    policy.check(m, context, caller, policy.WRITE, op.name)
            with self._tracer.start_as_current_span("tx.rebase") as span:
                span.set_attribute("morphz.revision", meta.revision)
                rebased = check_base(m, parsed, meta.revision, session=evaluating,
                                     read_tick=read_tick)
                # Once accepted: an unchecked base-version may not fit an attribute's int64.
                span.set_attribute("morphz.tx.base_version", parsed.base_version)
                span.set_attribute("morphz.tx.rebased", rebased)
            data = P.Commit(parsed, self._rules.version, activation, request_hash,
                            parsed.base_version if rebased else None)
            return self._event(m, context, R.CONTEXT_TX, data, data.to_data(tx_data),
                               session=evaluating, actor="agent", text=parsed.render(),
                               request_id=request_id)
        done, seq = self._write(context, build, with_seq=True, deadline=deadline)
        return replace(done, commit_seq=seq) if isinstance(done, CommitResult) \
            else CommitResult.of(done, commit_seq=seq)

    # -- reads ----------------------------------------------------------------------------------
    def get_frame(self, context: Context, frame_id: str, at_revision: int = 0,
                  *, reveal_secrets: bool = False, caller: Caller) -> FrameResult:
        context = _context(context)
        with self._store.reader(context) as reader:
            m = MindState(reader)
            policy.check_any(m, context, caller, policy.READ)  # frames: the shared Mind
            if reveal_secrets:
                policy.check_any(m, context, caller, policy.REVEAL)
            meta = m.require_meta(context)
            if at_revision:
                if at_revision > meta.revision:
                    raise MorphzError("REVISION_NOT_FOUND", f"revision {at_revision} is after the "
                                      f"latest {meta.revision}", revision=at_revision)
                f = m.frame_at(frame_id, at_revision)
            else:
                f = m.frame(frame_id)
            if f is None:
                raise MorphzError("FRAME_NOT_FOUND", f"frame {frame_id[:80]} does not exist"
                                  + (f" at revision {at_revision}" if at_revision else ""),
                                  ref=frame_id[:80])
            return read_views.frame_view(m, meta, f, at_revision or meta.revision,
                               with_relations=not at_revision, reveal=reveal_secrets)

    def list_frames(self, context: Context, *, reveal_secrets: bool = False, max_bytes: int = 0,
                    cursor: str = "", caller: Caller,
                    deadline: Deadline = NEVER) -> FrameListResult:
        """Frames in projection order: all of them (max_bytes 0), or a page of about
        max_bytes and the cursor of the next (frame_pages.py)."""
        context = _context(context)
        if not 0 <= max_bytes <= frame_pages.MAX_PAGE_BYTES:
            raise MorphzError("CONTEXT_INPUT_INVALID", f"max_bytes must be 0..."
                              f"{frame_pages.MAX_PAGE_BYTES}, got {max_bytes}",
                              field="max_bytes", maximum=frame_pages.MAX_PAGE_BYTES)
        params = {"context": context, "reveal": reveal_secrets, "max_bytes": max_bytes}
        with self._store.reader(context) as reader:
            m = MindView(reader)
            policy.check_any(m, context, caller, policy.READ)
            if reveal_secrets:
                policy.check_any(m, context, caller, policy.REVEAL)
            meta = m.require_meta(context)
            # Transactions move the revision; matured retirements move the tick.
            # (-k: positions are ranks and ids; a cursor from before, an offset, is stale)
            version = f"r{meta.revision}-t{meta.tick}-k"
            position = cursors.decode_position(cursor, "frames", params, version,
                                               service="FRAMES") if cursor \
                else frame_pages.START
            if not frame_pages.check_position(position):
                raise cursors.invalid("FRAMES")
            budget = max_bytes or frame_pages.WHOLE_LISTING_BYTES
            frames, size, next_cursor = [], 0, ""
            for past, f in frame_pages.frames_from(m, position):
                deadline.check("the listing")  # SEC-07
                view = read_views.frame_view(m, meta, f, meta.revision, reveal=reveal_secrets)
                n = frame_pages.view_bytes(view)
                if frames and size + n > budget:
                    if not max_bytes:
                        raise MorphzError(
                            "REPLY_TOO_LARGE", f"the frames of {context} pass what one reply "
                            f"holds ({budget} bytes): list them in pages (max_bytes, cursor)",
                            **MESSAGE_BYTES.details())
                    next_cursor = cursors.encode("frames", params, version, *position)
                    break
                frames.append(view)
                size += n
                position = past
            return FrameListResult(meta.revision, tuple(frames), next_cursor)

    def get_event(self, context: Context, ref_or_id: str, *, reveal_secrets: bool = False,
                  caller: Caller) -> EventResult:
        context = _context(context)
        with self._store.reader(context) as reader:
            m = MindState(reader)
            policy.check_any(m, context, caller, policy.READ)
            if reveal_secrets:
                policy.check_any(m, context, caller, policy.REVEAL)
            readable = policy.sessions(m, caller, policy.READ)
            meta = m.require_meta(context)
            ref = EventRef.find(ref_or_id)
            seq = ref.seq if ref is not None else m.event_seq_by_id(ref_or_id)
            ev = m.event(seq) if seq is not None and seq < meta.next_seq else None
            if ev is not None and readable is not None and \
                    not any(Viewer(m, s).sees(ev) for s in readable):
                ev = None  # evidence of a session the caller may not read: as missing
            if ev is None:
                raise MorphzError("EVENT_NOT_FOUND", f"no event {ref_or_id[:80]}",
                                  ref=ref_or_id[:80])
            if reveal_secrets:  # `reveal` for a session that sees this event
                revealing = policy.sessions(m, caller, policy.REVEAL)
                if revealing is not None and not any(Viewer(m, s).sees(ev) for s in revealing):
                    raise policy.forbidden(context, caller, policy.REVEAL, ev.session)
            return read_views.event_view(ev, m.observation(seq), reveal_secrets,
                                         read_views.erased_note(m, secrets.erasure_of(ev.data)))

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
        return self._write(context, build)[0]

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
                m = MindState(reader)
                policy.check(m, context, caller, policy.ERASE)
                m.require_meta(context)
                found = plan(m, sel, limit=1 << 62, deadline=deadline)
                return erasure_result(context, [found], [], showing_snapshots(m, [found]))
        reason = erasure.check_reason(reason)
        steps: list[tuple[Plan, str]] = []
        reclaimed: dict = {}
        try:
            commit_seq = self._erase_steps(context, sel, reason, caller, deadline, steps)
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

    def _erase_steps(self, context: str, sel: Selector, reason: str, caller: Caller,
                     deadline: Deadline, steps: list[tuple[Plan, str]]) -> int:
        """Commit the erasure a step (ERASE_BATCH events) at a time, each step appended to
        `steps` once committed; the last commit's commit_seq."""
        made: list[tuple[Plan, str]] = []  # what the last build took, and its erasure
        commit_seq = 0
        while True:
            made.clear()

            def build(m: MindState) -> Union[Proposed, ErasureResult]:
                policy.check(m, context, caller, policy.ERASE)
                m.require_meta(context)
                step = plan(m, sel, limit=erasure.ERASE_BATCH, deadline=deadline)
                if step.empty:
                    return erasure_result(context, [], [], ())
                at = R.ref(m.meta().next_seq)
                what, taken = erasure.rewrite(m, step, at)
                made[:] = [(step, at)]
                return self._event(m, context, R.ERASURE, P.Erasure(
                    reason, tuple(what), tuple(taken), sel.recorded(), len(step.events)),
                    actor=caller.principal or "runtime")
            commit_seq = self._write(context, build, with_seq=True, deadline=deadline)[1] \
                or commit_seq
            if not made:  # nothing (more) to take
                return commit_seq
            steps.append(made[0])
            if not made[0][0].more:
                return commit_seq

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
        pipe = self._pipeline(context)
        with pipe.lock:
            self._settle_in_flight(pipe)  # none of its commits still in flight
            with self._store.reader(context) as reader:
                m = MindState(reader)
                policy.check(m, context, caller, policy.ADMIN)
                events = m.require_meta(context).next_seq
            self._store.delete_context(context)
            if self._cache is not None:
                self._cache.forget(context)
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
            made[:] = [self._event(m, context, R.POLICY, change,
                                   actor=caller.principal or "runtime")]
            return made[0]
        self._write(context, build)
        # Not get_policy: its admin check would refuse an admin who just revoked their own.
        with self._store.reader(context) as reader:
            return policy_change.view(MindState(reader), context, R.ref(made[0].event.seq),
                                      self._retention, self._clock())

    def get_policy(self, context: Context, *, caller: Caller) -> PolicyResult:
        context = _context(context)
        with self._store.reader(context) as reader:
            m = MindState(reader)
            policy.check(m, context, caller, policy.ADMIN)
            m.require_meta(context)
            return policy_change.view(m, context, "", self._retention, self._clock())

    def retention_policy(self, context: Context, *, caller: Caller) -> RetentionState:
        """The context's retention policy, as those who may apply it (the erase right)
        see it: who may run a retention job (jobs.py), and whether the timer has one to
        apply."""
        context = _context(context)
        with self._store.reader(context) as reader:
            m = MindState(reader)
            policy.check(m, context, caller, policy.ERASE)
            m.require_meta(context)
            return RetentionState(context, policy_change.retention_view(
                m, self._retention, self._clock()))

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
                m = MindState(reader)
                if m.meta() is not None and policy.sessions(m, caller, policy.READ) != \
                        frozenset():
                    names.append(context)
        return ContextList(tuple(names))

    def startup_check(self) -> list[str]:
        """Cheap structural checks of every context, run when a server starts: the event
        sequence must end where the context's meta says."""
        problems = []
        for context in self._store.contexts():
            with self._store.reader(context) as reader:
                m = MindState(reader)
                meta = m.meta()
                if meta is None:
                    continue  # a context holding only records outside the Mind
                last = m.last_event_seq()
                if (last + 1 if last is not None else 0) != meta.next_seq:
                    problems.append(f"{context}: events end at {last}, "
                                    f"meta expects next {meta.next_seq}")
        return problems


def _context(context: Context) -> str:
    """A context's name, checked once: a ContextName was checked where it entered (the
    servicer), a string from a caller holding the core is checked here."""
    if isinstance(context, ContextName):
        return context.value
    return check_name(context, "context")  # what ContextName.parse checks


def _check_size(writes: list[Write]) -> None:
    """commit_bytes: what a write stores, keys and framing counted roughly (a storage
    service must receive it in one message: 1 MiB below message_bytes)."""
    size = 0
    for w in writes:  # a loop, not nested generators: every commit passes here
        size += len(w.value or b"") + len(w.table) + 16
        for p in w.key:
            if not isinstance(p, str):
                size += 10
            elif p.isascii():  # most keys: its length is its UTF-8 length
                size += len(p) + 2
            else:
                size += len(p.encode("utf-8", "surrogatepass")) + 2
    if size > COMMIT_BYTES.max:
        raise MorphzError(COMMIT_BYTES.reason, f"the write would store {size} bytes, over "
                          f"{COMMIT_BYTES.max}: an event's text is stored once, a frame's "
                          "body four times (event, transaction, frame, version), escaped",
                          **COMMIT_BYTES.details(size=size))


def _read_point(m: MindState, tx: Tx, session: str, activation: str, tick: int,
                act: Optional[R.Activation]) -> tuple[str, Optional[int]]:
    """(the session a commit is made for, the tick it read at): from the activation it
    names, the session it names and the transaction's own `(base-tick T)`."""
    read_tick = tx.base_tick
    if read_tick is not None and read_tick > tick:
        raise MorphzError("BASE_TICK_AHEAD", f"base-tick {read_tick} is ahead of the "
                          f"cognitive tick {tick}", base_tick=read_tick, tick=tick)
    if activation:
        if act is None:
            raise MorphzError("ACTIVATION_NOT_FOUND", f"no activation {activation}",
                              activation=activation)
        if session and act.session != session:
            raise MorphzError("CAUSAL_SCOPE_VIOLATION", f"activation {activation} is a causal "
                              f"scope of session {act.session}, not of {session}",
                              activation=activation, session=session)
        session = act.session
        if read_tick is None:
            read_tick = act.tick
    if session:
        s = m.session(session)
        if s is None:
            raise MorphzError("SESSION_NOT_FOUND", f"no session {session}", session=session)
        restoring = any(o.op == "restore-session" and o.name == session for o in tx.ops)
        if s.state == R.RETIRED and not restoring:
            raise MorphzError("SESSION_RETIRED", f"session {session} is retired: its "
                              "evaluations can no longer commit", session=session)
    return session, read_tick


def _append_result(done: Union[AppendReceipt, AppendResult], commit_seq: int) -> AppendResult:
    """An append's answer: its receipt's, or a retry's (already an AppendResult)."""
    if isinstance(done, AppendResult):
        return replace(done, commit_seq=commit_seq)
    return AppendResult.of(done, commit_seq=commit_seq)
