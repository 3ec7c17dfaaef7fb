"""Material -> each region's items (docs/encoding.md), as items.py lays them out. Frame
bodies are copied verbatim: the renderer never rewrites or shortens agent-written
content (CORE-25)."""
from __future__ import annotations

from morphz.shared import sexpr
from morphz.shared.mind import records as R
from morphz.shared.sexpr import Symbol
from morphz.services.encoding.core.items import (
    Item, atom, atom_text, form, item, preview_text, ref_or_atom, runtime, yes)
from morphz.services.encoding.core.material import AGENT, PREVIEW, RUNTIME, FrameIn, Material, Obs
from morphz.services.encoding.core.pressure import MAINTENANCE_HINT, Pressure

OWNERSHIP_NOTE = ("(runtime ...) forms are runtime facts, read-only to the agent; "
                  "(agent ...) forms were written by the agent through context-tx")
PREVIEW_NOTE = ("a (preview ...) shows only the first shown-bytes of an observation, never "
                "the whole; read the full text by its @eN ref")
ENTRY_NOTE = "evaluate is the only execution entry point; change the Mind with one context-tx"


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


def protocol(m: Material) -> list[Item]:
    return [item("encoding", "morphz-context", [runtime(form("version", m.version))]),
            item("ownership", None, [runtime(OWNERSHIP_NOTE)]),
            item("previews", None, [runtime(PREVIEW_NOTE)]),
            item("entry-point", None, [runtime(ENTRY_NOTE)])]


def profile(m: Material) -> list[Item]:
    body = form("harness", m.env.profile) if m.env.profile else Symbol("none")
    return [item("profile", None, [runtime(body)])]


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
