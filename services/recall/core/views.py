"""Reply shapes of recall, built from authoritative records."""
from __future__ import annotations

import json
from typing import Optional

from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import Reader
from morphz.shared.text.highlight import Highlighter, preview

LEAF_PREVIEW_CHARS = 200


# Observation records repeat byte for byte (most say active): decode each form once.
_STATES: dict[bytes, str] = {}


def event_state(reader: Reader, seq: int) -> str:
    """Observation lifecycle; runtime events (transactions, activations) have none."""
    raw = reader.get("observations", (seq,))
    if raw is None:
        return ""
    state = _STATES.get(raw)
    if state is None:
        state = R.RETIRED if json.loads(raw).get("retired") else R.ACTIVE
        if len(_STATES) >= 256:
            _STATES.clear()
        _STATES[bytes(raw)] = state
    return state


def event_hit(reader: Reader, seq: int, score: float, marker: Highlighter,
              ev: Optional[dict] = None) -> Optional[dict]:
    """`ev`: the stored event as a plain dict (not a record: the hot path), if read."""
    if ev is None:
        raw = reader.get("events", (seq,))
        if raw is None:
            return None
        ev = json.loads(raw)
    return {"kind": "event", "ref": R.ref(seq), "id": ev["id"], "state": event_state(reader, seq),
            "score": score, "time": ev["time"], "session": ev.get("session", ""),
            "event_kind": ev["kind"], "preview": marker.preview(ev.get("text", "")),
            "revision": 0}


def frame_hit(f: R.Frame, score: float, time: str, marker: Highlighter) -> dict:
    return {"kind": "frame", "ref": "", "id": f.id, "state": f.state, "score": score,
            "time": time, "session": "", "event_kind": "", "preview": marker.preview(f.body),
            "revision": f.revision}


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
    if include_body:
        node["body"] = f.body
    else:
        node["preview"] = preview(f.body, set(), width=LEAF_PREVIEW_CHARS)
    return node


def event_node(m: MindState, ref: str, ev: Optional[R.Event], depth: int,
               include_text: bool) -> dict:
    if ev is None:
        return _node(kind="event", ref=ref, depth=depth, missing=True)
    obs = m.observation(ev.seq)
    state = "" if obs is None else R.RETIRED if obs.retired else R.ACTIVE
    node = _node(kind="event", ref=ref, id=ev.id, depth=depth, state=state,
                 event_kind=ev.kind, time=ev.time)
    if include_text:
        node["text"] = ev.text
    else:
        node["preview"] = preview(ev.text, set(), width=LEAF_PREVIEW_CHARS)
    return node
