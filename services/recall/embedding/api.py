"""What the recall index asks of an embedder: text in, unit-length vectors out.

An embedder is named by its identity (name, version, dimension). The vector leg of an
index records the identity it was built with, and a query embedded by any other
identity is refused as stale: vectors of two embedders are never compared.

Some embedders are pretrained (fixed weights); others learn from the context's own
text (for example LSA over character n-grams). Both look the same to the index: it
asks for `fitted(corpus)` when it (re)builds a context's vector leg, keeps `state()`
beside the vectors, and `restore(state)` on restart, so the same text gives the same
vector for as long as that leg lives. A pretrained embedder returns itself and b"".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np


@dataclass(frozen=True)
class EmbedderIdentity:
    name: str
    version: str
    dimension: int

    def label(self) -> str:
        return f"{self.name}@{self.version}/{self.dimension}"


class Embedder(Protocol):
    identity: EmbedderIdentity

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalized vector of `identity.dimension` floats per text, in order
        (all zeros for a text with nothing to embed); deterministic."""
        ...

    def fitted(self, corpus: Sequence[str]) -> "Embedder":
        """An embedder for this corpus, with the same identity: itself when pretrained;
        deterministic (the same corpus gives the same embedder)."""
        ...

    def state(self) -> bytes:
        """What `restore` needs to give the same vectors again (b"" when pretrained)."""
        ...

    def restore(self, state: bytes) -> "Embedder":
        ...


def embed_texts(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Vectors of texts as a float32 array (an embedder with embed_array gives one
    directly, without the lists)."""
    direct = getattr(embedder, "embed_array", None)
    return direct(texts) if direct else np.asarray(embedder.embed(texts), dtype=np.float32)
