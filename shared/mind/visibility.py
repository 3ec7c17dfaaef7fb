"""Who may see which evidence (CONC-07): the one rule encoding, recall and the
transaction ops share.

Committed Mind state is shared: the context-created and context-tx events, and every
frame. Evidence local to a session - its inputs, actions, activations and deliveries -
is visible to that session only, unless a committed transaction promoted it into the
shared Mind (a frame cites it as a source), or it is a message addressed to the viewer.
Operators' reads outside an evaluation do not use a Viewer and see everything.
"""
from __future__ import annotations

from morphz.shared.mind import records as R
from morphz.shared.mind.view import MindView

SHARED_KINDS = frozenset((R.CONTEXT_CREATED, R.CONTEXT_TX))


def target_of(ev: R.Event) -> str:
    """The session a message is addressed to ('' for every other event)."""
    return ev.data.get("target_session", "") if ev.kind == R.MESSAGE else ""


def home(ev: R.Event) -> str:
    """The session whose inbox holds the event: a message's target, else its own."""
    return target_of(ev) or ev.session


class Viewer:
    """What an evaluation of `session` may see."""

    def __init__(self, m: MindView, session: str) -> None:
        self._m = m
        self.session = session

    def sees(self, ev: R.Event) -> bool:
        if ev.kind in SHARED_KINDS or not ev.session or ev.session == self.session:
            return True
        if target_of(ev) == self.session:
            return True
        return self._m.is_promoted(ev.seq)

    def sees_seq(self, seq: int) -> bool:
        """Whether event `seq` exists and may be seen (a missing one may not)."""
        ev = self._m.event(seq) if 0 <= seq < self._m.meta().next_seq else None
        return ev is not None and self.sees(ev)
