"""The inspector's evaluation views (UI-03): a session's evaluations a page at a time,
one evaluation as a step (what the model saw, by region; the recall calls it made; its
transactions' receipts; the Mind's change, with each revised frame's body diff), and
the diff of two encodings by region.

Each view is a few calls of one principal's client, none of which reads the whole
history: ListSnapshots pages the snapshot index, ShowEvaluation reads an activation's
own events, a snapshot's text is replayed from its record. Secrets stay markers unless
the page asks to reveal them (and the principal may): a snapshot compiled revealing
secrets is not shown without that."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from google.protobuf.json_format import MessageToDict

from morphz.client.errors import MorphzError, NotFoundError, input_error

EVALUATION_PAGE = 20
DIFF_FRAMES = 20  # revised frames whose bodies a step view diffs
READERS = 8
REGION_ORDER = ("protocol", "evaluation-profile", "inbox", "observation-state", "mind",
                "session-directory", "kernel", "cognitive-capabilities",
                "evaluation-environment", "evaluate")


def _plain(message) -> dict:
    return MessageToDict(message, preserving_proto_field_name=True,
                         always_print_fields_with_no_presence=True)


def evaluations(reader, context: str, q: dict) -> dict:
    """A session's evaluations, newest first: one row per evaluation that was compiled
    (its latest snapshot's time, budget use and pressure, the inputs it claimed, what it
    changed). `session`: default the first the principal may see."""
    sessions = [s.id for s in reader.mz.status(context).sessions]
    session = q.get("session") or (sessions[0] if sessions else "")
    if not session:
        return {"context": context, "session": "", "sessions": [], "rows": [],
                "next_cursor": ""}
    page = reader.mz.list_snapshots(context, session=session, limit=EVALUATION_PAGE,
                                    cursor=q.get("cursor", ""))
    latest: dict[str, Any] = {}
    for entry in page.snapshots:  # newest first: an activation's first is its latest
        latest.setdefault(entry.activation, entry)
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        views = list(pool.map(lambda a: reader.mz.evaluation(context, a), latest))
    rows = [_row(entry, view) for entry, view in zip(latest.values(), views)]
    return {"context": context, "session": session, "sessions": sessions, "rows": rows,
            "next_cursor": page.next_cursor}


def _row(entry, view) -> dict:
    changes = [f"{c.change} {c.key}" for c in view.mind.changes]
    return {"activation": view.activation, "time": entry.time, "snapshot": entry.snapshot,
            "inputs": [{"ref": i.ref, "kind": i.kind, "preview": i.preview[:80]}
                       for i in view.inputs],
            "bytes": entry.bytes, "limit_bytes": entry.limit_bytes, "level": entry.level,
            "permille": entry.permille, "transactions": len(view.transactions),
            "recalls": len(view.recalls), "changes": changes[:12],
            "more_changes": max(0, len(changes) - 12)}


def evaluation(reader, context: str, q: dict) -> dict:
    """One step: the evaluation by reference, its (latest) snapshot's encoding by region,
    and the bodies its transactions revised, before and after."""
    activation = q.get("activation", "")
    if not activation:
        raise input_error("name the evaluation's activation (aN)", field="activation")
    reveal = q.get("reveal") == "1"
    view = reader.mz.evaluation(context, activation)
    out = _plain(view)
    shown = q.get("snapshot") or (view.snapshots[-1].snapshot if view.snapshots else "")
    out["encoding"] = encoding(reader, context, shown, reveal) if shown else None
    out["bodies"] = _bodies(reader, context, view, reveal)
    return out


def _replayed(reader, context: str, snapshot: str, reveal: bool):
    """(record, replay report) of a snapshot; replay None when it was compiled revealing
    secrets and the page did not ask to reveal them (its text is then not read)."""
    record = reader.mz.show_snapshot(context, snapshot)
    if record.get("scope", {}).get("reveal_secrets") and not reveal:
        return record, None
    return record, reader.mz.replay_snapshot(context, snapshot)


def encoding(reader, context: str, snapshot: str, reveal: bool) -> dict:
    """A snapshot's text by region, replayed from its record (its hash checked against
    the record's), with the items each region holds and which are previews."""
    record, replay = _replayed(reader, context, snapshot, reveal)
    head = {"snapshot": snapshot, "hash": record.get("hash"), "bytes": record.get("bytes"),
            "pressure": record.get("pressure", {}), "revision": record.get("revision")}
    if replay is None:
        return {**head, "withheld": True, "regions": []}
    items = record.get("items", [])
    regions = []
    for r in record.get("regions", []):
        text = replay.text[r["start"]:r["end"]]
        mine = [{"kind": i["kind"], "key": i["key"], "shown_bytes": i.get("shown_bytes", 0),
                 "total_bytes": i.get("total_bytes", 0),
                 # an observation shown as a preview (its state item says so too)
                 "residency": i.get("residency", "") if i["kind"] == "observation" else ""}
                for i in items if i["region"] == r["name"]]
        regions.append({"name": r["name"], "bytes": len(text.encode()), "text": text,
                        "items": mine,
                        "previews": sum(1 for i in mine if i["residency"] == "preview")})
    return {**head, "withheld": False, "replay_hash": replay.replay_hash,
            "match": replay.match, "regions": regions}


