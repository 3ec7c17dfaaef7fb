"""Each client method as data: which service and RPC it calls, its request message, and
whether repeating it is safe. Client and AsyncClient send these; they differ only in
how they wait. Request ids are made here, once per call, so every retry of a write
carries the same one and the server answers it with the original receipt."""
from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Iterable, Mapping, Optional, Union

from morphz.api.common.v1 import common_pb2 as common
from morphz.api.encoding.v1 import encoding_pb2 as enc
from morphz.api.recall.v1 import recall_pb2 as rec
from morphz.api.transaction.v1 import transaction_pb2 as txn
from morphz.client.errors import input_error
from morphz.client.tx import Tx

TRANSACTION, RECALL, ENCODING = "transaction", "recall", "encoding"
TxInput = Union[str, Tx, txn.Transaction]


class Safety(Enum):
    READ = "read"              # changes nothing: retried
    IDEMPOTENT = "idempotent"  # a write the server answers again, not twice: retried
    NEVER = "never"            # a second attempt could act twice: never retried


def _writes_nothing(reply: Any) -> int:
    return 0


def _commit_seq(reply: Any) -> int:
    """A write's reply: the context version it reached."""
    return reply.commit_seq


def _batch_commit_seq(reply: Any) -> int:
    """AppendEvents' reply: the highest version its items reached."""
    return max((e.commit_seq for e in reply.events), default=0)


@dataclass(frozen=True)
class Call:
    service: str
    method: str
    request: Any
    safety: Safety
    timeout: Optional[float] = None  # None: the client's
    # The context version a reply says this call wrote (read your writes); 0: no write.
    position: Callable[[Any], int] = _writes_nothing


@dataclass(frozen=True)
class Evaluation:
    """A recall made for an evaluation: its reply is also recorded as a `recall`
    observation of `session` (so such a call is never retried)."""
    session: str
    activation: str


class WritePositions:
    """Read your writes: the highest `commit_seq` this client's writes returned, per
    context, which its searches then ask the server's index to reach (RECALL-13), as
    etcd's clients read at a revision."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def note(self, call: Call, reply: Any) -> None:
        seq = call.position(reply)
        context = getattr(call.request, "context", "")
        if seq and context:
            with self._lock:
                if seq > self._seen.get(context, 0):
                    self._seen[context] = seq

    def of(self, context: str) -> int:
        """The last write's position in `context` (0: no write seen)."""
        with self._lock:
            return self._seen.get(context, 0)


def new_request_id() -> str:
    return uuid.uuid4().hex


def _build(cls, **fields):
    try:
        return cls(**fields)
    except (ValueError, TypeError) as e:  # a value the wire type cannot hold
        raise input_error(f"invalid {cls.__name__} field: {e}") from None


# -- transaction service ---------------------------------------------------------------------
def create_context(context: str, window: int) -> Call:
    return Call(TRANSACTION, "CreateContext",
                _build(txn.CreateContextRequest, context=context, window=window), Safety.NEVER,
                position=_commit_seq)


def status(context: str) -> Call:
    return Call(TRANSACTION, "GetStatus", _build(txn.GetStatusRequest, context=context),
                Safety.READ)


def append_event(context: str, *, session: str, kind: str, text: str, actor: str,
                 causal_refs: Iterable[str], activation: str, target_session: str,
                 secret: bool, request_id: Optional[str], occurred_at: str = "") -> Call:
    request = _build(txn.AppendEventRequest, context=context, session=session, kind=kind,
                     text=text, actor=actor, causal_refs=list(causal_refs),
                     activation=activation, target_session=target_session, secret=secret,
                     request_id=new_request_id() if request_id is None else request_id,
                     occurred_at=occurred_at)
    return Call(TRANSACTION, "AppendEvent", request,
                Safety.IDEMPOTENT if request.request_id else Safety.NEVER, position=_commit_seq)


