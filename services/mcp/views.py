"""Replies (protobuf messages of protos/morphz/api) as the JSON a tool returns, and that
JSON's one rendering (its size is what the output byte limit counts)."""
from __future__ import annotations

import json
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message


def plain(msg: Message) -> dict[str, Any]:
    """Every field under its proto name, numbers as JSON numbers (protobuf's own JSON
    mapping writes 64-bit integers as strings, which a model then misreads as text);
    an unset `optional` field is left out."""
    out: dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        if field.has_presence and not field.is_repeated and not msg.HasField(field.name):
            continue
        value = getattr(msg, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            out[field.name] = {k: _value(field.message_type.fields_by_name["value"], v)
                               for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_value(field, v) for v in value]
        else:
            out[field.name] = _value(field, value)
    return out


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return plain(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values_by_number[value].name
    if field.type == FieldDescriptor.TYPE_BYTES:
        return value.decode("utf-8", "replace")
    return value


def render(obj: Any) -> str:
    """The text a tool returns: JSON, non-ASCII kept as is (a CJK text stays readable and
    a third of its \\u-escaped size)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def size(obj: Any) -> int:
    return len(render(obj).encode("utf-8"))


def hit(h: Message) -> dict[str, Any]:
    """A search hit: what the model needs to pick it and read it."""
    view = {"ref": h.ref or h.id, "id": h.id, "kind": h.kind, "event_kind": h.event_kind,
            "state": h.state, "preview": h.preview, "score": round(h.score, 6),
            "lexical_rank": h.lexical_rank, "vector_rank": h.vector_rank, "time": h.time}
    if h.occurred_at:
        view["occurred_at"] = h.occurred_at
    return view
