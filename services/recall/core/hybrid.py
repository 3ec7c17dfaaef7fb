"""Search modes: the lexical leg, the vector leg, and both fused (the default).

- `lexical`: BM25 over the index terms (search.py), unchanged.
- `vector`: the query's embedding (role "query") against each document's row (its own
  vector mixed with the turn it answers: core/passages.py). A neighbour at or below
  VECTOR_MIN_SCORE is noise, not a match.
- `hybrid` (the default; a search that names no mode falls back to `lexical` while the
  vector leg is stale or not built): score fusion of the top FUSE_DEPTH of each leg, then
  neighbour smoothing within sessions (HYB-07).

Score fusion. Each candidate scores LEXICAL_WEIGHT x its lexical part + (1 -
LEXICAL_WEIGHT) x its vector part:
- the lexical part is how much of the query a hit holds, past a small gate: its BM25
  score over the sum of the query terms' idf (lexical_confidence: a document holding every
  query term once, at average length, scores about that sum, so the share is an
  idf-weighted term coverage), capped at 1, minus LEXICAL_GATE, over 1 - LEXICAL_GATE
  (0 below the gate). Absolute, not scaled to the best hit: a match on "the" and "when"
  stays near 0 however poor the other matches are, so it cannot push the vector leg's
  paraphrase hit out (on tests/quality's paraphrase queries, which share no word with
  their targets, a min-max scaled BM25 cut the vector leg's recall@10 from 0.570 to 0.465);
- the vector part is the hit's score min-max scaled over the vector leg's candidates (the
  best 1, the last 0): e5's cosines sit in a narrow band, so their spread, not their level,
  says how sure the leg is.
Rank fusion (RRF) threw both scores away: a question in a conversation shares some of its
words with its evidence, and a rank says nothing of how many. The coverage-gated RRF this
replaced (a lexical hit below half the query abstained) made those partial matches abstain:
on the agent conversations of tests/quality/conversations it was no better than the vector
leg alone (recall@10 0.582 against 0.582, bare texts), score fusion 0.593 (0.640 over
version 1 of the passages of core/passages.py; tests/quality/ablation.py).

Neighbour smoothing. Relevance clusters in a conversation: the answer is next to the
question, the tool's output next to the call, a confirmation next to what it confirms.
Each of the SPREADERS best fused hits that is a turn of a session (core/passages.py) lends
the turns before and after it in its session NEIGHBOUR_SHARE of its fused score, and
those neighbours join the list with what they gain. Only the best lend: a mediocre hit's
neighbours are mostly noise (on the labelled set's notes grouped into sessions by
workstream, every hit lending cost the paraphrase queries 5 points of recall@10). Measured
on tests/quality/conversations (passages version 1): recall@10 0.640 -> 0.727 (0.723 with
every hit lending, 0.728 with a share of 0.5, which cost the keyword queries' MRR). The weights
(LEXICAL_WEIGHT 0.5, LEXICAL_GATE 0.1, NEIGHBOUR_SHARE 0.3, SPREADERS 10) were chosen on
both labelled sets together: conversation recall without losing the keyword queries'
exact hits (HYB-05) or the paraphrase queries' vector hits (tests/quality/hybrid_eval.py
prints every set and leg).

Each hit says its rank in each leg (0: not among that leg's candidates; a neighbour that
only smoothing brought in has 0 in both). Both legs apply the same kind/session/time
filters, and a neighbour joins only if it passes them too (filtered); every fused or vector hit then goes through the same resolution as a lexical one
(search.run_search: state, the evaluation's visibility, the store's record), so a vector
hit never bypasses those checks. Lexical hits that score nothing stay listed, after every
hit that does, in the lexical leg's order.

Exact path: a query that is one token naming an event (@eN or its id), a frame id or a
number is not embedded (ids and numbers carry no meaning to an embedder): the item it
names comes first (when it exists and passes the filters), then the lexical leg's
hits, in its deterministic order.

Vector results stop after the vector leg's FUSE_DEPTH candidates. Hybrid and exact
results go on past the fused list with the rest of the lexical leg, in its order
(lexical_tail), so paging a default search still reaches every lexical match. The
vector leg moves on its own (it follows the lexical one), so a vector or hybrid search
with a next page keeps its Ranking (the fused list, with the lexical searcher that
continues it) server-side for its cursor: every page is a slice of the first page's
ranking, never of a vector leg read again.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from morphz.services.recall.core.documents import event_key, frame_key
from morphz.services.recall.core.leg import Leg
from morphz.services.recall.index.vector_index import key_order
from morphz.shared.mind.view import MindView
from morphz.shared.names import MAX_LOOKUP_CHARS

MODES = ("lexical", "vector", "hybrid")
DEFAULT_MODE = "hybrid"
LEXICAL_WEIGHT = 0.5
LEXICAL_GATE = 0.1  # a lexical hit holding less of the query adds nothing
NEIGHBOUR_SHARE = 0.3
SPREADERS = 10  # the fused hits that lend their neighbours a share: the best ones
FUSE_DEPTH = 100
VECTOR_MIN_SCORE = 0.15
_NUMBER = re.compile(r"[+-]?\d+(?:[.,]\d+)*")
MAX_ID_BYTES = 400  # within the store's key bound (480 bytes) with room for the prefix


@dataclass
class RankedHit:
    key: str
    score: float
    time_us: Optional[int] = None
    lexical_rank: int = 0
    vector_rank: int = 0


@dataclass(frozen=True)
class Ranking:
    """A vector or hybrid search's candidates as its first page fixed them."""
    ranked: tuple[RankedHit, ...]
    lexical_continues: bool  # the lexical leg had FUSE_DEPTH hits: more follow the list


