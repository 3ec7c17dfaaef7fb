"""What the fusion (hybrid.py) and the resolution of hits (search.py) read a search's
candidates through; legs.py has the lexical leg, the vector leg and a fixed ranking."""
from __future__ import annotations

from typing import Protocol, Sequence


class Leg(Protocol):
    def hits(self, offset: int, count: int) -> Sequence:
        """Candidates ranked offset..offset+count, best first: each with `key` (a
        HitKey's text), `score` and `time_us`, and a fused one its legs' ranks."""
        ...

    def empty_reason(self) -> str:
        """Why a search of this leg found nothing: 'empty_index' (nothing to search) or
        'no_match'."""
        ...
