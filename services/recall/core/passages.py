"""What the vector leg embeds for an event (HYB-07), and how its row is made. A turn of a
conversation means what it answers ("yes, Friday works", a tool's bare output), so its row
mixes the vector of the turn as said with a share (CONTEXT_SHARE) of the vector of the turn
it answers: for a tool result, the call (action) it answers; for any other turn, the turn
before it in its session. A turn as said is its actor's name, then its text ("Mara: yes,
Friday works"). Each text is embedded once: the answered turn's vector is its own row's
text, found again in the batch or the vector cache.

A row without a turn to answer (a session's first turn, a frame, a runtime event) mixes in
the same share of the typical vector instead (the mean vector of TYPICAL's texts), so every
row is made alike: a mixed row, made unit, leans toward the direction all of a model's
vectors share (e5's mean vector has norm 0.96), and it would otherwise outscore an unmixed
one for any query (a frame below the turns about it).

Measured on the labelled conversations of tests/quality/conversations (tests/quality/
ablation.py, fused and smoothed recall@10, agent / chats): the turn as said alone .682 /
.746; version 1 (two passages a turn: the turn as said, and the turn before it and this one
as one text, ~3x the tokens) .722 / .807; this one .702 / .803, its vector leg alone .646 /
.770 against version 1's .648 / .741. A third of the tokens is what builds a cold leg of a
million events in about 2 hours here (scripts/bench recall) instead of 6-13.

Turns are the events agents and people append (records.APPEND_KINDS, recall observations
aside): the chain of a session's turns is what the vector leg keeps for neighbour
smoothing too (hybrid.py). The texts are the ones readers are shown (secret parts as
their marker), so nothing a search may not show is embedded.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Optional

import numpy as np

from morphz.shared.mind import records as R

# Part of the vector leg's fingerprint (with TYPICAL's texts): a leg built from other
# passages is not extended.
PASSAGE_VERSION = 2
CONTEXT_SHARE = 0.3  # of the answered turn's vector in a turn's row
REMEMBERED = 4096  # turns' texts a run keeps for the calls their results answer
_TURN_KINDS = frozenset(R.APPEND_KINDS) - frozenset(R.UNINDEXED_KINDS)


def is_turn(kind: str) -> bool:
    return kind in _TURN_KINDS


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
        for an event that is no turn; the key of the turn it answers, None without one;
        its texts: its own, then the answered turn's as said). `call`: the key of the
        action a tool result answers."""
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
        return before, source, (own, context)

    def _text_of(self, key: str) -> Optional[str]:
        if not key:
            return None
        found = self._said.get(key)
        return found if found is not None else self._said_of(key)


def rows(vectors: np.ndarray, texts: list[int], typical: np.ndarray) -> np.ndarray:
    """One unit row per event from the vectors of its texts (`texts[i]` of them, in order:
    Passages.event): its own vector plus CONTEXT_SHARE of the answered turn's, or of the
    `typical` vector for an event with one text; a zero row stays zero (nothing said)."""
    starts = np.cumsum([0] + texts[:-1]).astype(np.int64)
    out = vectors[starts].copy()
    said = out.any(axis=1)
    two = np.asarray(texts) == 2
    out[two] += CONTEXT_SHARE * vectors[starts[two] + 1]
    out[~two] += CONTEXT_SHARE * typical
    out[~said] = 0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


# What a typical text says, for the typical vector: a spread of what agents and people
# write to a context (requests, decisions, tool calls and results, small talk; English,
# Chinese and both), none about anything in particular.
TYPICAL = (
    "user: can you look into this and tell me what you find?",
    "assistant: I checked the logs and the error started after the last deploy.",
    "Let's go with the second option, it is simpler to maintain.",
    "tool: {\"status\": \"ok\", \"rows\": 12, \"elapsed_ms\": 48}",
    "search(query=\"latest report\", limit=5)",
    "Thanks, that works for me. Talk tomorrow?",
    "The meeting moved to Thursday afternoon because two people are away.",
    "I prefer short answers with the conclusion first.",
    "Reminder: the invoice is due at the end of the month.",
    "We decided not to migrate the database until the tests pass.",
    "How was your weekend? We went hiking by the lake.",
    "Error: connection refused (retrying in 5 seconds)",
    "Summary of the document: three sections, two open questions, one action item.",
    "Please book a table for four at seven.",
    "The build failed on the integration step; the unit tests passed.",
    "I'm not sure, let me double-check and get back to you.",
    "用户：帮我查一下这个问题的原因。",
    "助手：我看了日志，错误是在上次发布之后开始的。",
    "我们决定先不升级，等测试通过再说。",
    "明天下午三点开会，地点改到二楼会议室。",
    "好的，谢谢！周末愉快。",
    "这个方案比较简单，维护成本也低。",
    "工具返回：共 12 条记录，耗时 48 毫秒。",
    "我更喜欢简短的回答，先说结论。",
    "这个 bug 在 staging 环境可以复现，production 上还没看到。",
    "周五之前把 report 发给我就行。",
    "帮我 review 一下这个 PR，主要看接口部分。",
    "the deploy 已经完成了，you can test it now.",
)
