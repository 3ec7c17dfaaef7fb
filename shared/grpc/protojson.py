"""Protobuf messages <-> plain dicts with the core's shapes (ints stay ints, unset
message fields are None), so a remote client returns what an in-process core does.
Both directions are on the path of every reply: an encoding's reply holds a thousand
items and more, so neither walks a message's descriptor per message."""
from __future__ import annotations

from functools import cache
from typing import Callable, TypeVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

M = TypeVar("M", bound=Message)
_SCALAR, _MESSAGE, _SCALARS, _MESSAGES, _MAP, _MESSAGE_MAP, _ONEOF_SCALAR = range(7)


def to_plain(msg: Message) -> dict:
    return _reader(msg.DESCRIPTOR)(msg)


@cache
def _reader(descriptor: Descriptor) -> Callable[[Message], dict]:
    """A message type's converter to a dict, its fields in declaration order (made
    once per type; the CLI prints the dicts as they are, order included). Every field
    is read in one comprehension, then the few that are not plain scalars are replaced
    in place (which keeps their position) or, for an unset oneof member, dropped."""
    names = tuple(f.name for f in descriptor.fields)
    fixups = []
    for f in descriptor.fields:
        kind = _kind(f)
        if kind == _SCALAR and f.containing_oneof is not None:
            kind = _ONEOF_SCALAR
        elif kind == _SCALAR:
            continue
        sub = f.message_type
        if kind == _MESSAGE_MAP:
            sub = sub.fields_by_name["value"].message_type
        fixups.append((f.name, kind, sub))  # a sub-reader is looked up when used: types nest

    def read(msg: Message) -> dict:
        out = {name: getattr(msg, name) for name in names}
        for name, kind, sub in fixups:
            value = out[name]
            if kind == _MESSAGES:
                read_sub = _reader(sub)
                out[name] = [read_sub(v) for v in value]
            elif kind == _SCALARS:
                out[name] = list(value)
            elif kind == _MESSAGE:
                out[name] = _reader(sub)(value) if msg.HasField(name) else None
            elif kind == _ONEOF_SCALAR:
                if not msg.HasField(name):  # only the oneof's member that is set
                    del out[name]
            elif kind == _MAP:
                out[name] = dict(value)
            else:
                read_sub = _reader(sub)
                out[name] = {k: read_sub(v) for k, v in value.items()}
        return out
    return read


class ReplyShapeError(Exception):
    """A core's result has a key its reply message lacks: a mismatch between the core and
    the proto, never trimmed silently (the servicer's boundary answers INTERNAL)."""


def from_plain(d: dict, cls: type[M]) -> M:
    """A message of type `cls` from a core dict; None values are left unset, any other key
    the message does not have raises ReplyShapeError. The message's constructor takes
    the nested dicts and lists whole (protobuf's C runtime converts them, several times
    faster than assigning field by field); a value of another type than the field's (a
    float for an int, base64 text for bytes...) takes json_format's conversions instead."""
    try:
        return cls(**d)
    except (TypeError, ValueError):
        pass  # an unknown key or another type: find which, field by field
    msg = cls()
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


def _kind(f) -> int:
    sub = f.message_type
    if sub is not None and sub.GetOptions().map_entry:
        value = sub.fields_by_name["value"]
        return _MESSAGE_MAP if value.message_type is not None else _MAP
    if f.is_repeated:
        return _MESSAGES if sub is not None else _SCALARS
    return _MESSAGE if sub is not None else _SCALAR


@cache
def _plan(descriptor: Descriptor) -> dict[str, int]:
    """How each field of a message type is filled (computed once per type)."""
    return {f.name: _kind(f) for f in descriptor.fields}


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
