"""The records the transaction service keeps in storage, and their JSON form.

Storage treats them as opaque bytes; this module is their only schema.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional, TypeVar

import msgspec

DEFAULT_WINDOW = 8

ACTIVE, RETIRING, RETIRED = "active", "retiring", "retired"

# Input kinds an agent runtime appends. The external facts advance the cognitive
# clock when claimed; `continuation` (the runtime's own follow-up) and `recall`
# (results of a recall made for an evaluation) are observations that do not. A
# `message` comes from another session and waits in its target's inbox.
TOOL_RESULT, MESSAGE = "tool-result", "message"
EXTERNAL_KINDS = ("user-message", TOOL_RESULT, "approval", "external", MESSAGE)
INPUT_KINDS = EXTERNAL_KINDS + ("continuation", "recall")
# An action (a tool call an activation issued) is appended too, but it is no
# observation: it belongs to its activation's causal scope and waits for its result.
ACTION = "action"
APPEND_KINDS = INPUT_KINDS + (ACTION,)
# Runtime events written by the transaction service itself.
CONTEXT_CREATED, ACTIVATION, DELIVERY, CONTEXT_TX = (
    "context-created", "activation", "delivery", "context-tx")
# A change of the context's policy (who may do what), made by an administrator.
POLICY = "policy"
# An erasure of content (administrators, with a reason): what it took, by digest
# (shared/mind/envelope.py; PRIV-01, PRIV-02).
ERASURE = "erasure"
# Where an event's `data` keeps when it happened at its source (an append's occurred_at);
# absent: it happened when it was recorded (`time`).
OCCURRED_AT = "occurred_at"
# Kinds kept out of recall's index: a recall observation holds a search's own results,
# so indexing it would let a search find its earlier results as evidence.
UNINDEXED_KINDS = ("recall",)


def occurred_at(data: Optional[dict]) -> str:
    """The source time an event's data holds, '' when none was given."""
    return (data or {}).get(OCCURRED_AT, "")


# An event's short ref, read as the S-expression reader reads one (ASCII digits, bounded).
_REF = re.compile(r"@e([0-9]{1,18})\Z")


def ref(seq: int) -> str:
    return f"@e{seq}"


def parse_ref(text: str) -> Optional[int]:
    """The seq of an `@eN` ref, or None when text is not one."""
    m = _REF.match(text)
    return int(m.group(1)) if m else None


def is_ref(text: str) -> bool:
    return _REF.match(text) is not None


def ref_seq(text: str) -> int:
    """The seq of text, which must be a ref (see is_ref)."""
    return int(_REF.match(text).group(1))


@dataclass
class Meta:
    context: str
    window: int = DEFAULT_WINDOW
    revision: int = 0
    tick: int = 0
    next_seq: int = 0
    # What the next event links with (shared/mind/envelope.py): the last event's envelope
    # hash once `links_from` is set, else the SHA-256 of its stored bytes (the link of a
    # store written before envelopes). Audit verifies every link.
    chain: str = ""
    activations: int = 0
    # Bounds of the order ranks handed out; appends go past the tail, `first` before the head.
    order_head: int = 1 << 62
    order_tail: int = 1 << 62
    # Whether its sessions keep counts of their waiting inputs (Session.pending/waiting):
    # contexts created since; older ones count their rows. Stored only when true, so a
    # meta written before keeps its bytes.
    counts: bool = False
    # The seq of the first event linked by envelope; None: none is (a store written before
    # envelopes), and then the row holds no such field, as it was written.
    links_from: Optional[int] = None


@dataclass(frozen=True)
class Stamp:
    """When a conflict boundary last changed: by the transaction that made `revision`,
    or (tick set) by an activation at that tick while `revision` was the latest."""
    revision: int
    tick: Optional[int] = None

    @staticmethod
    def parse(raw: Optional[bytes]) -> Optional["Stamp"]:
        if raw is None:
            return None
        rev, _, tick = raw.decode().partition("@")
        return Stamp(int(rev), int(tick) if tick else None)

    def encode(self) -> bytes:
        return stamp_bytes(self.revision, self.tick)


def stamp_bytes(revision: int, tick: Optional[int] = None) -> bytes:
    """Stamp(revision, tick).encode() without making the Stamp (one per boundary set)."""
    return (str(revision) if tick is None else f"{revision}@{tick}").encode()


