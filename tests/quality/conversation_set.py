"""The labelled conversation benchmark (tests/quality/conversations/*.json, the project's
own, written for it): long multi-session conversations between a person and an assistant
agent (turns: the person's messages, the agent's replies and tool calls, the tools'
results) or between two people, with questions labelled by the turns that hold their
answers (single-hop, multi-hop, temporal, preference), English, Chinese and mixed.

A conversation is imported into a context as an agent runtime records one (import_into):
each sitting is a session; a person's message is a `user-message` (its actor the
person's name); the agent's turns are `action`s of an activation claimed after the
message they answer (actor: the agent, or the tool a call names); a tool's output is a
`tool-result` answering its call (actor: the tool); each turn occurred a minute after
the one before it in its sitting (occurred_at, with the sitting's offset)."""
from __future__ import annotations

import json
import pathlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Optional

HERE = pathlib.Path(__file__).resolve().parent / "conversations"
CATEGORIES = ("single-hop", "multi-hop", "temporal", "preference")
_TOOL = re.compile(r"([A-Za-z_][\w]*)[.(]")


@dataclass(frozen=True)
class Turn:
    id: str
    session: str
    kind: str  # user-message | action | tool-result
    actor: str
    text: str
    occurred_at: str
    answers: str = ""  # a tool result's call (a turn id)


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answer: str
    evidence: tuple[str, ...]
    category: str


@dataclass(frozen=True)
class Conversation:
    id: str
    language: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    @property
    def is_chat(self) -> bool:
        return all(t.kind == "user-message" for t in self.turns)


def _actor(raw: dict, people: dict) -> str:
    if "speaker" in raw:  # a chat between two people
        return people[raw["speaker"]]
    if raw["kind"] == "user-message":
        return people["user"]
    if raw["kind"] == "action" and raw["text"].startswith("reply:"):
        return people["agent"]
    m = _TOOL.match(raw["text"])
    return m.group(1) if m else people["agent"]


def load(path: pathlib.Path) -> Conversation:
    c = json.loads(path.read_text(encoding="utf-8"))
    turns, tools = [], {}
    for s in c["sessions"]:
        start = datetime.fromisoformat(s["start"])
        for i, raw in enumerate(s["turns"]):
            actor = _actor(raw, c["people"])
            if raw["kind"] == "tool-result":
                actor = tools[raw["answers"]]
            elif raw["kind"] == "action":
                tools[raw["id"]] = actor
            turns.append(Turn(raw["id"], s["id"], raw["kind"], actor, raw["text"],
                              (start + timedelta(minutes=i)).isoformat(),
                              raw.get("answers", "")))
    questions = tuple(Question(q["id"], q["question"], q["answer"], tuple(q["evidence"]),
                               q["category"]) for q in c["questions"])
    return Conversation(c["id"], c["language"], tuple(turns), questions)


def conversations(folder: pathlib.Path = HERE) -> list[Conversation]:
    return [load(p) for p in sorted(folder.glob("*.json"))]


def import_into(client, context: str, conv: Conversation) -> dict[str, str]:
    """The conversation as events of `context` (a new one, made here) through a
    morphz.client Client; returns {turn id: @eN}."""
    client.create_context(context)
    refs: dict[str, str] = {}
    activation: Optional[str] = None
    session = ""
    for t in conv.turns:
        if t.session != session:  # a new sitting: the last one's evaluation is over
            if activation:
                client.deliver(context, activation)
            activation, session = None, t.session
        if t.kind == "user-message":
            if activation:  # the person speaks: the agent's evaluation is answered
                client.deliver(context, activation)
                activation = None
            ev = client.append_event(context, session=t.session, kind=t.kind, text=t.text,
                                     actor=t.actor, occurred_at=t.occurred_at)
        elif t.kind == "action":
            if activation is None:
                activation = client.activate(context, session=t.session).id
            ev = client.append_event(context, session=t.session, kind=t.kind, text=t.text,
                                     actor=t.actor, activation=activation,
                                     occurred_at=t.occurred_at)
        else:
            ev = client.append_event(context, session=t.session, kind=t.kind, text=t.text,
                                     actor=t.actor, causal_refs=[refs[t.answers]],
                                     occurred_at=t.occurred_at)
        refs[t.id] = ev.ref
    if activation:
        client.deliver(context, activation)
    return refs
