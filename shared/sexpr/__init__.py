"""S-expression reader/writer for the ``context-tx`` DSL.

Nodes are plain Python values: ``list`` (a parenthesised form), ``str``
(string literal), ``int`` (integer literal), ``Ref`` (``@e42``) and ``Symbol``
(any other bare token).  The reader (reader.py) is iterative and linear-time so
hostile input can only ever produce a ``SexprError``; ``render`` (writer.py)
produces canonical, single-line text that ``parse_many`` reads back to an equal
structure. The nodes, limits and errors: nodes.py.
"""

from morphz.shared.sexpr.nodes import (
    DEFAULT_LIMITS, REASONS, Limits, Node, Ref, SexprError, Symbol)
from morphz.shared.sexpr.reader import parse_many, parse_one
from morphz.shared.sexpr.writer import render, render_items, render_read

__all__ = [
    "DEFAULT_LIMITS",
    "REASONS",
    "Limits",
    "Node",
    "Ref",
    "SexprError",
    "Symbol",
    "parse_many",
    "parse_one",
    "render",
    "render_items",
    "render_read",
]
