"""RECALL-10: which feed changes recall holds back from an unread context's index
(services/recall/runtime/holds.py), on a clock the test moves."""
from __future__ import annotations

from morphz.services.recall.runtime import holds as holds_module
from morphz.services.recall.runtime.holds import Holds
from morphz.shared.storage.feed import Change


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def changes(context: str, *positions: int) -> list[Change]:
    return [Change(position=p, context=context, commit_seq=p, events=(p,))
            for p in positions]


def test_recall_10_an_unread_contexts_changes_are_held_until_idle_seconds_pass():
    clock = Clock()
    h = Holds(30.0, clock)
    assert h.take("a", changes("a", 1, 2)) == []
    assert h.held() == 2 and h.floor(2) == 0  # the position stays below what is held
    clock.now += 29
    assert h.take("a", changes("a", 3)) == [] and h.due() == []
    clock.now += 1  # 30 s since the first was held: all of them, in feed order
    assert h.due() == [("a", changes("a", 1, 2, 3))]
    assert h.held() == 0 and h.floor(3) == 3


def test_recall_10_a_context_read_lately_is_applied_as_its_changes_come():
    clock = Clock()
    h = Holds(30.0, clock)
    h.take("a", changes("a", 1))
    token, claimed = h.claim("a")  # a search: what is held is the reader's to apply
    assert claimed == changes("a", 1) and h.floor(5) == 0  # counted until released
    h.release(token, "a")
    assert h.floor(5) == 5
    assert h.take("a", changes("a", 6)) == changes("a", 6)  # read within 30 s: applied
    clock.now += 30
    h.due()  # forgets reads older than the idle time
    assert h.take("a", changes("a", 7)) == []  # unread again: held


def test_recall_10_a_read_that_could_not_apply_puts_the_changes_back_first():
    clock = Clock()
    h = Holds(30.0, clock)
    h.take("a", changes("a", 1, 2))
    token, claimed = h.claim("a")
    clock.now += 31  # unread again meanwhile, and a later change held
    assert h.take("a", changes("a", 3)) == []
    h.release(token, "a", claimed)
    assert h.held() == 3 and h.floor(3) == 0
    assert h.due() == [] and h.claim("a")[1] == changes("a", 1, 2, 3)


def test_recall_10_holds_are_bounded_per_context_and_in_all(monkeypatch):
    monkeypatch.setattr(holds_module, "MAX_CHANGES", 3)
    monkeypatch.setattr(holds_module, "MAX_TOTAL", 4)
    h = Holds(30.0, Clock())
    assert h.take("a", changes("a", 1, 2)) == []
    assert h.take("a", changes("a", 3)) == changes("a", 1, 2, 3)  # 3 for one context
    assert h.take("a", changes("a", 4, 5)) == []
    assert h.take("b", changes("b", 6, 7)) == []
    assert h.take("c", changes("c", 8)) == changes("c", 8)  # 5 in all
    assert h.held() == 4 and h.floor(8) == 3


def test_recall_10_idle_zero_holds_nothing():
    h = Holds(0.0, Clock())
    assert h.take("a", changes("a", 1)) == changes("a", 1)
    assert h.held() == 0 and h.due() == [] and h.floor(1) == 1


def test_recall_10_an_inspection_applies_what_is_held_but_is_not_a_search():
    h = Holds(30.0, Clock())
    h.take("a", changes("a", 1))
    token, claimed = h.claim("a", search=False)  # a monitor's InspectIndex
    assert claimed == changes("a", 1)
    h.release(token, "a")
    assert h.take("a", changes("a", 2)) == []  # still held: no search asked for it


def test_recall_10_a_failed_read_puts_nothing_back_once_the_holds_were_cleared():
    """Cleared: the follower starts over (another store) or reads the feed again."""
    h = Holds(30.0, Clock())
    h.take("a", changes("a", 1))
    token, claimed = h.claim("a")
    h.clear()
    h.release(token, "a", claimed)
    assert h.held() == 0 and h.floor(1) == 1


def test_priv_03_a_change_carrying_an_erasure_is_never_held():
    """What an erasure took must leave the index now: its change goes to be applied at
    once, with what the context held before it."""
    clock = Clock()
    h = Holds(30.0, clock)
    assert h.take("a", changes("a", 1)) == []
    erasure = Change(position=2, context="a", commit_seq=2, events=(0, 2), erased=(0,))
    assert h.take("a", [erasure]) == changes("a", 1) + [erasure]
    assert h.held() == 0
