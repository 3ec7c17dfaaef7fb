"""Freeze and thaw: a compile becomes an immutable snapshot record; replay rebuilds
the same Material from that record plus the authoritative history.

The record holds identities and runtime facts (event refs, frame ids with their
revisions, relation edges, sessions, kernel facts, budget, scope, time), never the
bodies: bodies are re-read from the event history and, for frames, as of the
snapshot's context revision (frame_versions). The hash is over the exact bytes."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional, Sequence

import msgspec
import orjson

from morphz.shared.errors import MorphzError
from morphz.shared.mind import secrets
from morphz.shared.mind.view import MindView
from morphz.services.encoding.core.compact_json import dumps
from morphz.services.encoding.core.material import ENCODING_VERSION, FrameIn, Material, Obs
from morphz.services.encoding.core.options import Budget, Environment
from morphz.services.encoding.core.record import (
    SCHEMA, SCHEMAS, ActivationIn, BudgetIn, EnvIn, Head, PressureIn, ScopeIn, SnapshotRecord)
from morphz.services.encoding.core.render import Rendered
from morphz.services.encoding.core.upcast import ITEM_FIELDS, ITEM_ROW_FIELDS

__all__ = ["SCHEMA", "SCHEMAS", "Frozen", "freeze", "pack", "thaw", "text_hash"]


def text_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Frozen:
    """What a compile freezes: the record's typed head, and its body as render and
    gather made it (their thousands of items and inputs are written as they are, not
    made into records first; record.Body is their type, as every read decodes them)."""
    head: Head
    inputs: dict
    omitted: list
    regions: list
    items: list

    @property
    def id(self) -> str:
        return self.head.id


def freeze(snapshot_id: str, m: Material, r: Rendered, *, parent: str, must_read: list[str],
           omitted: list[dict], omitted_total: int, maintenance_permille: int) -> Frozen:
    head = Head(
        schema=SCHEMA, version=m.version, id=snapshot_id, context=m.context,
        session=m.session, time=m.time, revision=m.revision, tick=m.tick, window=m.window,
        activation=ActivationIn(**m.activation), parent=parent,
        budget=BudgetIn(m.budget.bytes, m.budget.tokens, m.budget.preview_bytes,
                        maintenance_permille),
        scope=ScopeIn(**m.scope.to_dict()), must_read=list(must_read),
        env=EnvIn(m.env.model, m.env.profile, m.env.bindings, m.env.capabilities),
        capabilities=m.capabilities, selected=len(m.observations) + len(m.frames),
        omitted_total=omitted_total, pressure=PressureIn(**r.pressure.view()),
        bytes=r.bytes, chars=len(r.text), hash=text_hash(r.text))
    inputs = {
        "observations": [{"ref": f"@e{o.seq}", "kind": o.kind, "session": o.session,
                          "actor": o.actor, "time": o.time, "residency": o.residency,
                          "protected": o.protected, "freshness": o.freshness,
                          "root": o.root, **({"target": o.target} if o.target else {}),
                          **({"occurred": o.occurred} if o.occurred else {})}
                         for o in m.observations],
        "frames": [f.frozen or frame_input(f) for f in m.frames],
        "relations": m.relations, "checkpoints": m.checkpoints, "sessions": m.sessions,
        "pending": m.pending, "calls": m.calls, "late_results": m.late_results}
    return Frozen(head, inputs, omitted, r.regions, r.items)


def frame_input(f: FrameIn) -> dict:
    """A frame as a snapshot's inputs record it (shared, never changed: a RowCache
    keeps it with the frame)."""
    return {"id": f.id, "revision": f.revision, "state": f.state, "protected": f.protected,
            "retire_reason": f.retire_reason, "due_tick": f.due_tick,
            "remaining_ticks": f.remaining_ticks}


def item_rows(items: list[dict]) -> list[list]:
    """Schema 2 rows of structured items (what render makes as it renders them)."""
    out = []
    for it in items:
        start = it["start"]
        out.append([start, [it["region"], it["kind"], it["key"], it["end"] - start,
                            *(it[f] for f in ITEM_FIELDS[5:]),
                            [x for p in it["parts"]
                             for x in (p["owner"], p["start"] - start, p["end"] - start)]]])
    return out


_encode_head = msgspec.json.Encoder().encode


def pack(frozen: Frozen, rows: Optional[list[Sequence]] = None) -> tuple[bytes, bytes]:
    """The stored form's two lines: the head's JSON and the body's (items as rows:
    `rows` when render made them, its rows' parts past the start serialized already).
    msgspec writes a Head's fields in order, compact, as the dict of them was written
    before (json.dumps(ensure_ascii=False, compact)), so stored bytes stay the same."""
    body = {"inputs": frozen.inputs, "omitted": frozen.omitted, "regions": frozen.regions,
            "item_fields": ["start", list(ITEM_ROW_FIELDS)],
            "item_rows": item_rows(frozen.items) if rows is None else rows}
    try:
        packed = orjson.dumps(body)
    except TypeError:  # for json (dumps), render's serialized rows become plain ones
        body["item_rows"] = item_rows(frozen.items)
        packed = dumps(body)
    return _encode_head(frozen.head), packed


def _invalid(snapshot_id: str, what: str) -> MorphzError:
    return MorphzError("SNAPSHOT_INVALID", f"snapshot {snapshot_id} cannot be replayed: {what}",
                       snapshot=snapshot_id)


def thaw(record: SnapshotRecord, m: MindView) -> tuple[Material, list[str]]:
    """The Material a snapshot was rendered from, bodies re-read from history; plus
    the problems found where history no longer yields what the record names."""
    h, body = record.head, record.body
    if h.schema not in SCHEMAS or h.version != ENCODING_VERSION:
        raise _invalid(h.id, f"unknown schema/version {h.schema}/{h.version}")
    inputs, revision = body.inputs, h.revision
    scope = h.scope.scope()
    reveal = scope.reveal_secrets
    problems: list[str] = []
    observations = []
    for o in inputs.observations:
        seq = o.seq
        ev = m.event(seq)
        if ev is None:
            problems.append(f"{o.ref}: event not in history")
            text = ""
        else:
            text = secrets.shown_text(ev, reveal)
            if (ev.kind, ev.session, ev.time) != (o.kind, o.session, o.time):
                problems.append(f"{o.ref}: event identity differs from the record")
            if secrets.erasure_of(ev.data):  # shown as erased: the text differs (PRIV-01)
                problems.append(f"{o.ref}: erased by {secrets.erasure_of(ev.data)}")
        observations.append(Obs(seq, o.kind, o.session, o.actor, o.time, text, o.residency,
                                o.protected, o.freshness, o.root, o.target,
                                occurred=o.occurred))
    frames = []
    for f in inputs.frames:
        old = m.frame_at(f.id, revision) if revision else None
        if old is None or old.revision != f.revision:
            problems.append(f"frame {f.id}: revision {f.revision} not found as of "
                            f"context revision {revision}")
        text, sources = ((secrets.shown_body(old, reveal), list(old.sources))
                         if old is not None else ("", []))
        if old is not None and old.erased:
            problems.append(f"frame {f.id}: body erased by {old.erased}")
        frames.append(FrameIn(f.id, f.revision, text, sources, f.state, f.protected,
                              f.retire_reason, f.due_tick, f.remaining_ticks))
    b, env = h.budget, h.env
    plain = msgspec.to_builtins
    material = Material(
        context=h.context, session=h.session, revision=revision, tick=h.tick,
        window=h.window, activation=plain(h.activation), observations=observations,
        frames=frames, relations=[list(e) for e in inputs.relations],
        checkpoints=[list(c) for c in inputs.checkpoints], sessions=plain(inputs.sessions),
        pending=inputs.pending, scope=scope, time=h.time,
        env=Environment(env.model, env.profile, dict(env.bindings), env.capabilities),
        budget=Budget(b.bytes, b.tokens, b.preview_bytes),
        capabilities={k: list(v) for k, v in h.capabilities.items()}, version=h.version,
        calls=plain(inputs.calls), late_results=plain(inputs.late_results))
    return material, problems
