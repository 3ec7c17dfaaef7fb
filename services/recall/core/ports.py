"""What RecallCore is handed (services/recall/wiring.py builds each from recall/runtime):
the index upkeep, the store of search snapshots kept for their cursors, and a way to
run a hybrid search's two legs side by side. Protocols only: the core holds no thread,
process or file of its own."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, Protocol

from morphz.services.recall.core.results import RebuildInfo, RebuildProgress
from morphz.services.recall.embedding.api import Embedder
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.services.recall.index.vector_cache import CacheStats
from morphz.services.recall.index.vector_index import VectorLeg
from morphz.shared.auth import Caller
from morphz.shared.deadline import NEVER, Deadline

if TYPE_CHECKING:
    from morphz.services.transaction.core.results import AppendResult


@dataclass(frozen=True)
class VectorPosition:
    """Where a context's vector leg is (Indexes.vector_status): the version it holds and
    how far that is behind the version asked about (0 with no leg at all)."""
    position: int
    lag: int


@dataclass(frozen=True)
class Pinned:
    """What answered a search's first page, kept for its cursor (RECALL-03)."""
    snapshot: object  # (searcher, index meta) that answered the first page
    ranking: Optional[object] = None  # a vector or hybrid search's (hybrid.Ranking)


class Pins(Protocol):
    """Search snapshots by (context, index version), bounded (runtime/pins.py's
    SearchPins): a cursor past what it keeps is refused as stale."""
    def keep(self, context: str, version: str, pinned: Pinned) -> None: ...

    def get(self, context: str, version: str) -> Optional[Pinned]: ...


class Indexes(Protocol):
    """A context's derived index, kept up to date (runtime/indexer.py's Indexer)."""
    embedder: Embedder
    vectors_off: bool

    def index(self, context: str, head: Optional[int] = None) -> ContextIndex: ...

    def index_up_to(self, context: str, target: int, give_up: float) -> None: ...

    def vectors_up_to(self, context: str, target: int, give_up: float) -> None: ...

    def vector_status(self, context: str, head: int) -> VectorPosition: ...

    def want_vectors(self, context: str) -> None: ...

    def leg_current(self, leg: VectorLeg) -> bool: ...

    def leg_embedder(self, context: str, leg: VectorLeg) -> Embedder: ...

    def progress(self, context: str) -> RebuildProgress: ...

    def shown_path(self, context: str) -> str: ...

    def cache_stats(self) -> CacheStats: ...

    def rebuild(self, context: str, deadline: Deadline = NEVER) -> RebuildInfo: ...


class RunsBeside(Protocol):
    """Runs a hybrid search's two legs side by side (runtime/beside.py's Beside)."""
    def both(self, first: Callable[[], list], second: Callable[[], list]) -> tuple[list, list]:
        ...


class Transactions(Protocol):
    def append_event(self, context: str, session: str, kind: str, text: str, *,
                     request_id: str = "", actor: str = "", causal_refs=(),
                     caller: Caller) -> AppendResult: ...
