"""The encoding renderer, scope narrowing and pressure, as pure functions (no server)."""
from __future__ import annotations

import pytest

from morphz.services.encoding.core.material import FrameIn, Material, Obs
from morphz.services.encoding.core.options import Budget, Environment
from morphz.services.encoding.core.pressure import estimate_tokens
from morphz.services.encoding.core.items import preview_text
from morphz.services.encoding.core.render import REGIONS, render
from morphz.services.encoding.core.scope import Scope, causal_scope
from morphz.shared.errors import MorphzError
from morphz.shared.sexpr import parse_many


def material(text_sizes=(10,), budget=None, frames=1, **kw) -> Material:
    budget = budget or Budget()
    act = {"id": "a1", "session": "s1", "claimed": ["@e1"], "root": "@e1", "tick": 3,
           "tick_advanced": True, "retired_frames": [], "delivered": False}
    obs = [Obs(i + 1, "tool-result", "s1", "npm", "2026-08-04T09:00:00+08:00", "é" * n)
           for i, n in enumerate(text_sizes)]
    fr = [FrameIn(f"f{i}", 1, "(goal \"ship\") (stage packaging)", ["@e1"], "active")
          for i in range(frames)]
    base = dict(context="c", session="s1", revision=4, tick=3, window=8, activation=act,
                observations=obs, frames=fr, relations=[["f0", "supports", "f0"]],
                checkpoints=[["cp", 2]], sessions=[{"id": "s1", "state": "active",
                                                    "level": "full"}],
                pending=0, scope=causal_scope("s1"), time="2026-08-04T09:00:00+08:00",
                env=Environment(), budget=budget)
    base.update(kw)
    return Material(**base)


def test_core_26_renderer_emits_regions_in_order_and_is_deterministic():
    m = material(env=Environment(capabilities=True))
    m.capabilities = {"context-tx": ["create"]}
    a, b = render(m), render(m)
    assert a.text == b.text and a.items == b.items
    assert [f[0].name for f in parse_many(a.text)] == list(REGIONS)


@pytest.mark.parametrize("size", [0, 50, 900, 2_000, 9_000, 40_000, 90_000])
def test_core_25_pressure_reports_the_whole_encoding_size(size):
    budget = Budget(bytes=100_000, tokens=50_000)
    r = render(material((size,), budget=budget))
    assert r.pressure.used_bytes == len(r.text.encode()) == r.bytes
    assert r.pressure.used_tokens == estimate_tokens(r.text)


def test_core_24_preview_never_splits_a_character_and_is_marked():
    r = render(material((3000,), budget=Budget(preview_bytes=101)))
    assert preview_text("é" * 3000, 101) == "é" * 50
    m = material((3000,), budget=Budget(preview_bytes=101))
    m.observations[0].residency = "preview"
    r = render(m)
    obs = [it for it in r.items if it["kind"] == "observation"][0]
    assert obs["residency"] == "preview" and obs["shown_bytes"] == 100
    assert obs["total_bytes"] == 6000 and "(preview (shown-bytes 100)" in r.text


def test_core_22_item_parts_cover_owned_forms_exactly():
    r = render(material())
    for it in r.items:
        for p in it["parts"]:
            piece = r.text[p["start"]:p["end"]]
            assert piece.startswith(f"({p['owner']}") and piece.endswith(")")
            assert parse_many(piece)[0][0].name == p["owner"]


def test_asm_01_scope_narrowing_inherits_and_refuses_widening():
    root = causal_scope("s1")
    child = root.narrow(Scope.make(kinds=["tool-result"]))
    assert child.sessions == ("s1",) and child.kinds == ("tool-result",)
    with pytest.raises(MorphzError) as e:
        child.narrow(Scope.make(kinds=["user-message"]))
    assert e.value.reason == "SCOPE_VIOLATION"
    timed = root.narrow(Scope.make(since="2026-08-04T09:00:00+08:00"))
    with pytest.raises(MorphzError):
        timed.narrow(Scope.make(since="2026-08-04T08:00:00+08:00"))
    assert timed.why_not_event("s1", "x", "2026-08-04T00:59:59+00:00") == \
        "outside scope: before since"
    assert timed.why_not_event("s1", "x", "2026-08-04T01:00:00+00:00") == ""
    with pytest.raises(MorphzError) as e:
        Scope.make(until="2026-08-04T09:00:00")
    assert e.value.reason == "CONTEXT_INPUT_INVALID"
