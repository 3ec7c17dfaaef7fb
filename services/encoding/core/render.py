"""Material -> the evaluable S-expression text, in the physical region order (docs/encoding.md).

Layout: one top-level form per region, one item per line inside it. Every item is
`(HEAD [KEY] (runtime ...) [(agent ...)])`: the `runtime` form holds runtime facts
(read-only to the agent), the `agent` form holds what the agent wrote through
context-tx, so ownership is visible in the text itself (CORE-22) and, as `parts`
with character ranges, in the structured form. Frame bodies are copied verbatim:
the renderer never rewrites or shortens agent-written content (CORE-25).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Optional

import orjson

from morphz.shared import sexpr
from morphz.shared.mind import records as R
from morphz.shared.sexpr import Ref, Symbol
from morphz.services.encoding.core.compact_json import dumps
from morphz.services.encoding.core.material import AGENT, PREVIEW, RUNTIME, FrameIn, Material, Obs
from morphz.services.encoding.core.options import MAINTENANCE_PERMILLE
from morphz.services.encoding.core.pressure import MAINTENANCE_HINT, Pressure, pressure_of, tokens_of

REGIONS = ("protocol", "evaluation-profile", "inbox", "observation-state", "mind",
           "session-directory", "kernel", "cognitive-capabilities", "evaluation-environment",
           "evaluate")

OWNERSHIP_NOTE = ("(runtime ...) forms are runtime facts, read-only to the agent; "
                  "(agent ...) forms were written by the agent through context-tx")
PREVIEW_NOTE = ("a (preview ...) shows only the first shown-bytes of an observation, never "
                "the whole; read the full text by its @eN ref")
ENTRY_NOTE = "evaluate is the only execution entry point; change the Mind with one context-tx"


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


# -- regions -----------------------------------------------------------------------------

def protocol(m: Material) -> list[Item]:
    return [item("encoding", "morphz-context", [runtime(form("version", m.version))]),
            item("ownership", None, [runtime(OWNERSHIP_NOTE)]),
            item("previews", None, [runtime(PREVIEW_NOTE)]),
            item("entry-point", None, [runtime(ENTRY_NOTE)])]


def profile(m: Material) -> list[Item]:
    body = form("harness", m.env.profile) if m.env.profile else Symbol("none")
    return [item("profile", None, [runtime(body)])]


# A bounded cache of a pure function (ids repeat across frames and compiles).
@functools.lru_cache(maxsize=1 << 16)
def atom_text(value: str) -> str:
    """Rendered text of atom(value): the hot loops below format strings directly."""
    return sexpr.render(ref_or_atom(value))


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


def inbox(m: Material) -> list[Item]:
    n = m.budget.preview_bytes
    # A whole text's item is the same at any preview size: one key for all of them.
    return [inbox_item(o, n) if o.seen is None else
            o.seen.item(("inbox", o.residency, n if o.residency == PREVIEW else 0,
                         o.protected), lambda o=o: inbox_item(o, n))
            for o in m.observations]


def inbox_item(o: Obs, preview_bytes: int) -> Item:
    """An observation's inbox item: its event's facts and text."""
    total = o.total_bytes if o.total_bytes is not None else len(o.text.encode("utf-8"))
    # A message names where it comes from and goes to, and carries its text only.
    whose = (f"(from {atom_text(o.session)}) (to {atom_text(o.target)})" if o.target
             else f"(session {atom_text(o.session)})")
    meta = (f"(kind {atom_text(o.kind)}) {whose} "
            f"(actor {sexpr.render(o.actor)}) (time {sexpr.render(o.time)}) "
            # Only where given: an encoding of events without it stays byte-exact.
            + (f"(occurred {sexpr.render(o.occurred)}) " if o.occurred else ""))
    if o.residency == PREVIEW:
        shown = preview_text(o.text, preview_bytes)
        shown_bytes = len(shown.encode("utf-8"))
        body = (f"(preview (shown-bytes {shown_bytes}) (total-bytes {total}) "
                f"(full-text @e{o.seq}) (text {sexpr.render(shown)}))")
    else:
        shown_bytes = total
        body = f"(text {sexpr.render(o.text)})"
    return Item("observation", f"@e{o.seq}", f"observation @e{o.seq}",
                [(RUNTIME, meta + body)],
                {"residency": o.residency, "shown_bytes": shown_bytes,
                 "total_bytes": total, "protected": o.protected})


def observation_state(m: Material) -> list[Item]:
    cited: dict[str, list[str]] = {}
    for f in m.frames:
        for s in f.sources:
            cited.setdefault(s, []).append(f.id)
    out = []
    for o in m.observations:
        users = tuple(cited.get(f"@e{o.seq}", ()))
        if o.seen is None:
            out.append(state_item(o, users))
        else:
            out.append(o.seen.item(("state", o.protected, o.residency, o.freshness, o.root,
                                    users), lambda o=o, u=users: state_item(o, u)))
    return out


def state_item(o: Obs, users: tuple[str, ...]) -> Item:
    """An observation's state item; `users`: the frames citing it."""
    ref = f"@e{o.seq}"
    usage = ("(usage (cited-by " + " ".join(map(atom_text, users)) + "))" if users
             else "(usage uncited)")
    facts = (f"(protected {_yn(o.protected)}) (residency {o.residency}) "
             f"(freshness {o.freshness}) {usage}" + (" (root-request yes)" if o.root else ""))
    return Item("state", ref, f"state {ref}", [(RUNTIME, facts)],
                {"residency": o.residency, "protected": o.protected})


