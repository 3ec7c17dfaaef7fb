"""The default embedder: latent semantic analysis learned from the context's own text.

TF-IDF over the surface features of features.py (CJK characters and bigrams, words
and word prefixes), projected on the top singular vectors of a sample of the
context's documents: words that occur in the same documents land near each other,
so a query can find a document it shares no word with. Runs offline on CPU and
handles any mix of scripts.

Two modes, one identity: a corpus too small to learn from (MIN_DOCS) gives the
hashed mode, the features hashed with signs straight into the vector's dimensions
(vectors then match on shared surface features only). Either way the state records
what `restore` needs for the same vectors.
"""
from __future__ import annotations

import struct
import zlib
from collections import Counter
from typing import Sequence

import numpy as np
from scipy.sparse import csr_matrix
from threadpoolctl import threadpool_limits

from morphz.shared.text.analyze import normalize

from .api import EmbedderIdentity
from .features import chunk_features, counts
from .svd import right_singular_vectors

NAME = "morphz-lsa"
VERSION = "1"  # features, weighting and projection: vectors change when any does
DIMENSION = 256
SAMPLE_DOCS = 20_000  # documents the basis is learned from, spread over the corpus
VOCAB_FEATURES = 1 << 15  # most frequent features kept (the state's size follows)
MIN_DF = 2  # a feature seen in one sampled document teaches nothing about others
MIN_DOCS = 64  # fewer documents with features: hashed mode
# Dimensions learned: a fraction of the sample's rank (keeping nearly all of it would
# only rotate TF-IDF, and relate no words); the rest of the vector stays zero.
RANK_DIVISOR = 8
MIN_RANK = 8
BATCH = 4096
CACHE_CHUNKS = 1 << 18
CACHE_CHUNK_CHARS = 32  # longer chunks (CJK runs, URLs) rarely repeat

_MAGIC = b"MZLSA"
_STATE_VERSION = 1
_HEADER = struct.Struct("<5sBBII")  # magic, state version, mode, dimension, features
_HASHED, _LSA = 0, 1


