"""HYB-07: what the vector leg embeds for an event and how its row is made
(services/recall/core/passages.py): each turn's text once, as said; its row its own vector
with a share of the vector of the turn it answers (or of the typical vector), made unit."""
from __future__ import annotations

import numpy as np

from morphz.services.recall.core.passages import CONTEXT_SHARE, Passages, rows


def composer(earlier: dict[str, str] | None = None) -> Passages:
    earlier = earlier or {}
    return Passages(lambda session: None, earlier.get)


def test_hyb_07_a_turn_is_embedded_once_as_said_with_the_text_of_the_turn_it_answers():
    p = composer()
    assert p.event("e:1", "user-message", "s1", "mara", "when is the van due?") == (
        "", None, ("mara: when is the van due?",))
    before, source, texts = p.event("e:2", "continuation", "s1", "bot", "Friday at nine")
    assert (before, source) == ("e:1", "e:1")
    # Its own text, then the answered turn's exactly as that turn's own (one embedding).
    assert texts == ("bot: Friday at nine", "mara: when is the van due?")


def test_hyb_07_a_tool_result_answers_its_call_not_the_turn_before_it():
    p = composer({"e:3": "bot: lookup(van)"})
    p.event("e:4", "user-message", "s1", "mara", "thanks")
    before, source, texts = p.event("e:5", "tool-result", "s1", "", "due 09:00", call="e:3")
    assert (before, source) == ("e:4", "e:3")
    assert texts == ("due 09:00", "bot: lookup(van)")


def test_hyb_07_an_event_that_is_no_turn_is_embedded_alone():
    assert composer().event("e:0", "context-created", "", "runtime", "") == (None, None, ("",))


def test_hyb_07_a_turn_after_an_erased_one_has_no_context():
    p = composer({"e:1": ""})  # an erased turn: its text is gone
    p.event("e:1", "user-message", "s1", "mara", "")
    assert p.event("e:2", "user-message", "s1", "mara", "ok")[1:] == (None, ("mara: ok",))


def test_hyb_07_rows_mix_the_answered_turn_or_the_typical_vector_and_are_unit():
    own, answered, other = np.eye(4, dtype=np.float32)[:3]
    typical = np.array([0, 0, 0, 0.5], dtype=np.float32)
    vectors = np.stack([own, answered, other, np.zeros(4, np.float32)])
    made = rows(vectors, [2, 1, 1], typical)
    mixed = own + CONTEXT_SHARE * answered
    assert np.allclose(made[0], mixed / np.linalg.norm(mixed))
    alone = other + CONTEXT_SHARE * typical
    assert np.allclose(made[1], alone / np.linalg.norm(alone))
    assert np.allclose(np.linalg.norm(made[:2], axis=1), 1.0)
    assert not made[2].any()  # nothing said: a zero row, which no search finds


def test_hyb_07_a_row_without_context_moves_with_the_mixed_rows():
    """Vectors that share one direction (as e5's do): mixing a turn with the turn it
    answers moves its score for a query (toward the common direction, away from its own
    topic). A frame mixed with the typical vector moves about as much; left alone it would
    not move at all, and rank apart from the turns for that alone."""
    rng = np.random.default_rng(7)
    common = np.zeros(64, np.float32)
    common[0] = 1.0

    def text(topic: np.ndarray = common * 0) -> np.ndarray:  # their mean's norm about 0.95
        v = common + topic + 0.04 * rng.normal(size=64).astype(np.float32)
        return v / np.linalg.norm(v)
    typical = np.stack([text() for _ in range(200)]).mean(axis=0)
    topic = rng.normal(size=64).astype(np.float32)
    topic[0] = 0
    topic *= 0.3 / np.linalg.norm(topic)
    frame, turn, answered = text(topic), text(topic), text()
    query = (common + topic / 0.3) / np.sqrt(2)
    made = rows(np.stack([frame, turn, answered]), [1, 2], typical) @ query
    turn_gain = made[1] - turn @ query
    frame_gain = made[0] - frame @ query
    assert abs(turn_gain) > 0.01
    assert abs(turn_gain - frame_gain) < abs(turn_gain) / 3


def test_hyb_07_the_typical_texts_are_part_of_the_passage_version():
    """A leg's rows depend on TYPICAL's texts: changing them makes a new passage version
    (a leg of the old one is stale until rebuilt), so this pins them to version 2."""
    import hashlib

    from morphz.services.recall.core.passages import PASSAGE_VERSION, TYPICAL
    digest = hashlib.sha256("\n".join(TYPICAL).encode()).hexdigest()[:16]
    assert (PASSAGE_VERSION, digest) == (2, "238854f447fbe2fd")
