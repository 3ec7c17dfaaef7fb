"""Reply shapes of recall, built from authoritative records (read through MindView).
Texts and bodies are the shown ones: recall never reveals a secret."""
from __future__ import annotations

from typing import Optional

from morphz.shared.mind import records as R, secrets
from morphz.shared.mind.view import MindView
from morphz.shared.text.highlight import Highlighter, preview, preview_reach

LEAF_PREVIEW_CHARS = 200


def event_hit(m: MindView, seq: int, score: float, marker: Highlighter,
              ev: Optional[dict] = None) -> Optional[dict]:
    """`ev`: the stored event as a plain dict (not a record: the hot path), if read; its
    text may be cut to preview_reach()."""
    if ev is None:
        ev = m.event_dicts((seq,), text_chars=preview_reach()).get(seq)
        if ev is None:
            return None
    return {"kind": "event", "ref": R.ref(seq), "id": ev["id"],
            "state": m.observation_state(seq),
            "score": score, "time": ev["time"], "session": ev.get("session", ""),
            "event_kind": ev["kind"], "preview": marker.preview(secrets.shown_dict_text(ev)),
            "revision": 0, **time_basis(ev.get("data"))}


def time_basis(data: Optional[dict]) -> dict:
    """An event's source time, and which time since/until compared (documents.py)."""
    occurred = R.occurred_at(data)
    return {"occurred_at": occurred, "time_basis": "occurred" if occurred else "recorded"}


def frame_hit(f: R.Frame, score: float, time: str, marker: Highlighter) -> dict:
    return {"kind": "frame", "ref": "", "id": f.id, "state": f.state, "score": score,
            "time": time, "session": "", "event_kind": "", "preview": marker.preview(secrets.frame_body(f.id, f.body)),
            "revision": f.revision, "occurred_at": "", "time_basis": "recorded"}


def _node(**fields) -> dict:
    """Every node has every field (the wire form has them too), defaults when n/a."""
    node = {"kind": "", "id": "", "ref": "", "depth": 0, "state": "", "revision": 0,
            "sources": [], "body": "", "protected": False, "event_kind": "", "time": "",
            "preview": "", "text": "", "missing": False}
    node.update(fields)
    return node


def frame_node(f: Optional[R.Frame], fid: str, depth: int, include_body: bool) -> dict:
    if f is None:  # a source id whose frame no longer exists (e.g. rolled back)
        return _node(kind="frame", id=fid, depth=depth, missing=True)
    node = _node(kind="frame", id=f.id, depth=depth, state=f.state, revision=f.revision,
                 sources=list(f.sources), protected=f.protected)
    body = secrets.frame_body(f.id, f.body)
    if include_body:
        node["body"] = body
    else:
        node["preview"] = preview(body, set(), width=LEAF_PREVIEW_CHARS)
    return node


def event_node(m: MindView, ref: str, ev: Optional[R.Event], depth: int,
               include_text: bool) -> dict:
    if ev is None:
        return _node(kind="event", ref=ref, depth=depth, missing=True)
    node = _node(kind="event", ref=ref, id=ev.id, depth=depth,
                 state=m.observation_state(ev.seq), event_kind=ev.kind, time=ev.time)
    text = secrets.shown_text(ev)
    if include_text:
        node["text"] = text
    else:
        node["preview"] = preview(text, set(), width=LEAF_PREVIEW_CHARS)
    return node
