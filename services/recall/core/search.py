"""Lexical and time-range search: index hits, resolved against the authoritative store.

The index chooses and ranks; the store supplies the records (and the lifecycle
state, which the state filter checks here, since an observation's retirement is
not an index intent). Offsets count raw index hits, so a cursor resumes exactly.
"""
from __future__ import annotations

from typing import Optional

from morphz.services.recall.core.timeparse import from_us
from morphz.services.recall.core.views import event_hit, frame_hit
from morphz.services.recall.index.tantivy_index import ContextIndex, Query
from morphz.shared.mind.state import MindState
from morphz.shared.storage.api import Reader
from morphz.shared.text.highlight import matcher

MIN_CHUNK = 64


def run_search(m: MindState, reader: Reader, idx: ContextIndex, searcher, words: list[str],
               since_us: Optional[int], until_us: Optional[int], kinds: list[str],
               states: list[str], sessions: list[str], start: int,
               limit: int) -> tuple[list[dict], Optional[int], str]:
    """(hits, raw offset of the next page or None, why empty)."""
    q = Query(terms=words, kinds=kinds, sessions=sessions, since_us=since_us, until_us=until_us)
    wordset = set(words)
    pattern = matcher(wordset)
    hits: list[dict] = []
    offset = start
    # A state filter (checked here, not in the index) may skip hits: fetch more.
    chunk = max(MIN_CHUNK, limit + 1) if states else limit + 1
    while True:
        raw = idx.search(searcher, q, offset, chunk)
        for i, h in enumerate(raw):
            hit = _resolve(m, reader, h, wordset, pattern)
            if hit is None or (states and hit["state"] not in states):
                continue
            if len(hits) == limit:  # one more exists: the next page starts here
                return hits, offset + i, ""
            hits.append(hit)
        if len(raw) < chunk:
            break
        offset += len(raw)
        chunk = min(chunk * 2, 4096)
    empty = "" if hits else ("empty_index" if searcher.num_docs <= 1 else "no_match")
    return hits, None, empty


def _resolve(m: MindState, reader: Reader, h, words: set[str], pattern) -> Optional[dict]:
    kind, _, ident = h.key.partition(":")
    score = round(h.score, 6)
    if kind == "e":
        return event_hit(reader, int(ident), score, words, pattern)
    f = m.frame(ident)
    if f is None:
        return None
    return frame_hit(f, score, from_us(h.time_us) if h.time_us is not None else "", words,
                     pattern)