def _bodies(reader, context: str, view, reveal: bool) -> list[dict]:
    """Each revised frame's body before and after its revision (as-of reads)."""
    wanted = [c for c in view.mind.changes
              if c.kind == "frame" and c.change == "revised" and c.revision][:DIFF_FRAMES]

    def one(c) -> dict:
        after = _body(reader, context, c.key, c.revision, reveal)
        before = _body(reader, context, c.key, c.revision - 1, reveal)
        return {"frame": c.key, "revision": c.revision, "before": before, "after": after}
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        return list(pool.map(one, wanted))


def _body(reader, context: str, frame: str, revision: int, reveal: bool) -> Optional[str]:
    if revision <= 0:
        return None
    try:
        return reader.mz.frame(context, frame, at_revision=revision, reveal_secrets=reveal).body
    except NotFoundError:
        return None


def encoding_diff(reader, context: str, q: dict) -> dict:
    """Two snapshots' encodings region by region: which regions changed, and in each the
    items added, removed or changed (by kind and key: `observation @e4`)."""
    a, b = q.get("from", ""), q.get("to", "")
    if not a or not b:
        raise input_error("name two snapshots: from and to", field="from" if not a else "to")
    reveal = q.get("reveal") == "1"
    with ThreadPoolExecutor(max_workers=2) as pool:
        (rec_a, old), (rec_b, new) = pool.map(
            lambda s: _replayed(reader, context, s, reveal), (a, b))
    if old is None or new is None:
        raise MorphzError("FORBIDDEN", "a snapshot compiled revealing secrets is diffed only "
                          "when asked to reveal them", code="PERMISSION_DENIED",
                          details={"right": "reveal"})
    before, after = _regions(rec_a, old.text), _regions(rec_b, new.text)
    names = [n for n in REGION_ORDER if n in before or n in after]
    regions = [_region_diff(n, before.get(n), after.get(n)) for n in names]
    return {"context": context, "from": a, "to": b, "from_hash": rec_a.get("hash"),
            "to_hash": rec_b.get("hash"), "regions": regions,
            "changed": [r["name"] for r in regions if r["status"] != "same"]}


def _regions(record: dict, text: str) -> dict[str, tuple[str, dict[str, str]]]:
    """Each region's text, and its items' texts by `kind key`."""
    items: dict[str, dict[str, str]] = {}
    for i in record.get("items", []):
        items.setdefault(i["region"], {})[f"{i['kind']} {i['key']}"] = \
            text[i["start"]:i["end"]]
    return {r["name"]: (text[r["start"]:r["end"]], items.get(r["name"], {}))
            for r in record.get("regions", [])}


def _region_diff(name: str, old: Optional[tuple], new: Optional[tuple]) -> dict:
    size = lambda r: len(r[0].encode()) if r else 0  # noqa: E731
    out = {"name": name, "from_bytes": size(old), "to_bytes": size(new), "added": [],
           "removed": [], "changed": []}
    if old is None or new is None:
        return {**out, "status": "added" if old is None else "removed"}
    if old[0] == new[0]:
        return {**out, "status": "same"}
    a, b = old[1], new[1]
    return {**out, "status": "changed", "added": [k for k in b if k not in a],
            "removed": [k for k in a if k not in b],
            "changed": [k for k in b if k in a and a[k] != b[k]]}
