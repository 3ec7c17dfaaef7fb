"""Protobuf messages <-> plain dicts with the core's shapes (ints stay ints, unset
message fields are None), so a remote client returns what an in-process core does."""
from __future__ import annotations

from google.protobuf import json_format
from google.protobuf.message import Message


def to_plain(msg: Message) -> dict:
    out = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            vf = field.message_type.fields_by_name["value"]
            out[field.name] = {k: (to_plain(v) if vf.message_type else v) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [to_plain(v) if field.message_type else v for v in value]
        elif field.message_type is not None:
            out[field.name] = to_plain(value) if msg.HasField(field.name) else None
        elif field.containing_oneof is not None and not msg.HasField(field.name):
            continue
        else:
            out[field.name] = value
    return out


def from_plain(d: dict, msg: Message) -> Message:
    """Fill msg from a core dict; keys the message does not have are ignored."""
    return json_format.ParseDict(_drop_none(d), msg, ignore_unknown_fields=True)


def _drop_none(v):
    if isinstance(v, dict):
        return {k: _drop_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_none(x) for x in v]
    return v