def exact_target(m: MindView, query: str) -> tuple[bool, Optional[str]]:
    """(whether the query takes the exact path, the key of the item it names if any)."""
    q = query.strip()
    if not q or len(q.split()) != 1:
        return False, None
    if not _could_be_an_id(q):  # a long or odd word is only a word: nothing to look up
        return (True, None) if _NUMBER.fullmatch(q) else (False, None)
    ev = m.event_by_ref(q)
    if ev is not None:
        return True, event_key(ev.seq)
    if m.frame(q) is not None:
        return True, frame_key(q)
    if _NUMBER.fullmatch(q) or q.startswith("@e"):
        return True, None
    return False, None


def _could_be_an_id(word: str) -> bool:
    """Whether the store could hold an event or frame under this id: bounded, printable
    (an id past the store's key bounds is refused by the store, not merely not found)."""
    return len(word) <= MAX_LOOKUP_CHARS and len(word.encode("utf-8", "surrogatepass")) <= MAX_ID_BYTES \
        and word.isprintable()


def lexical_confidence(score: float, idf_total: float) -> float:
    """How much of the query a lexical hit holds, 0..1: its BM25 score over the sum of
    the query terms' idf (a document holding every term once, at average length, scores
    about that sum). 1 when unknown (idf_total 0)."""
    return min(1.0, score / idf_total) if idf_total > 0 else 1.0


def lexical_part(score: float, idf_total: float, gate: float = LEXICAL_GATE) -> float:
    """A lexical hit's part of the fusion, 0..1: its confidence past the gate."""
    return max(0.0, (lexical_confidence(score, idf_total) - gate) / (1.0 - gate))


# A search's neighbours: {key: (the turn before it in its session, the turn after)}.
Neighbours = Callable[[list[str]], dict[str, tuple[Optional[str], Optional[str]]]]


def no_neighbours(keys: list[str]) -> dict:
    return {}


def filtered(neighbours: Neighbours, passing: Callable[[set[str]], set[str]]) -> Neighbours:
    """`neighbours` keeping only the turns that pass the search's filters (`passing`: a
    set of keys -> those that pass): a neighbour joins a search's hits only as a hit of
    it would (its kind, session, time)."""
    def within(keys: list[str]) -> dict[str, tuple[Optional[str], Optional[str]]]:
        pairs = neighbours(keys)
        ok = passing({k for pair in pairs.values() for k in pair if k is not None})
        return {k: tuple(x if x in ok else None for x in pair) for k, pair in pairs.items()}
    return within


def fuse(lexical: list, vector: list, idf_total: float = 0.0,
         neighbours: Neighbours = no_neighbours, *, weight: float = LEXICAL_WEIGHT,
         gate: float = LEXICAL_GATE, share: float = NEIGHBOUR_SHARE) -> list[RankedHit]:
    """Score fusion of two ranked lists of hits (objects with key, score, time_us), then
    neighbour smoothing; `idf_total`: the query terms' idf summed."""
    out: dict[str, RankedHit] = {}
    for rank, h in enumerate(lexical, 1):
        out[h.key] = RankedHit(h.key, weight * lexical_part(h.score, idf_total, gate),
                               h.time_us, lexical_rank=rank)
    if vector:
        top, low = vector[0].score, vector[-1].score
        for rank, h in enumerate(vector, 1):
            hit = out.get(h.key)
            if hit is None:
                hit = out[h.key] = RankedHit(h.key, 0.0, h.time_us)
            hit.score += (1 - weight) * ((h.score - low) / (top - low) if top > low else 1.0)
            hit.vector_rank = rank
            if hit.time_us is None:
                hit.time_us = h.time_us
    if share:
        _smooth(out, neighbours, share)
    return sorted(out.values(), key=lambda h: (-h.score, h.lexical_rank or FUSE_DEPTH + 1,
                                               key_order(h.key)))


