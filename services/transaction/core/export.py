"""A context's events as the lines `morphz context import` reads (PRIV-05; docs/privacy.md).

Each event of a kind import takes (what a runtime appends as an input: user messages,
tool results, approvals, external facts, continuations) becomes one line: its kind,
session, actor, text and the time it occurred (its recorded time where none was given,
so an import keeps the times). A secret event's text goes only to a caller with the
reveal right who asks for it (else its `[secret @eN]` marker); an erased one is a
placeholder (its `[erased @eN]` marker, `erased` set). Other kinds (messages between
sessions, actions, recall observations, runtime events) have no import line: counted,
not written. Read a page at a time, each in its own read (the events below the
context's length when the export began do not change but by an erasure)."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterator

from morphz.services.transaction.core.results import Result, _result
from morphz.shared.mind import records as R, secrets
from morphz.shared.mind.view import MindView

KINDS = ("user-message", "tool-result", "approval", "external", "continuation")
PAGE = 1000  # events read, and lines sent, at a time


@_result
class ExportedEvent(Result):
    kind: str
    session: str
    actor: str
    text: str
    occurred_at: str
    secret: bool
    erased: bool
    ref: str


@_result
class ExportPage(Result):
    """A page of lines, how far the export is (events read of `total`), and, in the
    last page, what it left out by kind."""
    events: tuple[ExportedEvent, ...]
    done: int
    total: int
    skipped: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Window:
    """Occurred time in [since, until) (either may be open)."""
    since: str = ""
    until: str = ""

    def holds(self, at: str) -> bool:
        t = datetime.fromisoformat(at)
        return (not self.since or t >= datetime.fromisoformat(self.since)) and \
            (not self.until or t < datetime.fromisoformat(self.until))


def line_of(ev: R.Event, reveal: bool) -> ExportedEvent:
    erasure = secrets.erasure_of(ev.data)
    secret = secrets.is_secret_event(ev.data)
    return ExportedEvent(ev.kind, ev.session, ev.actor,
                         secrets.shown_text(ev, reveal),
                         R.occurred_at(ev.data) or ev.time, secret, bool(erasure),
                         R.ref(ev.seq))


def pages(read_page, total: int, window: Window, reveal: bool) -> Iterator[ExportPage]:
    """The export's pages; `read_page(first, count)` reads events [first, first+count)
    (a MindView's events, in a read of their own)."""
    skipped: dict[str, int] = {}
    for first in range(0, total, PAGE):
        out = []
        for ev in read_page(first, min(PAGE, total - first)):
            if ev.kind not in KINDS:
                skipped[ev.kind] = skipped.get(ev.kind, 0) + 1
                continue
            line = line_of(ev, reveal)
            if window.holds(line.occurred_at):
                out.append(line)
        last = first + PAGE >= total
        yield ExportPage(tuple(out), min(first + PAGE, total), total,
                         dict(skipped) if last else {})
    if not total:
        yield ExportPage((), 0, 0, {})


def events_of(m: MindView, first: int, count: int) -> list[R.Event]:
    seqs = range(first, first + count)
    m.prefetch_events(seqs)  # one round trip where the store is remote
    return [m.event(seq) for seq in seqs]
