"""What TransactionCore's entry points answer: frozen records, one per reply.

The servicer turns them into protobuf (convert.py), the CLI into text or JSON. Callers
read their fields as attributes; `plain()` gives the reply's JSON-shaped form, where an
optional field (default None) left None is absent, as from the reply message."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Iterator, Optional

import msgspec

from morphz.shared.mind import records as R
from morphz.shared.mind.receipts import AppendReceipt, OpOutcome, TxReceipt

_SCALARS = (str, int, bool, float, type(None))


def plain(value: Any) -> Any:
    """A result (or a value it holds) as the JSON-shaped value of its reply."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Result):
        return value.plain()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, msgspec.Struct):  # a stored receipt's part (OpOutcome)
        return msgspec.structs.asdict(value)
    return R.plain(value)  # a record's dataclass


class Result:
    """Base of the result records."""
    __slots__ = ()

    def plain(self) -> dict:
        return {n: plain(getattr(self, n)) for n in self._present()}

    def _present(self) -> Iterator[str]:
        """The fields of the reply: all but the optional ones left None."""
        optional = self._optional()
        return (n for n in self._fields() if n not in optional or getattr(self, n) is not None)

    @classmethod
    def _fields(cls) -> tuple[str, ...]:
        names = cls.__dict__.get("_field_names")
        if names is None:
            names = tuple(f.name for f in fields(cls))
            type.__setattr__(cls, "_field_names", names)
        return names

    @classmethod
    def _optional(cls) -> frozenset[str]:
        """The fields absent from the plain form while None (those whose default is None)."""
        names = cls.__dict__.get("_optional_names")
        if names is None:
            names = frozenset(f.name for f in fields(cls) if f.default is None)
            type.__setattr__(cls, "_optional_names", names)
        return names


def _result(cls):
    """A frozen result record, equal to another of its type with equal fields."""
    return dataclass(frozen=True)(cls)


@_result
class Capacity(Result):
    released_now_bytes: int
    released_after_window_bytes: int
    released_now: tuple[str, ...]
    released_after_window: tuple[str, ...]


@_result
class CommitResult(Result):
    revision: int
    base_version: int
    results: tuple[OpOutcome, ...]
    capacity: Capacity
    cognitive_tick: int
    event_ref: str
    rebased: bool
    rebased_from: int
    replayed: bool = False
    commit_seq: Optional[int] = None

    @staticmethod
    def of(r: TxReceipt, *, replayed: bool = False,
           commit_seq: Optional[int] = None) -> "CommitResult":
        return CommitResult(
            r.revision, r.base_version, r.results,
            Capacity(r.released_now_bytes, r.released_after_window_bytes, r.released_now,
                     r.released_after_window),
            r.cognitive_tick, R.ref(r.seq), r.rebased, r.rebased_from, replayed, commit_seq)


@_result
class AppendResult(Result):
    ref: str
    seq: int
    id: str
    session: Optional[str] = None  # a causal-scope event's (action, call result, message)
    activation: Optional[str] = None
    call: Optional[str] = None
    returned_to: Optional[str] = None
    target_session: Optional[str] = None
    replayed: bool = False
    commit_seq: Optional[int] = None

    @staticmethod
    def of(r: AppendReceipt, *, replayed: bool = False,
           commit_seq: Optional[int] = None) -> "AppendResult":
        return AppendResult(R.ref(r.seq), r.seq, r.id, r.session, r.activation, r.call,
                            r.returned_to, r.target_session, replayed, commit_seq)


@_result
class AppendBatchResult(Result):
    events: tuple[AppendResult, ...]


@_result
class ActivationResult(Result):
    id: str
    session: str
    claimed: tuple[str, ...]
    root: str
    tick: int
    tick_advanced: bool
    retired_frames: tuple[str, ...]
    delivered: bool
    results: tuple[str, ...]

    @staticmethod
    def of(act: R.Activation) -> "ActivationResult":
        return ActivationResult(act.id, act.session, tuple(R.ref(s) for s in act.claimed),
                                R.ref(act.root) if act.root is not None else "", act.tick,
                                act.tick_advanced, tuple(act.retired_frames), act.delivered,
                                tuple(R.ref(s) for s in act.results))


@_result
class SessionStatus(Result):
    id: str
    state: str
    level: str
    pending: int
    messages_waiting: int
    outstanding_calls: int


@_result
class StatusResult(Result):
    context: str
    revision: int
    cognitive_tick: int
    window: int
    frames_by_state: Mapping[str, int]
    sessions: tuple[SessionStatus, ...]
    event_count: int
    commit_seq: int
    shard: str
    owner: Optional[str] = None  # with a coordinator (ownership.describe)
    owner_address: Optional[str] = None
    fencing_token: Optional[int] = None
    retention: Optional["RetentionView"] = None  # its retention policy, if it has one


