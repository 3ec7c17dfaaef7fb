"""AsyncClient: the asyncio Morphz client over grpc.aio, with the same methods, options,
replies, retries and errors as Client (client.py); each method is a coroutine and
`walk` an async iterator.

    async with AsyncClient("127.0.0.1:7070") as mz:
        receipt = await mz.commit("demo", tx, session="main")
"""
from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable, Mapping, Optional

import grpc

from morphz.api.common.v1 import common_pb2 as common
from morphz.api.encoding.v1 import encoding_pb2 as enc
from morphz.api.recall.v1 import recall_pb2 as rec
from morphz.api.transaction.v1 import transaction_pb2 as txn
from morphz.client import calls as C
from morphz.client.calls import FRAME_PAGE_BYTES, Call, Evaluation, TxInput
from morphz.client.client import STUBS
from morphz.client.errors import from_rpc_error
from morphz.client.options import (DEFAULT_TIMEOUT, Credentials,
                                   RetryPolicy, aio_channel, check_timeout,
                                   long_timeout, service_targets)
from morphz.client.retry import MAX_REDIRECTS, redirect, retryable


async def following(page_at: Callable[[str], Awaitable[Any]]) -> AsyncIterator[Any]:
    """client.following for the asyncio client: each page awaited in turn."""
    cursor = ""
    while True:
        page = await page_at(cursor)
        yield page
        if not page.next_cursor:
            return
        cursor = page.next_cursor


