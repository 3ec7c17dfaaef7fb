"""No core entry point returns or takes a bare dict (issue 41): a reply's shape is a
type, converted to protobuf by the servicer and to text or JSON by the CLI. Walks the
public methods' annotations (through Optional, unions and containers); add a core to
CORES as it is typed."""
from __future__ import annotations

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


def test_the_walk_finds_a_dict_where_it_is():
    def entry(x: Optional[list[dict[str, int]]]) -> dict: ...
    hints = typing.get_type_hints(entry)
    assert _dicts(hints["x"]) and _dicts(hints["return"])
    assert not _dicts(typing.get_type_hints(EncodingCore.read)["return"])