def frame_item(f: FrameIn) -> Item:
    facts = f"(revision {f.revision}) (state {f.state}) (protected {_yn(f.protected)})"
    agent = ""
    if f.state == "retiring":
        facts += f" (due-tick {f.due_tick}) (remaining-ticks {f.remaining_ticks})"
        agent = f"(retire-reason {sexpr.render(f.retire_reason)}) "
    agent += "(sources" + "".join(" " + atom_text(x) for x in f.sources) + ")"
    # The body is the agent's canonical text, inserted byte for byte.
    agent += " (body" + (" " + f.body if f.body else "") + ")"
    it = Item("frame", f.id, "frame " + atom_text(f.id), [(RUNTIME, facts), (AGENT, agent)],
              {"revision": f.revision, "state": f.state, "protected": f.protected,
               "remaining_ticks": f.remaining_ticks})
    # Frames land in the mind region: render copies this for each compile that shows
    # the item (a RowCache keeps it between compiles).
    it.template = {"region": "mind", "kind": it.kind, "key": it.key, "start": 0, "end": 0,
                   "parts": None, **it.fields}
    return it


def mind(m: Material) -> list[Item]:
    out = [f.rendered or frame_item(f) for f in m.frames]
    for s, n, o in m.relations:
        out.append(Item("relation", f"{s} {n} {o}", "relation",
                        [(AGENT, f"{atom_text(s)} {atom_text(n)} {atom_text(o)}")]))
    for name, revision in m.checkpoints:
        out.append(Item("checkpoint", name, "checkpoint " + atom_text(name),
                        [(RUNTIME, f"(revision {revision})")]))
    return out


def session_directory(m: Material) -> list[Item]:
    out = []
    for s in m.sessions:
        facts = [form("state", atom(s["state"])), form("level", atom(s["level"])),
                 form("current", yes(s["id"] == m.session))]
        if s.get("waiting"):  # messages addressed to it, not claimed yet
            facts.append(form("messages-waiting", s["waiting"]))
        out.append(item("session", s["id"], [runtime(*facts)]))
    return out


def scope_items(m: Material) -> list[Item]:
    """The evaluating session's calls still waiting for a result, and results of its
    calls that came after their activation was delivered (CONC-04)."""
    out = [item("call", c["ref"], [runtime(form("activation", atom(c["activation"])),
                                           form("actor", c["actor"]),
                                           form("result", Symbol("outstanding")))])
           for c in m.calls]
    out += [item("late-result", r["ref"], [runtime(
        form("call", ref_or_atom(r["call"])), form("activation", atom(r["activation"])),
        form("activation-delivered", Symbol("yes")), form("state", Symbol(r["state"])))])
        for r in m.late_results]
    return out