def append_events(context: str, events: Iterable[dict]) -> Call:
    """Each event: append_event's keywords (session, kind, text, ...); one without a
    request_id gets a fresh one, so the whole batch is retried safely."""
    items = [_build(txn.AppendEventRequest, **dict(
        e, causal_refs=list(e.get("causal_refs", ())),
        request_id=new_request_id() if e.get("request_id") is None else e["request_id"]))
        for e in events]
    request = _build(txn.AppendEventsRequest, context=context, events=items)
    return Call(TRANSACTION, "AppendEvents", request,
                Safety.IDEMPOTENT if all(i.request_id for i in items) else Safety.NEVER,
                position=_batch_commit_seq)


def activate(context: str, session: str) -> Call:
    return Call(TRANSACTION, "Activate", _build(txn.ActivateRequest, context=context,
                                                session=session), Safety.NEVER)


def deliver(context: str, activation: str) -> Call:
    # Delivering a delivered activation answers it again: idempotent without a request id.
    return Call(TRANSACTION, "Deliver", _build(txn.DeliverRequest, context=context,
                                               activation=activation), Safety.IDEMPOTENT)


def commit(context: str, tx: TxInput, *, session: str, activation: str,
           request_id: Optional[str]) -> Call:
    if isinstance(tx, Tx):
        form = {"structured": tx.to_proto()}
    elif isinstance(tx, txn.Transaction):
        form = {"structured": tx}
    elif isinstance(tx, str):
        form = {"text": tx}
    else:
        raise input_error("tx must be DSL text, a Tx or a Transaction message", field="tx")
    request = _build(txn.CommitRequest, context=context, session=session,
                     activation=activation,
                     request_id=new_request_id() if request_id is None else request_id, **form)
    return Call(TRANSACTION, "Commit", request,
                Safety.IDEMPOTENT if request.request_id else Safety.NEVER, position=_commit_seq)


def frame(context: str, frame_id: str, at_revision: int, reveal_secrets: bool) -> Call:
    return Call(TRANSACTION, "GetFrame", _build(txn.GetFrameRequest, context=context,
                                                frame_id=frame_id, at_revision=at_revision,
                                                reveal_secrets=reveal_secrets), Safety.READ)


FRAME_PAGE_BYTES = 4 << 20  # a page of frames when listing them in pages


def frames(context: str, reveal_secrets: bool, max_bytes: int = 0, cursor: str = "") -> Call:
    return Call(TRANSACTION, "ListFrames", _build(txn.ListFramesRequest, context=context,
                                                  reveal_secrets=reveal_secrets,
                                                  max_bytes=max_bytes, cursor=cursor),
                Safety.READ)


def event(context: str, ref: str, reveal_secrets: bool) -> Call:
    return Call(TRANSACTION, "GetEvent", _build(txn.GetEventRequest, context=context, ref=ref,
                                                reveal_secrets=reveal_secrets), Safety.READ)


def set_policy(context: str, op: str, principal: str, rights: Iterable[str],
               session: str) -> Call:
    # Each call appends a policy event (it carries no request id): never resent.
    return Call(TRANSACTION, "SetPolicy", _build(
        txn.SetPolicyRequest, context=context, op=op, principal=principal,
        rights=list(rights), session=session), Safety.NEVER)


def set_retention(context: str, policy: str) -> Call:
    # Each change is a policy event (it carries no request id): never resent.
    return Call(TRANSACTION, "SetPolicy", _build(
        txn.SetPolicyRequest, context=context, op="retention", retention=policy),
        Safety.NEVER)


def erase(context: str, *, refs: Iterable[str], session: str, actor: str, phrase: str,
          kinds: Iterable[str], since: str, until: str, reason: str, dry_run: bool,
          timeout: float) -> Call:
    # An erasure sent again finds nothing left to take: never resent (a dry run is a read).
    return Call(TRANSACTION, "Erase", _build(
        txn.EraseRequest, context=context, refs=list(refs), session=session, actor=actor,
        phrase=phrase, kinds=list(kinds), since=since, until=until, reason=reason,
        dry_run=dry_run), Safety.READ if dry_run else Safety.NEVER, timeout)


