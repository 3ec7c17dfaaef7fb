"""Material -> the evaluable S-expression text, in the physical region order (docs/encoding.md).

Layout: one top-level form per region (its items: regions.py), one item per line inside
it (items.py). The pressure line reports the size of the whole text, itself included.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from morphz.services.encoding.core.items import Item, stored_row
from morphz.services.encoding.core.material import Material
from morphz.services.encoding.core.options import MAINTENANCE_PERMILLE
from morphz.services.encoding.core.pressure import Pressure, pressure_of, tokens_of
from morphz.services.encoding.core.regions import (
    capabilities, environment, evaluate, inbox, kernel_items, mind, observation_state,
    pressure_item, profile, protocol, session_directory)

REGIONS = ("protocol", "evaluation-profile", "inbox", "observation-state", "mind",
           "session-directory", "kernel", "cognitive-capabilities", "evaluation-environment",
           "evaluate")


@dataclass
class Rendered:
    text: str
    regions: list[dict]
    items: list[dict]
    pressure: Pressure
    bytes: int
    # The items as the stored snapshot packs them: (start, stored_row(...)).
    rows: list[tuple] = field(default_factory=list)


def _region_text(name: str, lines: list[str]) -> str:
    if name == "evaluate":
        return lines[0]
    return "(" + name + ("\n  " + "\n  ".join(lines) if lines else "") + ")"


def render(m: Material, maintenance_permille: int = MAINTENANCE_PERMILLE) -> Rendered:
    """The encoding of `m`: its regions' items, the pressure line sized to the whole
    text, then the text with every item's and region's range in it."""
    regions = _regions(m)
    texts, p = _with_pressure(regions, m, maintenance_permille)
    region_ranges, items_out, rows = _ranges(regions, texts)
    text = "\n".join(texts)
    nbytes = len(text) if text.isascii() else len(text.encode())
    return Rendered(text, region_ranges, items_out, p, nbytes, rows)


KERNEL = 6  # the kernel region's index in _regions' list: the pressure line's region


def _regions(m: Material) -> list[tuple[str, list[Item]]]:
    """Each region's items, in the physical order (REGIONS); the kernel's pressure line
    comes later (_with_pressure)."""
    regions: list[tuple[str, list[Item]]] = [
        ("protocol", protocol(m)), ("evaluation-profile", profile(m)), ("inbox", inbox(m)),
        ("observation-state", observation_state(m)), ("mind", mind(m)),
        ("session-directory", session_directory(m)), ("kernel", kernel_items(m))]
    if m.env.capabilities:
        regions.append(("cognitive-capabilities", capabilities(m)))
    regions += [("evaluation-environment", environment(m)), ("evaluate", [evaluate(m)])]
    return regions


def _with_pressure(regions: list[tuple[str, list[Item]]], m: Material,
                   maintenance_permille: int) -> tuple[list[str], Pressure]:
    """The regions' texts, and the pressure, whose line (appended to the kernel's
    items) reports the size of the whole text, itself included: everything else is
    rendered once, then the line whose numbers describe the total is found."""
    kernel = regions[KERNEL][1]
    marker = "\x00pressure\x00"
    kernel.append(Item("pressure", "context", marker, []))
    kernel[-1].line = marker  # a placeholder: replaced below, never laid out
    texts = [_region_text(n, [it.line for it in its]) for n, its in regions]
    joined = "\n".join(texts)
    fixed_chars = len(joined) - len(marker)
    if joined.isascii():  # a flag str keeps: no need to encode the text to count it
        fixed_bytes = fixed_ascii = fixed_chars
    else:
        before, after = joined.split(marker)
        fixed_bytes = len(before.encode()) + len(after.encode())
        fixed_ascii = len(before.encode("ascii", "ignore")) + len(after.encode("ascii", "ignore"))
    guess = _pressure_sizes(fixed_bytes, fixed_chars, fixed_ascii, m, maintenance_permille)
    p = pressure_of(*guess, m.budget, maintenance_permille)
    pit = pressure_item(p)
    kernel[-1] = pit
    texts[KERNEL] = texts[KERNEL].replace(marker, pit.line)
    return texts, p


def _pressure_sizes(fixed_bytes: int, fixed_chars: int, fixed_ascii: int, m: Material,
                    maintenance_permille: int) -> tuple[int, int]:
    """(bytes, tokens) of the whole text with the pressure line that reports them,
    beside the rest's fixed sizes."""
    guess, seen = (fixed_bytes, tokens_of(fixed_chars, fixed_ascii)), []
    for _ in range(8):
        line = pressure_item(pressure_of(*guess, m.budget, maintenance_permille)).line
        actual = (fixed_bytes + len(line.encode()),
                  tokens_of(fixed_chars + len(line),
                            fixed_ascii + len(line.encode("ascii", "ignore"))))
        if actual == guess:
            break
        seen.append(actual)
        # At a boundary (a digit or level name changes the size) there may be no exact
        # fixed point; then report the largest sizes seen, never an under-count.
        guess = actual if len(seen) < 6 else (max(s[0] for s in seen), max(s[1] for s in seen))
    return guess


def _ranges(regions: list[tuple[str, list[Item]]],
            texts: list[str]) -> tuple[list[dict], list[dict], list[tuple]]:
    """Where each region and item lands in the joined text: the regions' ranges, the
    structured items (their parts' ranges), and the stored snapshot's rows."""
    region_ranges: list[dict] = []
    items_out: list[dict] = []
    rows: list[tuple] = []
    add_item, add_row = items_out.append, rows.append
    pos = 0
    for i, (name, its) in enumerate(regions):
        if i:
            pos += 1  # "\n"
        start = pos
        step = 0 if name == "evaluate" else 3  # "\n  " before each item
        cur = pos if name == "evaluate" else pos + 1 + len(name)
        for it in its:
            off = cur + step
            cur = off + it.chars
            rp = it.rel_parts
            # Unrolled for the one- and two-part items nearly all are (hot: one per item).
            if len(rp) == 2:
                (o1, s1, e1), (o2, s2, e2) = rp
                parts = [{"owner": o1, "start": off + s1, "end": off + e1},
                         {"owner": o2, "start": off + s2, "end": off + e2}]
            elif len(rp) == 1:
                (o1, s1, e1), = rp
                parts = [{"owner": o1, "start": off + s1, "end": off + e1}]
            else:
                parts = [{"owner": o, "start": off + s, "end": off + e} for o, s, e in rp]
            tpl = it.template
            if tpl is not None and tpl["region"] == name:
                d = tpl.copy()  # a copy beats building the 14 keys anew
                d["start"], d["end"], d["parts"] = off, cur, parts
            else:  # an item made for this compile only: no template to keep
                d = {"region": name, "kind": it.kind, "key": it.key, "start": off,
                     "end": cur, "parts": parts, **it.fields}
            add_item(d)
            stored = it.stored
            if stored is None or stored[0] != name:
                stored = it.stored = (name, stored_row(name, it))
            add_row((off, stored[1]))
        pos += len(texts[i])
        region_ranges.append({"name": name, "start": start, "end": pos})
    return region_ranges, items_out, rows
