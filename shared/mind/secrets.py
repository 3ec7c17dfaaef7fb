"""Secrets: what is marked secret and the one redacted form every reader shows instead.

Two marks, both stored as the truth in the event history (the chain hashes them):
- an event's whole text, appended with `secret` (`data["secret"]` on the event);
- a part of a frame body, written as a `(secret ...)` list anywhere in the body.

Whoever shows text to an agent or a person (encodings, recall, reads, previews, CLI)
passes it through here, and sees `[secret REF]` instead: REF is the event's `@eN`, or
the frame id for a frame part (in a context-tx event, the frame its op writes). Only a
caller whose request sets `reveal_secrets` gets the stored text back.
"""
from __future__ import annotations

from typing import Any, Mapping

from morphz.shared import sexpr
from morphz.shared.mind import envelope, records as R

SECRET = sexpr.Symbol("secret")
# Canonical text renders a secret part as `(secret` + space or `)`: a cheap test before
# any parse (a string holding those characters is parsed and then left alone).
_OPENING = "(secret"
_BODY_OPS = ("create", "derive", "revise")
# Stored text passed the writer's limits; these only bound the reader's own work.
_STORED = sexpr.Limits(max_bytes=1 << 30, max_depth=256, max_nodes=1 << 30)


def erased_marker(erasure: str) -> str:
    """What every reader shows of content an erasure took (PRIV-01): never the text,
    only that it was erased and by which erasure (@eN: who, why, when)."""
    return f"[erased {erasure}]"


def erasure_of(data: Mapping[str, Any]) -> str:
    """The erasure (@eN) that last took an event's content; '' for one never erased."""
    m = data.get(envelope.ERASED)
    by = m.get("by") if isinstance(m, dict) else None
    return by[-1] if isinstance(by, list) and by else ""


def marker(ref: str = "") -> str:
    """The redacted form; `ref` empty only where nothing was stored yet (an error)."""
    return f"[secret {ref}]" if ref else "[secret]"


def is_secret_event(data: Mapping[str, Any]) -> bool:
    return bool(data.get("secret"))


def _redact(node: Any, ref: str) -> Any:
    if isinstance(node, list):
        if node and node[0] == SECRET:
            return marker(ref)
        return [_redact(n, ref) for n in node]
    return node


def redact_nodes(nodes: list, ref: str = "") -> list:
    return [_redact(n, ref) for n in nodes]


def has_secret(text: str) -> bool:
    """Whether canonical body text holds a `(secret ...)` part."""
    if _OPENING not in text:
        return False
    try:
        nodes = sexpr.parse_many(text, _STORED)
    except sexpr.SexprError:
        return False
    return redact_nodes(nodes, "x") != nodes


def shown_body(f: R.Frame, reveal: bool = False) -> str:
    """frame_body of a frame record: the erased marker where an erasure took its body."""
    return erased_marker(f.erased) if f.erased else frame_body(f.id, f.body, reveal)


def frame_body(frame_id: str, body: str, reveal: bool = False) -> str:
    """A frame's canonical body with each secret part replaced by `"[secret ID]"`."""
    if reveal or _OPENING not in body:
        return body
    try:
        nodes = sexpr.parse_many(body, _STORED)
    except sexpr.SexprError:
        return marker(frame_id)  # stored bodies parse; if one does not, show none of it
    return sexpr.render_items(redact_nodes(nodes, frame_id))


def _tx_text(seq: int, text: str) -> str:
    """A context-tx event's text: secret parts of an op's body name the op's frame."""
    try:
        form = sexpr.parse_one(text, _STORED)
    except sexpr.SexprError:
        return marker(R.ref(seq))
    out = []
    for item in form if isinstance(form, list) else [form]:
        if (isinstance(item, list) and len(item) > 1 and isinstance(item[0], sexpr.Symbol)
                and item[0].name in _BODY_OPS and isinstance(item[1], sexpr.Symbol)):
            out.append(_redact(item, item[1].name))
        else:
            out.append(_redact(item, R.ref(seq)))
    return sexpr.render(out if isinstance(form, list) else out[0])


def event_text(seq: int, kind: str, text: str, data: Mapping[str, Any],
               reveal: bool = False) -> str:
    """An event's text as readers show it: `[erased @eN]` for an event an erasure took
    (revealing shows nothing more: nothing is left), `[secret @eN]` for a secret event,
    secret parts redacted in a transaction's text, anything else as stored."""
    if kind != R.CONTEXT_TX and envelope.ERASED in data:
        return erased_marker(erasure_of(data))
    if reveal:
        return text
    if is_secret_event(data):
        return marker(R.ref(seq))
    if kind == R.CONTEXT_TX and _OPENING in text:
        return _tx_text(seq, text)
    return text


def shown_text(ev: R.Event, reveal: bool = False) -> str:
    return event_text(ev.seq, ev.kind, ev.text, ev.data, reveal)


def shown_dict_text(ev: Mapping[str, Any], reveal: bool = False) -> str:
    """shown_text for a stored event decoded as a plain dict (the recall hot paths)."""
    return event_text(ev["seq"], ev["kind"], ev.get("text", ""), ev.get("data") or {}, reveal)
