"""Snapshot records as pure data: packing, the content hash, refusing unknown versions."""
from __future__ import annotations

import hashlib

import pytest

from morphz.services.encoding.core.snapshot import freeze, pack, text_hash, thaw, unpack
from morphz.services.encoding.core.render import render
from morphz.shared.errors import MorphzError
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
    stored = pack(rec)
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
