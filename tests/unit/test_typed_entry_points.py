"""No core entry point returns or takes a bare dict (issue 41): a reply's shape is a
type, converted to protobuf by the servicer and to text or JSON by the CLI. Walks the
public methods' annotations (through Optional, unions and containers); add a core to
CORES as it is typed."""
from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Optional

import pytest

from morphz.services.encoding.core.engine import EncodingCore
from morphz.services.recall.core.engine import RecallCore
from morphz.services.transaction.core.engine import TransactionCore

CORES = [EncodingCore, RecallCore, TransactionCore]


def _dicts(t) -> list[str]:
    """Where the annotation `t` is or holds a dict."""
    if t is dict or typing.get_origin(t) is dict:
        return [repr(t)]
    return [d for arg in typing.get_args(t) for d in _dicts(arg)]


def _entry_points():
    for core in CORES:
        for name, fn in inspect.getmembers(core, inspect.isfunction):
            if not name.startswith("_"):
                yield pytest.param(name, fn, id=f"{core.__name__}.{name}")


@pytest.mark.parametrize("name, fn", list(_entry_points()))
def test_a_core_entry_point_neither_takes_nor_returns_a_bare_dict(name, fn):
    hints = typing.get_type_hints(fn)
    assert "return" in hints, f"{name} says what it returns"
    found = {arg: _dicts(t) for arg, t in hints.items() if _dicts(t)}
    assert not found, found


def _records(t, seen: set) -> list[type]:
    """The dataclasses the annotation `t` is or holds, and those their fields hold."""
    if isinstance(t, type) and dataclasses.is_dataclass(t):
        if t in seen:
            return []
        seen.add(t)
        return [t] + [r for f in typing.get_type_hints(t).values() for r in _records(f, seen)]
    return [r for arg in typing.get_args(t) for r in _records(arg, seen)]


DICT_READS = ("__getitem__", "get", "keys", "items", "values")


def _dict_reads(record: type) -> list[str]:
    """The dict-style reads a record offers (a field of that name is not one)."""
    fields = {f.name for f in dataclasses.fields(record)}
    return [a for a in DICT_READS if a not in fields and hasattr(record, a)]


def test_a_core_result_is_read_by_attribute_only():
    """A result answers `r.field`, never `r["field"]` or `r.get("field")`: one way to
    read it, which a type checker follows (plain() gives the JSON-shaped form)."""
    seen: set = set()
    for _, fn in (p.values for p in _entry_points()):
        _records(typing.get_type_hints(fn)["return"], seen)
    assert len(seen) > 20  # the walk reached the results
    assert {r.__name__: _dict_reads(r) for r in seen if _dict_reads(r)} == {}

    @dataclasses.dataclass
    class Readable:
        x: int
        def __getitem__(self, key): ...
    assert _dict_reads(Readable) == ["__getitem__"]


def test_the_walk_finds_a_dict_where_it_is():
    def entry(x: Optional[list[dict[str, int]]]) -> dict: ...
    hints = typing.get_type_hints(entry)
    assert _dicts(hints["x"]) and _dicts(hints["return"])
    assert not _dicts(typing.get_type_hints(EncodingCore.read)["return"])
