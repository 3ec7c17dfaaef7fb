"""The Driver: everything a case may do to the implementation under test, stated in the
SC model's terms (seed 003), never in one implementation's API.

A driver for another implementation is one subclass of `Driver`: implement the model
operations (contexts, observations, activations, context-tx commits, reads of frames,
events and the encoding) and, for the profiles that need them, the control hooks.
A hook a driver cannot provide raises `NotSupported`; the cases that need it are then
reported not-applicable, never passed.

Rejections are `Rejected(reason, ...)` with the implementation's stable reason code (the
CONFORMANCE cases compare reasons, never messages); a target that does not answer is
`Unreachable`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence


class Rejected(Exception):
    """A structured rejection: `reason` (stable code), `code` (status class, e.g.
    INVALID_ARGUMENT), `details` (offending op index, ref, changed boundaries...)."""

    def __init__(self, reason: str, message: str = "", *, code: str = "",
                 details: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason, self.message, self.code = reason, message, code
        self.details: dict[str, Any] = dict(details or {})


class Unreachable(Exception):
    """The target did not answer (not running, deadline passed)."""


class DeadlineExceeded(Unreachable):
    """The call's deadline passed before the target answered (a transport outcome: what
    the target did meanwhile is for the case to observe)."""


class NotSupported(Exception):
    """The driver cannot do this (a control hook it lacks): the case is not applicable."""


# -- what the operations return ----------------------------------------------------------------
@dataclass(frozen=True)
class SessionState:
    id: str
    state: str
    pending: int = 0
    messages_waiting: int = 0
    outstanding_calls: int = 0


@dataclass(frozen=True)
class Status:
    context: str
    revision: int
    cognitive_tick: int
    window: int
    event_count: int
    frames_by_state: Mapping[str, int] = field(default_factory=dict)
    sessions: tuple[SessionState, ...] = ()
    commit_seq: int = 0  # the context's physical version: what a search can wait for
    # SC-Distributed: the runtime instance owning the context now and its fencing token.
    owner: str = ""
    owner_address: str = ""
    fencing_token: int = 0
    shard: str = ""  # the store (shard) the context is placed on, where there are several

    def session(self, sid: str) -> Optional[SessionState]:
        return next((s for s in self.sessions if s.id == sid), None)


@dataclass(frozen=True)
class Appended:
    """An observation (event) once recorded."""
    ref: str        # @eN
    seq: int
    id: str         # stable full id
    replayed: bool  # the answer to a retry of an already applied request id
    session: str = ""
    activation: str = ""
    call: str = ""
    returned_to: str = ""  # a call result: "activation" or "session"
    commit_seq: int = 0


@dataclass(frozen=True)
class Activation:
    id: str
    session: str
    claimed: tuple[str, ...]
    root: str
    tick: int
    tick_advanced: bool
    retired_frames: tuple[str, ...] = ()
    delivered: bool = False
    results: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpResult:
    index: int
    op: str
    target: str
    outcome: str
    frame_revision: int = 0
    due_tick: int = 0


@dataclass(frozen=True)
class Receipt:
    revision: int
    base_version: int
    results: tuple[OpResult, ...]
    released_now: tuple[str, ...] = ()
    released_now_bytes: int = 0
    released_after_window: tuple[str, ...] = ()
    released_after_window_bytes: int = 0
    cognitive_tick: int = 0
    event_ref: str = ""
    replayed: bool = False
    rebased: bool = False
    commit_seq: int = 0

    @property
    def outcomes(self) -> list[str]:
        return [r.outcome for r in self.results]


@dataclass(frozen=True)
class RetireRequest:
    generation: int
    requested_tick: int
    due_tick: int
    remaining_ticks: int
    reason: str
    frame_revision: int


@dataclass(frozen=True)
class Relation:
    subject: str
    name: str
    object: str


@dataclass(frozen=True)
class ErasedMark:
    """PRIV-01: what an erased item says of the erasure that took its content."""
    erasure: str  # the erasure's own event, @eN
    by: str       # the principal that made it
    reason: str
    at: str       # when (ISO 8601)


@dataclass(frozen=True)
class Frame:
    id: str
    revision: int
    state: str
    protected: bool
    sources: tuple[str, ...]
    body: str
    retire: Optional[RetireRequest] = None
    generation: int = 0
    relations: tuple[Relation, ...] = ()
    secret: bool = False
    erased: Optional[ErasedMark] = None


@dataclass(frozen=True)
class Event:
    id: str
    seq: int
    ref: str
    kind: str
    actor: str
    session: str
    causal_refs: tuple[str, ...]
    time: str
    text: str
    state: str
    protected: bool
    context: str
    secret: bool = False
    occurred_at: str = ""
    erased: Optional[ErasedMark] = None


@dataclass(frozen=True)
class Part:
    owner: str  # "runtime" (a runtime fact) or "agent" (written through context-tx)
    start: int
    end: int


@dataclass(frozen=True)
class Item:
    region: str
    kind: str
    key: str
    start: int
    end: int
    parts: tuple[Part, ...] = ()
    residency: str = ""  # observations: full | preview
    state: str = ""
    remaining_ticks: int = 0
    shown_bytes: int = 0
    total_bytes: int = 0
    revision: int = 0  # frames: the frame revision shown


@dataclass(frozen=True)
class Pressure:
    """Context pressure as a signal: how full the encoding is against its budget."""
    level: str  # normal | elevated | maintenance
    used_bytes: int
    limit_bytes: int
    external_actions_deferred: bool = False


@dataclass(frozen=True)
class Scope:
    """What an evaluation may see; it can only be narrowed (empty: no narrower)."""
    sessions: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    frames: tuple[str, ...] = ()


@dataclass(frozen=True)
class SnapshotSearch:
    keys: tuple[str, ...]
    empty_reason: str = ""  # empty_index | no_match


@dataclass(frozen=True)
class SnapshotReplay:
    hash: str
    replay_hash: str
    match: bool
    ranges_match: bool


@dataclass(frozen=True)
class SnapshotCheck:
    current: bool
    valid_for_new_use: bool
    changed: tuple[tuple[str, str], ...] = ()  # (key, reason)


@dataclass(frozen=True)
class Encoding:
    """The text the model sees for one evaluation, its regions in physical order and
    the items placed in them (character ranges into `text`)."""
    text: str
    activation: str
    revision: int
    tick: int
    regions: tuple[str, ...]
    items: tuple[Item, ...]
    pressure: Pressure
    bytes: int = 0
    snapshot: str = ""  # the immutable snapshot this compile was frozen as
    hash: str = ""      # sha256:<hex> of the text
    omitted: tuple[tuple[str, str], ...] = ()  # (key, reason)

    def keys(self, kind: str = "") -> list[str]:
        return [i.key for i in self.items if not kind or i.kind == kind]

    def item(self, kind: str, key: str) -> Optional[Item]:
        return next((i for i in self.items if i.kind == kind and i.key == key), None)

    def span(self, item: Item) -> str:
        return self.text[item.start:item.end]


@dataclass(frozen=True)
class SnapshotEntry:
    """ASM-06: one snapshot as a listing shows it."""
    snapshot: str
    hash: str
    session: str
    activation: str
    time: str
    bytes: int
    limit_bytes: int
    level: str  # pressure: normal | elevated | maintenance


@dataclass(frozen=True)
class SnapshotList:
    entries: tuple[SnapshotEntry, ...]  # newest first
    next_cursor: str = ""  # "" on the last page


@dataclass(frozen=True)
class Evaluation:
    """A recall made for an evaluation: it is recorded as a `recall` observation."""
    session: str
    activation: str


@dataclass(frozen=True)
class Hit:
    kind: str  # event | frame
    ref: str   # @eN for events
    id: str
    state: str
    preview: str = ""
    revision: int = 0
    time: str = ""
    time_basis: str = ""  # occurred | recorded
    lexical_rank: int = 0  # hybrid/vector: the rank (from 1) in each leg; 0: not in it
    vector_rank: int = 0

    @property
    def key(self) -> str:
        return self.ref or self.id


@dataclass(frozen=True)
class SearchPage:
    hits: tuple[Hit, ...]
    next_cursor: str = ""
    empty: str = ""  # empty_index | no_match
    observation_ref: str = ""
    unclosed_lag: int = 0
    vector_lag: int = 0  # HYB-08: commits the vector leg had not reached when it answered

    @property
    def keys(self) -> list[str]:
        return [h.key for h in self.hits]


@dataclass(frozen=True)
class ReadPage:
    kind: str  # event | frame
    ref: str
    id: str
    text: str
    offset: int
    next_offset: int
    total_chars: int
    has_more: bool
    state: str = ""
    event_kind: str = ""
    observation_ref: str = ""


@dataclass(frozen=True)
class Node:
    kind: str  # frame | event
    id: str
    ref: str
    depth: int
    state: str
    revision: int = 0
    sources: tuple[str, ...] = ()
    body: str = ""
    preview: str = ""
    text: str = ""
    event_kind: str = ""

    @property
    def key(self) -> str:
        return self.ref or self.id


@dataclass(frozen=True)
class GraphEdge:
    kind: str  # source | relation
    source: str
    target: str
    name: str


@dataclass(frozen=True)
class Traversal:
    nodes: tuple[Node, ...]
    edges: tuple[GraphEdge, ...]
    next_cursor: str = ""
    version: str = ""
    page_bytes: int = 0
    observation_ref: str = ""


@dataclass(frozen=True)
class IndexState:
    documents: int
    position: int
    head: int
    lag: int
    vector_lag: int = 0  # commits the vector leg is behind (it follows on its own)
    embedder: str = ""   # HYB-04: the identity of the embedder the target embeds with
    embedded: int = 0    # HYB-06: texts the target has had to embed since it started
    # DIST-06: what the index holds, and this replica's place in the change feed it
    # follows (all contexts: the position up to which it has applied every change).
    events: int = 0
    frames: int = 0
    feed_position: int = 0
    # HYB-08: the vector leg's pace: the processes it embeds in, documents a second lately,
    # seconds still to go at that pace.
    embed_workers: int = 0
    documents_per_second: float = 0.0
    eta_seconds: float = 0.0


@dataclass(frozen=True)
class AuditResult:
    match: bool
    problems: tuple[str, ...] = ()
    erased: int = 0  # PRIV-02: events whose content an erasure removed (wholly or in part)


@dataclass(frozen=True)
class Erasure:
    """PRIV-01: what an erasure took (or, a dry run, would take)."""
    erasures: tuple[str, ...]  # the erasure events it committed (@eN); none for a dry run
    events: tuple[str, ...]    # the events whose content it took (@eN)
    frames: tuple[str, ...]    # the frames whose body it took (derived only from those)
    dry_run: bool = False


@dataclass(frozen=True)
class Exported:
    """PRIV-05: one observation as a context's export gives it, in the form import_events()
    takes (session, kind, text, actor, occurred_at); `erased`: a placeholder for an erased
    one, `text` its marker."""
    session: str
    kind: str
    text: str
    actor: str = ""
    occurred_at: str = ""
    secret: bool = False
    erased: bool = False

    def record(self) -> dict[str, Any]:
        """As import_events() takes it."""
        return {"session": self.session, "kind": self.kind, "text": self.text,
                "actor": self.actor, "occurred_at": self.occurred_at}


@dataclass(frozen=True)
class Span:
    """DIST-07: one span the target exported (OpenTelemetry's model): the process that
    made it (`service`), its trace and span ids and its parent's (hex; "" for a root),
    and every string it carries (its name, attribute values, event names and attributes,
    status message, resource attributes), for the check that no text leaked into it."""
    service: str
    trace: str
    id: str
    parent: str
    name: str
    strings: tuple[str, ...] = ()
    kind: str = ""    # server | client | internal | producer | consumer
    start_ns: int = 0  # when it started (Unix time, ns, the target's clock)


@dataclass(frozen=True)
class Implementation:
    name: str
    version: str


# -- the interface ---------------------------------------------------------------------------------
class Driver:
    """One implementation under test. Every method is a black-box operation; the SC
    model's names (context, session, observation, activation, context-tx) are the
    vocabulary. `capabilities()` names the control hooks the driver provides."""

    # model operations ------------------------------------------------------------------
    def implementation(self) -> Implementation:
        raise NotImplementedError

    def create_context(self, context: str, *, window: int = 0) -> Status:
        """A new, empty context; `window`: organizing window in ticks (0: default 8)."""
        raise NotImplementedError

    def status(self, context: str) -> Status:
        raise NotImplementedError

    def append(self, context: str, session: str, kind: str, text: str, *,
               request_id: str = "", actor: str = "", causal_refs: Sequence[str] = (),
               activation: str = "", target_session: str = "",
               secret: bool = False, occurred_at: str = "") -> Appended:
        """Record one observation (user-message, tool-result, external, approval,
        continuation, message, action...); `occurred_at`: when it happened at its
        source (ISO 8601 with an offset)."""
        raise NotImplementedError

    def activate(self, context: str, session: str) -> Activation:
        """Claim the session's pending inputs as one batch (an evaluation)."""
        raise NotImplementedError

    def deliver(self, context: str, activation: str) -> Activation:
        raise NotImplementedError

    def commit(self, context: str, text: str, *, session: str = "", request_id: str = "",
               activation: str = "") -> Receipt:
        """Commit one context-tx, given as its text form."""
        raise NotImplementedError

    def frame(self, context: str, frame_id: str, *, at_revision: int = 0) -> Frame:
        raise NotImplementedError

    def frames(self, context: str) -> list[Frame]:
        """Every frame of the Mind, in projection order."""
        raise NotImplementedError

    def event(self, context: str, ref: str) -> Event:
        """An event by @eN or full id."""
        raise NotImplementedError

    def encoding(self, context: str, session: str, *, activation: str = "",
                 budget_bytes: int = 0, preview_bytes: int = 0,
                 capabilities: bool = False, scope: Optional[Scope] = None,
                 parent_snapshot: str = "", must_read: Sequence[str] = ()) -> Encoding:
        """The encoding for an evaluation of `session` (claims its pending inputs unless
        `activation` names an open one). `budget_bytes`: its size budget (0: the
        default); `preview_bytes`: observations over this show as previews (0: the
        default); `capabilities`: include the optional cognitive-capabilities region;
        `scope`: narrower than `parent_snapshot`'s (or the session's causal scope);
        `must_read`: refs or frame ids that must appear whole."""
        raise NotImplementedError

    # assembly: snapshots ------------------------------------------------------------------
    def list_snapshots(self, context: str, *, session: str = "", activation: str = "",
                       limit: int = 0, cursor: str = "") -> SnapshotList:
        """ASM-06: a page of the context's snapshots, newest first: a session's, an
        activation's, or the whole context's; `cursor`: the page before's next_cursor."""
        raise NotImplementedError

    def snapshot_read(self, context: str, snapshot: str, ref: str) -> str:
        """An event's or frame's text, read through a snapshot's frozen scope."""
        raise NotImplementedError

    def snapshot_search(self, context: str, snapshot: str, query: str) -> SnapshotSearch:
        raise NotImplementedError

    def replay_snapshot(self, context: str, snapshot: str) -> SnapshotReplay:
        raise NotImplementedError

    def check_snapshot(self, context: str, snapshot: str) -> SnapshotCheck:
        raise NotImplementedError

    def audit(self, context: str) -> AuditResult:
        """Replay the events and compare with the current projection."""
        raise NotImplementedError

    # recall ----------------------------------------------------------------------------
    def search(self, context: str, query: str = "", *, since: str = "", until: str = "",
               limit: int = 0, kinds: Sequence[str] = (), states: Sequence[str] = (),
               sessions: Sequence[str] = (), cursor: str = "", mode: str = "lexical",
               evaluation: Optional[Evaluation] = None, min_commit_seq: int = 0) -> SearchPage:
        """Search events and frames (retired ones included). `since` inclusive, `until`
        exclusive (ISO 8601 with an offset); `mode`: lexical, vector or hybrid;
        `cursor`: a previous page's, unchanged;
        `min_commit_seq`: the version the search must see (read your writes)."""
        raise NotImplementedError

    def read(self, context: str, ref: str, *, offset: int = 0, limit: int = 0,
             evaluation: Optional[Evaluation] = None) -> ReadPage:
        """A page of an event's or a frame's full content (offsets in characters)."""
        raise NotImplementedError

    def traverse(self, context: str, frame_id: str, *, depth: Optional[int] = None,
                 direction: str = "", include_bodies: bool = False,
                 include_events: bool = False, max_nodes: int = 0, max_bytes: int = 0,
                 cursor: str = "", evaluation: Optional[Evaluation] = None) -> Traversal:
        """BFS from a frame: ancestors (default), descendants or both."""
        raise NotImplementedError

    def index_status(self, context: str) -> IndexState:
        raise NotImplementedError

    def rebuild_index(self, context: str) -> IndexState:
        """Drop and rebuild the derived index from events and frames."""
        raise NotImplementedError

    def rebuild(self, context: str) -> None:
        """Recompute every projection from the events (DUR-03)."""
        raise NotSupported("rebuild")

    def import_events(self, context: str, events: Sequence[Mapping[str, Any]]) -> list[Appended]:
        """Append many observations as one all-or-nothing import (DUR-09); each mapping
        holds append()'s arguments (session, kind, text, request_id, ...)."""
        raise NotSupported("import")

    # privacy -------------------------------------------------------------------------
    def erase(self, context: str, *, refs: Sequence[str] = (), session: str = "",
              actor: str = "", phrase: str = "", since: str = "", until: str = "",
              kinds: Sequence[str] = (), reason: str = "", dry_run: bool = False) -> Erasure:
        """PRIV-01: remove the content of the observations every given criterion selects
        (refs, a session, an actor, a phrase in the text, kinds, occurred time in [since,
        until)) and of what was derived only from them, as the kit's principal (it holds
        the right to); `reason` is required. Returns once the erasure is done: every copy
        the target keeps (store, index, vectors, caches) no longer holds it."""
        raise NotSupported("erase")

    def delete_context(self, context: str, *, reason: str) -> None:
        """PRIV-05: remove the context whole, with a reason; its name is free again."""
        raise NotSupported("delete")

    def export(self, context: str, *, since: str = "", until: str = "") -> list[Exported]:
        """PRIV-05: the context's observations in the import format, in order."""
        raise NotSupported("export")

    def set_retention(self, context: str, *, kinds: Sequence[str], days: int) -> None:
        """PRIV-04: the context's retention policy: the content of observations of `kinds`
        that occurred more than `days` days ago is erased when it falls due."""
        raise NotSupported("retention")

    def apply_retention(self, context: str) -> None:
        """PRIV-04: apply the context's retention policy now (as when it falls due) and
        return once what it erased is done as an erasure is (erase())."""
        raise NotSupported("retention")

    # control hooks -------------------------------------------------------------------
    def capabilities(self) -> frozenset[str]:
        """Among "stop", "start", "kill" (SIGKILL), "restart", "tamper", "space",
        "embedder", "default_embedder", "rules", "backup", "replication", "principals",
        "raw_store", "deadline", "stall", "memory", "mcp", "inspector", "second_runtime",
        "lease", "fence", "data" (stored_bytes), "log" (target_log);
        the default driver has none."""
        return frozenset()

    def stop(self) -> None:
        """Stop the target gracefully and wait until it has stopped."""
        raise NotSupported("stop")

    def start(self) -> None:
        """Start the target on its data and wait until it answers."""
        raise NotSupported("start")

    def kill(self) -> None:
        """SIGKILL the target (no shutdown path runs) and wait until it is gone."""
        raise NotSupported("kill")

    def restart(self) -> None:
        self.stop()
        self.start()

    def tamper_frame(self, context: str, frame_id: str, body: str) -> None:
        """AUDIT-01: change a frame's stored body behind the implementation's back (as a
        faulty disk or an operator with raw access would), bypassing the transaction path."""
        raise NotSupported("tamper")

    def raw_store_attempts(self, context: str) -> dict[str, str]:
        """SEC-05: try to read and write the context's raw store every way a public
        caller (the kit's own credentials) has; per way, the refusal's reason, or ""
        when it was let through."""
        raise NotSupported("raw_store")

    def as_principal(self, who: str) -> "Driver":
        """SEC-01: this target as another caller: "other" (a second principal holding no
        grant on the kit's contexts) or "anonymous" (no credentials at all)."""
        raise NotSupported("principals")

    def mcp_session(self, who: str = "self") -> Any:
        """MCP-01/02: an MCP session with the implementation's MCP server, as the kit's
        principal ("self"), a principal without grants ("other") or none ("anonymous"):
        list_tools(), call(tool, **arguments) -> ToolResult(is_error, text), close()
        (morphz_conformance.mcp_client)."""
        raise NotSupported("mcp")

    def inspector(self, who: str = "self") -> Any:
        """UI-01/02/03: the implementation's web inspector over HTTP, as the kit's principal
        ("self"), a principal without grants ("other") or no one ("anonymous"):
        get(path, **query) -> InspectorReply(status, headers, body; text, json())
        (morphz_conformance.inspector_client)."""
        raise NotSupported("inspector")

    def with_deadline(self, seconds: float) -> "Driver":
        """SEC-07: this target with every call carrying a deadline of `seconds` (a call
        past it raises DeadlineExceeded); close() it after use."""
        raise NotSupported("deadline")

    def stalled_reads(self, context: str, ref: str, count: int) -> list[Any]:
        """SEC-08: `count` connections each asking for the event `ref` and never reading
        the reply (a zero flow-control window). Each handle has poll(), `answered` (the
        target made the reply and holds it), `ended` (the target ended the call) and
        close()."""
        raise NotSupported("stall")

    def target_memory(self) -> int:
        """SEC-08: the target's memory in use now, in bytes (its processes' anonymous
        resident memory)."""
        raise NotSupported("memory")

    def stored_bytes(self, needle: bytes) -> list[str]:
        """PRIV-03: the files of the target's data at rest (store, index, vectors, caches)
        whose bytes hold `needle`, by path."""
        raise NotSupported("data")

    def target_log(self) -> str:
        """PRIV-01: everything the target has logged so far (its output)."""
        raise NotSupported("log")

    def second_runtime(self) -> "Driver":
        """SC-Distributed: a driver for a second runtime instance over the same store."""
        raise NotSupported("second_runtime")

    def second_recall(self) -> "Driver":
        """DIST-06: this target with its recall calls (search, read, index_status) served
        by a second recall replica following the same change feed."""
        raise NotSupported("recall_replica")

    def kill_second_recall(self) -> None:
        """DIST-06: SIGKILL the second recall replica; return once it no longer answers."""
        raise NotSupported("recall_replica_restart")

    def start_second_recall(self) -> None:
        """DIST-06: start the second recall replica again on its own data; return once it
        answers."""
        raise NotSupported("recall_replica_restart")

    def traced(self, trace_id: str, parent_span: str) -> "Driver":
        """DIST-07: this target with every call carrying W3C trace context: a child of
        span `parent_span` (16 hex digits) in trace `trace_id` (32), sampled. close() it
        after use."""
        raise NotSupported("tracing")

    def exported_spans(self) -> list[Span]:
        """DIST-07: every span the target's processes have exported to the kit so far
        (e.g. over OTLP to a receiver the driver runs)."""
        raise NotSupported("tracing")

    def limit_space(self) -> None:
        """DUR-07: leave the target little storage space (a small quota, a small disk);
        the case fills the rest."""
        raise NotSupported("space")

    def free_space(self) -> None:
        """DUR-07: give the space back; writes must resume."""
        raise NotSupported("space")

    def restart_with_other_embedder(self) -> None:
        """HYB-02: restart the target on its data embedding with another embedder (restart()
        brings the original back)."""
        raise NotSupported("embedder")

    def restart_with_default_embedder(self) -> None:
        """HYB-04/05: restart the target on its data embedding with its default embedder
        (the one it ships; restart() brings the run's own back)."""
        raise NotSupported("default_embedder")

    def restart_with_older_rules(self) -> None:
        """DUR-05: restart the target on its data deciding new transactions under an
        earlier version of its rules (restart() brings the current rules back)."""
        raise NotSupported("rules")

    def backup(self) -> None:
        """DUR-06: take an online backup of the target's store while it serves (the
        target keeps it; restore_backup() brings it back)."""
        raise NotSupported("backup")

    def restore_backup(self) -> None:
        """DUR-06: stop the target, replace its data by the last backup, start it."""
        raise NotSupported("backup")

    def promote_standby(self) -> None:
        """DUR-08: lose the primary store for good and promote a standby replica; return
        when the target answers again."""
        raise NotSupported("replication")

    def lose_leases(self) -> None:
        """SC-Distributed: make the lease service unreachable, so owners cannot renew."""
        raise NotSupported("lease")

    def restore_leases(self) -> None:
        raise NotSupported("lease")

    def fenced_write(self, context: str, token: int) -> None:
        """SC-Distributed: write to the context's store carrying `token` as the fencing
        token, bypassing the runtime (as a former owner still running would)."""
        raise NotSupported("fence")

    def close(self) -> None:
        """Release connections and anything the driver started."""
