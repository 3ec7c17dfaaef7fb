"""A bounded length for every string and list field of every request (SEC-06).

Checked on each request before its servicer runs (shared/grpc/guard.py: its Guard's
FieldLimits), from the message's descriptor, so a field added later is bounded too: a
name field by name_chars, an id looked up by lookup_chars, any other string by
string_chars, and every repeated or map field by list_items (shared/limits.py). The
fields whose size a core checks against a limit of its own are left to it (an event's
text, a transaction), and bytes fields are bounded by the message size. The error names
the limit and the field's path; it never echoes the value. Nothing here imports gRPC.
"""
from __future__ import annotations

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from morphz.shared.errors import MorphzError
from morphz.shared.limits import (LIST_ITEMS, LOOKUP_CHARS, NAME_CHARS, STRING_CHARS, Limit)

# Checked by the core against a limit of their own.
OWN_LIMITS = frozenset({
    "morphz.api.transaction.v1.AppendEventRequest.text",  # event_text_bytes
    "morphz.api.transaction.v1.CommitRequest.text",  # tx_bytes ...
    "morphz.api.transaction.v1.CommitRequest.structured",  # ... the same for both forms
    "morphz.api.storage.v1.CommitRequest.writes",  # one commit's rows: message_bytes
})
# By field name, in any request message (a list of them: each item).
NAME_FIELDS = frozenset({"context", "session", "activation", "target_session", "request_id",
                         "actor", "kind", "kinds", "sessions", "states", "table", "snapshot",
                         "parent_snapshot"})
LOOKUP_FIELDS = frozenset({"frame_id", "ref", "causal_refs", "must_read", "frames"})
# A message no longer than this has no field over any of the limits above.
SMALLEST = min(NAME_CHARS.max, LOOKUP_CHARS.max, STRING_CHARS.max, LIST_ITEMS.max)

_STRING, _MESSAGE, _MAP = "string", "message", "map"


def _string_limit(name: str) -> Limit:
    if name in NAME_FIELDS:
        return NAME_CHARS
    return LOOKUP_CHARS if name in LOOKUP_FIELDS else STRING_CHARS


class FieldLimits:
    """The checks, with the plan of each message type they met (its Guard's: one a
    server)."""

    def __init__(self) -> None:
        self._plans: dict[str, tuple] = {}  # message full name -> _plan's

    def check(self, msg: Message, path: str = "") -> None:
        """Raise the error of the first field over its limit (MorphzError)."""
        for name, kind, repeated, arg in self._plan(msg.DESCRIPTOR):
            value = getattr(msg, name)
            where = path + name
            if repeated:
                _count(value, where)
            if kind is _STRING:
                for i, s in enumerate(value) if repeated else ((None, value),):
                    _length(s, arg, where if i is None else f"{where}[{i}]")
            elif kind is _MESSAGE:
                if repeated:
                    for i, item in enumerate(value):
                        self.check(item, f"{where}[{i}].")
                elif msg.HasField(name):
                    self.check(value, where + ".")
            else:  # a map: string keys; string or message values
                for key, item in value.items():
                    _length(key, STRING_CHARS, f"{where}.key")
                    if arg.type == FieldDescriptor.TYPE_STRING:
                        _length(item, STRING_CHARS, f"{where}.value")
                    elif arg.type == FieldDescriptor.TYPE_MESSAGE:
                        self.check(item, f"{where}.value.")

    def _plan(self, desc: Descriptor) -> tuple:
        """(field name, kind, repeated, string limit or message descriptor) of each
        field to check; computed once per message type."""
        plan = self._plans.get(desc.full_name)
        if plan is None:
            plan = self._plans[desc.full_name] = _fields_to_check(desc)
        return plan


def _fields_to_check(desc: Descriptor) -> tuple:
    entries = []
    for f in desc.fields:
        if f.full_name in OWN_LIMITS or f.type == FieldDescriptor.TYPE_BYTES:
            continue
        if f.type == FieldDescriptor.TYPE_STRING:
            entries.append((f.name, _STRING, f.is_repeated, _string_limit(f.name)))
        elif f.type == FieldDescriptor.TYPE_MESSAGE:
            entry = f.message_type
            if entry.GetOptions().map_entry:
                entries.append((f.name, _MAP, True, entry.fields_by_name["value"]))
            else:
                entries.append((f.name, _MESSAGE, f.is_repeated, entry))
    return tuple(entries)


def _count(values, where: str) -> None:
    if len(values) > LIST_ITEMS.max:
        raise MorphzError(LIST_ITEMS.reason, f"{where} has more than {LIST_ITEMS.max} entries",
                          **LIST_ITEMS.details(field=where, size=len(values)))


def _length(value: object, limit: Limit, where: str) -> None:
    if isinstance(value, str) and len(value) > limit.max:
        raise MorphzError(limit.reason, f"{where} is longer than {limit.max} characters",
                          **limit.details(field=where, size=len(value)))