class LsaEmbedder:
    """Unfitted, it is in hashed mode; `fitted(corpus)` learns the basis."""

    def __init__(self, dimension: int = DIMENSION, *, vocab: Sequence[str] = (),
                 weights: np.ndarray | None = None) -> None:
        self.identity = EmbedderIdentity(NAME, VERSION, dimension)
        self._vocab = {f: i for i, f in enumerate(vocab)}
        self._weights16 = weights  # float16, len(vocab) x dimension; None: hashed mode
        if weights is None:
            # Hashed mode as a projection too: column h (+ dimension when h's sign bit
            # is clear) of the hashed features maps to +1 (-1) on dimension h.
            eye = np.eye(dimension, dtype=np.float32)
            self._weights = np.vstack([eye, -eye])
        else:
            self._weights = weights.astype(np.float32)
        # chunk of normalized text -> its feature columns; words repeat, so most
        # chunks are looked up once. Plain dict (a lost entry is only recomputed),
        # cleared when full.
        self._columns: dict[str, list[int]] = {}

    @property
    def learned(self) -> bool:
        return self._weights16 is not None

    # -- embedding

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist()

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """`embed` as a float32 array (len(texts) x dimension), without the lists."""
        out = np.zeros((len(texts), self.identity.dimension), dtype=np.float32)
        for start in range(0, len(texts), BATCH):
            block = texts[start:start + BATCH]
            out[start:start + len(block)] = self._project(block)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def _project(self, texts: Sequence[str]) -> np.ndarray:
        columns = self._columns
        miss = self._chunk_columns
        indptr, cols = [0], []
        for text in texts:
            for chunk in normalize(text).split():
                found = columns.get(chunk)
                cols.extend(miss(chunk) if found is None else found)
            indptr.append(len(cols))
        x = csr_matrix((np.ones(len(cols), dtype=np.float32), np.asarray(cols, dtype=np.int32),
                        np.asarray(indptr, dtype=np.int64)),
                       shape=(len(texts), self._weights.shape[0]))
        x.sum_duplicates()
        x.data = 1.0 + np.log(x.data)  # sublinear term frequency
        return x @ self._weights

    def _chunk_columns(self, chunk: str) -> list[int]:
        feats = chunk_features(chunk)
        if self.learned:
            vocab = self._vocab
            cols = [i for f in feats if (i := vocab.get(f)) is not None]
        else:
            dim = self.identity.dimension
            cols = [_hashed_column(f, dim) for f in feats]
        if len(chunk) <= CACHE_CHUNK_CHARS:
            if len(self._columns) >= CACHE_CHUNKS:
                self._columns.clear()
            self._columns[chunk] = cols
        return cols

    # -- learning

    def fitted(self, corpus: Sequence[str]) -> "LsaEmbedder":
        """Learns from at most SAMPLE_DOCS documents, evenly spaced over `corpus`
        (read by index, so a lazy sequence over a large context is fine)."""
        dim = self.identity.dimension
        n = len(corpus)
        take = min(n, SAMPLE_DOCS)
        docs = [c for c in (counts(corpus[i * n // take]) for i in range(take)) if c]
        if len(docs) < MIN_DOCS:
            return LsaEmbedder(dim)
        df: Counter[str] = Counter()
        for c in docs:
            df.update(c.keys())
        kept = [f for f, k in df.items() if k >= MIN_DF]
        kept.sort(key=lambda f: (-df[f], f))
        kept = kept[:VOCAB_FEATURES]
        if len(kept) < MIN_DOCS:
            return LsaEmbedder(dim)
        vocab = {f: i for i, f in enumerate(kept)}
        idf = np.log((1.0 + len(docs)) / (1.0 + np.array([df[f] for f in kept]))) + 1.0
        x = _tfidf(docs, vocab, idf)
        k = latent_rank(dim, *x.shape)
        weights = np.zeros((len(kept), dim))
        # One BLAS thread: a pool of spinning threads on a busy machine is many times
        # slower than one, and the service has other work on its cores.
        with threadpool_limits(1, user_api="blas"):
            weights[:, :k] = idf[:, None] * right_singular_vectors(x, k)
        # Scaled to fill float16's range: the scale cancels in the final normalization.
        weights /= max(float(np.abs(weights).max()), 1e-30)
        return LsaEmbedder(dim, vocab=kept, weights=weights.astype(np.float16))

    # -- state

    def state(self) -> bytes:
        if not self.learned:
            return _HEADER.pack(_MAGIC, _STATE_VERSION, _HASHED, self.identity.dimension, 0)
        head = _HEADER.pack(_MAGIC, _STATE_VERSION, _LSA, self.identity.dimension,
                            len(self._vocab))
        # Features never hold "\n" (they are runs of word characters).
        body = "\n".join(self._vocab).encode() + b"\n" + self._weights16.astype("<f2").tobytes()
        return head + zlib.compress(body, 6)

    def restore(self, state: bytes) -> "LsaEmbedder":
        if len(state) < _HEADER.size:
            raise ValueError("not an LSA embedder state")
        magic, version, mode, dim, n = _HEADER.unpack_from(state)
        if magic != _MAGIC or version != _STATE_VERSION or mode not in (_HASHED, _LSA):
            raise ValueError("not an LSA embedder state of this version")
        if dim != self.identity.dimension:
            raise ValueError(f"state has dimension {dim}, embedder {self.identity.dimension}")
        if mode == _HASHED:
            return LsaEmbedder(dim)
        body = zlib.decompress(state[_HEADER.size:])
        weights_bytes = n * dim * 2
        names = body[:len(body) - weights_bytes - 1].decode().split("\n")
        weights = np.frombuffer(body[len(body) - weights_bytes:], dtype="<f2")
        if len(names) != n or body[len(body) - weights_bytes - 1:][:1] != b"\n":
            raise ValueError("LSA embedder state is damaged")
        return LsaEmbedder(dim, vocab=names, weights=weights.reshape(n, dim).astype(np.float16))


def latent_rank(dim: int, docs: int, features: int) -> int:
    return min(dim, max(MIN_RANK, min(docs, features) // RANK_DIVISOR), min(docs, features) - 1)


def _hashed_column(feature: str, dim: int) -> int:
    h = zlib.crc32(feature.encode())
    return h % dim + (0 if h & 0x80000000 else dim)


def _tfidf(docs: list[Counter[str]], vocab: dict[str, int], idf: np.ndarray) -> csr_matrix:
    """Rows of sublinear tf x idf, L2-normalized (long documents do not dominate)."""
    indptr, indices, tfs = [0], [], []
    for c in docs:
        for f, k in c.items():
            i = vocab.get(f)
            if i is not None:
                indices.append(i)
                tfs.append(k)
        indptr.append(len(indices))
    idx = np.asarray(indices, dtype=np.int32)
    data = (1.0 + np.log(np.asarray(tfs, dtype=np.float64))) * idf[idx]
    x = csr_matrix((data, idx, indptr), shape=(len(docs), len(vocab)))
    norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return csr_matrix(x.multiply(1.0 / norms[:, None]))
