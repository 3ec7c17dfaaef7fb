"""Searching a context's tantivy index: BM25 over its terms (or by time, with no terms),
filtered by kind, session, time and key, a page at a time, ties at the page's end
ordered by key so that the ranking never depends on how the index was built."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import tantivy

from morphz.services.recall.index.tantivy_docs import SCHEMA

TIE_MARGIN = 16  # hits fetched past a page, to see a tie at its end through


@dataclass
class Hit:
    key: str
    score: float
    time_us: Optional[int] = None


@dataclass
class Query:
    terms: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    since_us: Optional[int] = None
    until_us: Optional[int] = None
    keys: list[str] = field(default_factory=list)  # only these documents


def search(searcher: tantivy.Searcher, q: Query, offset: int, count: int) -> list[Hit]:
    """Hits in rank order: BM25 when there are terms, else by time (oldest first,
    ties by key, so the listing never depends on how the index was built)."""
    must: list = []
    if q.keys:
        must.append(_any(SCHEMA, "key", q.keys))
    if q.kinds:
        must.append(_any(SCHEMA, "kind", q.kinds))
    if q.sessions:
        must.append(_any(SCHEMA, "session", q.sessions))
    if q.since_us is not None or q.until_us is not None:
        must.append(tantivy.Query.range_query(
            SCHEMA, "time", tantivy.FieldType.Integer,
            lower_bound=q.since_us if q.since_us is not None else -(1 << 62),
            upper_bound=q.until_us if q.until_us is not None else 1 << 62,
            include_lower=True, include_upper=q.until_us is None))
    if q.terms:
        words = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, "terms", t))
             for t in q.terms])
        query = (tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, words)] +
            [(tantivy.Occur.Must, tantivy.Query.const_score_query(m, 0.0)) for m in must])
            if must else words)

        def run(n: int) -> list:
            return [(-score, addr) for score, addr in
                    searcher.search(query, n, count=False).hits]
    else:
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, m) for m in must])

        def run(n: int) -> list:
            return searcher.search(query, n, count=False, order_by_field="time",
                                   order=tantivy.Order.Asc).hits
    n = offset + count
    raw = _through_ties(run, n)
    addrs = [addr for _, addr in raw]
    seqs = searcher.fast_field_values("seq", addrs) if addrs else []
    # Ties ordered by key (events by seq, then frames by id): the ranking never
    # depends on how the index was built (replicas answer alike).
    picked = _by_key_within_ties(searcher, raw, seqs)[offset:offset + count]
    keys = [f"e:{seqs[i]}" if seqs[i] >= 0 else _stored_key(searcher, addrs[i])
            for i in picked]
    if q.terms:  # BM25 order; only frames' hits use the time (an event's comes from
        # its record)
        frames = [i for i in picked if seqs[i] < 0]  # (an event's seq is its own)
        times = dict(zip(frames, searcher.fast_field_values(
            "time", [addrs[i] for i in frames]))) if frames else {}
        return [Hit(key, -raw[i][0], times.get(i)) for i, key in zip(picked, keys)]
    times = searcher.fast_field_values("time", [addrs[i] for i in picked]) if picked else []
    return [Hit(key, 0.0, t) for key, t in zip(keys, times)]


def _through_ties(run: Callable[[int], list], n: int) -> list:
    """The first n hits of `run` (sorted (order key, address) pairs) and every other hit
    tied with the n-th: enough to order that tie by key. The first fetch takes a margin
    past n: ties straddling the page end are common (one in two 1-word queries at 1M
    events) but short (they ended within 13 hits past a page of 20 there), and a few more
    hits cost far less than a second search. Past the margin, growing steps, and only
    through the tie (not on to whatever tie a step happens to end in)."""
    want = n + 1 + max(TIE_MARGIN, n // 4)
    raw = run(want)
    if len(raw) <= n or raw[n - 1][0] != raw[n][0]:
        return raw[:n]
    cut = raw[n - 1][0]
    while len(raw) == want and raw[-1][0] == cut:
        want = 2 * want
        raw = run(want)
    return [h for h in raw if _not_after(h[0], cut)]


def _not_after(value, cut) -> bool:
    """Whether an order key sorts at or before the cut (None, no time, sorts last)."""
    if cut is None:
        return True
    return value is not None and value <= cut


def _by_key_within_ties(searcher: tantivy.Searcher, raw: list, seqs: list) -> list[int]:
    """Indexes of `raw` in (order key, vector_index.key_order) order, on arrays: a tie can
    hold tens of thousands of hits."""
    if not raw:
        return []
    ev = np.asarray(seqs, dtype=np.int64)
    frame = ev < 0
    within = np.where(frame, 0, ev)
    if frame.any():  # frames by id (few): their rank among themselves
        fidx = np.flatnonzero(frame)
        fkeys = [_stored_key(searcher, raw[i][1]) for i in fidx]
        within[fidx[sorted(range(len(fidx)), key=fkeys.__getitem__)]] = np.arange(len(fidx))
    keys = [h[0] for h in raw]
    none = np.array([k is None for k in keys])
    order_key = np.array([0 if k is None else k for k in keys], dtype=np.float64
                         if isinstance(next((k for k in keys if k is not None), 0), float)
                         else np.int64)
    return np.lexsort((within, frame, order_key, none)).tolist()


def _stored_key(searcher: tantivy.Searcher, addr) -> str:
    return searcher.doc(addr).get_first("key")


def _any(schema: tantivy.Schema, fld: str, values: list[str]) -> tantivy.Query:
    return tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.term_query(schema, fld, v)) for v in values])
