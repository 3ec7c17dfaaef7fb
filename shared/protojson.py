"""Protobuf messages <-> plain dicts with the core's shapes (ints stay ints, unset
message fields are None), so a remote client returns what an in-process core does."""
from __future__ import annotations

from functools import cache

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor
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


class ReplyShapeError(Exception):
    """A core's result has a key its reply message lacks: a mismatch between the core and
    the proto, never trimmed silently (the servicer's boundary answers INTERNAL)."""


def from_plain(d: dict, msg: Message) -> Message:
    """Fill msg from a core dict; None values are left unset, any other key the message
    does not have raises ReplyShapeError. Direct attribute assignment (every reply passes here,
    json_format costs several times more); a value of another type than the field's (a
    float for an int, base64 text for bytes...) takes json_format's conversions instead."""
    try:
        _fill(msg, d)
    except ReplyShapeError:
        raise
    except (TypeError, ValueError, AttributeError):
        msg.Clear()
        try:
            json_format.ParseDict(_drop_none(d), msg)
        except json_format.ParseError as e:
            raise ReplyShapeError(str(e)) from None
    return msg


_SCALAR, _MESSAGE, _SCALARS, _MESSAGES, _MAP, _MESSAGE_MAP = range(6)


@cache
def _plan(descriptor: Descriptor) -> dict[str, int]:
    """How each field of a message type is filled (computed once per type)."""
    plan = {}
    for f in descriptor.fields:
        sub = f.message_type
        if sub is not None and sub.GetOptions().map_entry:
            value = sub.fields_by_name["value"]
            plan[f.name] = _MESSAGE_MAP if value.message_type is not None else _MAP
        elif f.is_repeated:
            plan[f.name] = _MESSAGES if sub is not None else _SCALARS
        else:
            plan[f.name] = _MESSAGE if sub is not None else _SCALAR
    return plan


def _fill(msg: Message, d: dict) -> None:
    if not isinstance(d, dict):
        raise TypeError(f"expected a dict for {msg.DESCRIPTOR.full_name}")
    plan = _plan(msg.DESCRIPTOR)
    for key, value in d.items():
        if value is None:  # absent, whether or not the message has the field
            continue
        kind = plan.get(key)
        if kind is None:
            raise ReplyShapeError(f"{msg.DESCRIPTOR.full_name} has no field {key!r}")
        if kind == _SCALAR:
            setattr(msg, key, value)
        elif kind == _MESSAGE:
            sub = getattr(msg, key)
            sub.SetInParent()  # an empty dict still marks the field present
            _fill(sub, value)
        elif kind == _SCALARS:
            getattr(msg, key).extend(value)
        elif kind == _MESSAGES:
            repeated = getattr(msg, key)
            for item in value:
                _fill(repeated.add(), item)
        elif kind == _MAP:
            getattr(msg, key).update(value)
        else:
            mapping = getattr(msg, key)
            for k, item in value.items():
                _fill(mapping[k], item)


def _drop_none(v):
    if isinstance(v, dict):
        return {k: _drop_none(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_drop_none(x) for x in v]
    return v