class AsyncClient:
    """As Client; create it inside the event loop that uses it."""

    def __init__(self, target: Optional[str] = None, *, recall: Optional[str] = None,
                 encoding: Optional[str] = None, credentials: Optional[Credentials] = None,
                 timeout: float = DEFAULT_TIMEOUT,
                 retry: Optional[RetryPolicy] = None) -> None:
        self.credentials = Credentials.from_env() if credentials is None else credentials
        self.timeout = check_timeout(timeout)
        self.retry = RetryPolicy() if retry is None else retry
        self._metadata = self.credentials.metadata()
        self.positions = C.WritePositions()  # what searches read after (RECALL-13)
        self.targets = service_targets(target, recall=recall, encoding=encoding)
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs = {service: STUBS[service](self._channel(address))
                       for service, address in self.targets.items()}

    # -- plumbing ----------------------------------------------------------------------------
    def _channel(self, address: str) -> grpc.aio.Channel:
        if address not in self._channels:
            self._channels[address] = aio_channel(address, self.credentials)
        return self._channels[address]

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def _send(self, call: Call) -> Any:
        stub = self._stubs[call.service]
        backoffs = self.retry.backoffs()
        hops = 0
        while True:
            try:
                reply = await getattr(stub, call.method)(
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
            await asyncio.sleep(wait)

    async def _stream(self, call: Call) -> AsyncIterator[Any]:
        """A server stream's messages as they come; retried (when its call is safe to
        repeat) only until its first message, so no message is given twice."""
        backoffs = self.retry.backoffs()
        while True:
            started = False
            try:
                async for message in getattr(self._stubs[call.service], call.method)(
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
            await asyncio.sleep(wait)

    # -- contexts ------------------------------------------------------------------------------
    async def create_context(self, context: str, *, window: int = 0) -> txn.ContextStatus:
        """A new context (`window`: the organizing window in ticks; 0: default 8)."""
        return await self._send(C.create_context(context, window))

    async def status(self, context: str) -> txn.ContextStatus:
        return await self._send(C.status(context))

    # -- events ----------------------------------------------------------------------------------
    async def append_event(self, context: str, *, session: str, kind: str, text: str,
                           actor: str = "", causal_refs: Iterable[str] = (), activation: str = "",
                           target_session: str = "", secret: bool = False,
                           request_id: Optional[str] = None,
                           occurred_at: str = "") -> txn.AppendEventResponse:
        """Any input: user-message | tool-result | approval | external | message | action.
        request_id None: a fresh one (the call is then retried safely); "": none.
        secret: the text is shown as [secret @eN] unless a read asks to reveal it.
        occurred_at: when it happened at its source, ISO 8601 with a UTC offset (else
        it happened when recorded); time-range recall filters on it."""
        return await self._send(C.append_event(
            context, session=session, kind=kind, text=text, actor=actor,
            causal_refs=causal_refs, activation=activation, target_session=target_session,
            secret=secret, request_id=request_id, occurred_at=occurred_at))

    async def append_events(self, context: str,
                            events: Iterable[dict]) -> txn.AppendEventsResponse:
        """Many events in one commit (all or none), each given as append_event's keywords;
        each keeps its own request id, so a batch sent again applies only what was not."""
        return await self._send(C.append_events(context, events))

    async def send_message(self, context: str, *, session: str, to: str, text: str,
                           actor: str = "", request_id: Optional[str] = None) \
            -> txn.AppendEventResponse:
        """A message from `session` waiting in session `to`'s inbox."""
        return await self.append_event(context, session=session, kind="message", text=text,
                                       actor=actor, target_session=to, request_id=request_id)

    async def record_action(self, context: str, *, session: str, activation: str, text: str,
                            actor: str = "", causal_refs: Iterable[str] = (),
                            request_id: Optional[str] = None) -> txn.AppendEventResponse:
        """A tool call the open `activation` of `session` issues."""
        return await self.append_event(context, session=session, kind="action", text=text,
                                       actor=actor, causal_refs=causal_refs, activation=activation,
                                       request_id=request_id)

    async def tool_result(self, context: str, *, text: str, call: str = "", session: str = "",
                          actor: str = "", request_id: Optional[str] = None) \
            -> txn.AppendEventResponse:
        """A tool's result; `call`: the action (@eN) it answers (it then belongs to that
        call's session, and `session` may stay empty)."""
        return await self.append_event(context, session=session, kind="tool-result", text=text,
                                       actor=actor, causal_refs=[call] if call else [],
                                       request_id=request_id)

    async def event(self, context: str, ref: str, *, reveal_secrets: bool = False) -> txn.Event:
        """One event by @eN or full id (operator's read: every session's)."""
        return await self._send(C.event(context, ref, reveal_secrets))

    # -- activations -----------------------------------------------------------------------------
    async def activate(self, context: str, *, session: str) -> txn.Activation:
        """Claim the session's pending inputs as one evaluation (never retried)."""
        return await self._send(C.activate(context, session))

    async def deliver(self, context: str, activation: str) -> txn.Activation:
        """The evaluation answered: its root request may now be retired."""
        return await self._send(C.deliver(context, activation))

    # -- transactions and the Mind -----------------------------------------------------------------
    async def commit(self, context: str, tx: TxInput, *, session: str = "", activation: str = "",
                     request_id: Optional[str] = None) -> txn.Receipt:
        """Commit one context-tx: DSL text, a Tx builder or a Transaction message.
        A TX_CONFLICT raises ConflictError naming the changed boundaries."""
        return await self._send(C.commit(context, tx, session=session, activation=activation,
                                         request_id=request_id))

    async def frame(self, context: str, frame_id: str, *, at_revision: int = 0,
              reveal_secrets: bool = False) -> txn.Frame:
        return await self._send(C.frame(context, frame_id, at_revision, reveal_secrets))

    async def frames(self, context: str, *, reveal_secrets: bool = False, max_bytes: int = 0,
                     cursor: str = "") -> txn.FrameList:
        """Every frame of the Mind, in projection order (REPLY_TOO_LARGE: more than one
        message holds; list them in pages); with max_bytes, the page from `cursor`."""
        return await self._send(C.frames(context, reveal_secrets, max_bytes, cursor))

    async def frame_pages(self, context: str, *, reveal_secrets: bool = False,
                          max_bytes: int = FRAME_PAGE_BYTES) -> AsyncIterator[txn.FrameList]:
        """Every page of the frames, following next_cursor (FRAMES_CURSOR_STALE: the Mind
        changed between pages; list again)."""
        async for page in following(lambda cursor: self.frames(
                context, reveal_secrets=reveal_secrets, max_bytes=max_bytes, cursor=cursor)):
            yield page

    async def audit(self, context: str) -> txn.AuditReport:
        return await self._send(C.audit(context))

    async def rebuild_projections(self, context: str, *,
                                  timeout: Optional[float] = None) -> txn.RebuildReport:
        return await self._send(C.rebuild_projections(context, long_timeout(timeout)))

    # -- server-side jobs (audit, rebuild-projections, retention, rebuild-index) -----------------
    async def start_job(self, context: str, kind: str) -> common.Job:
        """Start `kind` on `context` as a server-side job: answered at once (poll job())."""
        return await self._send(C.start_job(context, kind))

    async def job(self, id: str) -> common.Job:
        """The job's state, progress and, once finished, result_json or error_reason."""
        return await self._send(C.get_job(id))

    async def jobs(self, context: str = "") -> list[common.Job]:
        """The jobs this principal may see (of `context` if given), of both services."""
        return [j for service in (C.TRANSACTION, C.RECALL)
                for j in (await self._send(C.list_jobs(service, context))).jobs]

    async def cancel_job(self, id: str) -> common.Job:
        """Ask the job to stop at its next check (nothing is left half-done)."""
        return await self._send(C.cancel_job(id))

    # -- authorization ---------------------------------------------------------------------------
    async def grant(self, context: str, principal: str, rights: Iterable[str], *,
              session: str = "") -> txn.Policy:
        """Give `principal` ("*": every authenticated one) rights among read, write,
        recall, encode, reveal, admin; `session`: for that session only."""
        return await self._send(C.set_policy(context, "grant", principal, rights, session))

    async def revoke(self, context: str, principal: str, rights: Iterable[str], *,
               session: str = "") -> txn.Policy:
        return await self._send(C.set_policy(context, "revoke", principal, rights, session))

    async def set_retention(self, context: str, policy: str) -> txn.Policy:
        """Set the context's retention policy, "(retention (kinds KIND...) (days N))", or
        "none" (administrators; docs/privacy.md)."""
        return await self._send(C.set_retention(context, policy))

    async def erase(self, context: str, *, refs: Iterable[str] = (), session: str = "",
                    actor: str = "", phrase: str = "", kinds: Iterable[str] = (),
                    since: str = "", until: str = "", reason: str = "",
                    dry_run: bool = False,
                    timeout: Optional[float] = None) -> txn.Erasure:
        """Remove the content of the events these criteria name (all of them hold:
        refs, a session, an actor, a phrase in the text, kinds, occurred time in
        [since, until)) and of what was derived only from them, from every copy the
        server holds (docs/privacy.md); `reason` is required, the caller needs the erase
        right (administrators hold it). `dry_run`: what it would take, nothing changed.
        The reply lists what was (or would be) taken and the store's rewrite."""
        return await self._send(C.erase(context, refs=refs, session=session, actor=actor,
                                        phrase=phrase, kinds=kinds, since=since, until=until,
                                        reason=reason, dry_run=dry_run,
                                        timeout=long_timeout(timeout)))

    async def delete_context(self, context: str, *, reason: str,
                             timeout: Optional[float] = None) -> txn.ContextDeleted:
        """Remove the context whole (events, Mind, snapshots, index, vectors, jobs); its
        name is free again. Administrators, with a reason (docs/privacy.md)."""
        return await self._send(C.delete_context(context, reason, long_timeout(timeout)))

    def export(self, context: str, *, since: str = "", until: str = "",
               reveal_secrets: bool = False,
               timeout: Optional[float] = None) -> AsyncIterator[txn.ExportPage]:
        """The context's events, a page at a time with its progress (`done` of `total`),
        as the lines `morphz context import` reads (docs/privacy.md): occurred time in
        [since, until); secrets' text only with `reveal_secrets` (and the reveal right);
        erased events as placeholders. The whole stream has one deadline (`timeout`,
        default an hour)."""
        return self._stream(C.export(context, since, until, reveal_secrets,
                                     long_timeout(timeout)))

    async def policy(self, context: str) -> txn.Policy:
        return await self._send(C.policy(context))

    async def contexts(self) -> list[str]:
        """The contexts this principal may read."""
        return list((await self._send(C.list_contexts())).contexts)

    # -- recall ------------------------------------------------------------------------------------
    async def search(self, context: str, query: str = "", *, since: str = "", until: str = "",
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
        return await self._send(C.search(context, query, since=since, until=until, limit=limit,
                                         kinds=kinds, states=states, sessions=sessions,
                                         cursor=cursor, mode=mode, evaluation=evaluation,
                                         min_commit_seq=min_commit_seq))

    async def read(self, context: str, ref: str, *, offset: int = 0, limit: int = 0,
                   evaluation: Optional[Evaluation] = None) -> rec.ReadResponse:
        """A page of an event's (@eN, id) or a frame's full text."""
        return await self._send(C.read(context, ref, offset=offset, limit=limit,
                                       evaluation=evaluation))

    async def traverse(self, context: str, frame_id: str, *, depth: Optional[int] = None,
                       direction: str = "", include_bodies: bool = False,
                       include_events: bool = False, max_nodes: int = 0, max_bytes: int = 0,
                       cursor: str = "", evaluation: Optional[Evaluation] = None) \
            -> rec.TraverseResponse:
        """One page of the graph walk from a frame (ancestors | descendants | both)."""
        return await self._send(C.traverse(
            context, frame_id, depth=depth, direction=direction,
            include_bodies=include_bodies, include_events=include_events,
            max_nodes=max_nodes, max_bytes=max_bytes, cursor=cursor, evaluation=evaluation))

    async def walk(self, context: str, frame_id: str, *, depth: Optional[int] = None,
                   direction: str = "", include_bodies: bool = False, include_events: bool = False,
                   max_nodes: int = 0, max_bytes: int = 0) -> AsyncIterator[rec.TraverseResponse]:
        """Every page of a traversal, following next_cursor (RECALL_CURSOR_STALE: the
        Mind changed between pages; walk again)."""
        async for page in following(lambda cursor: self.traverse(
                context, frame_id, depth=depth, direction=direction,
                include_bodies=include_bodies, include_events=include_events,
                max_nodes=max_nodes, max_bytes=max_bytes, cursor=cursor)):
            yield page

    async def inspect_index(self, context: str) -> rec.IndexStatus:
        return await self._send(C.inspect_index(context))

    async def rebuild_index(self, context: str, *,
                            timeout: Optional[float] = None) -> rec.IndexStatus:
        return await self._send(C.rebuild_index(context, long_timeout(timeout)))

    # -- encoding and snapshots -----------------------------------------------------------------------
    async def compile(self, context: str, *, session: str, activation: str = "",
                      budget_bytes: int = 0, budget_tokens: int = 0, preview_bytes: int = 0,
                      must_read: Iterable[str] = (), scope: Optional[Mapping[str, Any]] = None,
                      parent_snapshot: str = "", model: str = "", evaluation_profile: str = "",
                      bindings: Optional[Mapping[str, str]] = None,
                      capabilities: bool = False) -> enc.Encoding:
        """The Context Encoding for one model call, frozen as a snapshot. Without
        `activation` it claims the session's pending inputs (a new activation)."""
        return await self._send(C.compile(
            context, session=session, activation=activation, budget_bytes=budget_bytes,
            budget_tokens=budget_tokens, preview_bytes=preview_bytes, must_read=must_read,
            scope=scope, parent_snapshot=parent_snapshot, model=model,
            evaluation_profile=evaluation_profile, bindings=bindings,
            capabilities=capabilities))

    async def show_snapshot(self, context: str, snapshot: str) -> dict[str, Any]:
        """The stored snapshot record (JSON, decoded)."""
        return json.loads((await self._send(C.show_snapshot(context, snapshot))).record_json)

    async def replay_snapshot(self, context: str, snapshot: str) -> enc.ReplayReport:
        return await self._send(C.replay_snapshot(context, snapshot))

    async def check_snapshot(self, context: str, snapshot: str) -> enc.CheckReport:
        return await self._send(C.check_snapshot(context, snapshot))

    async def read_snapshot(self, context: str, snapshot: str, ref: str, *, offset: int = 0,
                            limit: int = 0) -> enc.ReadResult:
        return await self._send(C.read_snapshot(context, snapshot, ref, offset=offset, limit=limit))

    async def search_snapshot(self, context: str, snapshot: str, query: str, *,
                              limit: int = 0) -> enc.SearchResult:
        return await self._send(C.search_snapshot(context, snapshot, query, limit=limit))

    async def list_snapshots(self, context: str, *, session: str = "", activation: str = "",
                             since: str = "", until: str = "", limit: int = 0,
                             cursor: str = "") -> enc.SnapshotList:
        return await self._send(C.list_snapshots(
            context, session=session, activation=activation, since=since, until=until,
            limit=limit, cursor=cursor))

    async def snapshot_pages(self, context: str, *, session: str = "", activation: str = "",
                             since: str = "", until: str = "",
                             limit: int = 0) -> AsyncIterator[enc.SnapshotList]:
        async for page in following(lambda cursor: self.list_snapshots(
                context, session=session, activation=activation, since=since, until=until,
                limit=limit, cursor=cursor)):
            yield page

    async def evaluation(self, context: str, activation: str) -> enc.EvaluationView:
        return await self._send(C.evaluation(context, activation))


__all__ = ["AsyncClient"]
