"""Lexical and time-range search: index hits, resolved against the authoritative store.

The index chooses and ranks; the store supplies the records (and the lifecycle
state, which the state filter checks here, since an observation's retirement is
not an index intent). A search for an evaluation drops, the same way, the events its
causal scope may not see. Offsets count raw index hits, so a cursor resumes exactly.
The vector and hybrid modes (hybrid.py) hand their ranked candidates to the same
resolution (`fetch`), so their hits pass exactly the same checks.
"""
from __future__ import annotations

from typing import Callable, Optional

from morphz.services.recall.core.documents import indexed
from morphz.services.recall.core.timeparse import from_us
from morphz.services.recall.core.views import event_hit, frame_hit
from morphz.services.recall.index.tantivy_index import ContextIndex, Query
from morphz.shared.mind.view import MindView
from morphz.shared.text.highlight import Highlighter, preview_reach

MIN_CHUNK = 64
PAGE_READ_BYTES = 16 << 20  # rows a page reads ahead at most


def run_search(m: MindView, idx: ContextIndex, searcher, words: list[str],
               since_us: Optional[int], until_us: Optional[int], kinds: list[str],
               states: list[str], sessions: list[str], start: int, limit: int,
               visible: Optional[Callable[[int], bool]] = None,
               fetch: Optional[Callable[[int, int], list]] = None,
               empty_reason: Optional[Callable[[], str]] = None,
               ) -> tuple[list[dict], Optional[int], str]:
    """(hits, raw offset of the next page or None, why empty). `visible`: for a search
    made for an evaluation, whether its causal scope may see event seq. `fetch(offset,
    count)`: ranked candidates other than the lexical leg's (with their legs' ranks)."""
    q = Query(terms=words, kinds=kinds, sessions=sessions, since_us=since_us, until_us=until_us)
    if fetch is None:
        def fetch(offset: int, count: int) -> list:
            return idx.search(searcher, q, offset, count)
    marker = Highlighter(set(words))
    hits: list[dict] = []
    offset = start
    filtered = bool(states) or visible is not None
    # A filter checked here, not in the index, may skip hits: fetch more.
    chunk = max(MIN_CHUNK, limit + 1) if filtered else limit + 1
    while True:
        raw = fetch(offset, chunk)
        # What the filters and the hits read, in one round trip (a remote store).
        shown = [int(h.key[2:]) for h in raw[:limit - len(hits)] if h.key[0] == "e"]
        # This search's last read when the index has no more hits, or when an unfiltered
        # page fills from this chunk (only a hit that fails to resolve, a frame gone since
        # it was indexed, reads on: at the same version, or StaleRead).
        last = len(raw) < chunk or (not filtered and len(raw) > limit - len(hits))
        # Large rows (events, frames of megabytes) past PAGE_READ_BYTES are read when
        # resolved, one at a time.
        m.prefetch_tables({
            "observations": [(int(h.key[2:]),) for h in raw if h.key[0] == "e"],
            "frames": [(h.key[2:],) for h in raw if h.key[0] == "f"],
            "events": [(seq,) for seq in shown]}, last=last, max_bytes=PAGE_READ_BYTES)
        events = m.event_dicts(shown, text_chars=preview_reach())
        for i, h in enumerate(raw):
            # With a filter, drop a hit before reading its text and previewing it.
            if filtered and not _qualifies(m, h, states, visible):
                continue
            if len(hits) == limit:  # one more qualifying hit: the next page starts here
                if filtered or _qualifies(m, h, states, visible):
                    return hits, offset + i, ""
                continue
            hit = _resolve(m, h, marker, events)
            if hit is not None:
                hits.append(hit)
        if len(raw) < chunk:
            break
        offset += len(raw)
        chunk = min(chunk * 2, 4096)
    if hits:
        empty = ""
    elif empty_reason is not None:
        empty = empty_reason()
    else:
        empty = "empty_index" if searcher.num_docs <= 1 else "no_match"
    return hits, None, empty


def _resolve(m: MindView, h, marker: Highlighter, events: dict[int, dict]) -> Optional[dict]:
    kind, _, ident = h.key.partition(":")
    score = round(h.score, 6)
    if kind == "e":
        seq = int(ident)
        hit = event_hit(m, seq, score, marker, events.get(seq))
        if hit is not None and not indexed(hit["event_kind"]):  # an older index's
            return None
    else:
        f = m.frame(ident)
        if f is None:
            return None
        hit = frame_hit(f, score, from_us(h.time_us) if h.time_us is not None else "", marker)
    if hit is not None and hasattr(h, "vector_rank"):  # a vector or hybrid search's
        hit["lexical_rank"], hit["vector_rank"] = h.lexical_rank, h.vector_rank
    return hit


def _qualifies(m: MindView, h, states: list[str],
               visible: Optional[Callable[[int], bool]] = None) -> bool:
    """Whether _resolve would give a hit passing the filters (no preview)."""
    kind, _, ident = h.key.partition(":")
    if kind == "e":
        seq = int(ident)
        return (m.has_event(seq) and
                (not states or m.observation_state(seq) in states) and
                (visible is None or visible(seq)))
    f = m.frame(ident)
    return f is not None and (not states or f.state in states)
