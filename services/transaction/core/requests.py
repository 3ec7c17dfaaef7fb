"""Requests the transaction core takes as records (the rest it takes as arguments)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AppendItem:
    """One event of an append_events batch: append_event's arguments."""
    session: str
    kind: str
    text: str
    request_id: str = ""
    actor: str = ""
    causal_refs: tuple[str, ...] = ()
    activation: str = ""
    target_session: str = ""
    secret: bool = False
    occurred_at: str = ""
