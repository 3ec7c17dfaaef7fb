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
    pressure_level: str = ""

    def keys(self, kind: str = "") -> list[str]:
        return [i.key for i in self.items if not kind or i.kind == kind]


@dataclass(frozen=True)
class AuditResult:
    match: bool
    problems: tuple[str, ...] = ()


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
               secret: bool = False) -> Appended:
        """Record one observation (user-message, tool-result, external, approval,
        continuation, message, action...)."""
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

    def encoding(self, context: str, session: str, *, activation: str = "") -> Encoding:
        """The encoding for an evaluation of `session` (claims its pending inputs unless
        `activation` names an open one)."""
        raise NotImplementedError

    def audit(self, context: str) -> AuditResult:
        """Replay the events and compare with the current projection."""
        raise NotImplementedError

    def rebuild(self, context: str) -> None:
        """Recompute every projection from the events (DUR-03)."""
        raise NotSupported("rebuild")

    def import_events(self, context: str, events: Sequence[Mapping[str, Any]]) -> list[Appended]:
        """Append many observations as one all-or-nothing import (DUR-09); each mapping
        holds append()'s arguments (session, kind, text, request_id, ...)."""
        raise NotSupported("import")

    # control hooks -------------------------------------------------------------------
    def capabilities(self) -> frozenset[str]:
        """Among "stop", "start", "kill" (SIGKILL), "restart", "second_runtime",
        "lease"; the default driver has none."""
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

    def second_runtime(self) -> "Driver":
        """SC-Distributed: a driver for a second runtime instance over the same store."""
        raise NotSupported("second_runtime")

    def expire_lease(self, context: str) -> None:
        """SC-Distributed: make the current owner lose its lease on `context`."""
        raise NotSupported("lease")

    def close(self) -> None:
        """Release connections and anything the driver started."""
