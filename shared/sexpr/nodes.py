"""The S-expression nodes and what bounds and refuses them: ``Symbol`` and ``Ref`` (the
rest are plain ``str``, ``int`` and ``list``), the reader's ``Limits``, its errors, and
the grammar of a number atom, which the reader reads and the writer keeps symbols clear
of (a symbol never reads back as a number or a ref)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypeAlias

@dataclass(frozen=True, slots=True)
class Symbol:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Ref:
    """Reference to a stored entry, written ``@e<seq>``."""

    seq: int

    def __str__(self) -> str:
        return f"@e{self.seq}"


Node: TypeAlias = "Symbol | Ref | str | int | list[Node]"


@dataclass(frozen=True, slots=True)
class Limits:
    max_bytes: int = 16 * 1024 * 1024  # measured on the UTF-8 encoding
    max_depth: int = 64
    max_nodes: int = 200_000


DEFAULT_LIMITS = Limits()

REASONS = frozenset({
    "SEXPR_INVALID_UTF8",
    "SEXPR_TOO_LARGE",
    "SEXPR_TOO_DEEP",
    "SEXPR_TOO_MANY_NODES",
    "SEXPR_UNBALANCED",
    "SEXPR_UNTERMINATED_STRING",
    "SEXPR_BAD_ESCAPE",
    "SEXPR_INTEGER_RANGE",
    "SEXPR_EMPTY",
    "SEXPR_EXPECTED_ONE_FORM",
    "SEXPR_INVALID_CHARACTER",
})


class SexprError(Exception):
    """Parse failure; ``offset`` is a character offset, line/column are 1-based."""

    def __init__(self, reason: str, message: str, offset: int = 0, line: int = 1, column: int = 1):
        super().__init__(f"{reason}: {message} (line {line}, column {column})")
        self.reason = reason
        self.message = message
        self.offset = offset
        self.line = line
        self.column = column

    def to_dict(self) -> dict[str, object]:
        return {
            "reason": self.reason,
            "message": self.message,
            "offset": self.offset,
            "line": self.line,
            "column": self.column,
        }


# A number atom: an integer or a ref, at most MAX_DIGITS digits ([0-9] is ASCII-only,
# unlike \d).
INT = re.compile(r"-?([0-9]+)")
REF = re.compile(r"@e([0-9]+)")
MAX_DIGITS = 18
