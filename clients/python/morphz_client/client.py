"""Client: the synchronous Morphz client (AsyncClient in aio.py has the same methods).

    with Client("127.0.0.1:7070") as mz:
        mz.create_context("demo")
        mz.append_event("demo", session="main", kind="user-message", text="Ship v1.")
        enc = mz.compile("demo", session="main")          # what the model sees
        receipt = mz.commit("demo", Tx(enc.revision).create("release", "(goal ship-v1)"),
                            session="main", activation=enc.activation)

Replies are the protobuf messages of protos/morphz/api (typed by their .pyi stubs).
Every call carries a deadline (`timeout`, per attempt). Reads, and writes carrying a
request id, are retried after transient failures (`retry`); appends and commits get a
fresh request id unless given one, so a retry is answered with the original receipt.
Failures raise MorphzError subclasses (errors.py).
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional

import grpc

from morphz.api.common.v1 import common_pb2 as common
from morphz.api.encoding.v1 import encoding_pb2 as enc
from morphz.api.encoding.v1 import encoding_pb2_grpc
from morphz.api.recall.v1 import recall_pb2 as rec
from morphz.api.recall.v1 import recall_pb2_grpc
from morphz.api.transaction.v1 import transaction_pb2 as txn
from morphz.api.transaction.v1 import transaction_pb2_grpc
from morphz.client import calls as C
from morphz.client.calls import (ENCODING, FRAME_PAGE_BYTES, RECALL, TRANSACTION, Call, Evaluation,
                                 TxInput)
from morphz.client.errors import MorphzError, from_rpc_error
from morphz.client.options import (DEFAULT_TIMEOUT, Credentials, RetryPolicy, check_timeout,
                                   long_timeout, service_targets, sync_channel)
from morphz.client.retry import MAX_REDIRECTS, redirect, retryable


def following(page_at: Callable[[str], Any]) -> Iterator[Any]:
    """page_at(cursor) from the first page (cursor "") on, each next_cursor in turn,
    until a page has none."""
    cursor = ""
    while True:
        page = page_at(cursor)
        yield page
        if not page.next_cursor:
            return
        cursor = page.next_cursor


STUBS = {TRANSACTION: transaction_pb2_grpc.TransactionServiceStub,
         RECALL: recall_pb2_grpc.RecallServiceStub,
         ENCODING: encoding_pb2_grpc.EncodingServiceStub}


class Client:
    """`target`: the server (all-in-one), default $MORPHZ_SERVER or 127.0.0.1:7070;
    `recall`/`encoding`: those services' addresses when they run apart (default
    $MORPHZ_RECALL/$MORPHZ_ENCODING, else `target`). `credentials`: default from
    $MORPHZ_TLS_CA, $MORPHZ_TLS_CERT, $MORPHZ_TLS_KEY, $MORPHZ_TOKEN. `wrap_channel`:
    applied to each channel the client opens (to a target, or to the owner a redirect
    names), e.g. `lambda ch: grpc.intercept_channel(ch, interceptor)` to trace or log
    every call (the CLI traces its commands so)."""

    def __init__(self, target: Optional[str] = None, *, recall: Optional[str] = None,
                 encoding: Optional[str] = None, credentials: Optional[Credentials] = None,
                 timeout: float = DEFAULT_TIMEOUT, retry: Optional[RetryPolicy] = None,
                 wrap_channel: Optional[Callable[[grpc.Channel], grpc.Channel]] = None) \
            -> None:
        self.credentials = Credentials.from_env() if credentials is None else credentials
        self.timeout = check_timeout(timeout)
        self.retry = RetryPolicy() if retry is None else retry
        self._metadata = self.credentials.metadata()
        self.positions = C.WritePositions()  # what searches read after (RECALL-13)
        self.targets = service_targets(target, recall=recall, encoding=encoding)
        self._wrap = wrap_channel
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs = {service: STUBS[service](self._channel(address))
                       for service, address in self.targets.items()}

    # -- plumbing ----------------------------------------------------------------------------
    def _channel(self, address: str) -> grpc.Channel:
        if address not in self._channels:
            channel = sync_channel(address, self.credentials)
            self._channels[address] = self._wrap(channel) if self._wrap else channel
        return self._channels[address]

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _send(self, call: Call) -> Any:
        stub = self._stubs[call.service]
        backoffs = self.retry.backoffs()
        hops = 0
        while True:
            try:
                reply = getattr(stub, call.method)(
                    call.request, timeout=call.timeout or self.timeout, metadata=self._metadata)
                self.positions.note(call, reply)
                return reply
            except grpc.RpcError as e:
                err = from_rpc_error(e)
            address = redirect(call, err)
            if address and hops < MAX_REDIRECTS:
                hops += 1
                stub = STUBS[call.service](self._channel(address))
                continue
            wait = next(backoffs, None) if retryable(call, err) else None
            if wait is None:
                raise err
            time.sleep(wait)

    def _stream(self, call: Call) -> Iterator[Any]:
        """A server stream's messages as they come; retried (when its call is safe to
        repeat) only until its first message, so no message is given twice."""
        backoffs = self.retry.backoffs()
        while True:
            started = False
            try:
                for message in getattr(self._stubs[call.service], call.method)(
                        call.request, timeout=call.timeout or self.timeout,
                        metadata=self._metadata):
                    started = True
                    yield message
                return
            except grpc.RpcError as e:
                err = from_rpc_error(e)
            wait = None if started or not retryable(call, err) else next(backoffs, None)
            if wait is None:
                raise err
            time.sleep(wait)

    # -- contexts ------------------------------------------------------------------------------
    def create_context(self, context: str, *, window: int = 0) -> txn.ContextStatus:
        """A new context (`window`: the organizing window in ticks; 0: default 8)."""
        return self._send(C.create_context(context, window))

    def status(self, context: str) -> txn.ContextStatus:
        return self._send(C.status(context))

    # -- events ----------------------------------------------------------------------------------
    def append_event(self, context: str, *, session: str, kind: str, text: str,
                     actor: str = "", causal_refs: Iterable[str] = (), activation: str = "",
                     target_session: str = "", secret: bool = False,
                     request_id: Optional[str] = None,
                     occurred_at: str = "") -> txn.AppendEventResponse:
        """Any input: user-message | tool-result | approval | external | message | action.
        request_id None: a fresh one (the call is then retried safely); "": none.
        secret: the text is shown as [secret @eN] unless a read asks to reveal it.
        occurred_at: when it happened at its source, ISO 8601 with a UTC offset (else
        it happened when recorded); time-range recall filters on it."""
        return self._send(C.append_event(
            context, session=session, kind=kind, text=text, actor=actor,
            causal_refs=causal_refs, activation=activation, target_session=target_session,
            secret=secret, request_id=request_id, occurred_at=occurred_at))

    def append_events(self, context: str,
                      events: Iterable[dict]) -> txn.AppendEventsResponse:
        """Many events in one commit (all or none), each given as append_event's keywords;
        each keeps its own request id, so a batch sent again applies only what was not."""
        return self._send(C.append_events(context, events))

    def send_message(self, context: str, *, session: str, to: str, text: str,
                     actor: str = "", request_id: Optional[str] = None) \
            -> txn.AppendEventResponse:
        """A message from `session` waiting in session `to`'s inbox."""
        return self.append_event(context, session=session, kind="message", text=text,
                                 actor=actor, target_session=to, request_id=request_id)

    def record_action(self, context: str, *, session: str, activation: str, text: str,
                      actor: str = "", causal_refs: Iterable[str] = (),
                      request_id: Optional[str] = None) -> txn.AppendEventResponse:
        """A tool call the open `activation` of `session` issues."""
        return self.append_event(context, session=session, kind="action", text=text,
                                 actor=actor, causal_refs=causal_refs, activation=activation,
                                 request_id=request_id)

    def tool_result(self, context: str, *, text: str, call: str = "", session: str = "",
                    actor: str = "", request_id: Optional[str] = None) \
            -> txn.AppendEventResponse:
        """A tool's result; `call`: the action (@eN) it answers (it then belongs to that
        call's session, and `session` may stay empty)."""
        return self.append_event(context, session=session, kind="tool-result", text=text,
                                 actor=actor, causal_refs=[call] if call else [],
                                 request_id=request_id)

    def event(self, context: str, ref: str, *, reveal_secrets: bool = False) -> txn.Event:
        """One event by @eN or full id (operator's read: every session's)."""
        return self._send(C.event(context, ref, reveal_secrets))

    # -- activations -----------------------------------------------------------------------------
    def activate(self, context: str, *, session: str) -> txn.Activation:
        """Claim the session's pending inputs as one evaluation (never retried)."""
        return self._send(C.activate(context, session))

    def deliver(self, context: str, activation: str) -> txn.Activation:
        """The evaluation answered: its root request may now be retired."""
        return self._send(C.deliver(context, activation))

    # -- transactions and the Mind -----------------------------------------------------------------
    def commit(self, context: str, tx: TxInput, *, session: str = "", activation: str = "",
               request_id: Optional[str] = None) -> txn.Receipt:
        """Commit one context-tx: DSL text, a Tx builder or a Transaction message.
        A TX_CONFLICT raises ConflictError naming the changed boundaries."""
        return self._send(C.commit(context, tx, session=session, activation=activation,
                                   request_id=request_id))

    def frame(self, context: str, frame_id: str, *, at_revision: int = 0,
              reveal_secrets: bool = False) -> txn.Frame:
        return self._send(C.frame(context, frame_id, at_revision, reveal_secrets))

    def frames(self, context: str, *, reveal_secrets: bool = False, max_bytes: int = 0,
                     cursor: str = "") -> txn.FrameList:
        """Every frame of the Mind, in projection order (REPLY_TOO_LARGE: more than one
        message holds; list them in pages); with max_bytes, the page from `cursor`."""
        return self._send(C.frames(context, reveal_secrets, max_bytes, cursor))

    def frame_pages(self, context: str, *, reveal_secrets: bool = False,
                          max_bytes: int = FRAME_PAGE_BYTES) -> Iterator[txn.FrameList]:
        """Every page of the frames, following next_cursor (FRAMES_CURSOR_STALE: the Mind
        changed between pages; list again)."""
        yield from following(lambda cursor: self.frames(
            context, reveal_secrets=reveal_secrets, max_bytes=max_bytes, cursor=cursor))

    def audit(self, context: str) -> txn.AuditReport:
        return self._send(C.audit(context))

    def rebuild_projections(self, context: str, *,
                            timeout: Optional[float] = None) -> txn.RebuildReport:
        """Rebuild the context's projections from its history (admin); what matched is
        left alone. A long one is better run as a job (start_job). `timeout`: this call's
        deadline (default: an hour, as for every call that reads a whole context)."""
        return self._send(C.rebuild_projections(context, long_timeout(timeout)))

    # -- server-side jobs (audit, rebuild-projections, retention, rebuild-index) -----------------
    def start_job(self, context: str, kind: str) -> common.Job:
        """Start `kind` on `context` as a server-side job: answered at once (poll job()).
        Kinds: audit, rebuild-projections, retention (apply the context's retention
        policy now: set_retention) and rebuild-index."""
        return self._send(C.start_job(context, kind))

    def job(self, id: str) -> common.Job:
        """The job's state, progress and, once finished, result_json or error_reason."""
        return self._send(C.get_job(id))

    def jobs(self, context: str = "") -> list[common.Job]:
        """The jobs this principal may see (of `context` if given), of both services."""
        return [j for service in (C.TRANSACTION, C.RECALL)
                for j in (self._send(C.list_jobs(service, context))).jobs]

    def cancel_job(self, id: str) -> common.Job:
        """Ask the job to stop at its next check (nothing is left half-done)."""
        return self._send(C.cancel_job(id))

    # -- authorization ---------------------------------------------------------------------------
    def grant(self, context: str, principal: str, rights: Iterable[str], *,
              session: str = "") -> txn.Policy:
        """Give `principal` ("*": every authenticated one) rights among read, write,
        recall, encode, reveal, admin; `session`: for that session only."""
        return self._send(C.set_policy(context, "grant", principal, rights, session))

    def revoke(self, context: str, principal: str, rights: Iterable[str], *,
               session: str = "") -> txn.Policy:
        return self._send(C.set_policy(context, "revoke", principal, rights, session))

    def set_retention(self, context: str, policy: str) -> txn.Policy:
        """Set the context's retention policy, "(retention (kinds KIND...) (days N))", or
        "none" to have none (administrators; docs/privacy.md): the content of those kinds
        older than N days by occurred time is erased when it falls due. policy() and
        status() show it and when it is next due."""
        return self._send(C.set_retention(context, policy))

    def erase(self, context: str, *, refs: Iterable[str] = (), session: str = "",
              actor: str = "", phrase: str = "", kinds: Iterable[str] = (), since: str = "",
              until: str = "", reason: str = "", dry_run: bool = False,
              timeout: Optional[float] = None) -> txn.Erasure:
        """Remove the content of the events these criteria name (all of them hold:
        refs, a session, an actor, a phrase in the text, kinds, occurred time in
        [since, until)) and of what was derived only from them, from every copy the
        server holds (docs/privacy.md); `reason` is required, the caller needs the erase
        right (administrators hold it). `dry_run`: what it would take, nothing changed.
        The reply lists what was (or would be) taken and the store's rewrite.
        `timeout`: its deadline (default: an hour)."""
        return self._send(C.erase(context, refs=refs, session=session, actor=actor,
                                   phrase=phrase, kinds=kinds, since=since, until=until,
                                   reason=reason, dry_run=dry_run,
                                   timeout=long_timeout(timeout)))

    def delete_context(self, context: str, *, reason: str,
                       timeout: Optional[float] = None) -> txn.ContextDeleted:
        """Remove the context whole (events, Mind, snapshots, index, vectors, jobs); its
        name is free again. Administrators, with a reason (docs/privacy.md). `timeout`:
        its deadline (default: an hour)."""
        return self._send(C.delete_context(context, reason, long_timeout(timeout)))

    def export(self, context: str, *, since: str = "", until: str = "",
               reveal_secrets: bool = False,
               timeout: Optional[float] = None) -> Iterator[txn.ExportPage]:
        """The context's events, a page at a time with its progress (`done` of `total`),
        as the lines `morphz context import` reads (docs/privacy.md): occurred time in
        [since, until); secrets' text only with `reveal_secrets` (and the reveal right);
        erased events as placeholders. The whole stream has one deadline (`timeout`,
        default an hour)."""
        return self._stream(C.export(context, since, until, reveal_secrets,
                                     long_timeout(timeout)))

    def policy(self, context: str) -> txn.Policy:
        return self._send(C.policy(context))

    def contexts(self) -> list[str]:
        """The contexts this principal may read."""
        return list((self._send(C.list_contexts())).contexts)

    # -- recall ------------------------------------------------------------------------------------
    def search(self, context: str, query: str = "", *, since: str = "", until: str = "",
               limit: int = 0, kinds: Iterable[str] = (), states: Iterable[str] = (),
               sessions: Iterable[str] = (), cursor: str = "", mode: str = "",
               evaluation: Optional[Evaluation] = None,
               min_commit_seq: Optional[int] = None) -> rec.SearchResponse:
        """mode: hybrid (the server's default), lexical or vector (each hit then says its
        rank in each leg: lexical_rank, vector_rank). min_commit_seq: the context version the
        index must reach first; None: this client's last write's in the context (read
        your writes), 0: the index as it is. `unclosed_lag` in the reply: what the
        server's bounded wait could not close."""
        if min_commit_seq is None:
            min_commit_seq = self.positions.of(context)
        return self._send(C.search(context, query, since=since, until=until, limit=limit,
                                   kinds=kinds, states=states, sessions=sessions,
                                   cursor=cursor, mode=mode, evaluation=evaluation,
                                   min_commit_seq=min_commit_seq))

    def read(self, context: str, ref: str, *, offset: int = 0, limit: int = 0,
             evaluation: Optional[Evaluation] = None) -> rec.ReadResponse:
        """A page of an event's (@eN, id) or a frame's full text."""
        return self._send(C.read(context, ref, offset=offset, limit=limit,
                                 evaluation=evaluation))

    def traverse(self, context: str, frame_id: str, *, depth: Optional[int] = None,
                 direction: str = "", include_bodies: bool = False,
                 include_events: bool = False, max_nodes: int = 0, max_bytes: int = 0,
                 cursor: str = "", evaluation: Optional[Evaluation] = None) \
            -> rec.TraverseResponse:
        """One page of the graph walk from a frame (ancestors | descendants | both)."""
        return self._send(C.traverse(
            context, frame_id, depth=depth, direction=direction,
            include_bodies=include_bodies, include_events=include_events,
            max_nodes=max_nodes, max_bytes=max_bytes, cursor=cursor, evaluation=evaluation))

    def walk(self, context: str, frame_id: str, *, depth: Optional[int] = None,
             direction: str = "", include_bodies: bool = False, include_events: bool = False,
             max_nodes: int = 0, max_bytes: int = 0) -> Iterator[rec.TraverseResponse]:
        """Every page of a traversal, following next_cursor (RECALL_CURSOR_STALE: the
        Mind changed between pages; walk again)."""
        yield from following(lambda cursor: self.traverse(
            context, frame_id, depth=depth, direction=direction, include_bodies=include_bodies,
            include_events=include_events, max_nodes=max_nodes, max_bytes=max_bytes,
            cursor=cursor))

    def inspect_index(self, context: str) -> rec.IndexStatus:
        return self._send(C.inspect_index(context))

    def rebuild_index(self, context: str, *,
                      timeout: Optional[float] = None) -> rec.IndexStatus:
        """Drop and rebuild the context's recall index from its events and frames.
        `timeout`: its deadline (default: an hour)."""
        return self._send(C.rebuild_index(context, long_timeout(timeout)))

    # -- encoding and snapshots -----------------------------------------------------------------------
    def compile(self, context: str, *, session: str, activation: str = "",
                budget_bytes: int = 0, budget_tokens: int = 0, preview_bytes: int = 0,
                must_read: Iterable[str] = (), scope: Optional[Mapping[str, Any]] = None,
                parent_snapshot: str = "", model: str = "", evaluation_profile: str = "",
                bindings: Optional[Mapping[str, str]] = None,
                capabilities: bool = False) -> enc.Encoding:
        """The Context Encoding for one model call, frozen as a snapshot. Without
        `activation` it claims the session's pending inputs (a new activation)."""
        return self._send(C.compile(
            context, session=session, activation=activation, budget_bytes=budget_bytes,
            budget_tokens=budget_tokens, preview_bytes=preview_bytes, must_read=must_read,
            scope=scope, parent_snapshot=parent_snapshot, model=model,
            evaluation_profile=evaluation_profile, bindings=bindings,
            capabilities=capabilities))

    def show_snapshot(self, context: str, snapshot: str) -> dict[str, Any]:
        """The stored snapshot record (JSON, decoded)."""
        return json.loads(self._send(C.show_snapshot(context, snapshot)).record_json)

    def replay_snapshot(self, context: str, snapshot: str) -> enc.ReplayReport:
        return self._send(C.replay_snapshot(context, snapshot))

    def check_snapshot(self, context: str, snapshot: str) -> enc.CheckReport:
        return self._send(C.check_snapshot(context, snapshot))

    def read_snapshot(self, context: str, snapshot: str, ref: str, *, offset: int = 0,
                      limit: int = 0) -> enc.ReadResult:
        return self._send(C.read_snapshot(context, snapshot, ref, offset=offset, limit=limit))

    def search_snapshot(self, context: str, snapshot: str, query: str, *,
                        limit: int = 0) -> enc.SearchResult:
        return self._send(C.search_snapshot(context, snapshot, query, limit=limit))

    def list_snapshots(self, context: str, *, session: str = "", activation: str = "",
                       since: str = "", until: str = "", limit: int = 0,
                       cursor: str = "") -> enc.SnapshotList:
        """A page of the context's snapshots, newest first: a session's, an activation's
        or (empty filters) the whole context's, frozen in [since, until)."""
        return self._send(C.list_snapshots(context, session=session, activation=activation,
                                           since=since, until=until, limit=limit,
                                           cursor=cursor))

    def snapshot_pages(self, context: str, *, session: str = "", activation: str = "",
                       since: str = "", until: str = "",
                       limit: int = 0) -> Iterator[enc.SnapshotList]:
        """Every page of list_snapshots, following next_cursor."""
        yield from following(lambda cursor: self.list_snapshots(
            context, session=session, activation=activation, since=since, until=until,
            limit=limit, cursor=cursor))

    def evaluation(self, context: str, activation: str) -> enc.EvaluationView:
        """One evaluation by reference: its inputs, snapshots, recall calls, actions,
        transactions and the Mind's change, with its session's previous and next."""
        return self._send(C.evaluation(context, activation))


__all__ = ["Client", "MorphzError"]
