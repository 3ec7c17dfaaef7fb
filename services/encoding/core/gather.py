"""Current projections -> Material for one compile. Reads the active-inbox index and
the frames, never the event history as a whole, so the cost follows what is
rendered (plus the Mind's frame table), not how long the context has lived."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from morphz.shared.mind import records as R, secrets
from morphz.shared.mind.records import ref_seq
from morphz.shared.mind.view import MindView
from morphz.shared.mind.visibility import Viewer, home, target_of
from morphz.services.encoding.core.row_cache import RowCache
from morphz.services.encoding.core.material import (
    FULL, PREVIEW, FrameIn, Material, Obs, SeenEvent)
from morphz.services.encoding.core.options import Budget, Environment
from morphz.services.encoding.core.items import preview_text
from morphz.services.encoding.core.regions import frame_item
from morphz.services.encoding.core.scope import Scope
from morphz.services.encoding.core.snapshot import frame_input

PENDING = "pending: arrives with the next activation"
MAX_OMISSIONS_LISTED = 1000
READ_AHEAD_BYTES = 16 << 20


@dataclass
class Gathered:
    material: Material = None
    omitted: list[dict] = field(default_factory=list)
    omitted_total: int = 0
    missing: dict = field(default_factory=dict)  # must-read item -> why it is not here

    def omit(self, key: str, reason: str) -> None:
        self.omitted_total += 1
        if len(self.omitted) < MAX_OMISSIONS_LISTED:
            self.omitted.append({"key": key, "reason": reason})


def frame_in(f: R.Frame, tick: int, reveal: bool = False) -> FrameIn:
    retiring = f.state == R.RETIRING and f.retire is not None
    return FrameIn(f.id, f.revision, secrets.shown_body(f, reveal),
                   list(f.sources), f.state, f.protected,
                   f.retire.reason if retiring else "", f.retire.due_tick if retiring else 0,
                   max(0, f.retire.due_tick - tick) if retiring else 0)


def gather(m: MindView, *, context: str, session: str, act: R.Activation,
           scope: Scope, budget: Budget, env: Environment, must_read: list[str], time: str,
           capabilities: dict, cache: Optional[RowCache] = None) -> Gathered:
    """The Material of one compile: the inbox's observations, the frames in placement
    order, and the rest the regions show; what the scope leaves out, in `omitted`, and
    must-read items that are not there, in `missing`."""
    g = Gathered()
    meta = m.meta()
    # The scans below, in one round trip where the store is remote (not one each).
    m.prefetch_encoding_scans(session)
    pending = set(m.pending(session))
    claimed = set(act.claimed)
    viewer = Viewer(m, session)
    # Every undelivered root request stays an objective until its activation is
    # delivered, not only the current activation's (the transaction core indexes them).
    roots = m.root_requests()
    inbox = m.inbox()
    # One round trip for the events read below (the inbox's, the pending and claimed
    # results', the open calls') and the inbox's observations, not one or two per item
    # (past READ_AHEAD_BYTES, large events are read as they come).
    calls = m.open_calls(session)
    read = set(inbox) | pending | claimed | {seq for seq, _ in calls}
    m.prefetch_inputs(inbox, sorted(read), max_bytes=READ_AHEAD_BYTES)
    observations = _observations(m, g, cache, inbox, session=session, viewer=viewer,
                                 scope=scope, preview_bytes=budget.preview_bytes,
                                 wanted=set(must_read), pending=pending,
                                 fresh=claimed | set(act.results), roots=roots)
    rendered = _frames(m, g, cache, scope, meta.tick)
    # One scan of the edge table beats a prefix scan per frame when frames are many.
    edges = m.relations()
    shown = {f.id for f in rendered} if edges else set()
    relations = [list(e) for e in edges if e[0] in shown]
    checkpoints = m.checkpoint_revisions()
    sessions = [{"id": s.id, "state": s.state, "level": s.level,
                 "waiting": m.waiting_count(s)} for s in m.sessions()]
    _must_read_missing(m, g, viewer, must_read, observations, rendered)
    g.material = Material(
        context=context, session=session, revision=meta.revision, tick=meta.tick,
        window=meta.window, activation=R.activation_view(act), observations=observations,
        frames=rendered, relations=relations, checkpoints=checkpoints, sessions=sessions,
        pending=len(pending), scope=scope, time=time, env=env, budget=budget,
        capabilities=capabilities, calls=_open_calls(m, calls),
        late_results=_late_results(m, pending, claimed))
    return g


def _observations(m: MindView, g: Gathered, cache: Optional[RowCache], inbox: list[int], *,
                  session: str, viewer: Viewer, scope: Scope, preview_bytes: int,
                  wanted: set[str], pending: set[int], fresh: set[int],
                  roots: set[int]) -> list[Obs]:
    """The inbox's observations the evaluation sees, a preview where a text is over
    `preview_bytes` and not asked for whole; the others omitted with why (pending: not
    this activation's yet)."""
    observations: list[Obs] = []
    reveal = scope.reveal_secrets
    for seq in inbox:
        seen, kept = _seen(m, cache, seq, reveal)
        ev = seen.event
        ref = R.ref(seq)
        if home(ev) != session and not viewer.sees(ev):
            continue  # another session's private evidence: not even named (CONC-07)
        why = scope.why_not_event(home(ev), ev.kind, ev.time, R.occurred_at(ev.data))
        if not why and seq in pending:
            why = PENDING
        if why:
            g.omit(ref, why)
            if ref in wanted:
                g.missing[ref] = why
            continue
        text, total = seen.text, seen.total_bytes
        preview = total > preview_bytes and ref not in wanted
        o = Obs(seq, ev.kind, ev.session, ev.actor, ev.time,
                preview_text(text, preview_bytes) if preview else text,
                PREVIEW if preview else FULL, m.observation_protected(seq),
                "new" if seq in fresh else "seen",
                seq in roots, target_of(ev), total if preview else None,
                # Only what the cache keeps: a large event not kept is held no longer
                # than this step (the Obs holds its preview).
                seen if kept else None, occurred=R.occurred_at(ev.data))
        observations.append(o)
    return observations


def _frames(m: MindView, g: Gathered, cache: Optional[RowCache], scope: Scope,
            tick: int) -> list[FrameIn]:
    """The frames shown, in placement order first, then those the order does not name
    by id (as ListFrames); retired ones left out, and those outside the scope omitted."""
    rendered: list[FrameIn] = []
    reveal = scope.reveal_secrets
    keys = m.frame_cache_keys()
    # One lookup per frame (hot: every frame, every compile); None: no cache.
    cached = cache.get_many(keys, reveal) if cache is not None else [None] * len(keys)
    by_id = {}
    for key, f in zip(keys, cached):
        if f is None:
            f = frame_in(m.frame_of_key(key), tick, reveal)
            if f.state != R.RETIRING and cache is not None:  # see row_cache.py
                if f.state == R.ACTIVE:
                    f.rendered = frame_item(f)
                f.frozen = frame_input(f)
                cache.put(key, reveal, f)
        by_id[f.id] = f
    retired, narrowed, add = R.RETIRED, bool(scope.frames), rendered.append  # hot loop
    for f in m.in_placement_order(by_id):
        if f.state == retired:
            continue
        if narrowed and not scope.allows_frame(f.id):  # a scope naming no frames allows all
            g.omit(f.id, "outside scope: frames")
            continue
        add(f)
    return rendered


def _must_read_missing(m: MindView, g: Gathered, viewer: Viewer, must_read: list[str],
                       observations: list[Obs], rendered: list[FrameIn]) -> None:
    """Why each must-read item the encoding does not show is not there (in g.missing),
    beyond those the scope left out."""
    present = ({R.ref(o.seq) for o in observations} | {f.id for f in rendered}) \
        if must_read else set()
    for item in must_read:
        if item in present or item in g.missing:
            continue
        seq = R.parse_ref(item)
        if seq is not None:
            obs = m.observation(seq)
            g.missing[item] = ("no such observation" if obs is None or
                               not viewer.sees_seq(seq)
                               else "retired observation: restore it or read it by ref")
        else:
            f = m.frame(item)
            g.missing[item] = ("no such frame" if f is None else
                               "retired frame: restore it first" if f.state == R.RETIRED
                               else "outside scope: frames")


def _seen(m: MindView, cache: Optional[RowCache], seq: int,
          reveal: bool) -> tuple[SeenEvent, bool]:
    """The event `seq` as compiles show it, from the cache by its key or made now; and
    whether the cache keeps it."""
    key = m.event_cache_key(seq)
    seen = cache.get(key, reveal) if cache is not None else None
    if seen is not None:
        return seen, True
    ev = m.event_of_key(key)
    text = secrets.shown_text(ev, reveal)
    seen = SeenEvent(ev, text, len(text.encode("utf-8")))
    return seen, cache is not None and cache.put(key, reveal, seen)


def _open_calls(m: MindView, calls: list[tuple[int, str]]) -> list[dict]:
    """The session's open calls (seq, activation), as the encoding shows them."""
    return [{"ref": R.ref(seq), "activation": aid, "actor": m.event(seq).actor}
            for seq, aid in calls]


def _late_results(m: MindView, pending: set[int], claimed: set[int]) -> list[dict]:
    """Results of the session's calls that came after their activation was delivered,
    still pending or claimed by this activation: the kernel announces them."""
    out = []
    for seq in sorted(pending | claimed):
        ev = m.event(seq)
        call = ev.data.get("call") if ev.kind == R.TOOL_RESULT else None
        c = m.call(ref_seq(call)) if call else None
        if c is not None and c.late:
            out.append({"ref": R.ref(seq), "call": call, "activation": c.activation,
                        "state": "pending" if seq in pending else "claimed"})
    return out
