"""Snapshot records as pure data: packing, the content hash, refusing unknown versions."""
from __future__ import annotations

import hashlib
import json

import msgspec
import orjson
import pytest

from morphz.services.encoding.core import upcast
from morphz.services.encoding.core.record import SnapshotRecord
from morphz.services.encoding.core.snapshot import Frozen, freeze, pack, text_hash, thaw
from morphz.services.encoding.core.render import render
from morphz.shared.errors import MorphzError
from morphz.shared.mind.snapshots import StoredSnapshot
from tests.unit.test_encoding_render import material as render_material


def material(*args, **kw):
    """The renderer tests' material, its sessions as gather makes them (with the
    messages waiting, which every record since the session directory holds)."""
    return render_material(*args, sessions=[{"id": "s1", "state": "active", "level": "full",
                                             "waiting": 0}], **kw)


def _stored(raw: bytes) -> StoredSnapshot:
    """`raw` as the snapshot repository reads it back from the store."""
    head, newline, body = raw.partition(b"\n")
    return StoredSnapshot("enc-1", head, body if newline else None)


def _read(raw) -> SnapshotRecord:
    """The record every read makes of stored bytes (a pack() pair joined as stored)."""
    return upcast.whole(_stored(b"\n".join(raw) if isinstance(raw, tuple) else raw), "c")


def _head(raw: bytes):
    return upcast.head(_stored(raw), "c")[0]


def _dict(rec: Frozen) -> dict:
    """A frozen record as the one JSON object it is read back as (ShowSnapshot's)."""
    return json.loads(json.dumps({**msgspec.to_builtins(rec.head), "inputs": rec.inputs,
                                  "omitted": rec.omitted, "regions": rec.regions,
                                  "items": rec.items}))


def _record() -> Frozen:
    m = material((10, 20))
    r = render(m)
    return freeze("enc-1", m, r, parent="", must_read=[], omitted=[{"key": "@e9",
                  "reason": "pending: arrives with the next activation"}], omitted_total=1,
                  maintenance_permille=900)


def test_asm_03_record_hash_is_over_the_exact_bytes_and_packing_round_trips():
    rec = _record()
    text = render(material((10, 20))).text
    assert rec.head.hash == text_hash(text) == \
        "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    stored = json.loads(pack(rec)[0])
    assert set(stored) & {"items", "inputs", "regions", "omitted"} == set()
    assert _read(pack(rec)).plain() == _dict(rec)
    assert rec.omitted[0]["reason"].startswith("pending")
    assert [o["ref"] for o in rec.inputs["observations"]] == ["@e1", "@e2"]
    assert rec.inputs["frames"][0]["revision"] == 1


def test_asm_04_replay_refuses_a_record_of_an_unknown_version():
    rec = _read(pack(_record()))
    rec = msgspec.structs.replace(rec, head=msgspec.structs.replace(rec.head, version=99))
    with pytest.raises(MorphzError) as e:
        thaw(rec, None)
    assert e.value.reason == "SNAPSHOT_INVALID"


def test_sec_03_what_freeze_writes_has_the_shape_every_read_checks():
    """Records are valid by construction: freeze's record, stored as JSON, passes the
    checks reads make; one field off is SNAPSHOT_CORRUPT naming where."""
    m = material((10, 20), calls=[{"ref": "@e3", "activation": "a1", "actor": "npm"}],
                 late_results=[{"ref": "@e4", "call": "@e3", "activation": "a0",
                                "state": "claimed"}])
    r = render(m)
    rec = freeze("enc-1", m, r, parent="", must_read=["@e1"], omitted=[], omitted_total=0,
                 maintenance_permille=900)
    head_line, body_line = pack(rec)
    stored = json.loads(head_line)
    _head(head_line)
    assert _read(pack(rec)).plain() == _dict(rec)
    for bad, where in ((dict(stored, revision=-1), "revision"),
                       (dict(stored, env=dict(stored["env"], bindings={"k": 1})),
                        "env.bindings.k"),
                       (dict(stored, id="enc-2"), "another snapshot")):
        with pytest.raises(MorphzError) as e:
            _head(json.dumps(bad).encode())
        assert e.value.reason == "SNAPSHOT_CORRUPT" and where in e.value.details["why"]
    body = json.loads(body_line)
    body["inputs"]["late_results"][0]["state"] = "later"
    with pytest.raises(MorphzError) as e:
        _read(head_line + b"\n" + json.dumps(body).encode())
    assert e.value.details["why"].startswith("inputs.late_results[0].state")


