"""What RecallCore's entry points return: frozen values, one per reply. The servicer turns
them into protobuf; `plain()` gives the dict a recall observation records (its JSON text
is stored, so the keys, their order and the fields left out stay as they were)."""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Optional

import msgspec


class Plain:
    """`plain()`: the value as a dict in field order; a nested value or a tuple of them
    as dicts and lists; a field named in _DROP_NONE left out while None (a reply shows
    it only where it applies); a field named in _WIRE spelled as the wire spells it."""
    __slots__ = ()
    _DROP_NONE: ClassVar[frozenset[str]] = frozenset()
    _WIRE: ClassVar[Mapping[str, str]] = {}

    def plain(self) -> dict[str, Any]:
        out = {}
        for name, wire, drop_none in _layout(type(self)):
            value = getattr(self, name)
            if value is None and drop_none:
                continue
            out[wire] = _plain(value)
        return out


@functools.cache
def _layout(cls: type) -> tuple[tuple[str, str, bool], ...]:
    """(field, its plain name, whether left out while None) of a Plain type, in order
    (worked out once per type: a traversal sizes every node by its plain form)."""
    names = cls.__struct_fields__ if issubclass(cls, msgspec.Struct) else \
        tuple(f.name for f in dataclasses.fields(cls))
    return tuple((name, cls._WIRE.get(name, name), name in cls._DROP_NONE) for name in names)


def _plain(value: Any) -> Any:
    if isinstance(value, Plain):
        return value.plain()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


# -- search ---------------------------------------------------------------------------------
class Hit(msgspec.Struct, Plain, frozen=True):
    """An event or frame a search found, as the store holds it now. Each leg's rank
    only in a vector or hybrid search (None in a lexical one). A msgspec Struct, not a
    dataclass: a search builds one per hit of a page, and a frozen dataclass of 14
    fields costs four times as much to build."""
    _DROP_NONE = frozenset({"lexical_rank", "vector_rank"})
    kind: str
    ref: str
    id: str
    state: str
    score: float
    time: str
    session: str
    event_kind: str
    preview: str
    revision: int
    occurred_at: str
    time_basis: str
    lexical_rank: Optional[int] = None
    vector_rank: Optional[int] = None


@dataclass(frozen=True, slots=True)
class SearchResult(Plain):
    """A page of hits. `vector_position`/`vector_lag`: the vector leg's place, in a
    search whose mode is not lexical (None otherwise)."""
    _DROP_NONE = frozenset({"vector_position", "vector_lag", "observation_ref"})
    results: tuple[Hit, ...]
    next_cursor: str
    index_position: int
    lag: int
    unclosed_lag: int
    empty: str
    vector_position: Optional[int] = None
    vector_lag: Optional[int] = None
    observation_ref: Optional[str] = None  # set once the reply is recorded (or not)


# -- paged reads ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReadResult(Plain):
    """A page of an event's text or a frame's body. `occurred_at`: an event's only."""
    _DROP_NONE = frozenset({"occurred_at", "observation_ref"})
    kind: str
    ref: str
    id: str
    state: str
    time: str
    session: str
    event_kind: str
    revision: int
    occurred_at: Optional[str]
    offset: int
    text: str
    total_chars: int
    next_offset: int
    has_more: bool
    observation_ref: Optional[str] = None


# -- graph ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Node(Plain):
    """A frame or event met on a walk; every field present (defaults where n/a)."""
    kind: str = ""
    id: str = ""
    ref: str = ""
    depth: int = 0
    state: str = ""
    revision: int = 0
    sources: tuple[str, ...] = ()
    body: str = ""
    protected: bool = False
    event_kind: str = ""
    time: str = ""
    preview: str = ""
    text: str = ""
    missing: bool = False


@dataclass(frozen=True, slots=True)
class Edge(Plain):
    """A frame's source or relation, `from_` -> `to` (`from` on the wire)."""
    _WIRE = {"from_": "from"}
    kind: str
    from_: str
    to: str
    name: str


@dataclass(frozen=True, slots=True)
class TraverseResult(Plain):
    _DROP_NONE = frozenset({"observation_ref"})
    root: str
    direction: str
    depth: int
    version: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    page_bytes: int
    next_cursor: str
    observation_ref: Optional[str] = None


# -- index upkeep ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RebuildInfo(Plain):
    at: str
    duration_ms: int
    documents: int


@dataclass(frozen=True, slots=True)
class RebuildProgress(Plain):
    running: bool
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class VectorLegStatus(Plain):
    built_by: str
    count: int
    dimension: int
    fit_count: int
    text_version: int
    fingerprint: str
    log_bytes: int
    current: bool
    position: int
    lag: int
    cached: int
    cache_hits: int
    cache_misses: int
    passage_version: int = 0
    embed_workers: int = 0
    documents_per_second: float = 0.0
    eta_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class IndexStatus(Plain):
    """A context's index: its documents, its place against the context's head and the
    change feed's (the feed's None where this replica follows none), its vector leg."""
    _DROP_NONE = frozenset({"feed_position", "feed_head", "feed_lag", "feed_held"})
    context: str
    documents: int
    events: int
    frames: int
    terms: int
    position: int
    head: int
    lag: int
    feed_position: Optional[int]
    feed_head: Optional[int]
    feed_lag: Optional[int]
    feed_held: Optional[int]
    last_rebuild: Optional[RebuildInfo]
    rebuild: RebuildProgress
    index_bytes: int
    path: str
    vectors: VectorLegStatus
    embedder: str
    embedder_note: str
    # The commit_seq of an erasure whose earlier content the index's files may still
    # hold (a rebuild rewriting them runs); 0: none (docs/privacy.md).
    erasure_pending: int = 0
