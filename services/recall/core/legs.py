"""A search's legs: where its ranked candidates come from. The lexical leg (BM25 or time
order over the lexical index), the vector leg (cosine over the embedded documents) and a
fixed ranking (a fused or exact first page, continued by the lexical leg) all answer the
same two questions, so the fusion (hybrid.py) and the resolution of hits (search.py)
read any of them alike (leg.Leg)."""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import numpy as np

from morphz.services.recall.core import hybrid
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.services.recall.index.tantivy_search import Query


class LexicalLeg:
    def __init__(self, idx: ContextIndex, searcher, query: Query) -> None:
        self._idx, self._searcher, self.query = idx, searcher, query

    def hits(self, offset: int, count: int) -> list:
        return self._idx.search(self._searcher, self.query, offset, count)

    def empty_reason(self) -> str:
        return "empty_index" if self.is_empty else "no_match"

    def passing(self, keys: set[str]) -> set[str]:
        """Those of `keys` that pass this search's kind/session/time filters (all of
        them where it has none)."""
        q = self.query
        if not keys or not (q.kinds or q.sessions or q.since_us is not None
                            or q.until_us is not None or q.keys):
            return keys
        return {h.key for h in self.narrowed(terms=[], keys=sorted(keys)).hits(0, len(keys))}

    def narrowed(self, **changes) -> "LexicalLeg":
        """The same leg over the same searcher, its query changed (e.g. one key)."""
        return LexicalLeg(self._idx, self._searcher, dataclasses.replace(self.query, **changes))

    @property
    def is_empty(self) -> bool:
        return self._searcher.num_docs <= 1  # (the index's meta document only)

    def idf_total(self) -> float:
        """The query terms' idf summed (the fusion's gate: hybrid.lexical_confidence)."""
        return sum(ContextIndex.idf(self._searcher, self.query.terms))


class VectorLeg:
    """`embed()`: the query's unit vector, or None when it has nothing to embed; called
    when the leg is first read (on the thread that reads it)."""

    def __init__(self, leg, embed: Callable[[], Optional[np.ndarray]], query: Query) -> None:
        self._leg, self._embed, self._query = leg, embed, query

    def hits(self, offset: int, count: int) -> list:
        if not self._leg.count:  # not begun, or not filled yet: the reply says it lags
            return []
        qvec = self._embed()
        if qvec is None:
            return []
        q = self._query
        return self._leg.search(qvec, offset + count, kinds=q.kinds, sessions=q.sessions,
                                since_us=q.since_us, until_us=q.until_us,
                                min_score=hybrid.VECTOR_MIN_SCORE)[offset:]

    def empty_reason(self) -> str:
        """empty_index: nothing embedded to compare with."""
        return "no_match" if self._leg.searchable() else "empty_index"


class RankedLeg:
    """A first page's fixed ranking, continued past its end by the rest of the lexical
    leg that made it (hybrid.lexical_tail) when that leg had more."""

    def __init__(self, ranking: hybrid.Ranking, lexical: LexicalLeg,
                 empty_reason: Callable[[], str]) -> None:
        self._ranking, self._lexical, self._empty = ranking, lexical, empty_reason

    def hits(self, offset: int, count: int) -> list:
        more = self._lexical.hits if self._ranking.lexical_continues else None
        return hybrid.lexical_tail(self._ranking.ranked, more, offset, count)

    def empty_reason(self) -> str:
        return self._empty()
