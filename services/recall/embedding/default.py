"""The embedder a recall index uses unless told otherwise."""
from __future__ import annotations

from .lsa import LsaEmbedder


def default_embedder() -> LsaEmbedder:
    """LSA learned from the context's own text (lsa.py): offline, CPU, any script;
    unfitted until the index calls `fitted(corpus)`."""
    return LsaEmbedder()
