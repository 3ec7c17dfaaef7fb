"""The writer: nodes -> canonical, single-line text that the reader reads back to an
equal structure; anything that would not read back is refused (ValueError, TypeError)."""

from __future__ import annotations

import re
from typing import Iterable

from morphz.shared.sexpr.nodes import INT, MAX_DIGITS, REF, Node, Ref, Symbol

# Escape what the reader needs plus all C0 controls/DEL so output is one line;
# surrogates are matched only to be rejected (they cannot be read back).
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f\ud800-\udfff]')
_ESCAPED = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_SYMBOL_TEXT = re.compile(r'[^\s()";\x00\ud800-\udfff]+')


def _escape_char(m: re.Match[str]) -> str:
    ch = m.group()
    if "\ud800" <= ch <= "\udfff":
        raise ValueError("string contains a lone surrogate")
    return _ESCAPED.get(ch) or f"\\u{{{ord(ch):x}}}"


def _render_atom(node: object) -> str:
    # Reject anything that would not read back as an equal node.
    if isinstance(node, bool):
        raise TypeError("bool is not a sexpr node")
    if isinstance(node, Symbol):
        name = node.name
        if (
            not isinstance(name, str)
            or not _SYMBOL_TEXT.fullmatch(name)
            or INT.fullmatch(name)
            or REF.fullmatch(name)
        ):
            raise ValueError(f"not valid symbol text: {name!r}")
        return name
    if isinstance(node, str):
        return '"' + _NEEDS_ESCAPE.sub(_escape_char, node) + '"'
    if isinstance(node, Ref):
        if not isinstance(node.seq, int) or isinstance(node.seq, bool) or not 0 <= node.seq < 10**MAX_DIGITS:
            raise ValueError(f"ref seq out of range: {node.seq!r}")
        return f"@e{node.seq}"
    if isinstance(node, int):
        if not -(10**MAX_DIGITS) < node < 10**MAX_DIGITS:
            raise ValueError(f"integer out of range: {node}")
        return str(node)
    raise TypeError(f"not a sexpr node: {type(node).__name__}")


_END = object()  # iterator-exhausted sentinel


def _render_into(nodes: Iterable[object], out: list[str]) -> None:
    # Explicit stack of [iterator, list id, items emitted] so depth never hits recursion limits.
    stack: list[list] = [[iter(nodes), None, 0]]
    open_ids: set[int] = set()  # lists on the current path, to detect cycles
    while stack:
        frame = stack[-1]
        node = next(frame[0], _END)
        if node is _END:
            stack.pop()
            if frame[1] is not None:
                open_ids.discard(frame[1])
                out.append(")")
            continue
        if frame[2]:
            out.append(" ")
        frame[2] += 1
        if isinstance(node, list):
            if id(node) in open_ids:
                raise ValueError("cyclic list cannot be rendered")
            open_ids.add(id(node))
            out.append("(")
            stack.append([iter(node), id(node), 0])
        else:
            out.append(_render_atom(node))



def render(node: Node) -> str:
    """Canonical single-line text for one node."""
    if type(node) is str:  # the commonest node (a text, a time): no walk to set up
        return '"' + _NEEDS_ESCAPE.sub(_escape_char, node) + '"'
    out: list[str] = []
    _render_into((node,), out)
    return "".join(out)


def render_items(nodes: Iterable[Node]) -> str:
    """Canonical text for a sequence of top-level nodes, separated by one space."""
    out: list[str] = []
    _render_into(nodes, out)
    return "".join(out)


def render_read(nodes: list[Node]) -> str:
    """render_items of nodes this module's reader made: each of its atoms reads back as
    itself and its lists nest no deeper than its limits allow (no cycle), so nothing is
    checked: several times faster, for the hot path that renders what it just read."""
    out: list[str] = []
    _render_read_into(nodes, out)
    return "".join(out)


def _render_read_into(nodes: list[Node], out: list[str]) -> None:
    for i, node in enumerate(nodes):
        if i:
            out.append(" ")
        kind = type(node)
        if kind is Symbol:
            out.append(node.name)
        elif kind is list:
            out.append("(")
            _render_read_into(node, out)
            out.append(")")
        elif kind is str:
            out.append('"' + _NEEDS_ESCAPE.sub(_escape_char, node) + '"')
        elif kind is int:
            out.append(str(node))
        else:
            out.append(f"@e{node.seq}")