@dataclass
class RetireRequest:
    generation: int
    requested_tick: int
    due_tick: int
    reason: str
    frame_revision: int


@dataclass
class Frame:
    id: str
    revision: int
    body: str  # canonical S-expression text of the body items
    sources: list[str] = field(default_factory=list)
    state: str = ACTIVE
    protected: bool = False
    retire: Optional[RetireRequest] = None
    generation: int = 0  # retire requests made so far; a due entry names one
    changed_at: int = 0  # context revision of the last change
    # The erasure (@eN) that took this version's body, derived only from erased events:
    # the frame keeps its place, sources and relations; its body is "". Stored only when
    # set, so a frame's row keeps the bytes it had before erasures existed.
    erased: str = ""

    def size(self) -> int:
        """Bytes this frame occupies in an encoding (id + body)."""
        return len(self.id.encode()) + len(self.body.encode())


@dataclass
class Event:
    seq: int
    id: str
    kind: str
    time: str
    context: str
    session: str = ""
    actor: str = ""
    causal_refs: list[str] = field(default_factory=list)
    text: str = ""
    request_id: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # runtime events' structured body


@dataclass
class Observation:
    """Mutable attention state of an input event (the event itself never changes)."""
    retired: bool = False
    protected: bool = False
    reason: str = ""


@dataclass
class Session:
    id: str
    state: str = ACTIVE
    level: str = "full"
    # In a context that keeps counts (Meta.counts): its inputs not claimed yet, and the
    # messages from other sessions among them, kept by the reducer so a status or an
    # encoding reads one row per session, not every waiting input. None: not kept
    # (stored only when kept).
    pending: Optional[int] = None
    waiting: Optional[int] = None


@dataclass
class Activation:
    id: str
    session: str
    claimed: list[int]
    root: Optional[int]
    tick: int
    tick_advanced: bool
    retired_frames: list[str] = field(default_factory=list)
    delivered: bool = False
    # Results of this activation's own calls that arrived while it was open (CONC-04).
    results: list[int] = field(default_factory=list)


@dataclass
class Call:
    """An action and where its result goes: the activation that issued it."""
    activation: str
    session: str
    result: Optional[int] = None  # seq of the tool result that answered it
    late: bool = False            # the result came after the activation was delivered


@dataclass
class Checkpoint:
    name: str
    revision: int
    frames: list[Frame]
    relations: list[list[str]]
    order: list[str]


def activation_view(act: Activation) -> dict:
    """An activation as services answer it: refs for the claimed inputs and the root."""
    return dict(plain(act), claimed=[ref(s) for s in act.claimed],
                root=ref(act.root) if act.root is not None else "",
                results=[ref(s) for s in act.results])


T = TypeVar("T")


_SCALARS = frozenset((str, int, bool, float, type(None)))


def plain(obj: Any) -> Any:
    """Dataclasses to dicts, recursively; much cheaper than dataclasses.asdict, which
    deep-copies every value (this runs for every record of every commit). Scalars are
    tested inline: most values are, and a call per value would double the cost."""
    kind = type(obj)
    if kind in _SCALARS:
        return obj
    if kind is list or kind is tuple:
        return [v if type(v) in _SCALARS else plain(v) for v in obj]
    items = obj.items() if kind is dict else vars(obj).items()
    return {k: v if type(v) in _SCALARS else plain(v) for k, v in items}


_encode = msgspec.json.Encoder(order="sorted").encode
_EXACT = frozenset((str, int, bool, type(None)))


def dumps(rec: Any) -> bytes:
    """A record's stored bytes: compact JSON, keys sorted, UTF-8. These bytes are hashed
    into the history's chain and compared by audit, so they never change: msgspec writes
    them (many times json's speed) when it writes what json would, else json does."""
    kind = type(rec)
    if kind is Meta:
        unkept = _meta_unkept(rec)
        if unkept:  # the bytes a meta had before these fields
            rec = {k: v for k, v in vars(rec).items() if k not in unkept}
    elif kind is Session and rec.pending is None:
        rec = {k: v for k, v in vars(rec).items() if k not in _UNKEPT}  # bytes as before
    elif kind is Frame:
        if _frame_exact(rec):  # `erased` unset: its key and value cut from the bytes (no
            raw = _encode(rec)  # quote stands unescaped in a JSON string: only the key's)
            return raw if rec.erased else raw.replace(b',"erased":""', b"", 1)
        rec = frame_row(rec)
    elif kind is Checkpoint:
        rec = dict(vars(rec), frames=[frame_row(f) for f in rec.frames])
    if _exact(rec):
        return _encode(rec)
    return json.dumps(plain(rec), ensure_ascii=False, separators=(",", ":"),
                      sort_keys=True).encode()


