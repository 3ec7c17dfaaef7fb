"""Freeze and thaw: a compile becomes an immutable snapshot record; replay rebuilds
the same Material from that record plus the authoritative history.

The record holds identities and runtime facts (event refs, frame ids with their
revisions, relation edges, sessions, kernel facts, budget, scope, time), never the
bodies: bodies are re-read from the event history and, for frames, as of the
snapshot's context revision (frame_versions). The hash is over the exact bytes."""
from __future__ import annotations

import hashlib
from typing import Optional, Sequence

import orjson

from morphz.shared.errors import MorphzError
from morphz.shared.mind import secrets
from morphz.shared.mind.view import MindView, snapshot_corrupt, snapshot_json
from morphz.services.encoding.core.compact_json import dumps
from morphz.services.encoding.core.material import ENCODING_VERSION, FrameIn, Material, Obs
from morphz.services.encoding.core.options import Budget, Environment
from morphz.services.encoding.core.render import Rendered
from morphz.services.encoding.core.scope import Scope

# 2: an item's stored row is [start, [the rest, end and parts relative to start]]
# (ITEM_ROW_FIELDS); 1 stored [ITEM_FIELDS..., parts] with every offset absolute. Both
# are read; a server reading 1 only refuses a 2 as a newer schema, not as corrupt.
SCHEMA = 2
SCHEMAS = (1, 2)


def text_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def freeze(snapshot_id: str, m: Material, r: Rendered, *, parent: str, must_read: list[str],
           omitted: list[dict], omitted_total: int, maintenance_permille: int) -> dict:
    return {
        "schema": SCHEMA, "version": m.version, "id": snapshot_id, "context": m.context,
        "session": m.session, "time": m.time, "revision": m.revision, "tick": m.tick,
        "window": m.window, "activation": m.activation, "parent": parent,
        "budget": {"bytes": m.budget.bytes, "tokens": m.budget.tokens,
                   "preview_bytes": m.budget.preview_bytes,
                   "maintenance_permille": maintenance_permille},
        "scope": m.scope.to_dict(), "must_read": list(must_read),
        "env": {"model": m.env.model, "profile": m.env.profile, "bindings": m.env.bindings,
                "capabilities": m.env.capabilities},
        "capabilities": m.capabilities,
        "inputs": {
            "observations": [{"ref": f"@e{o.seq}", "kind": o.kind, "session": o.session,
                              "actor": o.actor, "time": o.time, "residency": o.residency,
                              "protected": o.protected, "freshness": o.freshness,
                              "root": o.root, **({"target": o.target} if o.target else {}),
                              **({"occurred": o.occurred} if o.occurred else {})}
                             for o in m.observations],
            "frames": [f.frozen or frame_input(f) for f in m.frames],
            "relations": m.relations, "checkpoints": m.checkpoints, "sessions": m.sessions,
            "pending": m.pending, "calls": m.calls, "late_results": m.late_results},
        "selected": len(m.observations) + len(m.frames),
        "omitted": omitted, "omitted_total": omitted_total,
        "regions": r.regions, "items": r.items, "pressure": r.pressure.view(),
        "bytes": r.bytes, "chars": len(r.text), "hash": text_hash(r.text),
    }


def frame_input(f: FrameIn) -> dict:
    """A frame as a snapshot's inputs record it (shared, never changed: a RowCache
    keeps it with the frame)."""
    return {"id": f.id, "revision": f.revision, "state": f.state, "protected": f.protected,
            "retire_reason": f.retire_reason, "due_tick": f.due_tick,
            "remaining_ticks": f.remaining_ticks}


# The bulky parts of a record are stored apart from its head: the head is one JSON line,
# and these follow it as one JSON text (the write path serializes one body instead of
# walking thousands of small dicts, and a read of the head alone parses a line).
PACKED = ("inputs", "omitted", "regions", "items")


# An item's structured fields (parts aside), as the record's items hold them.
ITEM_FIELDS = ("region", "kind", "key", "start", "end", "bytes", "residency", "shown_bytes",
               "total_bytes", "revision", "state", "remaining_ticks", "protected")
# Schema 2 stores an item as [start, row], the row these fields (render.stored_row):
# "length" is end - start, "parts" the parts flattened to owner, start, end relative
# to the item's start. The row is the item's own wherever it lands, so an item shown
# again is serialized once.
ITEM_ROW_FIELDS = ("region", "kind", "key", "length") + ITEM_FIELDS[5:] + ("parts",)


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


def _items_1(rows: list, sid: str) -> list[dict]:
    """Schema 1's rows: [ITEM_FIELDS..., flat parts], offsets absolute."""
    width = len(ITEM_FIELDS) + 1
    if any(type(r) is not list or len(r) != width or type(r[-1]) is not list or len(r[-1]) % 3
           for r in rows):
        raise snapshot_corrupt(sid, f"the packed items are not rows of {width} fields")
    return [{**dict(zip(ITEM_FIELDS, row)), "parts": _parts(row[-1], 0)} for row in rows]


def _readable_2(r: object) -> bool:
    """Whether `r` is a schema-2 row whose offsets can be added up: [start, row of
    ITEM_ROW_FIELDS], the start, length and parts' offsets integers (record_shape checks
    the other fields of the items made)."""
    if type(r) is not list or len(r) != 2 or type(r[0]) is not int:
        return False
    row = r[1]
    if type(row) is not list or len(row) != len(ITEM_ROW_FIELDS) or type(row[3]) is not int:
        return False
    flat = row[-1]
    return (type(flat) is list and len(flat) % 3 == 0 and
            all(type(x) is int for x in flat[1::3] + flat[2::3]))


