"""The snapshot record as types: what snapshot.freeze writes, and what every read decodes
and validates in one pass (msgspec) before anything uses it. A record that is not this
shape is SNAPSHOT_CORRUPT, never a crash further in.

The record is versioned by its `schema` field. Records written before are upcast on read
(upcast.py): fields added since take the values an older server meant by leaving them
out, and schema 1's item rows become items. The head (identity, scope, budget,
environment: what scoped reads and compiles narrowing the scope use) and the body
(inputs, omissions, regions, items) are decoded apart, so a scoped read never unpacks
the items. Field order is the order freeze writes: the head is encoded from Head, byte
for byte what it was as a dict (stored records replay byte-exact)."""
from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

import msgspec
from msgspec import Meta, Struct

from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.names import check_name
from morphz.shared.storage.keys import MAX_KEY_BYTES
from morphz.services.encoding.core.options import MAINTENANCE_PERMILLE
from morphz.services.encoding.core.scope import Scope

# 2: an item's stored row is [start, [the rest, end and parts relative to start]]
# (snapshot.ITEM_ROW_FIELDS); 1 stored [ITEM_FIELDS..., parts] with every offset absolute.
# Both are read; a server reading 1 only refuses a 2 as a newer schema, not as corrupt.
SCHEMA = 2
SCHEMAS = (1, 2)

Count = Annotated[int, Meta(ge=0, le=(1 << 63) - 1)]  # fits a uint64 reply field
Positive = Annotated[int, Meta(gt=0, le=(1 << 63) - 1)]
Ref = Annotated[str, Meta(pattern=r"^@e[0-9]{1,18}\Z")]
Text = str  # JSON decoded by msgspec never holds a lone surrogate


def _name(v: str, where: str) -> None:
    try:
        check_name(v, "name")
    except MorphzError:
        raise ValueError(f".{where}: not a name") from None


def _ident(v: str, where: str) -> None:
    """An id the record names and replay looks up: it was a storage key once."""
    if "\x00" in v or len(v.encode()) > MAX_KEY_BYTES:
        raise ValueError(f".{where}: not an id a store could hold")


class _Rec(Struct, frozen=True, forbid_unknown_fields=True):
    """What every part of a record is: immutable, and no field it does not know."""


class ActivationIn(_Rec):
    id: str
    session: str
    claimed: list[Ref] = []       # absent in records written before these were kept
    root: Text = ""
    tick: Count = 0
    tick_advanced: bool = False
    retired_frames: list[Text] = []
    delivered: bool = False
    results: list[Ref] = []

    def __post_init__(self) -> None:
        _name(self.id, "id")
        _name(self.session, "session")


class BudgetIn(_Rec):
    bytes: Positive
    tokens: Count
    preview_bytes: Count
    maintenance_permille: Count = MAINTENANCE_PERMILLE  # the value before it was kept


class ScopeIn(_Rec, omit_defaults=True):
    sessions: list[Text]
    kinds: list[Text]
    since: Text
    until: Text
    frames: list[Text]
    reveal_secrets: bool = False  # written only when set

    def __post_init__(self) -> None:
        try:  # a stored scope must still be one a request could have made
            self.scope()
        except MorphzError as e:
            raise ValueError(e.message) from None

    def scope(self) -> Scope:
        return Scope.make(self.sessions, self.kinds, self.since, self.until, self.frames,
                          self.reveal_secrets)


class EnvIn(_Rec):
    model: Text
    profile: Text
    bindings: dict[Text, Any]
    capabilities: bool

    def __post_init__(self) -> None:
        for k, v in self.bindings.items():
            if type(v) is not str:  # checked here, so the error names the key
                raise ValueError(f".bindings.{k[:40]}: not a string")


class PressureIn(_Rec):
    used_bytes: Count
    limit_bytes: Count
    used_tokens: Count
    limit_tokens: Count
    permille: Count
    level: Text
    external_actions_deferred: bool


