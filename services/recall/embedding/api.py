"""What the recall index asks of an embedder: text in, unit-length vectors out.

An embedder is named by its identity (name, version, dimension, build). The vector leg
of an index records the identity it was built with, and a query embedded by any other
identity is refused as stale: vectors of two embedders are never compared. A pretrained
model's version covers its package version and a hash of its weights, and its build the
engine that runs them (an x86 and an arm build may round differently).

Texts are embedded in a role: "passage" (what is stored) or "query" (what is asked).
A question-to-passage model (e5) embeds the two differently; the others ignore it.

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

from .textprep import prepared


@dataclass(frozen=True)
class EmbedderIdentity:
    name: str
    version: str
    dimension: int
    build: str = ""  # the engine/platform the weights run on; "" when it cannot matter

    def label(self) -> str:
        base = f"{self.name}@{self.version}/{self.dimension}"
        return f"{base}+{self.build}" if self.build else base


PASSAGE, QUERY = "passage", "query"
ROLES = (PASSAGE, QUERY)


class Embedder(Protocol):
    identity: EmbedderIdentity

    def embed(self, texts: Sequence[str], role: str = PASSAGE) -> list[list[float]]:
        """One L2-normalized vector of `identity.dimension` floats per text, in order
        (all zeros for a text with nothing to embed); deterministic. `role`: PASSAGE
        for what is indexed, QUERY for what is searched with."""
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


class Pretrained:
    """What every pretrained embedder answers the same way: fixed weights, so a fit is
    itself and there is no state beyond the identity; texts are cleaned and bounded
    (textprep.py) and an empty one stays all zeros without the model loading. A subclass
    gives `identity`, `batch` and `_encode(texts, role)` (one batch of non-empty texts)."""
    batch = 32

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        raise NotImplementedError

    def embed(self, texts: Sequence[str], role: str = PASSAGE) -> list[list[float]]:
        return self.embed_array(texts, role=role).tolist()

    def embed_array(self, texts: Sequence[str], role: str = PASSAGE) -> np.ndarray:
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        out = np.zeros((len(texts), self.identity.dimension), dtype=np.float32)
        rows = [(i, t) for i, t in enumerate(map(prepared, texts)) if t]
        for start in range(0, len(rows), self.batch):
            part = rows[start:start + self.batch]
            out[[i for i, _ in part]] = self._encode([t for _, t in part], role)
        return out

    def fitted(self, corpus: Sequence[str]):
        return self

    def state(self) -> bytes:
        return b""

    def restore(self, state: bytes):
        if state:
            raise ValueError(f"a pretrained {type(self).__name__} has no state to restore")
        return self


def embed_texts(embedder: Embedder, texts: Sequence[str], role: str = PASSAGE) -> np.ndarray:
    """Vectors of texts as a float32 array (an embedder with embed_array gives one
    directly, without the lists)."""
    direct = getattr(embedder, "embed_array", None)
    if direct:
        return direct(texts, role=role)
    return np.asarray(embedder.embed(texts, role=role), dtype=np.float32)
