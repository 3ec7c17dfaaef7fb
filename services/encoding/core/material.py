"""What one encoding is made of: every fact and body the renderer needs, and nothing
read at render time. Compile fills it from the current projections; replay fills it
from a snapshot record plus the authoritative history, so the same renderer gives
the same bytes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from morphz.services.encoding.core.options import Budget, Environment
from morphz.services.encoding.core.scope import Scope

FULL, PREVIEW = "full", "preview"
RUNTIME, AGENT = "runtime", "agent"
# Bumped whenever the rendered form changes; a snapshot replays with its own version.
ENCODING_VERSION = 1


@dataclass
class Obs:
    seq: int
    kind: str
    session: str
    actor: str
    time: str
    text: str
    residency: str = FULL
    protected: bool = False
    freshness: str = "seen"  # new: claimed by this activation, or a result of its call
    root: bool = False       # the root request of an undelivered activation
    target: str = ""         # a message's target session (its `session` is the source)
    # The whole text's UTF-8 bytes when `text` holds only its preview (a large one is not
    # held whole for an encoding that shows a preview); None: `text` is whole.
    total_bytes: Optional[int] = None
    # Its event as a RowCache keeps it (render keeps the items made of it there).
    seen: Optional["SeenEvent"] = field(default=None, compare=False, repr=False)
    occurred: str = ""  # when it happened at its source, where that was given


MAX_ITEMS_PER_EVENT = 8


@dataclass
class SeenEvent:
    """An event as compiles show it (a RowCache keeps it by the event's row): decoded,
    its text as shown (secrets redacted or revealed) and that text's UTF-8 size, and
    the items render made of it so far, by what else they show (residency, preview
    bytes, protection...)."""
    event: Any  # records.Event, never changed
    text: str
    total_bytes: int
    items: dict = field(default_factory=dict, compare=False, repr=False)

    def item(self, key: tuple, make: Callable[[], Any]) -> Any:
        """The item made for `key`, made now if it was not (at most MAX_ITEMS_PER_EVENT
        are kept: callers choosing many preview sizes start it over)."""
        it = self.items.get(key)
        if it is None:
            if len(self.items) >= MAX_ITEMS_PER_EVENT:
                self.items.clear()
            it = self.items[key] = make()
        return it


@dataclass
class FrameIn:
    id: str
    revision: int
    body: str
    sources: list[str]
    state: str
    protected: bool = False
    retire_reason: str = ""
    due_tick: int = 0
    remaining_ticks: int = 0
    # Its item as regions.frame_item makes it, when a RowCache already made it.
    rendered: Optional[Any] = field(default=None, compare=False, repr=False)
    # Its snapshot input record as snapshot.frame_input makes it, likewise.
    frozen: Optional[dict] = field(default=None, compare=False, repr=False)


@dataclass
class Material:
    context: str
    session: str
    revision: int
    tick: int
    window: int
    activation: dict          # the activation view (id, claimed, root, tick, ...)
    observations: list[Obs]
    frames: list[FrameIn]     # placement order
    relations: list[list[str]]
    checkpoints: list[list]   # [name, revision]
    sessions: list[dict]      # {id, state, level, waiting: messages addressed to it}
    pending: int              # this session's inputs waiting for the next activation
    scope: Scope
    time: str                 # local time with offset, fixed at compile
    env: Environment
    budget: Budget
    capabilities: dict = field(default_factory=dict)  # name -> list of verbs
    # The evaluating session's calls still waiting for a result: {ref, activation, actor}.
    calls: list[dict] = field(default_factory=list)
    # Results of its calls that came after their activation was delivered (pending, or
    # claimed by this activation): {ref, call, activation, state}.
    late_results: list[dict] = field(default_factory=list)
    version: int = ENCODING_VERSION