class Head(_Rec, omit_defaults=True):
    schema: Count
    version: Count
    id: str
    context: str
    session: str
    time: Text
    revision: Count
    tick: Count
    window: Count
    activation: ActivationIn
    parent: Text
    budget: BudgetIn
    scope: ScopeIn
    must_read: list[Text]
    env: EnvIn
    capabilities: dict[Text, list[Text]]
    selected: Count
    omitted_total: Count
    pressure: PressureIn
    bytes: Count
    chars: Count
    hash: Text
    # The body's JSON text, in records stored as one line (before the body followed the
    # head); never written now.
    packed: Optional[Text] = None

    def __post_init__(self) -> None:
        for where in ("id", "context", "session"):
            _name(getattr(self, where), where)


class ObservationIn(_Rec, omit_defaults=True):
    ref: Ref
    kind: Text
    session: Text
    actor: Text
    time: Text
    residency: Text
    protected: bool
    freshness: Text
    root: bool
    target: Text = ""    # written only when set
    occurred: Text = ""

    @property
    def seq(self) -> int:
        return R.ref_seq(self.ref)


class FrameInput(_Rec):
    id: str
    revision: Count
    state: Text
    protected: bool
    retire_reason: Text
    due_tick: Count
    remaining_ticks: Count

    def __post_init__(self) -> None:
        _ident(self.id, "id")


class SessionIn(_Rec):
    id: str
    state: Text
    level: Text
    waiting: Count = 0  # absent in records written before it was kept

    def __post_init__(self) -> None:
        _ident(self.id, "id")


class CallIn(_Rec):
    ref: Ref
    activation: Text
    actor: Text


class LateResultIn(_Rec):
    ref: Ref
    call: Text
    activation: Text
    state: Literal["pending", "claimed"]


class Inputs(_Rec):
    observations: list[ObservationIn]
    frames: list[FrameInput]
    relations: list[tuple[str, str, str]]
    checkpoints: list[tuple[str, Count]]
    sessions: list[SessionIn]
    pending: Count
    calls: list[CallIn] = []          # absent in records written before they were kept
    late_results: list[LateResultIn] = []

    def __post_init__(self) -> None:
        for i, edge in enumerate(self.relations):
            for part in edge:
                _ident(part, f"relations[{i}]")
        for i, (name, _) in enumerate(self.checkpoints):
            _ident(name, f"checkpoints[{i}]")


class Omission(_Rec):
    key: Text
    reason: Text


class Region(_Rec):
    name: Text
    start: Count
    end: Count


class Part(_Rec):
    owner: Text
    start: Count
    end: Count


class Item(_Rec):
    region: Text
    kind: Text
    key: Text
    start: Count
    end: Count
    bytes: Count
    residency: Text
    shown_bytes: Count
    total_bytes: Count
    revision: Count
    state: Text
    remaining_ticks: Count
    protected: bool
    parts: list[Part]


class PackedBody(Struct, frozen=True, forbid_unknown_fields=True):
    """The body as stored: items as rows (snapshot.pack), read by upcast.items_of."""
    inputs: Inputs
    omitted: list[Omission]
    regions: list[Region]
    item_fields: Any = None
    item_rows: Any = None


class Body(_Rec):
    inputs: Inputs
    omitted: list[Omission]
    regions: list[Region]
    items: list[Item]


class SnapshotRecord(Struct, frozen=True):
    """A whole record: its head, and its body when it was read (None: head only)."""
    head: Head
    body: Optional[Body] = None

    @property
    def id(self) -> str:
        return self.head.id

    @property
    def session(self) -> str:
        return self.head.session

    def plain(self) -> dict:
        """The record as one JSON object (what ShowSnapshot shows): the head's fields,
        then the body's."""
        out = msgspec.json.decode(msgspec.json.encode(self.head))  # tuples as arrays
        if self.body is not None:
            out.update(msgspec.json.decode(msgspec.json.encode(self.body)))
        return out
