"""EncodingCore: compile, freeze, replay, check, and scoped read/search. Free of gRPC
and LMDB: it reads through the read model (MindView) over a Store's readers, claims
activations through the transaction service's interface, and keeps its own snapshots
(snapshot_store.py). Every entry point takes the `caller` (shared/auth.py) and checks
it against the context's policy (shared/policy.py): `encode` for the session compiled
(which includes claiming its inputs: the activation is then claimed as the services,
SERVICE_CALLER, as over the wire), and for a snapshot's session to use the snapshot; a
snapshot of a session the caller may not encode reads as a missing one (SEC-02)."""
from __future__ import annotations

import threading
import uuid
from datetime import datetime
from typing import Callable, Mapping, Optional

from opentelemetry import trace

import msgspec

from morphz.shared.process.telemetry import NO_TRACING

from morphz.shared import policy
from morphz.shared.auth import SERVICE_CALLER, Caller
from morphz.shared.process.cycles import cycles_not_collected
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R, secrets
from morphz.shared.mind.view import MindView
from morphz.shared.mind.visibility import Viewer
from morphz.shared.storage.api import Store, read_at_one_version
from morphz.services.encoding.core import depcheck, search as searching, snapshot_store
from morphz.services.encoding.core.row_cache import RowCache
from morphz.services.encoding.core.evaluation import show as show_evaluation
from morphz.services.encoding.core.gather import Gathered, gather
from morphz.services.encoding.core.listing import SnapshotPage, SnapshotQuery, listing_of, \
    page as listing_page, stamp_of
from morphz.services.encoding.core.material import FULL
from morphz.services.encoding.core.options import (
    MAINTENANCE_PERMILLE, Budget, Environment, bad, check_must_read)
from morphz.shared.names import check_lookup, check_name
from morphz.services.encoding.core.record import Omission, Region, SnapshotRecord
from morphz.services.encoding.core.render import Rendered, render
from morphz.services.encoding.core.results import (
    CheckReport, Encoding, Evaluation, ReadPage, ReplayReport, SearchResult)
from morphz.services.encoding.core.scope import Scope, causal_scope
from morphz.services.encoding.core.snapshot import freeze, text_hash, thaw

DEFAULT_READ_CHARS, MAX_READ_CHARS = 256 << 10, 4 << 20
MAX_ERROR_ITEMS = 20
# What the agent may do, as the optional cognitive-capabilities region shows it.
CAPABILITIES = {
    "context-tx": ["create", "derive", "revise", "retire", "restore", "protect", "unprotect",
                   "relate", "unrelate", "place", "checkpoint", "rollback", "drop-checkpoint",
                   "retire-session", "restore-session"],
    "recall": ["search", "read", "frame"],
}


