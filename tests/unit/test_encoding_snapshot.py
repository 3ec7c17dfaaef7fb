"""Snapshot records as pure data: packing, the content hash, refusing unknown versions."""
from __future__ import annotations

import hashlib
import json

import pytest

from morphz.services.encoding.core.record_shape import check_body, check_head
from morphz.services.encoding.core.snapshot import freeze, pack, text_hash, thaw, unpack
from morphz.services.encoding.core.render import render
from morphz.shared.errors import MorphzError
from morphz.shared.mind.view import snapshot_json
from tests.unit.test_encoding_render import material


def _record() -> dict:
    m = material((10, 20))
    r = render(m)
    return freeze("enc-1", m, r, parent="", must_read=[], omitted=[{"key": "@e9",
                  "reason": "pending: arrives with the next activation"}], omitted_total=1,
                  maintenance_permille=900)


def test_asm_03_record_hash_is_over_the_exact_bytes_and_packing_round_trips():
    rec = _record()
    text = render(material((10, 20))).text
    assert rec["hash"] == text_hash(text) == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    stored = snapshot_json(pack(rec), "enc-1")
    assert set(stored) & {"items", "inputs", "regions", "omitted"} == set()
    assert unpack(stored) == rec
    assert rec["omitted"][0]["reason"].startswith("pending")
    assert [o["ref"] for o in rec["inputs"]["observations"]] == ["@e1", "@e2"]
    assert rec["inputs"]["frames"][0]["revision"] == 1


def test_asm_04_replay_refuses_a_record_of_an_unknown_version():
    rec = dict(_record(), version=99)
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
    stored = snapshot_json(pack(rec), "enc-1")
    check_head(stored, "enc-1", "c")
    check_body(unpack(stored), "enc-1")
    assert unpack(stored) == json.loads(json.dumps(rec))
    for bad, where in ((dict(stored, revision=-1), "revision"),
                       (dict(stored, env=dict(stored["env"], bindings={"k": 1})),
                        "env.bindings.k"),
                       (dict(stored, id="enc-2"), "another snapshot")):
        with pytest.raises(MorphzError) as e:
            check_head(bad, "enc-1", "c")
        assert e.value.reason == "SNAPSHOT_CORRUPT" and where in e.value.details["why"]
    body = unpack(stored)
    body["inputs"]["late_results"][0]["state"] = "later"
    with pytest.raises(MorphzError) as e:
        check_body(body, "enc-1")
    assert e.value.details["why"].startswith("inputs.late_results[0].state")


def test_the_stored_form_is_a_head_line_then_the_body_and_the_older_form_still_reads():
    rec = _record()
    raw = pack(rec)
    head, body = raw.split(b"\n")  # exactly two lines: compact JSON holds no raw newline
    assert json.loads(head)["id"] == "enc-1" and "packed" not in json.loads(head)
    assert json.loads(body)["item_rows"] and b'\\"' not in body  # no quotes escaped twice
    older = json.dumps(dict(json.loads(head), packed=body.decode()),
                       ensure_ascii=False).encode()  # the body under "packed", one line
    assert unpack(snapshot_json(older, "enc-1")) == unpack(snapshot_json(raw, "enc-1")) == rec


@pytest.mark.parametrize("raw, why", [
    (b'{"id": "enc-1"}\n[1,', "not JSON"),
    (b'{"id": "enc-1"}\n\xff', "not JSON"),
    (b'{"id": "enc-1", "packed": "{}"}\n{}', "both in its head and after it"),
    (b'[]\n{}', "not an object"),
])
def test_sec_03_a_stored_form_of_two_lines_that_is_not_packs_is_corrupt(raw, why):
    with pytest.raises(MorphzError) as e:
        unpack(snapshot_json(raw, "enc-1"))
    assert e.value.reason == "SNAPSHOT_CORRUPT" and why in e.value.details["why"]
