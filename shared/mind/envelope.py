"""The history's chain links envelopes, so content can be erased while every link holds.

An event's envelope is what says that it happened: its seq, id, kind, context, session,
actor, times (recorded, and occurred at its source), request id, causal refs, its own
link, and a digest of its content. The digest is the SHA-256 of the event's record as
first stored; an erasure (PRIV-02) removes the content and keeps that digest in the
event's erasure mark (`data["erased"]["digest"]`), so the envelope, and the link its
successor holds, stay the same.

Two kinds of link, told apart by their key in `data`:
- `link`: the envelope hash of the predecessor (the first event of a context written
  since envelopes: `""`). Every event written since carries one.
- `prev`: the SHA-256 of the predecessor's stored bytes, as events written before the
  envelopes linked. A store written then keeps verifying as it was (an erased one of
  those events gives its successor the digest its mark keeps: the same bytes' hash).

The context's meta records the seq from which `link`s start (`Meta.links_from`; absent
in a store written before) and the hash the next event links with (`Meta.chain`: an
envelope hash once links start, else the stored bytes' hash), so the first event a
context gets after an upgrade links to the envelope of its last old one."""
from __future__ import annotations

import hashlib
from typing import Any, Mapping, Optional

import msgspec

LINK = "link"
PREV = "prev"
ERASED = "erased"
OCCURRED_AT = "occurred_at"  # (records.OCCURRED_AT: an event's time at its source)

_encode = msgspec.json.Encoder(order="sorted").encode


def raw_digest(raw: bytes) -> str:
    """SHA-256 (hex) of stored bytes."""
    return hashlib.sha256(raw).hexdigest()


def mark(data: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    """An erased event's mark (digest of its first record, the erasures that took its
    content), None for an event never erased."""
    m = data.get(ERASED)
    return m if isinstance(m, dict) else None


def content_digest(data: Mapping[str, Any], raw: bytes) -> str:
    """The digest of an event's content: the SHA-256 of its record as first stored, i.e.
    of `raw` unless an erasure kept it in the mark."""
    m = mark(data)
    return m["digest"] if m is not None and isinstance(m.get("digest"), str) else \
        raw_digest(raw)


def envelope_hash(event: Mapping[str, Any], content: str) -> str:
    """SHA-256 of the envelope of `event` (a stored event decoded, or vars() of a
    records.Event: the same keys) with `content`, its content digest."""
    data = event.get("data") or {}
    return raw_digest(_encode({
        "seq": event.get("seq"), "id": event.get("id"), "kind": event.get("kind"),
        "context": event.get("context"), "session": event.get("session", ""),
        "actor": event.get("actor", ""), "time": event.get("time"),
        "request_id": event.get("request_id", ""),
        "causal_refs": event.get("causal_refs") or [],
        "occurred_at": data.get(OCCURRED_AT, ""), "link": data.get(LINK, ""),
        "content": content}))


def next_link(event: Mapping[str, Any], raw: bytes, enveloped: bool) -> str:
    """What the successor of `event` (stored as `raw`) links with: its envelope hash
    once links are envelopes (`enveloped`), else its first record's bytes' hash."""
    content = content_digest(event.get("data") or {}, raw)
    return envelope_hash(event, content) if enveloped else content
