"""Deterministic truncated SVD of a sparse matrix (randomized range finder with power
iterations, Halko, Martinsson and Tropp 2011), seeded so the same matrix always
gives the same basis."""
from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix

SEED = 15
OVERSAMPLE = 16
POWER_ITERATIONS = 2


def right_singular_vectors(x: csr_matrix, k: int) -> np.ndarray:
    """The top `k` right singular vectors of `x`, as columns (cols(x) x k, float64).

    Each vector's sign is fixed (its largest entry is positive): singular vectors are
    only defined up to sign."""
    rng = np.random.default_rng(SEED)
    width = min(k + OVERSAMPLE, min(x.shape))
    x = x.astype(np.float32)
    xt = x.T.tocsr()
    q, _ = np.linalg.qr(x @ rng.standard_normal((x.shape[1], width)))
    for _ in range(POWER_ITERATIONS):
        q, _ = np.linalg.qr(xt @ q)
        q, _ = np.linalg.qr(x @ q)
    b = (xt @ q).T  # width x cols
    _, _, vt = np.linalg.svd(b, full_matrices=False)
    v = vt[:k].T
    signs = np.sign(v[np.abs(v).argmax(axis=0), np.arange(v.shape[1])])
    signs[signs == 0] = 1.0
    return v * signs
