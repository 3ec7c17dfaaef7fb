"""Search modes: the lexical leg, the vector leg, and both fused (the default).

- `lexical`: BM25 over the index terms (search.py), unchanged.
- `vector`: cosine similarity between the query's embedding (role "query") and each
  document's. A neighbour at or below VECTOR_MIN_SCORE is noise, not a match.
- `hybrid` (the default; a search that names no mode falls back to `lexical` while the
  vector leg is stale or not built): coverage-gated reciprocal rank fusion of the top
  FUSE_DEPTH of each leg.

Coverage-gated RRF. Plain RRF (Cormack et al., SIGIR 2009) scores a document
sum over legs of 1 / (RRF_K + rank), RRF_K = 60. For a query that shares no word with
the memory it means ("when did we decide to hold the launch" for "release 2.3 paused
until legal signs off"), BM25 still ranks documents that share "the" or "when", and RRF
trusts that noise as much as the dense leg's hits: on tests/quality it halved the
vector leg's paraphrase recall@10 (e5: 0.52 alone, 0.23 fused). So each lexical hit
first says how much of the query it holds: its BM25 score over the sum of the query
terms' idf (lexical_confidence; a document holding every query term once, at average
length, scores about that sum, so the share is an idf-weighted term coverage). A hit
below LEXICAL_FLOOR (half the query) abstains: it adds nothing to the fusion and is
listed after every hit that scores. The others, and every vector hit, add
1 / (RRF_K + rank) as in RRF. A keyword query's exact hits hold all its terms and keep
their full weight (and the dense leg mostly agrees with them); a paraphrase leaves the
ranking to the dense leg. Measured on tests/quality (hybrid_eval.py, README): hybrid
keeps the vector leg's paraphrase recall and the lexical leg's keyword MRR.
Ties are ordered by key, like the lexical leg's.

Each hit says its rank in each leg (0: not among that leg's candidates). Both legs
apply the same kind/session/time filters; every fused or vector hit then goes through
the same resolution as a lexical one (search.run_search: state, the evaluation's
visibility, the store's record), so a vector hit never bypasses those checks.

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
RRF_K = 60
LEXICAL_FLOOR = 0.5  # a lexical hit holding less of the query is noise to the fusion
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


def fuse(lexical: list, vector: list, idf_total: float = 0.0, k: int = RRF_K,
         floor: float = LEXICAL_FLOOR) -> list[RankedHit]:
    """Coverage-gated RRF of two ranked lists of hits (objects with key, score,
    time_us): a lexical hit below `floor` confidence adds nothing (it stays listed,
    after the hits that score); `idf_total`: the query terms' idf summed."""
    out: dict[str, RankedHit] = {}
    for rank, h in enumerate(lexical, 1):
        weight = 1.0 if lexical_confidence(h.score, idf_total) >= floor else 0.0
        out[h.key] = RankedHit(h.key, weight / (k + rank), h.time_us, lexical_rank=rank)
    for rank, h in enumerate(vector, 1):
        hit = out.get(h.key)
        if hit is None:
            hit = out[h.key] = RankedHit(h.key, 0.0, h.time_us)
        hit.score += 1.0 / (k + rank)
        hit.vector_rank = rank
        if hit.time_us is None:
            hit.time_us = h.time_us
    return sorted(out.values(), key=lambda h: (-h.score, key_order(h.key)))


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


def fused_ranking(lexical: Leg, vector: Leg, idf_total: float,
                  both: Both = inline) -> Ranking:
    """The hybrid ranking of each leg's first FUSE_DEPTH candidates (fuse)."""
    lex, vec = both(lambda: list(lexical.hits(0, FUSE_DEPTH)),
                    lambda: list(vector.hits(0, FUSE_DEPTH)))
    return Ranking(tuple(fuse(lex, vec, idf_total)), len(lex) >= FUSE_DEPTH)


def vector_ranking(vector: Leg) -> Ranking:
    """A vector search's ranking: the vector leg's first FUSE_DEPTH, nothing after."""
    return Ranking(tuple(ranked(list(vector.hits(0, FUSE_DEPTH)), "vector")), False)


def exact_ranking(lexical: Leg, item: Optional[RankedHit]) -> Ranking:
    """The exact path's ranking: the named item first, then the lexical leg's hits."""
    lex = list(lexical.hits(0, FUSE_DEPTH))
    return Ranking(tuple(pinned_first(item, ranked(lex, "lexical"))), len(lex) >= FUSE_DEPTH)
