"""What EncodingCore's entry points return: frozen values, converted to protobuf only by
the servicer (services/encoding/convert.py) and to text or JSON only by the CLI.

An encoding's items are render's item maps (the fields of record.Item), made once per
frame and shared through the RowCache: a compile of thousands of items hands them on as
they are rather than copying each into a record on the hot path."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

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
