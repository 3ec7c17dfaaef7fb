"""Graph recall: breadth-first from a frame along sources and relations.

`ancestors` follows a frame's sources back and relations from subject to object;
`descendants` goes the other way (frames citing it as a source, subjects of
relations naming it as object); `both` merges the two. Each node is visited and
expanded once (cycles end there); events are leaves. Nodes stream out in BFS order,
each with the edges found by expanding it, so pages can be cut anywhere.
"""
from __future__ import annotations

import json
from collections import deque
from functools import partial
from typing import Callable, Iterator, Optional

from morphz.services.recall.core.results import Edge, Node
from morphz.services.recall.core.views import event_node, frame_node
from morphz.shared.mind.records import is_ref, ref_seq
from morphz.shared.mind.view import MindView

DIRECTIONS = ("ancestors", "descendants", "both")


class Graph:
    def __init__(self, m: MindView, direction: str) -> None:
        self._m = m
        self._up = direction in ("ancestors", "both")
        self._down = direction in ("descendants", "both")
        self._cited_by: Optional[dict[str, list[str]]] = None

    def _citations(self) -> dict[str, list[str]]:
        if self._cited_by is None:
            self._cited_by = {}
            for f in self._m.frames():
                for s in f.sources:
                    self._cited_by.setdefault(s, []).append(f.id)
        return self._cited_by

    def neighbours(self, fid: str) -> list[tuple[str, Edge]]:
        """(neighbour, edge) pairs of a frame, in a stable order."""
        out = []
        if self._up:
            f = self._m.frame(fid)
            for s in (f.sources if f else []):
                out.append((s, Edge("source", fid, s, "sources")))
            for s, name, o in sorted(self._m.relations_from(fid)):
                out.append((o, Edge("relation", s, o, name)))
        if self._down:
            for citing in sorted(self._citations().get(fid, [])):
                out.append((citing, Edge("source", citing, fid, "sources")))
            for s, name, o in sorted(self._m.relations_to(fid)):
                out.append((s, Edge("relation", s, o, name)))
        return out


def walk(m: MindView, root: str, depth: int, direction: str, include_bodies: bool,
         include_events: bool, sees: Optional[Callable[[int], bool]] = None,
         ) -> Iterator[tuple[Callable[[], Node], list[Edge]]]:
    """(node maker, edges found expanding it) in BFS order. A page past a cursor makes
    only its own nodes (an event node reads and previews its event). `sees`: for an
    evaluation, the events its causal scope may see; any other is a missing leaf."""
    graph = Graph(m, direction)
    seen = {root}
    seen_edges: set[Edge] = set()
    queue = deque([(root, 0)])
    while queue:
        nid, d = queue.popleft()
        if is_ref(nid):
            seq = ref_seq(nid)
            yield (lambda nid=nid, seq=seq, d=d:
                   event_node(m, nid, m.event(seq) if sees is None or sees(seq) else None, d,
                              include_events)), []
            continue
        f = m.frame(nid)
        node = partial(frame_node, f, nid, d, include_bodies)
        edges = []
        if f is not None and d < depth:
            for nb, edge in graph.neighbours(nid):
                if edge not in seen_edges:
                    seen_edges.add(edge)
                    edges.append(edge)
                if nb not in seen:
                    seen.add(nb)
                    queue.append((nb, d + 1))
        yield node, edges


def node_bytes(node: Node, edges: list[Edge]) -> int:
    """A node's share of a page: its JSON with its edges' (as the reply's plain form)."""
    return len(json.dumps([node.plain(), [e.plain() for e in edges]],
                          ensure_ascii=False).encode())