def test_the_stored_form_is_a_head_line_then_the_body_and_the_older_form_still_reads():
    rec = _record()
    raw = b"\n".join(pack(rec))
    head, body = raw.split(b"\n")  # exactly two lines: compact JSON holds no raw newline
    assert json.loads(head)["id"] == "enc-1" and "packed" not in json.loads(head)
    assert json.loads(body)["item_rows"] and b'\\"' not in body  # no quotes escaped twice
    older = json.dumps(dict(json.loads(head), packed=body.decode()),
                       ensure_ascii=False).encode()  # the body under "packed", one line
    assert _read(older).body == _read(raw).body
    assert _read(older).plain() == dict(_read(raw).plain(), packed=body.decode())
    assert _read(raw).plain() == _dict(rec)


@pytest.mark.parametrize("raw, why", [
    (b'HEAD\n{"inputs": {', "not JSON"),  # cut short
    (b'HEAD\n\xff', "not JSON"),
    (b'HEAD, "packed": "{}"}\n{}', "both in its head and after it"),
    (b'[]\n{}', "not an object"),
])
def test_sec_03_a_stored_form_of_two_lines_that_is_not_packs_is_corrupt(raw, why):
    head = pack(_record())[0]  # a head that checks: what is wrong is the body
    raw = raw.replace(b'HEAD, "packed"', head[:-1] + b', "packed"').replace(b"HEAD", head)
    with pytest.raises(MorphzError) as e:
        _read(raw)
    assert e.value.reason == "SNAPSHOT_CORRUPT" and why in e.value.details["why"]


SCHEMA_1_FIELDS = ("region", "kind", "key", "start", "end", "bytes", "residency",
                   "shown_bytes", "total_bytes", "revision", "state", "remaining_ticks",
                   "protected")


def schema_1_body(body: dict, items: list[dict]) -> dict:
    """A packed body as a schema-1 server wrote it: each item one row of every field and
    its parts, offsets absolute."""
    return dict(body, item_fields=list(SCHEMA_1_FIELDS) + ["parts"], item_rows=[
        [it[f] for f in SCHEMA_1_FIELDS] +
        [[x for p in it["parts"] for x in (p["owner"], p["start"], p["end"])]]
        for it in items])


def _schema_1(rec: Frozen) -> bytes:
    """`rec` stored as a schema-1 server stored it."""
    rec = _dict(rec)
    head = {k: v for k, v in rec.items() if k not in ("inputs", "omitted", "regions", "items")}
    head["schema"] = 1
    body = schema_1_body({k: rec[k] for k in ("inputs", "omitted", "regions")}, rec["items"])
    return json.dumps(head).encode() + b"\n" + json.dumps(body).encode()


def test_asm_03_render_stores_each_item_as_its_start_and_a_row_of_its_own():
    """Schema 2: an item's row past its start holds no absolute offset, so the same
    item lands at another start with the same row bytes; render's rows (serialized once
    per item) are the rows of the record's items, and unpack gives the items back."""
    m = material((10, 20))
    r = render(m)
    rec = freeze("enc-1", m, r, parent="", must_read=[], omitted=[], omitted_total=0,
                 maintenance_permille=900)
    assert rec.head.schema == 2
    # What render stored, against rows made here from the reply's items (not by
    # snapshot.item_rows, which pack uses when render's rows are not given).
    want = [[it["start"], [it["region"], it["kind"], it["key"], it["end"] - it["start"]] +
             [it[f] for f in SCHEMA_1_FIELDS[5:]] +
             [[x for p in it["parts"]
               for x in (p["owner"], p["start"] - it["start"], p["end"] - it["start"])]]]
            for it in rec.items]
    body = json.loads(pack(rec, r.rows)[1])
    assert body["item_fields"][0] == "start" and body["item_rows"] == want
    assert json.loads(pack(rec)[1])["item_rows"] == want
    assert _read(pack(rec, r.rows)).plain() == _dict(rec)
    # The rows of items shown again, a frame moved down by a longer item before it, read
    # the same past their start.
    frame_rows = {row[2]: json.dumps(row) for _, row in body["item_rows"] if row[1] == "frame"}
    r2 = render(material((10, 20, 30)))
    again = {row[2]: json.dumps(row) for _, row in orjson.loads(orjson.dumps(r2.rows))
             if row[1] == "frame"}
    assert frame_rows and all(again[k] == v for k, v in frame_rows.items())
    starts = {it["key"]: it["start"] for it in r.items if it["kind"] == "frame"}
    assert all(it["start"] > starts[it["key"]] for it in r2.items if it["kind"] == "frame")


