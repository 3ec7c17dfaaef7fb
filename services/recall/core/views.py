"""Reply shapes of recall, built from authoritative records (read through MindView).
Texts and bodies are the shown ones: recall never reveals a secret."""
from __future__ import annotations

from typing import Optional

from morphz.services.recall.core.results import Hit, Node
from morphz.shared.mind import records as R, secrets
from morphz.shared.mind.view import MindView
from morphz.shared.text.highlight import Highlighter, preview, preview_reach

LEAF_PREVIEW_CHARS = 200
Ranks = tuple[Optional[int], Optional[int]]  # a hit's (lexical, vector) ranks
NO_RANKS: Ranks = (None, None)  # a lexical search's


def event_hit(m: MindView, seq: int, score: float, marker: Highlighter,
              ev: Optional[dict] = None, ranks: Ranks = NO_RANKS) -> Optional[Hit]:
    """`ev`: the stored event as a plain dict (not a record: the hot path), if read; its
    text may be cut to preview_reach(). `ranks`: (lexical, vector) in a vector or hybrid
    search (given here, not replaced after: a search builds 20 of these per page)."""
    if ev is None:
        ev = m.event_dicts((seq,), text_chars=preview_reach()).get(seq)
        if ev is None:
            return None
    occurred = R.occurred_at(ev.get("data"))
    return Hit(kind="event", ref=R.ref(seq), id=ev["id"], state=m.observation_state(seq),
               score=score, time=ev["time"], session=ev.get("session", ""),
               event_kind=ev["kind"], preview=marker.preview(secrets.shown_dict_text(ev)),
               revision=0, occurred_at=occurred,
               # which time since/until compared (documents.py)
               time_basis="occurred" if occurred else "recorded",
               lexical_rank=ranks[0], vector_rank=ranks[1])


def frame_hit(f: R.Frame, score: float, time: str, marker: Highlighter,
              ranks: Ranks = NO_RANKS) -> Hit:
    return Hit(kind="frame", ref="", id=f.id, state=f.state, score=score, time=time,
               session="", event_kind="",
               preview=marker.preview(secrets.shown_body(f)),
               revision=f.revision, occurred_at="", time_basis="recorded",
               lexical_rank=ranks[0], vector_rank=ranks[1])


def frame_node(f: Optional[R.Frame], fid: str, depth: int, include_body: bool) -> Node:
    if f is None:  # a source id whose frame no longer exists (e.g. rolled back)
        return Node(kind="frame", id=fid, depth=depth, missing=True)
    body = secrets.shown_body(f)
    shown = {"body": body} if include_body else \
        {"preview": preview(body, set(), width=LEAF_PREVIEW_CHARS)}
    return Node(kind="frame", id=f.id, depth=depth, state=f.state, revision=f.revision,
                sources=tuple(f.sources), protected=f.protected, **shown)


def event_node(m: MindView, ref: str, ev: Optional[R.Event], depth: int,
               include_text: bool) -> Node:
    if ev is None:
        return Node(kind="event", ref=ref, depth=depth, missing=True)
    text = secrets.shown_text(ev)
    shown = {"text": text} if include_text else \
        {"preview": preview(text, set(), width=LEAF_PREVIEW_CHARS)}
    return Node(kind="event", ref=ref, id=ev.id, depth=depth,
                state=m.observation_state(ev.seq), event_kind=ev.kind, time=ev.time, **shown)
