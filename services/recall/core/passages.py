"""What the vector leg embeds for an event (HYB-07): a turn of a conversation means what it
answers ("yes, Friday works", a tool's bare output), so a turn is embedded twice and its
vector is a weighted mean of the two (WEIGHTS):
- the turn as said: its actor's name, then its text ("Mara: yes, Friday works");
- the turn read after the one it follows: for a tool result, the call (action) it
  answers; for any other turn, the turn before it in its session, cut to CONTEXT_CHARS
  characters, then the turn as said.
A session's first turn, a frame and a runtime event (an activation, a delivery, a
transaction) are embedded once, as they read. The mean of two unit vectors is kept as it
is (not made unit again): a query's dot product with it is the mean of its cosines with
the two, which ranked evidence better than one vector of both texts together.

Measured on the 8 agent conversations of tests/quality/conversations (tests/quality/
ablation.py): the vector leg's recall@10 0.582 over bare texts, 0.599 with the turn as said,
0.592 with the context text, 0.629 with both at WEIGHTS; fused and smoothed (hybrid.py),
0.654, 0.675, 0.674 and 0.727. Both at equal weights ranked a little better alone (0.657)
but fused no better, and left less of a turn's own meaning to one whose neighbour is
unrelated (notes that merely follow each other in a session). Costs: about three times the
tokens of the bare text (the context text is about two turns long).

Turns are the events agents and people append (records.APPEND_KINDS, recall observations
aside): the chain of a session's turns is what the vector leg keeps for neighbour
smoothing too (hybrid.py). The texts are the ones readers are shown (secret parts as
their marker), so nothing a search may not show is embedded.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Optional

from morphz.shared.mind import records as R

# Part of the vector leg's fingerprint: a leg built from other passages is not extended.
PASSAGE_VERSION = 1
CONTEXT_CHARS = 300
WEIGHTS = (2 / 3, 1 / 3)  # the turn as said, the turn read after the one before it
REMEMBERED = 4096  # turns' texts a run keeps for the calls their results answer
_TURN_KINDS = frozenset(R.APPEND_KINDS) - frozenset(R.UNINDEXED_KINDS)


def is_turn(kind: str) -> bool:
    return kind in _TURN_KINDS


def weights(texts: int) -> tuple[float, ...]:
    """The weights of a group of `texts` passages in their vector."""
    return WEIGHTS if texts == 2 else (1.0,) * texts


def said(text: str, actor: str) -> str:
    """The turn as said ("" for a turn with nothing to say: an erased one's text is gone,
    and it gives the turn after it no context)."""
    if not text.strip():
        return ""
    return f"{actor}: {text}" if actor else text


class Passages:
    """The texts of a run of events, in seq order. `last_turn(session)`: the key of the
    session's last turn before the run (None: none); `said_of(key)`: that turn's text as
    said (None: gone)."""

    def __init__(self, last_turn: Callable[[str], Optional[str]],
                 said_of: Callable[[str], Optional[str]]) -> None:
        self._last_turn, self._said_of = last_turn, said_of
        self._last: dict[str, str] = {}  # session -> its last turn's key in this run
        self._said: OrderedDict[str, str] = OrderedDict()

    def event(self, key: str, kind: str, session: str, actor: str, text: str,
              call: str = "") -> tuple[Optional[str], Optional[str], tuple[str, ...]]:
        """(the key of the turn before it in its session: '' for a session's first, None
        for an event that is no turn; the key whose text its context passage reads, None
        without one; its texts to embed). `call`: the key of the action a tool result
        answers."""
        if not is_turn(kind):
            return None, None, (text,)
        own = said(text, actor)
        before = self._last.get(session)
        if before is None:
            before = self._last_turn(session) or ""
        source = call or before
        context = self._text_of(source)
        self._last[session] = key
        self._said[key] = own
        if len(self._said) > REMEMBERED:
            self._said.popitem(last=False)
        if not context:
            return before, None, (own,)
        return before, source, (own, f"{context[:CONTEXT_CHARS]}\n{own}")

    def _text_of(self, key: str) -> Optional[str]:
        if not key:
            return None
        found = self._said.get(key)
        return found if found is not None else self._said_of(key)
