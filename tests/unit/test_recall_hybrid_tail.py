"""Hybrid, the default mode, pages past its fused list into the rest of the lexical leg
(hybrid.lexical_tail): a default search paged to its end finds every lexical match."""
from __future__ import annotations

from morphz.services.recall.core.hybrid import FUSE_DEPTH, RankedHit, fuse, lexical_tail


def _lexical(n: int) -> list[RankedHit]:
    return [RankedHit(f"e:{i:04d}", 100.0 - i * 0.01) for i in range(n)]


def test_hyb_01_hybrid_pages_past_the_fused_list_through_the_rest_of_the_lexical_leg():
    every = _lexical(250)
    # The vector leg found one hit of the lexical leg's tail and one of its own.
    vector = [RankedHit("e:0200", 0.9), RankedHit("v:1", 0.8)]
    ranked = fuse(every[:FUSE_DEPTH], vector, idf_total=1.0)

    def more(offset: int, count: int) -> list:
        return every[offset:offset + count]

    pages, offset = [], 0
    while page := lexical_tail(ranked, more, offset, 30):
        pages += page
        offset += len(page)
    keys = [h.key for h in pages]
    assert len(keys) == len(set(keys)) == 251  # each once: 250 lexical, 1 vector only
    assert set(keys) == {h.key for h in every} | {"v:1"}
    tail = [h for h in pages if h.lexical_rank > FUSE_DEPTH]
    assert tail[0].lexical_rank == FUSE_DEPTH + 1 and "e:0200" not in {h.key for h in tail}
    # A leg with fewer than FUSE_DEPTH hits has no tail.
    assert lexical_tail(ranked, None, len(ranked), 10) == []