class EncodingCore:
    def __init__(self, store: Store, transactions, *,
                 clock: Callable[[], datetime] = None, new_id: Callable[[], str] = None,
                 tracer: Optional[trace.Tracer] = None,
                 maintenance_permille: int = MAINTENANCE_PERMILLE,
                 write_snapshot: Callable[..., None] = snapshot_store.put,
                 row_cache: Optional[RowCache] = None) -> None:
        self._store = store
        self._row_cache = row_cache  # None: every compile decodes and renders anew
        self._write_snapshot = write_snapshot  # injected: the benchmark times it apart
        self._tx = transactions  # TransactionCore, or RemoteTransactions: same answers
        self._clock = clock or (lambda: datetime.now().astimezone())
        self._new_id = new_id or (lambda: "enc-" + uuid.uuid4().hex[:20])
        self._tracer = tracer or NO_TRACING
        self._maintenance = maintenance_permille
        self._stamp_lock = threading.Lock()
        self._last_stamp = 0

    # -- compile ---------------------------------------------------------------------------
    @cycles_not_collected  # thousands of containers, all alive until it returns
    def compile(self, context: str, session: str, *, activation: str = "",
                budget_bytes: int = 0, budget_tokens: int = 0, preview_bytes: int = 0,
                must_read: list[str] = (), scope: Optional[Scope] = None,
                parent_snapshot: str = "", model: str = "", evaluation_profile: str = "",
                bindings: Optional[Mapping[str, str]] = None, capabilities: bool = False,
                caller: Caller, deadline: Deadline = NEVER) -> Encoding:
        """The steps, each below: check the request, read the scope it may see, claim
        an activation, gather at one version, render, check the budget, freeze."""
        # Everything the caller sent is checked before the activation claims anything.
        check_name(context, "context")
        check_name(session, "session")
        if activation:
            check_name(activation, "activation")
        budget = Budget.make(budget_bytes, budget_tokens, preview_bytes)
        env = Environment.make(model, evaluation_profile, bindings, capabilities)
        wanted = check_must_read(list(must_read))
        requested = scope or Scope()  # checked where it was made (Scope.make)
        with self._tracer.start_as_current_span("encoding.compile") as span:
            span.set_attribute("morphz.context", context)
            span.set_attribute("morphz.session", session)
            frozen = self._scope(context, session, requested, parent_snapshot, caller)
            # Past its deadline (SEC-07) a compile stops between its stages: before it
            # claims an activation, and before it renders and writes its snapshot.
            deadline.check("the compile")
            act_id = activation or self._claim(context, session)
            now = self._clock()
            with self._tracer.start_as_current_span("encoding.gather"):
                act, g, last_event = read_at_one_version(
                    self._store, context, lambda reader: self._gather(
                        MindView(reader), act_id, context=context, session=session,
                        caller=caller, scope=frozen, budget=budget, env=env,
                        must_read=wanted, time=now.isoformat(timespec="seconds")))
            if g.missing:
                raise MorphzError("MUST_READ_MISSING", "must-read items are not available "
                                  f"to this evaluation: {', '.join(sorted(g.missing)[:8])}",
                                  missing=sorted(g.missing), why=g.missing)
            deadline.check("the compile")
            with self._tracer.start_as_current_span("encoding.render"):
                r = render(g.material, self._maintenance)
            self._fit(g.material, r, wanted)
            deadline.check("the compile")
            record = self._freeze(context, g, r, parent_snapshot, wanted, now, last_event)
            span.set_attribute("morphz.encoding.bytes", r.bytes)
            span.set_attribute("morphz.encoding.items", len(r.items))
            span.set_attribute("morphz.snapshot", record.id)
            span.set_attribute("morphz.activation", act.id)
        return _encoding(record, r, act, g)

    def _scope(self, context: str, session: str, requested: Scope, parent_snapshot: str,
               caller: Caller) -> Scope:
        """The scope the compile freezes: the request's, narrowed from the parent
        snapshot's (a child never sees more than its parent), once the caller may
        encode the session (and reveal its secrets, when asked) and the session is
        live; all read in one reader."""
        # A root scope reveals secrets when the request asks and the caller holds
        # `reveal` for the session; a child only when its parent did.
        parent_scope = causal_scope(session, reveal_secrets=requested.reveal_secrets)
        if parent_snapshot:
            check_name(parent_snapshot, "parent_snapshot")
        with self._store.reader(context) as reader:
            m = MindView(reader)
            policy.check(m, context, caller, policy.ENCODE, session)
            if requested.reveal_secrets:
                policy.check(m, context, caller, policy.REVEAL, session)
            parent = _snapshot(m, context, parent_snapshot, caller, head=True) \
                if parent_snapshot else None
            # This reader's last read: the meta and the session in one round trip, which
            # also lets a remote snapshot go (no CloseSnapshot).
            m.prefetch_session(session, last=True)
            m.require_meta(context)
            evaluated = m.session(session)  # checked below, after the parent's scope
        if parent is not None:
            if parent.session != session:
                raise MorphzError("SCOPE_VIOLATION", "a snapshot's scope belongs to its "
                                  "session; it cannot be narrowed for another",
                                  snapshot=parent_snapshot, session=session)
            parent_scope = parent.head.scope.scope()
        frozen = parent_scope.narrow(requested)
        _check_session(evaluated, session)
        return frozen

    def _claim(self, context: str, session: str) -> str:
        """A new activation of the session, claimed as the services (SERVICE_CALLER):
        the caller was checked for `encode`, which includes claiming its inputs."""
        with self._tracer.start_as_current_span("encoding.claim"):
            return self._tx.activate(context, session, caller=SERVICE_CALLER).id

    def _gather(self, m: MindView, act_id: str, *, context: str, session: str,
                caller: Caller, env: Environment,
                **inputs) -> tuple[R.Activation, Gathered, int]:
        """The activation and what the compile shows of it, read at one version (the
        caller reads again from the start if the version went), and the last event's
        seq then."""
        m.prefetch_activation(act_id)  # one trip
        act = m.activation(act_id)
        if act is not None and not policy.allowed(m, caller, policy.ENCODE, act.session):
            act = None  # another session's activation reads as a missing one
        if act is None:
            raise MorphzError("ACTIVATION_NOT_FOUND", f"no activation {act_id}",
                              activation=act_id)
        if act.session != session:
            raise MorphzError("SCOPE_VIOLATION", f"activation {act_id} belongs to "
                              f"session {act.session}", activation=act_id)
        return act, gather(m, context=context, session=session, act=act, env=env,
                           capabilities=CAPABILITIES if env.capabilities else {},
                           cache=self._row_cache, **inputs), m.meta().next_seq - 1

    def _freeze(self, context: str, g: Gathered, r: Rendered, parent_snapshot: str,
                wanted: list[str], now: datetime, last_event: int) -> SnapshotRecord:
        """The snapshot of what the evaluation saw, under a new id, written with its
        listing entries."""
        record = freeze(self._new_id(), g.material, r, parent=parent_snapshot,
                        must_read=wanted, omitted=g.omitted, omitted_total=g.omitted_total,
                        maintenance_permille=self._maintenance)
        with self._tracer.start_as_current_span("encoding.freeze"):
            self._write_snapshot(self._store, context, record, r.rows,
                                 listing_of(record.head, self._stamp(now), last_event))
        return record

    def _stamp(self, now: datetime) -> int:
        """When a snapshot was frozen, in the index's order: microseconds, and past the
        last this core gave (compiles within one microsecond, a clock set back)."""
        with self._stamp_lock:
            self._last_stamp = max(stamp_of(now), self._last_stamp + 1)
            return self._last_stamp

    def _fit(self, m, r, wanted: list[str]) -> None:
        """Fail loudly when the encoding is over budget; never shorten anything."""
        p = r.pressure
        over = r.bytes > m.budget.bytes or (m.budget.tokens and p.used_tokens > m.budget.tokens)
        if not over:
            return
        limits = {"used_bytes": r.bytes, "limit_bytes": m.budget.bytes,
                  "used_tokens": p.used_tokens, "limit_tokens": m.budget.tokens}
        # Must-read observations shown whole only because they were asked for: if the
        # rest fits with them as previews, the error names the ones that do not fit.
        sizes = {it["key"]: it for it in r.items if it["kind"] == "observation"}
        extra = {}
        for o in m.observations:
            ref = f"@e{o.seq}"
            if ref in wanted and o.residency == FULL and \
                    len(o.text.encode()) > m.budget.preview_bytes:
                extra[ref] = sizes[ref]["bytes"] - m.budget.preview_bytes
        base = r.bytes - sum(extra.values())
        if extra and base <= m.budget.bytes:
            missing, room = [], m.budget.bytes - base
            for ref in wanted:
                if ref in extra:
                    if extra[ref] <= room:
                        room -= extra[ref]
                    else:
                        missing.append(ref)
            raise MorphzError("MUST_READ_MISSING", f"must-read items do not fit the budget: "
                              f"{', '.join(missing[:8])}", missing=missing,
                              sizes={k: sizes[k]["bytes"] for k in missing}, **limits)
        content = sorted((it for it in r.items if it["region"] in ("inbox", "mind")),
                         key=lambda it: -it["bytes"])[:MAX_ERROR_ITEMS]
        named = [{"kind": it["kind"], "key": it["key"], "bytes": it["bytes"],
                  "protected": bool(it.get("protected"))} for it in content]
        raise MorphzError("ENCODING_BUDGET_EXCEEDED",
                          f"the active and protected content needs {r.bytes} bytes, over the "
                          f"budget of {m.budget.bytes}; nothing is dropped or shortened: retire "
                          "observations, condense frames or raise the budget",
                          items=named, must_read=[w for w in wanted] or None, **limits)

    # -- snapshots --------------------------------------------------------------------------
    def show(self, context: str, snapshot: str, *, caller: Caller) -> SnapshotRecord:
        check_name(context, "context")
        check_name(snapshot, "snapshot")
        with self._store.reader(context) as reader:
            return _snapshot(MindView(reader), context, snapshot, caller)

    def replay(self, context: str, snapshot: str, *, caller: Caller) -> ReplayReport:
        check_name(context, "context")
        check_name(snapshot, "snapshot")
        with self._tracer.start_as_current_span("encoding.replay"), \
                self._store.reader(context) as reader:
            m = MindView(reader)
            record = _snapshot(m, context, snapshot, caller)
            with snapshot_store.reading(snapshot):
                material, problems = thaw(record, m)
                deps = depcheck.check(record, m)
            r = render(material, record.head.budget.maintenance_permille)
        replay_hash, recorded = text_hash(r.text), record.head.hash
        body = record.body
        ranges_match = (r.items == msgspec.to_builtins(body.items) and
                        r.regions == msgspec.to_builtins(body.regions))
        return ReplayReport(snapshot, recorded, replay_hash,
                            replay_hash == recorded and ranges_match, ranges_match, r.bytes,
                            r.text, deps, problems)

    def check(self, context: str, snapshot: str, *, caller: Caller) -> CheckReport:
        check_name(context, "context")
        check_name(snapshot, "snapshot")
        with self._store.reader(context) as reader:
            m = MindView(reader)
            record = _snapshot(m, context, snapshot, caller)
            with snapshot_store.reading(snapshot):
                return depcheck.check(record, m)

    def list_snapshots(self, context: str, query: SnapshotQuery, *,
                       caller: Caller) -> SnapshotPage:
        """A page of the context's snapshots, newest first (listing.py)."""
        check_name(context, "context")
        with self._store.reader(context) as reader:
            return listing_page(MindView(reader), context, query, caller)

    def evaluation(self, context: str, activation: str, *, caller: Caller) -> Evaluation:
        """One evaluation by reference (evaluation.py), at one version of the context."""
        check_name(context, "context")
        check_name(activation, "activation")
        with self._tracer.start_as_current_span("encoding.evaluation"):
            return read_at_one_version(self._store, context, lambda reader: show_evaluation(
                MindView(reader), context, activation, caller))

    # -- scoped reads -------------------------------------------------------------------------
    def read(self, context: str, snapshot: str, ref: str, offset: int = 0,
             limit: int = 0, *, caller: Caller) -> ReadPage:
        check_lookup(ref, "ref")
        if not 0 <= limit <= MAX_READ_CHARS or offset < 0:
            raise bad(f"limit must be 0..{MAX_READ_CHARS} characters", field="limit")
        check_name(context, "context")
        check_name(snapshot, "snapshot")
        with self._store.reader(context) as reader:
            m = MindView(reader)
            # Only the head (scope, session, id) is needed: no unpacking of the items.
            record = _snapshot(m, context, snapshot, caller, head=True)
            scope, session = record.head.scope.scope(), record.session
            with snapshot_store.reading(snapshot):
                _check_access(record, m)
            ev = m.event_by_ref(ref)
            if ev is not None and not Viewer(m, session).sees(ev):
                ev = None  # another session's private evidence reads as missing (CONC-07)
            if ev is None and R.is_ref(ref):
                raise MorphzError("EVENT_NOT_FOUND", f"no event {ref[:80]}", ref=ref[:80])
            if ev is not None:
                seq = ev.seq
                # What the session may see is its causal scope; kinds and times narrow it.
                why = scope.why_not_event(session, ev.kind, ev.time, R.occurred_at(ev.data))
                if why:
                    raise MorphzError("SCOPE_VIOLATION", f"{R.ref(seq)} is {why}",
                                      ref=R.ref(seq), snapshot=snapshot)
                text, kind, key, revision = (secrets.shown_text(ev, scope.reveal_secrets),
                                             "event", R.ref(seq), 0)
                state = m.observation_state(seq)
            else:
                if not scope.allows_frame(ref):
                    raise MorphzError("SCOPE_VIOLATION", f"frame {ref[:80]} is outside the "
                                      "snapshot's scope", ref=ref[:80], snapshot=snapshot)
                f = m.frame(ref)
                if f is None:
                    raise MorphzError("FRAME_NOT_FOUND", f"frame {ref[:80]} does not exist",
                                      ref=ref[:80])
                text, kind, key, revision, state = (
                    secrets.shown_body(f, scope.reveal_secrets), "frame", f.id,
                    f.revision, f.state)
        limit = limit or DEFAULT_READ_CHARS
        end = min(len(text), offset + limit)
        return ReadPage(key, kind, text[offset:end], offset, end, len(text), end < len(text),
                        state, revision)

    def search(self, context: str, snapshot: str, query: str, limit: int = 0,
               *, caller: Caller) -> SearchResult:
        terms, limit = searching.check_query(query, limit)  # before anything is read
        check_name(context, "context")
        check_name(snapshot, "snapshot")
        with self._store.reader(context) as reader:
            m = MindView(reader)
            record = _snapshot(m, context, snapshot, caller)
            with snapshot_store.reading(snapshot):
                _check_access(record, m)
                material, _ = thaw(record, m)
        docs = [(f"@e{o.seq}", "event", o.text) for o in material.observations]
        docs += [(f.id, "frame", f"{f.id} {f.body}") for f in material.frames]
        return searching.search(terms, limit, docs)


