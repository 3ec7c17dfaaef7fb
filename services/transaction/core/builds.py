"""What a write's `build` gives the Writer (writes/writer.py, Writer.write): an event to
apply with its typed payload, a record outside the Mind, a batch of appends, or the
finished answer of an idempotent retry (a Result)."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

from morphz.services.transaction.core import chain, payloads as P
from morphz.services.transaction.core.reducer import apply_event
from morphz.services.transaction.core.results import AppendBatchResult, AppendResult, Result
from morphz.shared.errors import MorphzError
from morphz.shared.mind import records as R
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import Write


@dataclass(frozen=True)
class Proposed:
    """What a `build` returns to apply an event: the event and its payload, typed (the
    reducer applies the payload itself; the event's data is its stored form)."""
    event: R.Event
    payload: P.Payload


@dataclass
class RawWrite:
    """What a `build` returns to store a record outside the Mind (no event, no revision)."""
    reply: Result
    writes: list[Write]


# A `build`'s answer: an event to apply, or the finished answer of an idempotent retry.
Build = Callable[[MindState], Union[Proposed, Result, RawWrite, "Batch"]]


@dataclass
class Batch:
    """What append_events' `build` gives: each item's build, applied in order to one state."""
    steps: list[Callable[[MindState], Union[Proposed, AppendResult]]]
    # What holds for the whole batch (the context exists, the caller may write it),
    # checked first so that its refusal names no item.
    check: Callable[[MindState], None] = lambda m: None
    replies: list[AppendResult] = field(default_factory=list)  # set by each apply_batch

    def __call__(self, m: MindState) -> "Batch":
        """As a `build` it is itself: the engine applies its steps (apply_batch)."""
        return self


def apply_batch(m: MindState, batch: Batch) -> Optional[AppendBatchResult]:
    """Each step applied after the one before it (its seq follows); the batch's result,
    or None when every step was an idempotent retry (batch.replies holds theirs)."""
    batch.check(m)
    batch.replies, applied = [], False
    for i, step in enumerate(batch.steps):
        try:
            done = step(m)
            if isinstance(done, Proposed):
                chain.link(m, done.event)
                done = AppendResult.of(apply_event(m, done.event, None, payload=done.payload))
                applied = True
        except MorphzError as e:
            e.details.setdefault("index", i)
            raise
        batch.replies.append(done)
    return AppendBatchResult(tuple(batch.replies)) if applied else None


def payload_hash(payload: dict) -> str:
    raw = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(raw.encode()).hexdigest()