def _smooth(hits: dict[str, RankedHit], neighbours: Neighbours, share: float) -> None:
    """Each hit gains `share` of the fused score (before this) of a session neighbour among
    the SPREADERS best; a neighbour not listed joins with what it gains."""
    best = sorted((h for h in hits.values() if h.score > 0), key=lambda h: -h.score)
    own = {h.key: h.score for h in best[:SPREADERS]}
    for key, pair in neighbours(list(own)).items():
        for other in pair:
            if other is None:
                continue
            hit = hits.get(other)
            if hit is None:
                hit = hits[other] = RankedHit(other, 0.0)
            hit.score += share * own[key]


def ranked(hits: list, leg: str) -> list[RankedHit]:
    """One leg's hits with their rank in it."""
    return [RankedHit(h.key, h.score, h.time_us, **{f"{leg}_rank": i})
            for i, h in enumerate(hits, 1)]


def lexical_tail(ranked: Sequence[RankedHit], more: Optional[Callable[[int, int], list]],
                 offset: int, count: int) -> list[RankedHit]:
    """ranked[offset:offset + count], continued past its end by the lexical hits below
    its first FUSE_DEPTH (`more(offset, count)` reads the lexical leg; None: the leg had
    fewer, nothing follows), skipping those the fused list already holds."""
    head = list(ranked[offset:offset + count])
    if more is None or len(head) == count:
        return head
    start, need = max(0, offset - len(ranked)), count - len(head)
    listed = {h.key for h in ranked}  # at most FUSE_DEPTH of the tail's hits are listed
    tail = [RankedHit(h.key, h.score, h.time_us, lexical_rank=FUSE_DEPTH + i)
            for i, h in enumerate(more(FUSE_DEPTH, start + need + len(listed)), 1)]
    return head + [h for h in tail if h.key not in listed][start:start + need]


def pinned_first(item: Optional[RankedHit], hits: list[RankedHit]) -> list[RankedHit]:
    """The exact item first (keeping its ranks if a leg found it), then the others;
    `item`: None when the query names nothing that passes the search's filters."""
    if item is None:
        return hits
    found = [h for h in hits if h.key == item.key]
    return (found or [item]) + [h for h in hits if h.key != item.key]


# A search's two legs read side by side: (first(), second()), perhaps on two threads
# (runtime/beside.py); the fusion only needs both lists.
Both = Callable[[Callable[[], list], Callable[[], list]], tuple[list, list]]


def inline(first: Callable[[], list], second: Callable[[], list]) -> tuple[list, list]:
    """Both legs, one after the other, on the calling thread."""
    return first(), second()


def fused_ranking(lexical: Leg, vector: Leg, idf_total: float, both: Both = inline,
                  neighbours: Neighbours = no_neighbours) -> Ranking:
    """The hybrid ranking of each leg's first FUSE_DEPTH candidates (fuse)."""
    lex, vec = both(lambda: list(lexical.hits(0, FUSE_DEPTH)),
                    lambda: list(vector.hits(0, FUSE_DEPTH)))
    return Ranking(tuple(fuse(lex, vec, idf_total, neighbours)), len(lex) >= FUSE_DEPTH)


def vector_ranking(vector: Leg) -> Ranking:
    """A vector search's ranking: the vector leg's first FUSE_DEPTH, nothing after."""
    return Ranking(tuple(ranked(list(vector.hits(0, FUSE_DEPTH)), "vector")), False)


def exact_ranking(lexical: Leg, item: Optional[RankedHit]) -> Ranking:
    """The exact path's ranking: the named item first, then the lexical leg's hits."""
    lex = list(lexical.hits(0, FUSE_DEPTH))
    return Ranking(tuple(pinned_first(item, ranked(lex, "lexical"))), len(lex) >= FUSE_DEPTH)
