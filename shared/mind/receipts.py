"""The idempotency record: what a request id was applied as, kept so that a retry gets
the original answer. A stored format of its own, versioned (pyeventsourcing's
`class_version`): a typed receipt of what the event did, not the API reply (whose shape
may change without touching what is stored).

  v1  (before issue 41) {"hash": ..., "reply": <the API reply dict>}
  v2  {"v": 2, "hash": ..., "receipt": {"kind": "tx" | "append", ...}}

Old records are upcast on read (upcast_v1_v2), so a store written before v2 answers its
retries as it did; audit compares idempotency rows by what they decode to (`canonical`),
as a replay writes v2 where the history holds v1."""
from __future__ import annotations

from typing import Optional, Union

import msgspec

from morphz.shared.mind.records import decode_json, parse_ref

VERSION = 2


class OpOutcome(msgspec.Struct, frozen=True):
    """What one op did to one target (ops.Outcome, as kept)."""
    index: int
    op: str
    target: str
    outcome: str
    frame_revision: int = 0
    due_tick: int = 0


class TxReceipt(msgspec.Struct, frozen=True, tag_field="kind", tag="tx"):
    """A committed transaction: its event, the revision it made and what it released."""
    seq: int
    revision: int
    base_version: int
    cognitive_tick: int
    results: tuple[OpOutcome, ...] = ()
    released_now: tuple[str, ...] = ()
    released_now_bytes: int = 0
    released_after_window: tuple[str, ...] = ()
    released_after_window_bytes: int = 0
    rebased: bool = False
    rebased_from: int = 0


class AppendReceipt(msgspec.Struct, frozen=True, tag_field="kind", tag="append",
                    omit_defaults=True):
    """An appended event. A causal-scope event (an action, a call's result, a message)
    names its session and where it went; a plain input names neither (`scoped`)."""
    seq: int
    id: str
    session: Optional[str] = None
    activation: Optional[str] = None
    call: Optional[str] = None
    returned_to: Optional[str] = None
    target_session: Optional[str] = None

    @property
    def scoped(self) -> bool:
        return self.session is not None


Receipt = Union[TxReceipt, AppendReceipt]


class IdempotencyRecord(msgspec.Struct, frozen=True):
    hash: str
    receipt: Receipt
    v: int = VERSION


_encode = msgspec.json.Encoder(order="sorted").encode


def dumps(record: IdempotencyRecord) -> bytes:
    return _encode(record)


def loads(raw: Optional[bytes]) -> Optional[IdempotencyRecord]:
    """A stored record of any version, upcast to the current one."""
    if raw is None:
        return None
    obj = decode_json(raw)
    if obj.get("v", 1) == 1:
        obj = upcast_v1_v2(obj)
    return msgspec.convert(obj, IdempotencyRecord)


def canonical(raw: Optional[bytes]) -> Optional[bytes]:
    """A stored record's bytes as the current version writes them (audit compares these:
    a v1 row and the v2 row a replay writes for it say the same)."""
    return None if raw is None else dumps(loads(raw))


def upcast_v1_v2(old: dict) -> dict:
    """v1 kept the API reply: a transaction's receipt or an append's."""
    reply = old["reply"]
    if "revision" in reply:
        cap = reply["capacity"]
        receipt = {"kind": "tx", "seq": parse_ref(reply["event_ref"]),
                   "revision": reply["revision"], "base_version": reply["base_version"],
                   "cognitive_tick": reply["cognitive_tick"], "results": reply["results"],
                   "released_now": cap["released_now"],
                   "released_now_bytes": cap["released_now_bytes"],
                   "released_after_window": cap["released_after_window"],
                   "released_after_window_bytes": cap["released_after_window_bytes"],
                   "rebased": reply["rebased"], "rebased_from": reply["rebased_from"]}
    else:
        receipt = {"kind": "append", **{k: v for k, v in reply.items() if k != "ref"}}
    return {"v": 2, "hash": old["hash"], "receipt": receipt}
