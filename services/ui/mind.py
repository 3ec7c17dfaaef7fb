"""The Mind at a chosen revision, composed from the API's reads: the current frames
(ListFrames, in pages), as-of GetFrame reads for the frames changed since that revision,
and the relations rewound through the commits after it (history.py). Also the
neighbourhood of a frame, for Minds too large to draw whole."""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable, Optional

from morphz.client import Client
from morphz.client.errors import NotFoundError
from morphz.services.ui.history import Commits

READERS = 8
Relation = tuple[str, str, str]  # subject, name, object


@dataclass(frozen=True)
class FrameView:
    id: str
    revision: int
    state: str
    protected: bool
    sources: tuple[str, ...]
    body: str
    changed_at: int
    due_tick: int
    secret: bool

    def to_json(self) -> dict:
        return {"id": self.id, "revision": self.revision, "state": self.state,
                "protected": self.protected, "sources": list(self.sources),
                "body": self.body, "changed_at": self.changed_at,
                "due_tick": self.due_tick, "secret": self.secret}


def frame_view(f) -> FrameView:
    return FrameView(f.id, f.revision, f.state, f.protected, tuple(f.sources), f.body,
                     f.changed_at, f.retire.due_tick if f.state == "retiring" else 0,
                     f.secret)


@dataclass(frozen=True)
class MindAt:
    revision: int
    current_revision: int
    frames: dict[str, FrameView]  # in projection order
    relations: frozenset[Relation]
    exact_relations: bool  # False: a commit after `revision` did not parse here


def current(mz: Client, context: str, reveal: bool) -> tuple[int, list, frozenset]:
    frames, relations, revision = [], set(), 0
    for page in mz.frame_pages(context, reveal_secrets=reveal):
        revision = page.revision
        for f in page.frames:
            frames.append(frame_view(f))
            relations.update((r.subject, r.name, r.object) for r in f.relations)
    return revision, frames, frozenset(relations)


def at_revision(mz: Client, context: str, now: tuple[int, list, frozenset],
                commits: Commits, revision: int, reveal: bool) -> MindAt:
    current_revision, frames, relations = now
    if revision <= 0 or revision >= current_revision:
        return MindAt(current_revision, current_revision, {f.id: f for f in frames},
                      relations, True)
    # A frame created by a later commit did not exist yet: no read needed for it.
    later = [commits.at(rev) for rev in range(revision + 1, current_revision + 1)]
    born_later = set() if any(c is None or not c.parsed for c in later) else {
        op.target for c in later for op in c.ops if op.op in ("create", "derive")}
    changed = [f.id for f in frames if f.changed_at > revision and f.id not in born_later]

    def as_of(frame_id: str) -> Optional[FrameView]:
        try:
            return frame_view(mz.frame(context, frame_id, at_revision=revision,
                                       reveal_secrets=reveal))
        except NotFoundError:
            return None
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        older = dict(zip(changed, pool.map(as_of, changed)))
    shown = {}
    for f in frames:
        if f.id in born_later:
            continue
        f = older.get(f.id, f) if f.id in older else f
        if f is not None:
            shown[f.id] = f
    rels, exact = set(relations), True
    for rev in range(current_revision, revision, -1):  # undo each later commit's edges
        commit = commits.at(rev)
        if commit is None or not commit.parsed:
            exact = False
            continue
        for op in reversed(commit.ops):
            edge = (op.target, op.name, op.object)
            if op.op == "relate":
                rels.discard(edge)
            elif op.op == "unrelate":
                rels.add(edge)
            elif op.op == "rollback":
                exact = False
    rels = {r for r in rels if r[0] in shown and r[2] in shown}
    return MindAt(revision, current_revision, shown, frozenset(rels), exact)


def adjacency(mind: MindAt) -> dict[str, set[str]]:
    adj: dict[str, set[str]] = {}
    for s, _, o in mind.relations:
        adj.setdefault(s, set()).add(o)
        adj.setdefault(o, set()).add(s)
    for f in mind.frames.values():
        for src in f.sources:
            if src in mind.frames:
                adj.setdefault(f.id, set()).add(src)
                adj.setdefault(src, set()).add(f.id)
    return adj


def neighbourhood(mind: MindAt, focus: str, depth: int, cap: int) -> list[str]:
    """Frames within `depth` hops of `focus` (relations and frame sources, either way),
    nearest first, at most `cap`."""
    adj = adjacency(mind)
    seen, order, queue = {focus}, [focus], deque([(focus, 0)])
    while queue and len(order) < cap:
        node, d = queue.popleft()
        if d == depth:
            continue
        for nxt in sorted(adj.get(node, ())):
            if nxt not in seen and len(order) < cap:
                seen.add(nxt)
                order.append(nxt)
                queue.append((nxt, d + 1))
    return order


def graph(mind: MindAt, frame_ids: Iterable[str], events: dict[str, dict]) -> dict:
    """Nodes and labelled edges for these frames: relations between them, sources (frames
    shown, and raw events as leaves, described by `events`)."""
    ids = [i for i in frame_ids if i in mind.frames]
    shown = set(ids)
    nodes = [{"kind": "frame", **mind.frames[i].to_json()} for i in ids]
    edges = [{"kind": "relation", "from": s, "to": o, "name": n}
             for s, n, o in sorted(mind.relations) if s in shown and o in shown]
    leaves = []
    for i in ids:
        for src in mind.frames[i].sources:
            if src in shown or src in events:
                edges.append({"kind": "source", "from": i, "to": src, "name": "source"})
                if src in events and src not in leaves:
                    leaves.append(src)
    nodes += [{"kind": "event", **events[ref]} for ref in leaves]
    return {"nodes": nodes, "edges": edges}