def _meta_unkept(m: "Meta") -> tuple[str, ...]:
    """A meta's fields stored only once set: `counts` while false, `links_from` while None."""
    return ("counts",) * (not m.counts) + ("links_from",) * (m.links_from is None)


def frame_row(f: "Frame") -> Any:
    """What a frame stores: its fields, `erased` only when set (dumps)."""
    if f.erased:
        return f
    d = dict(vars(f))
    if d.get("erased") == "":
        del d["erased"]
    return d


def _frame_exact(f: "Frame") -> bool:
    """_exact of a Frame, field by field (the commonest record: a commit writes each frame
    it changes twice, a replay every one)."""
    r = f.retire
    return (len(f.__dict__) == _FRAME_FIELDS and type(f.id) is str and type(f.body) is str
            and type(f.revision) is int and type(f.state) is str
            and type(f.protected) is bool and type(f.generation) is int
            and type(f.changed_at) is int and type(f.erased) is str
            and type(f.sources) is list
            and (not f.sources or all(type(s) is str for s in f.sources))
            and (r is None or _exact(r)))


def _exact(obj: Any) -> bool:
    """Whether msgspec writes `obj` byte for byte as json.dumps(plain(obj)) would: no float
    (their exponents are written otherwise), only str keys, and dataclasses holding just
    their fields (msgspec writes the fields, plain every attribute)."""
    kind = type(obj)
    if kind in _EXACT:
        return True
    if kind is Frame:
        return _frame_exact(obj)
    if kind is dict:
        for k, v in obj.items():  # loops, not all(): this runs for every record written
            if type(k) is not str or (type(v) not in _EXACT and not _exact(v)):
                return False
        return True
    if kind is list or kind is tuple:
        values = obj
    else:
        fields = getattr(kind, "__dataclass_fields__", None)
        attrs = getattr(obj, "__dict__", None)
        if fields is None or attrs is None or len(attrs) != len(fields):
            return False
        values = attrs.values()
    for v in values:
        if type(v) not in _EXACT and not _exact(v):
            return False
    return True


_FRAME_FIELDS = len(Frame.__dataclass_fields__)
_UNKEPT = ("pending", "waiting")  # a session's fields stored only where they are kept
NEW_OBSERVATION = dumps(Observation())  # every input's first observation row: made once
_decode = msgspec.json.Decoder().decode


def decode_json(raw: bytes) -> Any:
    """json.loads(raw), several times faster on what records hold. msgspec refuses what
    it cannot read exactly as json does (NaN, numbers past a double's range, lone
    surrogates, other encodings than UTF-8): json then reads it, giving the same value
    or raising the same error as before."""
    try:
        return _decode(raw)
    except msgspec.DecodeError:
        return json.loads(raw)


class _FrameState(msgspec.Struct):
    state: str = ACTIVE


_decode_frame_state = msgspec.json.Decoder(_FrameState).decode


def frame_state(raw: bytes) -> str:
    """A stored frame's state, its other fields skipped unread (a count by state over
    every frame: several times cheaper than loads)."""
    try:
        return _decode_frame_state(raw).state
    except msgspec.DecodeError:  # what decode_json falls back to json for
        return loads(Frame, raw).state


def loads(cls: type[T], raw: Optional[bytes]) -> Optional[T]:
    if raw is None:
        return None
    return from_dict(cls, decode_json(raw))


def from_dict(cls: type[T], obj: Any) -> T:
    if cls is Event:  # the commonest (a replay reads every one), with nothing to convert
        return cls(**obj)
    if cls in (list, dict):
        return obj
    if cls is Meta and "outbox_head" in obj:  # written before the change feed replaced it
        obj = {k: v for k, v in obj.items() if k != "outbox_head"}
    elif cls is Frame:
        obj = dict(obj, retire=RetireRequest(**obj["retire"]) if obj.get("retire") else None)
    elif cls is Checkpoint:
        obj = dict(obj, frames=[from_dict(Frame, f) for f in obj["frames"]])
    return cls(**obj)