def kernel_items(m: Material) -> list[Item]:
    a = m.activation
    claimed = [ref_or_atom(r) for r in a.get("claimed", [])]
    root = a.get("root") or ""
    scope = m.scope
    scope_form = form("scope", form("sessions", *map(atom, scope.sessions)),
                      form("kinds", *map(atom, scope.kinds)),
                      form("since", scope.since or Symbol("open")),
                      form("until", scope.until or Symbol("open")),
                      form("frames", *map(atom, scope.frames)) if scope.frames
                      else form("frames", Symbol("all")),
                      # Only when granted: encodings without it render as they always did.
                      *([form("secrets", Symbol("revealed"))] if scope.reveal_secrets else []))
    return [
        item("context", m.context, [runtime(form("revision", m.revision),
                                            form("cognitive-tick", m.tick),
                                            form("window", m.window))]),
        item("activation", a["id"], [runtime(
            form("session", atom(a["session"])), form("claimed", *claimed),
            form("root", ref_or_atom(root) if root else Symbol("none")),
            form("tick", a["tick"]), form("tick-advanced", yes(a["tick_advanced"])),
            form("retired-frames", *map(atom, a.get("retired_frames", []))),
            form("delivered", yes(a["delivered"])),
            # Results of its calls that came while it was open (continuing it).
            *([form("results", *map(ref_or_atom, a["results"]))] if a.get("results")
              else []))]),
        *([item("objective", R.ref(o.seq), [runtime(form("root-request", ref_or_atom(
            R.ref(o.seq))), form("delivered", Symbol("no")))]) for o in m.observations if o.root]
          or [item("objective", None, [runtime(Symbol("none"))])]),
        item("authority", "agent", [runtime(form("kernel", Symbol("read-only")),
                                            form("mind", Symbol("context-tx")), scope_form)]),
        item("scheduling", m.session,
             [runtime(form("pending-inputs", m.pending))]),
        *scope_items(m),
    ]


def pressure_item(p: Pressure) -> Item:
    facts = [form("used-bytes", p.used_bytes), form("limit-bytes", p.limit_bytes),
             form("used-tokens", p.used_tokens)]
    if p.limit_tokens:
        facts.append(form("limit-tokens", p.limit_tokens))
    facts += [form("permille", p.permille), form("level", Symbol(p.level))]
    if p.deferred:
        facts += [form("external-actions", Symbol("deferred")), form("until", MAINTENANCE_HINT)]
    return item("pressure", "context", [runtime(*facts)])


def capabilities(m: Material) -> list[Item]:
    return [item("capability", name, [runtime(form("ops", *map(atom, verbs)))])
            for name, verbs in m.capabilities.items()]


def environment(m: Material) -> list[Item]:
    out = [item("model", None, [runtime(m.env.model or Symbol("none"))]),
           item("local-time", None, [runtime(m.time)])]
    out += [item("binding", k, [runtime(v)]) for k, v in m.env.bindings.items()]
    return out


def evaluate(m: Material) -> Item:
    return item("evaluate", None, [runtime(form("session", atom(m.session)),
                                           form("activation", atom(m.activation["id"])))])


# -- assembly ----------------------------------------------------------------------------

# Every structured item carries every field, so the stored record, the core's reply
# and the gRPC client's reply are the same dicts.
ITEM_DEFAULTS = {"residency": "", "shown_bytes": 0, "total_bytes": 0, "revision": 0,
                 "state": "", "remaining_ticks": 0, "protected": False}


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
    regions: list[tuple[str, list[Item]]] = [
        ("protocol", protocol(m)), ("evaluation-profile", profile(m)), ("inbox", inbox(m)),
        ("observation-state", observation_state(m)), ("mind", mind(m)),
        ("session-directory", session_directory(m)), ("kernel", kernel_items(m))]
    if m.env.capabilities:
        regions.append(("cognitive-capabilities", capabilities(m)))
    regions += [("evaluation-environment", environment(m)), ("evaluate", [evaluate(m)])]

    # The pressure line reports the size of the whole text, itself included: render
    # everything else once, then find the line whose numbers describe the total.
    kernel = regions[6][1]
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
    p = pressure_of(*guess, m.budget, maintenance_permille)
    pit = pressure_item(p)
    kernel[-1] = pit
    texts[6] = texts[6].replace(marker, pit.line)

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
    text = "\n".join(texts)
    nbytes = len(text) if text.isascii() else len(text.encode())
    return Rendered(text, region_ranges, items_out, p, nbytes, rows)
