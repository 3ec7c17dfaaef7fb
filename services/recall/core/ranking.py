"""Which legs answer a search, and a vector or hybrid search's ranking (hybrid.py fuses
it), read from the one view and index snapshot the search reads (searching.py).

A leg another embedder built, or built from older texts, answers nothing: a search that
named no mode is left to the lexical leg, one that asked for vector or hybrid is refused
(RECALL_INDEX_STALE) until the index is rebuilt."""
from __future__ import annotations

from typing import Callable

import numpy as np

from morphz.services.recall.core import hybrid
from morphz.services.recall.core.legs import LexicalLeg, VectorLeg
from morphz.services.recall.core.ports import Indexes
from morphz.services.recall.core.request import SearchRequest
from morphz.services.recall.embedding.api import QUERY, embed_texts
from morphz.services.recall.index.tantivy_index import ContextIndex
from morphz.shared.errors import MorphzError
from morphz.shared.mind.view import MindView


class Rankings:
    def __init__(self, indexer: Indexes, both: hybrid.Both) -> None:
        """`both`: runs a hybrid search's lexical leg beside its vector leg."""
        self._indexer = indexer
        self._both = both

    def vectors_answer(self, idx: ContextIndex) -> bool:
        """Whether the default mode may use the vector leg: built by this embedder (a
        stale or missing leg leaves a search that named no mode to the lexical leg;
        one that asked for vector or hybrid is refused, RECALL_INDEX_STALE)."""
        return self._indexer.leg_current(idx.vectors)

    def vectors_wanted(self, context: str, asked: str) -> bool:
        """Whether a search of this mode reads the vector leg and the leg can follow (one
        another embedder built never does: such a search is refused or lexical)."""
        leg = self._indexer.index(context).vectors
        current = self._indexer.leg_current(leg)
        return current or (bool(asked) and not leg.exists)

    def ranking(self, m: MindView, req: SearchRequest, idx: ContextIndex,
                lexical: LexicalLeg) -> tuple[hybrid.Ranking, Callable[[], str]]:
        """A vector or hybrid search's ranking, and why it would find nothing."""
        exact, key = hybrid.exact_target(m, req.query)
        if exact:
            # The named item only if it passes the same kind/session/time filters.
            item = lexical.narrowed(terms=[], keys=[key]).hits(0, 1) if key is not None \
                else []
            return hybrid.exact_ranking(lexical, hybrid.RankedHit(
                item[0].key, 0.0, item[0].time_us) if item else None), lexical.empty_reason
        vectors = idx.vectors
        if not vectors.exists and lexical.is_empty:  # nothing indexed yet, by any embedder
            return hybrid.Ranking((), False), lambda: "empty_index"
        if vectors.exists and not self._indexer.leg_current(vectors):
            raise self._stale(req.context, vectors.meta)
        vector = VectorLeg(vectors, lambda: _query_vector(
            self._indexer.leg_embedder(req.context, vectors), req.query), lexical.query)
        if req.mode == "vector":
            return hybrid.vector_ranking(vector), vector.empty_reason
        ranking = hybrid.fused_ranking(lexical, vector, lexical.idf_total(), self._both,
                                       hybrid.filtered(vectors.neighbours, lexical.passing))
        # empty_index: nothing embedded to compare with and the lexical leg empty too
        return ranking, lambda: "no_match" if "no_match" in (
            vector.empty_reason(), lexical.empty_reason()) else "empty_index"

    def _stale(self, context: str, meta: dict) -> MorphzError:
        """The refusal of a leg this server cannot read: who built it, or from what."""
        label = self._indexer.embedder.identity.label()
        built = meta.get("embedder")
        how = (f"by {built}, not by this server's embedder {label}" if built != label else
               "from the texts of an older version (passages "
               f"{meta.get('passage_version', 0)}, text {meta.get('text_version', 0)})")
        return MorphzError(
            "RECALL_INDEX_STALE",
            f"the vector leg of {context}'s recall index was built {how}; run "
            f"`morphz context recall-index rebuild {context}` (lexical search still "
            "works)", context=context, built_by=built, embedder=label)


def _query_vector(embedder, query: str):
    """The query's unit vector, or None when it has nothing to embed (all zeros)."""
    v = embed_texts(embedder, [query], role=QUERY)[0]
    return v if np.any(v) else None
