"""An encoding's items: each is `(HEAD [KEY] (runtime ...) [(agent ...)])` on a line of
its own. The `runtime` form holds runtime facts (read-only to the agent), the `agent` form
holds what the agent wrote through context-tx, so ownership is visible in the text
itself (CORE-22) and, as `parts` with character ranges, in the structured form. An Item
lays itself out once (its line, sizes, parts' ranges and stored row, relative to its
start), so an item shown again (a RowCache keeps frame items) costs its placing only."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Optional

import orjson

from morphz.shared import sexpr
from morphz.shared.mind import records as R
from morphz.shared.sexpr import Ref, Symbol
from morphz.services.encoding.core.compact_json import dumps
from morphz.services.encoding.core.material import RUNTIME

# Every structured item carries every field, so the stored record, the core's reply
# and the gRPC client's reply are the same dicts.
ITEM_DEFAULTS = {"residency": "", "shown_bytes": 0, "total_bytes": 0, "revision": 0,
                 "state": "", "remaining_ticks": 0, "protected": False}


def atom(value: str):
    """A symbol when the text reads back as that symbol, else a string literal."""
    try:
        sexpr.render(Symbol(value))
        return Symbol(value)
    except ValueError:
        return value


def ref_or_atom(value: str):
    seq = R.parse_ref(value)
    return atom(value) if seq is None else Ref(seq)


def yes(flag: bool) -> Symbol:
    return Symbol("yes" if flag else "no")


def form(name: str, *nodes) -> list:
    return [Symbol(name), *nodes]


def preview_text(text: str, limit: int) -> str:
    """The longest prefix of at most `limit` UTF-8 bytes (never a split character)."""
    return text[:limit].encode("utf-8")[:limit].decode("utf-8", "ignore")


@dataclass
class Item:
    kind: str
    key: str
    head: str                       # rendered head text, e.g. "observation @e4"
    parts: list[tuple[str, str]]    # (owner, rendered inner text)
    facts: dict = field(default_factory=dict)  # structured fields for the protobuf Item
    line: str = ""

    def __post_init__(self) -> None:
        parts = self.parts
        if len(parts) == 1:  # most items: one runtime part
            (o, t), = parts
            self.line = f"({self.head} ({o} {t}))" if t else f"({self.head} ({o}))"
        else:
            self.line = "(" + self.head + "".join([f" ({o} {t})" if t else f" ({o})"
                                                    for o, t in parts]) + ")"
        self.layout()

    def layout(self) -> None:
        """What the item contributes wherever it lands: its sizes, its parts' ranges
        relative to its start, and its structured fields (render adds the offsets)."""
        line = self.line
        self.chars = len(line)
        nbytes = self.chars if line.isascii() else len(line.encode())
        rel, p_off = [], 1 + len(self.head)
        for owner, inner in self.parts:
            seg = 3 + len(owner) + (len(inner) + 1 if inner else 0)  # " (" owner [" " inner] ")"
            rel.append((owner, p_off + 1, p_off + seg))
            p_off += seg
        self.rel_parts = rel
        f = self.fields = {**ITEM_DEFAULTS, **self.facts, "bytes": nbytes}
        # snapshot.ITEM_FIELDS from "bytes" on: what a stored row holds past the offsets.
        # Its structured item, offsets left out, for items shown again and again
        # (frame_item's): render copies it and fills the offsets in.
        self.template = None
        self.row_fields = (nbytes, f["residency"], f["shown_bytes"], f["total_bytes"],
                           f["revision"], f["state"], f["remaining_ticks"], f["protected"])
        self.stored: Optional[tuple[str, orjson.Fragment]] = None  # see stored_row


def stored_row(region: str, it: Item) -> orjson.Fragment:
    """The item's row in a stored snapshot past its start (snapshot.ITEM_ROW_FIELDS),
    serialized: everything but the start is the item's own (the end and the parts'
    ranges are relative to it), so an item shown again (a RowCache keeps frame items)
    is serialized once, and each compile stores (start, these bytes)."""
    return orjson.Fragment(dumps([region, it.kind, it.key, it.chars, *it.row_fields,
                                  [x for part in it.rel_parts for x in part]]))


def item(kind: str, key: Optional[str], parts: list[tuple[str, list]], **facts) -> Item:
    head = sexpr.render_items([Symbol(kind)] + ([ref_or_atom(key)] if key is not None else []))
    rendered = [(o, sexpr.render_items(nodes)) for o, nodes in parts]
    return Item(kind, key if key is not None else kind, head, rendered, facts)


def runtime(*nodes) -> tuple[str, list]:
    return (RUNTIME, list(nodes))


# A bounded cache of a pure function (ids repeat across frames and compiles).
@functools.lru_cache(maxsize=1 << 16)
def atom_text(value: str) -> str:
    """Rendered text of atom(value): the hot loops of regions.py format strings directly."""
    return sexpr.render(ref_or_atom(value))
