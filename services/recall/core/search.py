"""Lexical and time-range search: index hits, resolved against the authoritative store.

The index chooses and ranks; the store supplies the records (and the lifecycle
state, which the state filter checks here, since an observation's retirement is
not an index intent). A search for an evaluation drops, the same way, the events its
causal scope may not see. Offsets count raw index hits, so a cursor resumes exactly.
The vector and hybrid modes (hybrid.py) hand their ranked candidates to the same
resolution (a leg.Leg, as the lexical leg is one), so their hits pass exactly the same checks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from morphz.services.recall.core.documents import indexed
from morphz.services.recall.core.leg import Leg
from morphz.services.recall.core.request import SearchRequest
from morphz.services.recall.core.results import Hit
from morphz.services.recall.core.timeparse import from_us
from morphz.services.recall.core.views import NO_RANKS, event_hit, frame_hit
from morphz.shared.mind.bulk import prefetch_hits
from morphz.shared.mind.view import MindView
from morphz.shared.text.highlight import Highlighter, preview_reach
from morphz.shared.values import HitKey

MIN_CHUNK = 64
PAGE_READ_BYTES = 16 << 20  # rows a page reads ahead at most


@dataclass(frozen=True, slots=True)
class SearchPage:
    """A page's hits; `next_offset`: the raw offset in the leg where the next page
    starts (None: no more); `empty`: why nothing matched ('' when something did)."""
    hits: tuple[Hit, ...]
    next_offset: Optional[int]
    empty: str


def run_search(m: MindView, request: SearchRequest, leg: Leg, start: int,
               visible: Optional[Callable[[int], bool]] = None) -> SearchPage:
    """The page of `leg`'s candidates from raw offset `start` that resolve and pass the
    request's filters. `visible`: for a search made for an evaluation, whether its
    causal scope may see event seq."""
    limit, states = request.limit, request.states
    marker = Highlighter(set(request.terms))
    hits: list[Hit] = []
    offset = start
    filtered = bool(states) or visible is not None
    # A filter checked here, not in the index, may skip hits: fetch more.
    chunk = max(MIN_CHUNK, limit + 1) if filtered else limit + 1
    while True:
        raw = [(h, HitKey.parse(h.key)) for h in leg.hits(offset, chunk)]
        # What the filters and the hits read, in one round trip (a remote store).
        shown = [k.seq for _, k in raw[:limit - len(hits)] if k.is_event]
        # This search's last read when the index has no more hits, or when an unfiltered
        # page fills from this chunk (only a hit that fails to resolve, a frame gone since
        # it was indexed, reads on: at the same version, or StaleRead).
        last = len(raw) < chunk or (not filtered and len(raw) > limit - len(hits))
        # Large rows (events, frames of megabytes) past PAGE_READ_BYTES are read when
        # resolved, one at a time.
        prefetch_hits(m, [k.seq for _, k in raw if k.is_event],
                      [k.frame_id for _, k in raw if not k.is_event], shown,
                      last=last, max_bytes=PAGE_READ_BYTES)
        events = m.event_dicts(shown, text_chars=preview_reach())
        for i, (h, key) in enumerate(raw):
            # With a filter, drop a hit before reading its text and previewing it.
            if filtered and not _qualifies(m, key, states, visible):
                continue
            if len(hits) == limit:  # one more qualifying hit: the next page starts here
                if filtered or _qualifies(m, key, states, visible):
                    return SearchPage(tuple(hits), offset + i, "")
                continue
            hit = _resolve(m, h, key, marker, events)
            if hit is not None:
                hits.append(hit)
        if len(raw) < chunk:
            break
        offset += len(raw)
        chunk = min(chunk * 2, 4096)
    return SearchPage(tuple(hits), None, "" if hits else leg.empty_reason())


def _resolve(m: MindView, h, key: HitKey, marker: Highlighter,
             events: dict[int, dict]) -> Optional[Hit]:
    score = round(h.score, 6)
    # a vector or hybrid search's hit has each leg's rank
    ranks = (h.lexical_rank, h.vector_rank) if hasattr(h, "vector_rank") else NO_RANKS
    if key.is_event:
        hit = event_hit(m, key.seq, score, marker, events.get(key.seq), ranks)
        if hit is not None and not indexed(hit.event_kind):  # an older index's
            return None
        return hit
    f = m.frame(key.frame_id)
    if f is None:
        return None
    return frame_hit(f, score, from_us(h.time_us) if h.time_us is not None else "", marker,
                     ranks)


def _qualifies(m: MindView, key: HitKey, states: tuple[str, ...],
               visible: Optional[Callable[[int], bool]] = None) -> bool:
    """Whether _resolve would give a hit passing the filters (no preview)."""
    if key.is_event:
        seq = key.seq
        return (m.has_event(seq) and
                (not states or m.observation_state(seq) in states) and
                (visible is None or visible(seq)))
    f = m.frame(key.frame_id)
    return f is not None and (not states or f.state in states)
