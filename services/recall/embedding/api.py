"""What the recall index asks of an embedder: text in, unit-length vectors out.

An embedder is named by its identity (name, version, dimension). The vector leg of an
index records the identity it was built with, and a query embedded by any other
identity is refused as stale: vectors of two embedders are never compared.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence


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
        """One L2-normalized vector of `identity.dimension` floats per text, in order;
        the same text always gives the same vector (rebuilds must be reproducible)."""
        ...
