"""The Writer: how a transaction core's write reaches storage, injected into the core.

Every write follows the same path: make sure this instance owns the context (its
fencing token; ownership.py), open a reader, build one event, apply it with the reducer
to a candidate MindState, hand the resulting batch to storage with the physical version
it was computed from and the token. If another writer got there first, redo it.

The event is applied to the durable state plus this context's commits still in flight,
submitted in order, and answered only once durable (pipeline.py)."""
from __future__ import annotations

import threading
import uuid
from datetime import datetime
from typing import Callable, Optional, Union

from opentelemetry import trace

from morphz.services.transaction.core import chain, payloads as P
from morphz.services.transaction.core.builds import (
    Batch, Build, Proposed, RawWrite, apply_batch)
from morphz.services.transaction.core.ownership import SOLE_OWNER, Ownership
from morphz.services.transaction.core.pipeline import ContextPipeline
from morphz.services.transaction.core.reducer import Applied, apply_event
from morphz.services.transaction.core.results import (
    AppendBatchResult, AppendResult, CommitResult, Result)
from morphz.shared.deadline import NEVER, Deadline
from morphz.shared.errors import MorphzError
from morphz.shared.limits import COMMIT_BYTES
from morphz.shared.mind import records as R
from morphz.shared.mind.receipts import TxReceipt
from morphz.shared.mind.state import MindState
from morphz.shared.mind.visibility import Viewer
from morphz.shared.names import check_name
from morphz.shared.process.faults import NO_FAULTS, Faults
from morphz.shared.process.telemetry import NO_TRACING
from morphz.shared.storage.api import StaleCommit, StaleRead, Store, Write
from morphz.shared.storage.owner_cache import OwnerCache

_WRITE_ATTEMPTS = 64
_STOPPED = ("DEADLINE_EXCEEDED", "CANCELLED")  # a deadline's reasons: no retry on storage's rows


class Writer:
    """Builds and commits one context's writes: `write(context, build)`. `cache`: the
    write path's rows over a remote store (owner_cache.py); only the writer reads there.
    `owners`: which contexts this instance may write, and their tokens."""

    def __init__(self, store: Store, *, cache: Optional[OwnerCache] = None,
                 owners: Ownership = SOLE_OWNER,
                 tracer: Optional[trace.Tracer] = None, faults: Faults = NO_FAULTS,
                 clock: Callable[[], datetime] = None,
                 new_id: Callable[[], str] = None) -> None:
        self._store = store
        self._cache = cache
        self._writes: Union[Store, OwnerCache] = cache or store
        self._owners = owners
        self._tracer = tracer or NO_TRACING
        self._faults = faults
        self._pipelines: dict[str, ContextPipeline] = {}
        self._pipelines_lock = threading.Lock()
        self._clock = clock or (lambda: datetime.now().astimezone())
        self._new_id = new_id or (lambda: uuid.uuid4().hex)

    def pipeline(self, context: str) -> ContextPipeline:
        with self._pipelines_lock:
            return self._pipelines.setdefault(context, ContextPipeline())

    def delete(self, context: str, check: Callable[[MindState], int]) -> int:
        """Delete `context` from storage once none of its commits is in flight and
        `check` passed on its rows, and drop what the write path keeps of it (what
        `check` gave)."""
        pipe = self.pipeline(context)
        with pipe.lock:
            self.settle(pipe)  # none of its commits still in flight
            with self._store.reader(context) as reader:
                found = check(MindState(reader))
            self._store.delete_context(context)
            if self._cache is not None:
                self._cache.forget(context)
        return found

    def write(self, context: str, build: Build, with_seq: bool = False,
              deadline: Deadline = NEVER) -> tuple[Union[Applied, Result], int]:
        """`build` returns the event to apply, or a finished reply (idempotent retry).
        (what applying the event gave, or the finished reply; the commit_seq or 0).
        A transaction committed for a session may name only what that session sees.
        `with_seq`: the reply says the context's `commit_seq` once the write is durable
        (a retry's: the context's then), for a search that must read it (RECALL-13).
        `deadline`: looked at once the event is validated, before its writes are
        submitted; once submitted, a write completes whatever the deadline (SEC-07)."""
        pipe = self.pipeline(context)
        cached = self._cache is not None  # False: read from storage itself
        for _ in range(_WRITE_ATTEMPTS):
            try:
                with pipe.lock:
                    # First: a context this instance may not write is refused unread.
                    fence = self._owners.token(context)
                    if not fence:  # unfenced: never computed over commits in flight
                        self.settle(pipe)
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
                self._await(pipe, context, fence, writes, ticket)
                self._faults.hit("after-commit-before-reply")
                return reply, seq if with_seq else 0
            except (StaleCommit, StaleRead):
                continue
        raise MorphzError("CONCURRENT_UPDATE", "too many concurrent writers; try again",
                          context=context)

    def _await(self, pipe: ContextPipeline, context: str, fence: int,
               writes: list[Write], ticket) -> None:
        """Wait until the submitted `writes` are durable; what failed tells the pipeline
        (its successors fail too) and a fenced-out owner (etcd is asked again)."""
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

    def settle(self, pipe: ContextPipeline) -> None:
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
            check_size(writes)
            # Validated: the last moment a caller that gave up stops it, all of it unsent.
            deadline.check("the commit")
            self._faults.hit("after-token-before-submit")
            ticket = self._writes.submit(context, reader.commit_seq, writes, fence=fence,
                                         timeout=deadline.remaining())
            pipe.push(reader.commit_seq + 1, writes, ticket)
            return ev, reply, writes, ticket, reader.commit_seq + 1

    def event(self, m: MindState, context: str, kind: str, payload: P.Payload,
              data: Optional[dict] = None, **fields) -> Proposed:
        """The next event of `context`, its data the stored form of `payload` (`data`:
        that form when the caller has it already)."""
        meta = m.meta()
        seq = meta.next_seq if meta else 0
        return Proposed(R.Event(seq=seq, id=self._new_id(), kind=kind, context=context,
                                time=self._clock().isoformat(timespec="microseconds"),
                                data=payload.to_data() if data is None else data, **fields),
                        payload)


def replayed(m: MindState, request_id: str, request_hash: str) -> Optional[Result]:
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


def check_size(writes: list[Write]) -> None:
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
