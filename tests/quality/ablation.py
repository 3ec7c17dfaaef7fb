"""What each part of hybrid recall adds on the labelled conversations (conversation_set.py):
the rows the vector leg makes (the bare text, the turn as said, version 1's two passages,
today's turn with 0.3 of the answered turn's vector: services/recall/core/passages.py)
crossed with the fusions (plain
reciprocal rank fusion, the coverage-gated RRF Morphz used before issue 53, score fusion,
score fusion with neighbour smoothing: services/recall/core/hybrid.py). Both legs are scored
in process with the server's analyzer, index adapter, embedder, passages and fusion; recall@10
of the evidence turns, any@10 and MRR, for the agent conversations and the chats apart.

    .venv/bin/python tests/quality/ablation.py
"""
from __future__ import annotations

import os
import sys
import tempfile
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conversation_set import Conversation, conversations  # noqa: E402

from morphz.services.recall.core import hybrid  # noqa: E402
from morphz.services.recall.core.passages import TYPICAL, Passages, rows, said  # noqa: E402
from morphz.services.recall.embedding.api import QUERY, embed_texts  # noqa: E402
from morphz.services.recall.embedding.default import default_embedder  # noqa: E402
from morphz.services.recall.index.tantivy_docs import Doc  # noqa: E402
from morphz.services.recall.index.tantivy_index import ContextIndex  # noqa: E402
from morphz.services.recall.index.tantivy_search import Query  # noqa: E402
from morphz.shared.text.analyze import query_terms, terms  # noqa: E402

K, DEPTH = 10, hybrid.FUSE_DEPTH


def _groups(conv: Conversation) -> list[tuple[str, ...]]:
    """The server's texts of every turn, in order (Passages.event)."""
    composer = Passages(lambda session: None, lambda key: None)
    return [composer.event(t.id, t.kind, t.session, t.actor, t.text, t.answers)[2]
            for t in conv.turns]


def variants(embedder, conv: Conversation, typical: np.ndarray) -> dict[str, np.ndarray]:
    """Each variant's row of every turn: the bare text, the turn as said, version 1 of the
    passages (2/3 of the turn as said, 1/3 of one text of the turn before it, cut to 300
    characters, and this one), and the server's (default). Each turn as said is embedded
    once: the server's groups are turns as said."""
    groups = _groups(conv)
    own = [said(t.text, t.actor) for t in conv.turns]
    vector = dict(zip(own, embed_texts(embedder, own)))
    made = np.stack([vector[t] for g in groups for t in g])
    said_rows = np.stack([vector[t] for t in own])
    before = [f"{g[1][:300]}\n{g[0]}" if len(g) == 2 else g[0] for g in groups]
    return {"bare": embed_texts(embedder, [t.text for t in conv.turns]),
            "said": said_rows,
            "version 1: said + the turn before and it as one text": (
                2 / 3 * said_rows + 1 / 3 * embed_texts(embedder, before)),
            "default: said + 0.3 of the answered turn's vector": rows(
                made, [len(g) for g in groups], typical)}


def _lexical(texts: list[str], questions: list[str]) -> list[tuple[list, float]]:
    """Each question's lexical hits (key, BM25 score) and its terms' idf summed."""
    with tempfile.TemporaryDirectory() as tmp:
        idx = ContextIndex(tmp)
        idx.apply([Doc(f"e:{i}", "event", terms(t), 0) for i, t in enumerate(texts)],
                  {"position": 0})
        searcher, _ = idx.snapshot()
        out = []
        for q in questions:
            words = query_terms(q)
            out.append((idx.search(searcher, Query(terms=words), 0, DEPTH),
                        sum(ContextIndex.idf(searcher, words))))
        return out


def _rrf(lists: list[list], gate=None, k: int = 60) -> list[str]:
    score: dict[str, float] = defaultdict(float)
    for leg, hits in enumerate(lists):
        for rank, h in enumerate(hits, 1):
            if leg == 0 and gate is not None and not gate(h):
                continue
            score[h.key] += 1.0 / (k + rank)
    return sorted(score, key=lambda key: -score[key])


def _scores(ranked: list[str], evidence: set[str]) -> tuple[float, float, float]:
    top = ranked[:K]
    first = next((i + 1 for i, k in enumerate(top) if k in evidence), None)
    return len(evidence & set(top)) / len(evidence), float(bool(first)), 1 / first if first else 0.0


def evaluate(convs: list[Conversation]) -> dict[str, dict[str, list]]:
    """{group: {"variant / fusion": [(recall@10, any@10, rr) per question]}}."""
    embedder = default_embedder()
    typical = embed_texts(embedder, list(TYPICAL)).mean(axis=0)
    out: dict = defaultdict(lambda: defaultdict(list))
    for conv in convs:
        group = "chats" if conv.is_chat else "agent"
        order = {t.id: i for i, t in enumerate(conv.turns)}
        chain = {}
        for i, t in enumerate(conv.turns):
            before = i - 1 if i and conv.turns[i - 1].session == t.session else None
            after = i + 1 if i + 1 < len(conv.turns) and conv.turns[i + 1].session == t.session \
                else None
            chain[f"e:{i}"] = tuple(None if x is None else f"e:{x}" for x in (before, after))

        def neighbours(keys, chain=chain):
            return {k: chain[k] for k in keys if k in chain}
        questions = [q.question for q in conv.questions]
        lexical = _lexical([t.text for t in conv.turns], questions)
        asked = embed_texts(embedder, questions, role=QUERY)
        for q, (lex, _) in zip(conv.questions, lexical):
            out[group]["lexical"].append(_scores([h.key for h in lex],
                                                 {f"e:{order[e]}" for e in q.evidence}))
        for variant, made in variants(embedder, conv, typical).items():
            scores = made @ asked.T  # [turns, questions]
            for qi, q in enumerate(conv.questions):
                evidence = {f"e:{order[e]}" for e in q.evidence}
                lex, idf_total = lexical[qi]
                best = np.argsort(-scores[:, qi], kind="stable")[:DEPTH]
                vec = [hybrid.RankedHit(f"e:{i}", float(scores[i, qi])) for i in best
                       if scores[i, qi] > hybrid.VECTOR_MIN_SCORE]
                ranked = {
                    "vector": [h.key for h in vec],
                    "plain RRF": _rrf([lex, vec]),
                    "gated RRF (before)": _rrf([lex, vec], gate=lambda h, idf=idf_total:
                                               hybrid.lexical_confidence(h.score, idf) >= 0.5),
                    "score fusion": [h.key for h in hybrid.fuse(lex, vec, idf_total, share=0)],
                    "score fusion + neighbours (default)": [
                        h.key for h in hybrid.fuse(lex, vec, idf_total, neighbours)]}
                for fusion, keys in ranked.items():
                    out[group][f"{variant} / {fusion}"].append(_scores(keys, evidence))
    return out


def main() -> int:
    convs = conversations()
    result = evaluate(convs)
    print("| set | passages / ranking | recall@10 | any@10 | MRR |\n| --- | --- | --- | --- | --- |")
    for group, ranked in result.items():
        for name, scores in ranked.items():
            m = np.mean(scores, axis=0)
            print(f"| {group} | {name} | {m[0]:.3f} | {m[1]:.3f} | {m[2]:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
