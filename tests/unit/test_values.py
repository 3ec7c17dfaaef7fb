"""The value types at the seams (shared/values.py) parse once and give their wire form back."""
import pytest

from morphz.shared.errors import MorphzError
from morphz.shared.values import ContextName, EventRef, FrameId, HitKey


def test_an_event_ref_parses_and_prints_as_at_e():
    assert EventRef.parse("@e42") == EventRef(42)
    assert str(EventRef(42)) == "@e42"
    assert EventRef.find("release") is None
    with pytest.raises(MorphzError) as e:
        EventRef.parse("@e")
    assert e.value.reason == "CONTEXT_INPUT_INVALID"


def test_a_hit_key_round_trips_its_stored_form():
    for text in ("e:7", "f:release-plan"):
        assert str(HitKey.parse(text)) == text
    k = HitKey.parse("e:7")
    assert k.is_event and k.seq == 7 and k.frame_id == ""
    f = HitKey.parse("f:a:b")
    assert not f.is_event and f.frame_id == "a:b" and f.seq == -1
    with pytest.raises(ValueError):
        HitKey.parse("x:1")


def test_names_are_checked_once_where_they_enter():
    assert str(ContextName.parse("demo")) == "demo"
    assert str(FrameId.parse("goal")) == "goal"
    with pytest.raises(MorphzError):
        ContextName.parse("has space")
    with pytest.raises(MorphzError):
        FrameId.parse("")