def delete_context(context: str, reason: str, timeout: float) -> Call:
    # A deletion sent again finds no context (CONTEXT_NOT_FOUND): never resent.
    return Call(TRANSACTION, "DeleteContext", _build(
        txn.DeleteContextRequest, context=context, reason=reason), Safety.NEVER, timeout)


def export(context: str, since: str, until: str, reveal_secrets: bool, timeout: float) -> Call:
    # A server stream: read page by page, never resent part way (a retry would repeat pages).
    return Call(TRANSACTION, "Export", _build(
        txn.ExportRequest, context=context, since=since, until=until,
        reveal_secrets=reveal_secrets), Safety.READ, timeout)


def policy(context: str) -> Call:
    return Call(TRANSACTION, "GetPolicy", _build(txn.GetPolicyRequest, context=context),
                Safety.READ)


def list_contexts() -> Call:
    return Call(TRANSACTION, "ListContexts", _build(txn.ListContextsRequest), Safety.READ)


def audit(context: str) -> Call:
    return Call(TRANSACTION, "Audit", _build(txn.AuditRequest, context=context), Safety.READ)


def rebuild_projections(context: str, timeout: float) -> Call:
    # Rewrites only what differs from a replay of the history: doing it twice is doing it once.
    return Call(TRANSACTION, "RebuildProjections",
                _build(txn.RebuildProjectionsRequest, context=context), Safety.IDEMPOTENT,
                timeout)


# -- server-side jobs (both services: the kind, or the id's prefix, names which) ------------------
JOB_KINDS = {"audit": TRANSACTION, "rebuild-projections": TRANSACTION,
             "retention": TRANSACTION, "rebuild-index": RECALL}


def job_service(id: str) -> str:
    return RECALL if id.startswith("recall-") else TRANSACTION


def start_job(context: str, kind: str) -> Call:
    if kind not in JOB_KINDS:
        raise input_error(f"unknown job kind {kind[:40]!r}: {' | '.join(JOB_KINDS)}",
                          field="kind")
    return Call(JOB_KINDS[kind], "StartJob", _build(common.StartJobRequest, context=context,
                                                    kind=kind), Safety.NEVER)


def get_job(id: str) -> Call:
    return Call(job_service(id), "GetJob", _build(common.JobRequest, id=id), Safety.READ)


def list_jobs(service: str, context: str) -> Call:
    return Call(service, "ListJobs", _build(common.ListJobsRequest, context=context),
                Safety.READ)


def cancel_job(id: str) -> Call:  # asking twice asks the same
    return Call(job_service(id), "CancelJob", _build(common.JobRequest, id=id),
                Safety.IDEMPOTENT)


# -- recall service ------------------------------------------------------------------------------
def _evaluation(e: Optional[Evaluation]) -> tuple[Optional[rec.Evaluation], Safety]:
    if e is None:
        return None, Safety.READ
    return _build(rec.Evaluation, session=e.session, activation=e.activation), Safety.NEVER


def search(context: str, query: str, *, since: str, until: str, limit: int,
           kinds: Iterable[str], states: Iterable[str], sessions: Iterable[str], cursor: str,
           evaluation: Optional[Evaluation], mode: str = "", min_commit_seq: int = 0) -> Call:
    ev, safety = _evaluation(evaluation)
    return Call(RECALL, "Search", _build(
        rec.SearchRequest, context=context, query=query, since=since, until=until,
        limit=limit, kinds=list(kinds), states=list(states), sessions=list(sessions),
        cursor=cursor, mode=mode, evaluation=ev, min_commit_seq=min_commit_seq), safety)


def read(context: str, ref: str, *, offset: int, limit: int,
         evaluation: Optional[Evaluation]) -> Call:
    ev, safety = _evaluation(evaluation)
    return Call(RECALL, "Read", _build(rec.ReadRequest, context=context, ref=ref,
                                       offset=offset, limit=limit, evaluation=ev), safety)