@_result
class Relation(Result):
    subject: str
    name: str
    object: str


@_result
class RetireView(Result):
    generation: int
    requested_tick: int
    due_tick: int
    reason: str
    frame_revision: int
    remaining_ticks: int


@_result
class ErasedNote(Result):
    """What an erased item says of its erasure (PRIV-01): the erasure event, who made
    it, why and when."""
    erasure: str
    by: str
    reason: str
    at: str


@_result
class FrameResult(Result):
    id: str
    revision: int
    body: str
    sources: tuple[str, ...]
    state: str
    protected: bool
    retire: Optional[RetireView]
    generation: int
    changed_at: int
    secret: bool
    as_of_revision: int
    relations: tuple[Relation, ...]
    erased: Optional[ErasedNote] = None  # the body was taken by an erasure


@_result
class FrameListResult(Result):
    revision: int
    frames: tuple[FrameResult, ...]
    next_cursor: str


@_result
class EventResult(Result):
    seq: int
    id: str
    kind: str
    time: str
    context: str
    session: str
    actor: str
    causal_refs: tuple[str, ...]
    text: str
    request_id: str
    secret: bool
    occurred_at: str
    ref: str
    state: str
    protected: bool
    activation: Optional[str] = None  # where the event belongs (EventResult docs: proto)
    call: Optional[str] = None
    target_session: Optional[str] = None
    erased: Optional[ErasedNote] = None  # its content (a transaction's: some frame bodies)
    # was taken by an erasure; the text says so


@_result
class Grant(Result):
    principal: str
    right: str
    session: str


@_result
class RetentionView(Result):
    """A context's retention policy (core/retention.py): its text, kinds and days, the
    policy event that set it, and when this server's timer next applies it ("": only on
    demand) and its period in seconds."""
    policy: str
    kinds: tuple[str, ...]
    days: int
    set_at: str
    next_due: str
    every_seconds: int


@_result
class RetentionState(Result):
    """A context's retention policy (None: it has none)."""
    context: str
    retention: Optional[RetentionView] = None


@_result
class PolicyResult(Result):
    context: str
    grants: tuple[Grant, ...]
    event_ref: str
    retention: Optional[RetentionView] = None


@_result
class ProjectionCheck(Result):
    projection: str
    match: bool
    differences: tuple[str, ...]


@_result
class ChainCheck(Result):
    match: bool
    checked: int
    first_broken: str
    problem: str
    erased: int = 0  # events whose content an erasure removed, wholly or in part


@_result
class AuditResult(Result):
    context: str
    match: bool
    events_replayed: int
    projections: tuple[ProjectionCheck, ...]
    chain: ChainCheck
    replay_error: str


@_result
class RebuildResult(Result):
    context: str
    events_replayed: int
    rewritten: Mapping[str, int]
    unrepairable: tuple[str, ...]
    quarantined: tuple[str, ...]


@_result
class ContextList(Result):
    contexts: tuple[str, ...]


@_result
class Reclaimed(Result):
    """What rewriting the store took (Store.reclaim)."""
    engine: str
    bytes_before: int
    bytes_after: int
    duration_ms: int


@_result
class ErasureResult(Result):
    """What an erasure took (or, a dry run, would take): the erasure events it committed
    (a large selection is erased in steps, each its own), the events erased whole, the
    transactions whose frame bodies it took, the frames whose present body and the frame
    versions (`ID@REVISION`) whose bodies it took, the checkpoints and encoding snapshots
    that held or showed them, and the store's rewrite."""
    context: str
    dry_run: bool
    erasures: tuple[str, ...]
    events: tuple[str, ...]
    transactions: tuple[str, ...]
    frames: tuple[str, ...]
    frame_versions: tuple[str, ...]
    checkpoints: tuple[str, ...]
    snapshots: tuple[str, ...]
    commit_seq: int = 0
    reclaimed: Optional[Reclaimed] = None


@_result
class RetentionResult(Result):
    """A retention policy applied (the `retention` job): the policy, the time before
    which the events of its kinds occurred to be erased, how many events it erased and
    the erasure events it committed (none when nothing was due), the store's rewrite."""
    context: str
    policy: str
    cutoff: str
    erased_events: int
    erasures: tuple[str, ...]
    commit_seq: int = 0
    reclaimed: Optional[Reclaimed] = None


@_result
class DeleteResult(Result):
    """A context deleted (PRIV-05): how many events it held, and the store's rewrite."""
    context: str
    event_count: int
    reclaimed: Optional[Reclaimed] = None
