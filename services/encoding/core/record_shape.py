"""The shape of a stored snapshot record (what snapshot.freeze writes), checked before
anything reads the record: one that is not that shape is SNAPSHOT_CORRUPT, never a
crash further in (a KeyError in thaw, a bad string in a reply, a division by zero).

The head (identity, scope, budget, environment: what reads and compiles narrowing the
scope use) and the packed body (inputs, omissions, regions, items) are checked
separately, so a scoped read never unpacks the items.
"""
from __future__ import annotations

import re
from typing import Callable

from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.mind.view import snapshot_corrupt
from morphz.shared.names import check_name
from morphz.shared.storage.keys import MAX_KEY_BYTES
from morphz.services.encoding.core.scope import Scope

Check = Callable[[object], None]
_SURROGATE = re.compile("[\ud800-\udfff]")  # JSON can escape one; UTF-8 cannot carry it
_MAX_COUNT = 1 << 63  # counts, ticks, revisions and offsets fit a uint64 reply field


class _Bad(Exception):
    """What is wrong; containers add where on the way out (no path is built for a
    record that checks, which is nearly all of them)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what, self.where = what, []

    def __str__(self) -> str:
        return f"{''.join(reversed(self.where)).lstrip('.')[:160]}: {self.what}"


def _fail(what: str) -> None:
    raise _Bad(what)


def count(v: object) -> None:
    if type(v) is not int or not 0 <= v < _MAX_COUNT:
        _fail("not a non-negative integer")


def positive(v: object) -> None:
    count(v)
    if v == 0:
        _fail("zero")


def text(v: object) -> None:
    if type(v) is not str:
        _fail("not a string")
    if not v.isascii() and _SURROGATE.search(v):
        _fail("a lone surrogate, not Unicode text")


def ident(v: object) -> None:
    """An id the record names and replay looks up: it was a storage key once."""
    text(v)
    if "\x00" in v or len(v.encode()) > MAX_KEY_BYTES:
        _fail("not an id a store could hold")


def name(v: object) -> None:
    """A session (or other) name as requests give them."""
    try:
        check_name(v, "name")
    except MorphzError:
        _fail("not a name")


def flag(v: object) -> None:
    if type(v) is not bool:
        _fail("not a boolean")


def ref(v: object) -> None:
    if type(v) is not str or not R.is_ref(v):
        _fail("not an @eN ref")


def one_of(*values: str) -> Check:
    def check(v: object) -> None:
        if v not in values:
            _fail(f"not one of {', '.join(values)}")
    return check


def list_of(item: Check) -> Check:
    def check(v: object) -> None:
        if type(v) is not list:
            _fail("not a list")
        for i, x in enumerate(v):
            try:
                item(x)
            except _Bad as e:
                e.where.append(f"[{i}]")
                raise
    return check


def tuple_of(*items: Check) -> Check:
    def check(v: object) -> None:
        if type(v) is not list or len(v) != len(items):
            _fail(f"not a list of {len(items)}")
        for i, (x, c) in enumerate(zip(v, items)):
            try:
                c(x)
            except _Bad as e:
                e.where.append(f"[{i}]")
                raise
    return check


def map_of(value: Check) -> Check:
    def check(v: object) -> None:
        if type(v) is not dict:
            _fail("not an object")
        for k, x in v.items():
            try:
                text(k)
                value(x)
            except _Bad as e:
                e.where.append(f".{k[:40]}")
                raise
    return check


def obj(required: dict[str, Check], optional: dict[str, Check] = None) -> Check:
    """An object with exactly these fields (the optional ones are absent in records
    written before they existed)."""
    optional = optional or {}
    allowed = {**required, **optional}

    def check(v: object) -> None:
        if type(v) is not dict:
            _fail("not an object")
        for k in required:
            if k not in v:
                _fail(f"no field {k}")
        for k, x in v.items():
            c = allowed.get(k)
            if c is None:
                _fail(f"unknown field {k[:40]}")
            try:
                c(x)
            except _Bad as e:
                e.where.append(f".{k}")
                raise
    return check


_SCOPE_FIELDS = obj({"sessions": list_of(text), "kinds": list_of(text), "since": text,
                     "until": text, "frames": list_of(text)}, {"reveal_secrets": flag})


def _scope(v: object) -> None:
    _SCOPE_FIELDS(v)
    try:  # a stored scope must still be one a request could have made
        Scope.from_dict(v)
    except MorphzError as e:
        _fail(e.message)


STRINGS = list_of(text)
HEAD = obj({
    "schema": count, "version": count, "id": name, "context": name, "session": name,
    "time": text, "revision": count, "tick": count, "window": count,
    "activation": obj({"id": name, "session": name, "tick": count, "tick_advanced": flag,
                       "delivered": flag},
                      {"claimed": STRINGS, "root": text, "retired_frames": STRINGS,
                       "results": STRINGS}),
    "parent": text,
    "budget": obj({"bytes": positive, "tokens": count, "preview_bytes": count},
                  {"maintenance_permille": count}),
    "scope": _scope, "must_read": STRINGS,
    "env": obj({"model": text, "profile": text, "bindings": map_of(text),
                "capabilities": flag}),
    "capabilities": map_of(STRINGS),
    "selected": count, "omitted_total": count,
    "pressure": obj({"used_bytes": count, "limit_bytes": count, "used_tokens": count,
                     "limit_tokens": count, "permille": count, "level": text,
                     "external_actions_deferred": flag}),
    "bytes": count, "chars": count, "hash": text,
}, {"packed": text})

BODY = obj({
    "inputs": obj({
        "observations": list_of(obj(
            {"ref": ref, "kind": text, "session": text, "actor": text, "time": text,
             "residency": text, "protected": flag, "freshness": text, "root": flag},
            {"target": text, "occurred": text})),
        "frames": list_of(obj({"id": ident, "revision": count, "state": text,
                               "protected": flag, "retire_reason": text, "due_tick": count,
                               "remaining_ticks": count})),
        "relations": list_of(tuple_of(ident, ident, ident)),
        "checkpoints": list_of(tuple_of(ident, count)),
        "sessions": list_of(obj({"id": ident, "state": text, "level": text},
                                {"waiting": count})),
        "pending": count},
        {"calls": list_of(obj({"ref": ref, "activation": text, "actor": text})),
         "late_results": list_of(obj({"ref": ref, "call": text, "activation": text,
                                      "state": one_of("pending", "claimed")}))}),
    "omitted": list_of(obj({"key": text, "reason": text})),
    "regions": list_of(obj({"name": text, "start": count, "end": count})),
    "items": list_of(obj({
        "region": text, "kind": text, "key": text, "start": count, "end": count,
        "bytes": count, "residency": text, "shown_bytes": count, "total_bytes": count,
        "revision": count, "state": text, "remaining_ticks": count, "protected": flag,
        "parts": list_of(obj({"owner": text, "start": count, "end": count}))})),
})
BODY_FIELDS = ("inputs", "omitted", "regions", "items")


def check_head(stored: dict, snapshot_id: str, context: str) -> None:
    """The stored record's own fields (a record from before packing holds its body
    fields here too: those are checked by check_body once unpacked)."""
    head = {k: v for k, v in stored.items() if k not in BODY_FIELDS}
    _check(HEAD, head, snapshot_id)
    if (stored["id"], stored["context"]) != (snapshot_id, context):
        raise snapshot_corrupt(snapshot_id, "the record names another snapshot or context")


def check_body(record: dict, snapshot_id: str) -> None:
    _check(BODY, {k: record.get(k) for k in BODY_FIELDS}, snapshot_id)


def _check(spec: Check, value: dict, snapshot_id: str) -> None:
    try:
        spec(value)
    except _Bad as e:
        raise snapshot_corrupt(snapshot_id, str(e)) from None