def traverse(context: str, frame_id: str, *, depth: Optional[int], direction: str,
             include_bodies: bool, include_events: bool, max_nodes: int, max_bytes: int,
             cursor: str, evaluation: Optional[Evaluation]) -> Call:
    ev, safety = _evaluation(evaluation)
    return Call(RECALL, "Traverse", _build(
        rec.TraverseRequest, context=context, frame_id=frame_id, depth=depth,
        direction=direction, include_bodies=include_bodies, include_events=include_events,
        max_nodes=max_nodes, max_bytes=max_bytes, cursor=cursor, evaluation=ev), safety)


def inspect_index(context: str) -> Call:
    return Call(RECALL, "InspectIndex", _build(rec.InspectIndexRequest, context=context),
                Safety.READ)


def rebuild_index(context: str, timeout: float) -> Call:
    return Call(RECALL, "RebuildIndex", _build(rec.RebuildIndexRequest, context=context),
                Safety.NEVER, timeout)


# -- encoding service -----------------------------------------------------------------------------
def compile(context: str, *, session: str, activation: str, budget_bytes: int,  # noqa: A001
            budget_tokens: int, preview_bytes: int, must_read: Iterable[str],
            scope: Optional[Mapping[str, Any]], parent_snapshot: str, model: str,
            evaluation_profile: str, bindings: Optional[Mapping[str, str]],
            capabilities: bool) -> Call:
    scope_msg = _build(enc.Scope, **{k: v for k, v in (scope or {}).items() if v})
    request = _build(enc.CompileRequest, context=context, session=session,
                     activation=activation, budget_bytes=budget_bytes,
                     budget_tokens=budget_tokens, preview_bytes=preview_bytes,
                     must_read=list(must_read), scope=scope_msg,
                     parent_snapshot=parent_snapshot, model=model,
                     evaluation_profile=evaluation_profile, bindings=dict(bindings or {}),
                     capabilities=capabilities)
    # Without an activation it claims the session's pending inputs: never twice. Compiling
    # again for a named activation records one more snapshot and changes nothing else.
    return Call(ENCODING, "Compile", request, Safety.READ if activation else Safety.NEVER)


def _snapshot(method: str, context: str, snapshot: str) -> Call:
    return Call(ENCODING, method, _build(enc.SnapshotRequest, context=context,
                                         snapshot=snapshot), Safety.READ)


def show_snapshot(context: str, snapshot: str) -> Call:
    return _snapshot("ShowSnapshot", context, snapshot)


def replay_snapshot(context: str, snapshot: str) -> Call:
    return _snapshot("Replay", context, snapshot)


def check_snapshot(context: str, snapshot: str) -> Call:
    return _snapshot("Check", context, snapshot)


def read_snapshot(context: str, snapshot: str, ref: str, *, offset: int, limit: int) -> Call:
    return Call(ENCODING, "Read", _build(enc.ReadRequest, context=context, snapshot=snapshot,
                                         ref=ref, offset=offset, limit=limit), Safety.READ)


def search_snapshot(context: str, snapshot: str, query: str, *, limit: int) -> Call:
    return Call(ENCODING, "Search", _build(enc.SearchRequest, context=context,
                                           snapshot=snapshot, query=query, limit=limit),
                Safety.READ)


def list_snapshots(context: str, *, session: str, activation: str, since: str, until: str,
                   limit: int, cursor: str) -> Call:
    return Call(ENCODING, "ListSnapshots", _build(
        enc.ListSnapshotsRequest, context=context, session=session, activation=activation,
        since=since, until=until, limit=limit, cursor=cursor), Safety.READ)


def evaluation(context: str, activation: str) -> Call:
    return Call(ENCODING, "ShowEvaluation", _build(enc.EvaluationRequest, context=context,
                                                   activation=activation), Safety.READ)