def _encoding(record: SnapshotRecord, r: Rendered, act: R.Activation, g: Gathered) -> Encoding:
    """The compile's reply: the rendered text and its layout, the snapshot made."""
    return Encoding(record.id, record.head.hash, r.text, r.bytes, len(r.text),
                    msgspec.convert(r.regions, list[Region]), r.items,
                    record.head.pressure, act.id, [R.ref(s) for s in act.claimed],
                    g.material.revision, g.material.tick,
                    msgspec.convert(g.omitted, list[Omission]), g.omitted_total)


def _check_session(s: Optional[R.Session], session: str) -> None:
    """The session an encoding is compiled for exists and is not retired."""
    if s is None:
        raise MorphzError("SESSION_NOT_FOUND", f"no session {session}", session=session)
    if s.state == R.RETIRED:
        raise MorphzError("SESSION_RETIRED", f"session {session} is retired: restore it "
                          "before evaluating it", session=session)


def _snapshot(m: MindView, context: str, snapshot: str, caller: Caller,
              head: bool = False) -> SnapshotRecord:
    """A snapshot record the caller may use: `encode` in the context (FORBIDDEN, before
    its existence is told), then for the record's session (else: as if missing); a
    snapshot whose scope revealed secrets also needs `reveal` for that session (its
    replays, reads and searches show them)."""
    policy.check_any(m, context, caller, policy.ENCODE)
    record = (snapshot_store.head if head else snapshot_store.load)(m, context, snapshot)
    if not policy.allowed(m, caller, policy.ENCODE, record.session):
        raise snapshot_store.not_found(snapshot)
    if record.head.scope.reveal_secrets:
        policy.check(m, context, caller, policy.REVEAL, record.session)
    return record


def _check_access(record: SnapshotRecord, m: MindView) -> None:
    """A frozen scope serves new reads only while its session still holds attention:
    retiring the session revokes the access the scope granted (ASM-04)."""
    s = m.session(record.session)
    if s is None or s.state == R.RETIRED:
        raise MorphzError("SNAPSHOT_INVALID", f"snapshot {record.id}: access revoked "
                          f"(session {record.session} is retired); replay still shows "
                          "what the evaluation saw", snapshot=record.id,
                          why="access_revoked")