def _items_2(rows: list, sid: str) -> list[dict]:
    """Schema 2's rows: [start, ITEM_ROW_FIELDS], offsets past the start relative to it."""
    if not all(_readable_2(r) for r in rows):
        raise snapshot_corrupt(sid, f"the packed items are not [start, "
                               f"{len(ITEM_ROW_FIELDS)} fields]")
    items = []
    for start, row in rows:
        region, kind, key, length, *fields, flat = row
        items.append({"region": region, "kind": kind, "key": key, "start": start,
                      "end": start + length, **dict(zip(ITEM_FIELDS[5:], fields)),
                      "parts": _parts(flat, start)})
    return items


def _parts(flat: list, start: int) -> list[dict]:
    """Parts flattened to owner, start, end..., their offsets `start` on."""
    return [{"owner": flat[i], "start": start + flat[i + 1], "end": start + flat[i + 2]}
            for i in range(0, len(flat), 3)]


def pack(record: dict, rows: Optional[list[Sequence]] = None) -> bytes:
    """The stored form: the head's JSON, a newline, the body's JSON. Compact JSON holds no
    raw newline, so the first one ends the head (shared/mind/view.py snapshot_json reads
    it back; a record stored before had its body as a string under the head's "packed",
    which escaped every quote of it). `rows`: item_rows(record["items"]) when the caller
    has them already (render's, each row's part past the start serialized already)."""
    head = {k: v for k, v in record.items() if k not in PACKED}
    body = {k: record[k] for k in PACKED if k != "items"}
    body["item_fields"] = ["start", list(ITEM_ROW_FIELDS)]
    body["item_rows"] = item_rows(record["items"]) if rows is None else rows
    try:
        packed = orjson.dumps(body)
    except TypeError:  # for json (dumps), render's serialized rows become plain ones
        body["item_rows"] = item_rows(record["items"])
        packed = dumps(body)
    return dumps(head) + b"\n" + packed


def unpack(stored: dict) -> dict:
    """The whole record from what snapshot_json read of pack()'s bytes (the head, the
    body's text under "packed"); SNAPSHOT_CORRUPT when the body is not what pack() makes
    (the fields' types are record_shape's to check)."""
    if "packed" not in stored:
        return stored
    sid = str(stored.get("id", ""))
    body = snapshot_json(stored["packed"], sid)
    rows = body.pop("item_rows", None)
    body.pop("item_fields", None)
    if type(rows) is not list:
        raise snapshot_corrupt(sid, "the packed items are not a list of rows")
    items = _items_1(rows, sid) if stored.get("schema") == 1 else _items_2(rows, sid)
    return {**{k: v for k, v in stored.items() if k != "packed"}, **body, "items": items}


def _invalid(snapshot_id: str, what: str) -> MorphzError:
    return MorphzError("SNAPSHOT_INVALID", f"snapshot {snapshot_id} cannot be replayed: {what}",
                       snapshot=snapshot_id)


def thaw(record: dict, m: MindView) -> tuple[Material, list[str]]:
    """The Material a snapshot was rendered from, bodies re-read from history; plus
    the problems found where history no longer yields what the record names."""
    sid = str(record.get("id", ""))
    if record.get("schema") not in SCHEMAS or record.get("version") != ENCODING_VERSION:
        raise _invalid(sid, f"unknown schema/version {record.get('schema')}/"
                       f"{record.get('version')}")
    try:
        inputs, revision = record["inputs"], record["revision"]
        reveal = Scope.from_dict(record["scope"]).reveal_secrets
        problems: list[str] = []
        observations = []
        for o in inputs["observations"]:
            seq = int(o["ref"][2:])
            ev = m.event(seq)
            if ev is None:
                problems.append(f"{o['ref']}: event not in history")
                text = ""
            else:
                text = secrets.shown_text(ev, reveal)
                if (ev.kind, ev.session, ev.time) != (o["kind"], o["session"], o["time"]):
                    problems.append(f"{o['ref']}: event identity differs from the record")
            observations.append(Obs(seq, o["kind"], o["session"], o["actor"], o["time"], text,
                                    o["residency"], o["protected"], o["freshness"], o["root"],
                                    o.get("target", ""), occurred=o.get("occurred", "")))
        frames = []
        for f in inputs["frames"]:
            old = m.frame_at(f["id"], revision) if revision else None
            if old is None or old.revision != f["revision"]:
                problems.append(f"frame {f['id']}: revision {f['revision']} not found as of "
                                f"context revision {revision}")
            body, sources = ((secrets.frame_body(old.id, old.body, reveal), list(old.sources))
                             if old is not None else ("", []))
            frames.append(FrameIn(f["id"], f["revision"], body, sources, f["state"],
                                  f["protected"], f["retire_reason"], f["due_tick"],
                                  f["remaining_ticks"]))
        b, env = record["budget"], record["env"]
        material = Material(
            context=record["context"], session=record["session"], revision=revision,
            tick=record["tick"], window=record["window"], activation=record["activation"],
            observations=observations, frames=frames, relations=inputs["relations"],
            checkpoints=inputs["checkpoints"], sessions=inputs["sessions"],
            pending=inputs["pending"], scope=Scope.from_dict(record["scope"]),
            time=record["time"],
            env=Environment(env["model"], env["profile"], env["bindings"], env["capabilities"]),
            budget=Budget(b["bytes"], b["tokens"], b["preview_bytes"]),
            capabilities=record["capabilities"], version=record["version"],
            calls=inputs.get("calls", []), late_results=inputs.get("late_results", []))
    except (KeyError, TypeError, ValueError) as e:  # record_shape checked it: not expected
        raise snapshot_corrupt(sid, f"malformed record ({type(e).__name__})") from None
    return material, problems
