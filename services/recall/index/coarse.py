"""A coarse partition of a large vector leg (an inverted file, IVF): the rows are
grouped around NLIST centroids, and a query scores only the rows of the NPROBE
centroids nearest to it. Built from the vectors alone (never persisted: rebuilt when
the leg is loaded or has doubled), deterministic for the same vectors: spherical
k-means from evenly spaced starting rows, a fixed number of rounds.

Why not a library's index (measured on the 1M LSA vectors of `scripts/bench recall`,
256 dimensions, one BLAS thread, 2026-12-01): hnswlib (M 16, ef_construction 100)
added about 100k vectors per 37 s on both cores, several times the whole rebuild
budget for a million; faiss's IndexIVFFlat with the same 256 lists and 8 probes built
in 3.4 s and answered in 3.0 ms at recall@100 0.693 against exact search, this one
in 2.6 s and 3.7 ms at 0.694: the same structure, for a dependency and a second copy
of the vectors. The price is approximation: a neighbour filed under a centroid that
is not probed is missed (the exact search below IVF_MIN rows is what tests compare
with).
"""
from __future__ import annotations

import numpy as np

NLIST = 256
NPROBE = 8
ROUNDS = 8
SAMPLE = 20000
CHUNK = 65536


class Partition:
    """NLIST centroids, and where each one's rows lie once the leg has laid them out
    list after list (`order`): list i is positions bounds[i]..bounds[i + 1] - 1, so a
    probe scores contiguous slices of the matrix instead of gathering rows."""

    def __init__(self, centroids: np.ndarray, bounds: np.ndarray) -> None:
        self.centroids = centroids
        self.bounds = bounds

    @property
    def size(self) -> int:
        return int(self.bounds[-1])

    @staticmethod
    def build(matrix: np.ndarray, rows: np.ndarray) -> tuple["Partition", np.ndarray]:
        """A partition of `rows` (indexes into `matrix`, unit vectors), and those rows in
        list order (the order the leg lays them out in)."""
        step = max(1, len(rows) // SAMPLE)
        sample = matrix[rows[::step]]
        k = min(NLIST, len(sample))
        centroids = sample[np.linspace(0, len(sample) - 1, k).astype(np.int64)].copy()
        for _ in range(ROUNDS):
            owner = np.argmax(sample @ centroids.T, axis=1)
            sums = np.zeros_like(centroids)
            np.add.at(sums, owner, sample)
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            moved = norms[:, 0] > 0  # an empty cluster keeps its centroid
            centroids[moved] = sums[moved] / norms[moved]
        owner = np.concatenate([np.argmax(matrix[rows[i:i + CHUNK]] @ centroids.T, axis=1)
                                for i in range(0, len(rows), CHUNK)]) if len(rows) else \
            np.zeros(0, dtype=np.int64)
        order = np.argsort(owner, kind="stable")
        bounds = np.searchsorted(owner[order], np.arange(k + 1))
        return Partition(centroids, bounds), rows[order]

    def probe(self, query: np.ndarray, nprobe: int = NPROBE) -> list[tuple[int, int]]:
        """The position ranges of the `nprobe` lists whose centroids are nearest the
        query, in position order."""
        near = self.centroids @ query
        probe = np.sort(np.argsort(-near, kind="stable")[:nprobe])
        return [(int(self.bounds[i]), int(self.bounds[i + 1])) for i in probe]
