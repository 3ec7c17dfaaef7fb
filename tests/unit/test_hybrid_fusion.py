"""The hybrid fusion (services/recall/core/hybrid.py) on hand-made legs: HYB-05 (the vector
leg's paraphrase hit and the lexical leg's exact hit both kept on top) and HYB-07 (a hit
both legs find partly beats either leg's own best; a turn's session neighbours gain a share
of its score and join the list)."""
from __future__ import annotations

from morphz.services.recall.core.hybrid import (LEXICAL_GATE, LEXICAL_WEIGHT, NEIGHBOUR_SHARE,
                                                RankedHit, filtered, fuse, lexical_part)

IDF_TOTAL = 10.0  # the query terms' idf summed: a hit scoring 10 holds the whole query


def keys(hits) -> list[str]:
    return [h.key for h in hits]


def test_hyb_05_the_vector_legs_paraphrase_hit_stays_first_over_lexical_noise():
    # BM25's hits hold a tenth of the query ("the", "when"): under the gate, they add nothing.
    noise = [RankedHit(f"e:{i}", 1.0) for i in range(1, 6)]
    dense = [RankedHit("e:99", 0.90)] + [RankedHit(f"e:{i}", 0.80) for i in range(50, 60)]
    fused = fuse(noise, dense, IDF_TOTAL)
    assert fused[0].key == "e:99" and (fused[0].lexical_rank, fused[0].vector_rank) == (0, 1)
    assert lexical_part(1.0, IDF_TOTAL) == 0.0
    # the noise is still listed, after every hit that scores, in the lexical leg's order
    scoring = [h.key for h in fused if h.score > 0]
    assert keys(fused)[:len(scoring)] == scoring
    assert [k for k in keys(fused)[len(scoring):] if k in {h.key for h in noise}] == \
        [f"e:{i}" for i in range(1, 6)]
    # min-max scaled BM25 (no gate, scaled to the best hit) would have let the noise win
    scaled = fuse([RankedHit(h.key, 10.0) for h in noise], dense, IDF_TOTAL)
    assert scaled[0].key != "e:99"


def test_hyb_05_an_exact_lexical_match_stays_first_though_the_vector_leg_ranks_it_low():
    exact = [RankedHit("e:7", 12.0)] + [RankedHit(f"e:{i}", 1.0) for i in range(1, 6)]
    dense = [RankedHit(f"e:{i}", 0.9 - i / 100) for i in range(50, 60)] + [RankedHit("e:7", 0.5)]
    fused = fuse(exact, dense, IDF_TOTAL)
    assert fused[0].key == "e:7" and (fused[0].lexical_rank, fused[0].vector_rank) == (1, 11)


def test_hyb_07_a_partial_match_both_legs_find_beats_each_legs_own_best():
    # The evidence holds half the query's words (lexical rank 2) and is the vector leg's
    # third: fused, it comes first; the lexical leg's best holds more words but no
    # meaning, the vector leg's best shares no word.
    lexical = [RankedHit("e:1", 6.0), RankedHit("e:2", 5.0), RankedHit("e:3", 1.0)]
    dense = [RankedHit("e:9", 0.88), RankedHit("e:8", 0.87), RankedHit("e:2", 0.86),
             RankedHit("e:4", 0.70)]
    fused = fuse(lexical, dense, IDF_TOTAL, share=0)
    assert fused[0].key == "e:2"
    expected = LEXICAL_WEIGHT * (0.5 - LEXICAL_GATE) / (1 - LEXICAL_GATE) + \
        (1 - LEXICAL_WEIGHT) * (0.86 - 0.70) / (0.88 - 0.70)
    assert abs(fused[0].score - expected) < 1e-9


def test_hyb_07_a_turns_session_neighbours_gain_a_share_of_its_score_and_join_the_list():
    dense = [RankedHit("e:10", 0.9), RankedHit("e:30", 0.8), RankedHit("e:40", 0.7)]
    chain = {"e:10": ("e:9", "e:11"), "e:30": (None, "e:31"), "e:40": ("e:31", None)}
    asked: list[list[str]] = []

    def neighbours(ks):
        asked.append(sorted(ks))
        return {k: chain[k] for k in ks if k in chain}
    fused = {h.key: h for h in fuse([], dense, IDF_TOTAL, neighbours)}
    half = 1 - LEXICAL_WEIGHT
    assert asked == [["e:10", "e:30"]]  # e:40 scores 0 (the vector leg's last): no share
    assert fused["e:9"].score == fused["e:11"].score == NEIGHBOUR_SHARE * half
    assert (fused["e:9"].lexical_rank, fused["e:9"].vector_rank) == (0, 0)
    assert abs(fused["e:31"].score - NEIGHBOUR_SHARE * half * 0.5) < 1e-9
    assert abs(fused["e:30"].score - half * 0.5) < 1e-9  # its neighbour e:31 scored nothing
    assert keys(fuse([], dense, IDF_TOTAL, neighbours))[:2] == ["e:10", "e:30"]


def test_hyb_07_a_neighbour_outside_the_searchs_filters_does_not_join():
    """A time range, kinds or sessions bound every hit, a neighbour brought in by
    smoothing too (recall-11: a search of one hour listed the turn after it)."""
    dense = [RankedHit("e:10", 0.9), RankedHit("e:20", 0.1)]
    chain = {"e:10": ("e:9", "e:11")}
    inside = filtered(lambda ks: {k: chain[k] for k in ks if k in chain},
                      lambda ks: ks & {"e:11"})  # e:9 is outside the search's window
    fused = keys(fuse([], dense, IDF_TOTAL, inside))
    assert "e:11" in fused and "e:9" not in fused