def test_asm_03_a_schema_1_snapshot_still_reads_as_written():
    rec = _record()
    old = _read(_schema_1(rec))
    assert old.head.schema == 1
    assert old.plain() == dict(_dict(rec), schema=1)
    # Its rows are checked by their own layout: a row of the other schema is corrupt.
    bad = _schema_1(rec).replace(b'"schema": 1', b'"schema": 2')
    with pytest.raises(MorphzError) as e:
        _read(bad)
    assert e.value.reason == "SNAPSHOT_CORRUPT"


def test_a_body_orjson_refuses_is_packed_by_json_with_the_same_items():
    """pack() falls back to json for what orjson refuses (an integer past 64 bits); the
    rows render serialized are then written as plain rows, the same items read back."""
    m = material((10, 20))
    r = render(m)
    rec = freeze("enc-1", m, r, parent="", must_read=[], omitted=[{"key": "@e9",
                 "reason": "x", "big": 1 << 70}], omitted_total=1, maintenance_permille=900)
    # Read as JSON: such an omission is no record.Omission (the typed record never
    # holds what orjson refuses), but the fallback still writes every item.
    back = json.loads(pack(rec, r.rows)[1])
    back["items"] = upcast._items_2(back["item_rows"], "enc-1")
    assert back["items"] == json.loads(json.dumps(rec.items))
    assert back["omitted"][0]["big"] == 1 << 70


@pytest.mark.parametrize("damage", [
    lambda rows: rows.append("not a row"),
    lambda rows: rows[0].append(0),                      # [start, row, extra]
    lambda rows: rows[0].__setitem__(0, "0"),            # a start that is not a number
    lambda rows: rows[0][1].pop(),                       # a row one field short
    lambda rows: rows[0][1].__setitem__(3, None),        # a length that is not a number
    lambda rows: rows[0][1][-1].append("x"),             # parts not in threes
    lambda rows: rows[0][1][-1].__setitem__(1, "1"),     # a part's start not a number
    lambda rows: rows[0][1][-1].__setitem__(2, 2.5),     # a part's end not an integer
])
def test_sec_03_damaged_item_rows_of_schema_2_are_corrupt_not_an_internal_error(damage):
    head, body = pack(_record())
    packed = json.loads(body)
    assert packed["item_rows"][0][1][-1]  # the first item has parts to damage
    damage(packed["item_rows"])
    with pytest.raises(MorphzError) as e:
        _read(head + b"\n" + json.dumps(packed).encode())
    assert e.value.reason == "SNAPSHOT_CORRUPT" and "[start, 13 fields]" in e.value.details["why"]


def test_asm_03_a_record_of_one_object_reads_as_written():
    """The oldest form: the body's fields in the head's own object, items as items."""
    rec = _record()
    one = json.dumps(_dict(rec)).encode()
    assert b"\n" not in one
    assert _read(one).plain() == _dict(rec)
    assert _read(one).body.items[0].start == rec.items[0]["start"]


def test_asm_03_fields_added_since_a_record_was_written_are_upcast_on_read():
    """A record from before the activation's claimed inputs and results, the budget's
    maintenance threshold, the sessions' waiting messages and the inputs' calls were
    kept reads with the values an older server meant by leaving them out."""
    from morphz.services.encoding.core.options import MAINTENANCE_PERMILLE
    old = _dict(_record())
    for k in ("claimed", "root", "retired_frames", "results"):
        old["activation"].pop(k)
    old["budget"].pop("maintenance_permille")
    for s in old["inputs"]["sessions"]:
        s.pop("waiting")
    old["inputs"].pop("calls")
    old["inputs"].pop("late_results")
    back = _read(json.dumps(old).encode())
    assert back.head.activation.claimed == [] and back.head.activation.root == ""
    assert back.head.budget.maintenance_permille == MAINTENANCE_PERMILLE
    assert back.body.inputs.sessions[0].waiting == 0 and back.body.inputs.calls == []
