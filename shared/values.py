"""Value types for what strings stood in for at the seams between services: a context's
name, an event's ref, a frame's id and a recall hit's key. Each is checked once, where it
enters (a request, a stored key), and is then passed as itself; `str()` gives the wire
form back. Frozen and hashable, so they can key dicts and sets as the strings did."""
from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec

from morphz.shared.errors import MorphzError
from morphz.shared.names import check_lookup, check_name

# An event's short ref, read as the S-expression reader reads one (ASCII digits, bounded).
_REF = re.compile(r"@e([0-9]{1,18})\Z")


@dataclass(frozen=True, slots=True)
class ContextName:
    """A context's name as a request gives it (a namespace-qualified `~NS/name` included)."""
    value: str

    @classmethod
    def parse(cls, text: str, field: str = "context") -> "ContextName":
        return cls(check_name(text, field))

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class EventRef:
    """`@eN`: the event at position N of a context's history."""
    seq: int

    @classmethod
    def parse(cls, text: str, field: str = "ref") -> "EventRef":
        found = cls.find(text)
        if found is None:
            raise MorphzError("CONTEXT_INPUT_INVALID", f"{field} must be an @eN ref", field=field)
        return found

    @classmethod
    def find(cls, text: str) -> "EventRef | None":
        """The ref text spells, or None when it is not one (a frame id, an event id)."""
        m = _REF.match(text) if isinstance(text, str) else None
        return cls(int(m.group(1))) if m else None

    def __str__(self) -> str:
        return f"@e{self.seq}"


@dataclass(frozen=True, slots=True)
class FrameId:
    value: str

    @classmethod
    def parse(cls, text: str, field: str = "frame_id") -> "FrameId":
        return cls(check_lookup(text, field))

    def __str__(self) -> str:
        return self.value


class HitKey(msgspec.Struct, frozen=True):
    """What a recall index document is: an event (by seq) or a frame (by id). Its wire and
    stored form is `e:<seq>` or `f:<frame id>`. A msgspec Struct of two plain fields (the
    other one -1 or ''), not a union of values: a search parses one per candidate."""
    seq: int  # the event's seq; -1 for a frame
    frame_id: str = ""  # the frame's id; '' for an event

    @classmethod
    def event(cls, seq: int) -> "HitKey":
        return cls(seq)

    @classmethod
    def frame(cls, frame_id: str) -> "HitKey":
        return cls(-1, frame_id)

    @classmethod
    def parse(cls, text: str) -> "HitKey":
        kind, digits = text[:2], text[2:]
        if kind == "e:" and digits.isdigit():
            return cls(int(digits))
        if kind == "f:" and digits:
            return cls(-1, digits)
        raise ValueError(f"not a hit key: {text[:64]!r}")

    @property
    def is_event(self) -> bool:
        return self.seq >= 0

    def __str__(self) -> str:
        return f"e:{self.seq}" if self.seq >= 0 else f"f:{self.frame_id}"
