"""What EncodingCore's entry points return: frozen values, converted to protobuf only by
the servicer (services/encoding/convert.py) and to text or JSON only by the CLI.

An encoding's items are render's item maps (the fields of record.Item), made once per
frame and shared through the RowCache: a compile of thousands of items hands them on as
they are rather than copying each into a record on the hot path."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from morphz.services.encoding.core.listing import Entry
from morphz.services.encoding.core.record import Omission, PressureIn, Region

ItemMap = Mapping[str, Any]  # render's item: record.Item's fields, parts as maps


@dataclass(frozen=True, slots=True)
class Encoding:
    """A compile: the text the model sees and the snapshot that froze it."""
    snapshot: str
    hash: str
    text: str
    bytes: int
    chars: int
    regions: list[Region]
    items: list[ItemMap]
    pressure: PressureIn
    activation: str
    claimed: list[str]
    revision: int
    tick: int
    omitted: list[Omission]
    omitted_total: int


@dataclass(frozen=True, slots=True)
class Dependency:
    """An input of a snapshot that is no longer what the snapshot saw."""
    key: str
    kind: str    # event | frame | relation | session
    status: str  # changed
    reason: str  # frame_revised | frame_retired | frame_removed | frame_erased | source_retired | source_erased | ...
    recorded_revision: int = 0
    current_revision: int = 0


@dataclass(frozen=True, slots=True)
class CheckReport:
    snapshot: str
    snapshot_revision: int
    checked_revision: int
    current: bool
    valid_for_new_use: bool
    inputs_checked: int
    changed: list[Dependency]


@dataclass(frozen=True, slots=True)
class ReplayReport:
    snapshot: str
    hash: str
    replay_hash: str
    match: bool
    ranges_match: bool
    bytes: int
    text: str
    dependencies: CheckReport
    problems: list[str]  # where history no longer yields what the record names


@dataclass(frozen=True, slots=True)
class ReadPage:
    """A page of one event's or frame's text, as the snapshot's scope shows it."""
    ref: str
    kind: str  # event | frame
    text: str
    offset: int
    next_offset: int
    total_chars: int
    has_more: bool
    state: str
    revision: int


@dataclass(frozen=True, slots=True)
class SearchHit:
    key: str
    kind: str
    snippet: str


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[SearchHit]
    empty_reason: str  # "" with hits; empty_index: nothing in scope; no_match
    searched: int
    message: str


# -- ShowEvaluation (evaluation.py): one evaluation, by reference -------------------------
@dataclass(frozen=True)
class EventRef:
    """An event by reference, with a preview of what a reader without `reveal` sees."""
    ref: str
    kind: str
    session: str
    time: str
    actor: str
    preview: str
    chars: int
    secret: bool


@dataclass(frozen=True)
class RecallCall:
    ref: str          # the recall observation that recorded it
    op: str           # search | read | frame
    query: str        # search: the query; read: the ref; frame: the frame id
    hits: tuple[str, ...]
    hit_count: int
    time: str


@dataclass(frozen=True)
class Action:
    ref: str
    time: str
    preview: str
    result: str  # the tool result's @eN, "" while there is none


@dataclass(frozen=True)
class TxOutcome:
    op: str
    target: str
    outcome: str  # "" when no receipt was kept
    frame_revision: int


@dataclass(frozen=True)
class Transaction:
    ref: str
    session: str
    time: str
    revision: int  # the Mind revision it made (0: no receipt kept)
    base_version: int
    reason: str
    rebased: bool
    results: tuple[TxOutcome, ...]


@dataclass(frozen=True)
class MindChange:
    kind: str     # frame | observation | relation | order | checkpoint | session
    key: str      # frame id, @eN, "subject name object", checkpoint name, session id
    change: str   # created | derived | revised | retiring | retired | restored | related ...
    frame_revision: int
    revision: int  # the Mind revision that made it (0: the clock's, at the claim)


@dataclass(frozen=True)
class MindDiff:
    from_revision: int  # what its first snapshot saw
    to_revision: int    # after its last transaction
    changes: tuple[MindChange, ...]


@dataclass(frozen=True)
class Evaluation:
    context: str
    activation: str
    session: str
    tick: int
    tick_advanced: bool
    delivered: bool
    root: str
    time: str
    activation_ref: str  # "" when not found within the bound
    delivery_ref: str
    inputs: tuple[EventRef, ...]
    snapshots: tuple[Entry, ...]
    recalls: tuple[RecallCall, ...]
    actions: tuple[Action, ...]
    results: tuple[EventRef, ...]
    messages: tuple[EventRef, ...]
    transactions: tuple[Transaction, ...]
    mind: MindDiff
    previous: str
    next: str
    complete: bool  # False: the history was read only up to `scanned_to`
    scanned_to: int
