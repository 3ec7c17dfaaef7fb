"""The default embedder: latent semantic analysis learned from the context's own text.

A vector has two halves, each unit-length, weighted and joined:
- the latent half: TF-IDF over the features of features.py (CJK characters and
  bigrams, words and word prefixes) projected on the top singular vectors of a
  sample of the context's documents. Words that occur in the same documents land
  near each other, so a query can find a document it shares no word with;
- the surface half: the same TF-IDF features hashed into its dimensions (unsigned: a
  colliding word may add a little similarity but never cancels a shared one, which
  signed hashing did for short texts), so documents that share a query's rare words
  stay closest (the latent half alone
  blurs them with their topic, and would pull the fused ranking off exact matches).

Runs offline on CPU and handles any mix of scripts. A corpus too small to learn from
(MIN_DOCS) leaves the latent half zero: hashed mode, the same identity. The state
records what `restore` needs for the same vectors.
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
from .svd import truncated_svd

NAME = "morphz-lsa"
VERSION = "2"  # features, weighting, halves and projection: vectors change with any
DIMENSION = 256
LATENT_SHARE = 0.5  # of the dimensions, and of the cosine (the halves' weights)
SAMPLE_DOCS = 20_000  # documents the basis is learned from, spread over the corpus
VOCAB_FEATURES = 1 << 15  # most frequent features kept (the state's size follows)
MIN_DF = 2  # a feature seen in one sampled document teaches nothing about others
MIN_DOCS = 64  # fewer documents with features: hashed mode
# Latent dimensions learned: as many as hold ENERGY of the sample's squared norm, at
# most the latent half (keeping nearly all would only rotate TF-IDF and relate no
# words); the rest of the half stays zero.
ENERGY = 0.7
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
                 idf: np.ndarray | None = None, latent: np.ndarray | None = None) -> None:
        self.identity = EmbedderIdentity(NAME, VERSION, dimension)
        self._latent_dims = latent_dims(dimension)
        self._vocab = {f: i for i, f in enumerate(vocab)}
        # What the state keeps (float16): idf per feature, latent basis per feature.
        self._idf16, self._latent16 = idf, latent
        self._weights = self._projection()
        # chunk of normalized text -> its columns; words repeat, so most chunks are
        # looked up once. Plain dict (a lost entry is only recomputed), cleared when full.
        self._columns: dict[str, list[int]] = {}

    @property
    def learned(self) -> bool:
        return self._latent16 is not None

    def _projection(self) -> np.ndarray:
        """Feature columns x dimensions: a vocabulary feature's row holds its latent
        basis and its idf at its surface bucket; the last `surface` rows take the
        features out of the vocabulary (rare ones: the largest idf) by bucket."""
        dim, lat = self.identity.dimension, self._latent_dims
        surface = dim - lat
        n = len(self._vocab)
        w = np.zeros((n + surface, dim), dtype=np.float32)
        rare = 1.0
        if self.learned:
            idf = self._idf16.astype(np.float32)
            w[:n, :lat] = self._latent16.astype(np.float32)
            buckets = np.array([_hashed_column(f, surface) for f in self._vocab], dtype=np.int64)
            w[np.arange(n), lat + buckets] = idf
            rare = float(idf.max())
        w[n:, lat:] = rare * np.eye(surface, dtype=np.float32)
        return w

    # -- embedding

    def embed(self, texts: Sequence[str], role: str = "passage") -> list[list[float]]:
        return self.embed_array(texts).tolist()  # one space for queries and passages

    def embed_array(self, texts: Sequence[str], role: str = "passage") -> np.ndarray:
        """`embed` as a float32 array (len(texts) x dimension), without the lists."""
        out = np.zeros((len(texts), self.identity.dimension), dtype=np.float32)
        for start in range(0, len(texts), BATCH):
            block = texts[start:start + BATCH]
            out[start:start + len(block)] = self._project(block)
        lat = self._latent_dims
        _unit_rows(out[:, :lat])
        _unit_rows(out[:, lat:])
        out[:, :lat] *= np.float32(np.sqrt(LATENT_SHARE))
        out[:, lat:] *= np.float32(np.sqrt(1.0 - LATENT_SHARE))
        return _unit_rows(out)  # one half may be zero (hashed mode, unknown words)

    def _project(self, texts: Sequence[str]) -> np.ndarray:
        columns = self._columns
        miss = self._chunk_columns
        indptr, cols = [0], []
        get, extend, end = columns.get, cols.extend, indptr.append
        for text in texts:
            for chunk in normalize(text).split():
                found = get(chunk)
                extend(miss(chunk) if found is None else found)
            end(len(cols))
        x = csr_matrix((np.ones(len(cols), dtype=np.float32), np.asarray(cols, dtype=np.int32),
                        np.asarray(indptr, dtype=np.int64)),
                       shape=(len(texts), self._weights.shape[0]))
        x.sum_duplicates()
        x.data = 1.0 + np.log(x.data)  # sublinear term frequency
        return x @ self._weights

    def _chunk_columns(self, chunk: str) -> list[int]:
        vocab = self._vocab
        out_of_vocab = len(vocab)
        surface = self.identity.dimension - self._latent_dims
        cols = [i if (i := vocab.get(f)) is not None
                else out_of_vocab + _hashed_column(f, surface)
                for f in chunk_features(chunk)]
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
        lat = latent_dims(dim)
        # One BLAS thread: a pool of spinning threads on a busy machine is many times
        # slower than one, and the service has other work on its cores.
        with threadpool_limits(1, user_api="blas"):
            sigma, v = truncated_svd(x, min(lat, min(x.shape) - 1))
        k = latent_rank(sigma, x.shape[0])
        latent = np.zeros((len(kept), lat))
        latent[:, :k] = idf[:, None] * v[:, :k]
        # Scaled to fill float16's range: the scale cancels when the half is normalized.
        latent /= max(float(np.abs(latent).max()), 1e-30)
        return LsaEmbedder(dim, vocab=kept, idf=idf.astype(np.float16),
                           latent=latent.astype(np.float16))

    # -- state

    def state(self) -> bytes:
        dim = self.identity.dimension
        if not self.learned:
            return _HEADER.pack(_MAGIC, _STATE_VERSION, _HASHED, dim, 0)
        head = _HEADER.pack(_MAGIC, _STATE_VERSION, _LSA, dim, len(self._vocab))
        # Features never hold "\n" (they are runs of word characters).
        body = ("\n".join(self._vocab).encode() + b"\n" + self._idf16.astype("<f2").tobytes()
                + self._latent16.astype("<f2").tobytes())
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
        try:
            body = zlib.decompress(state[_HEADER.size:])
        except zlib.error as e:
            raise ValueError("LSA embedder state is damaged") from e
        lat = latent_dims(dim)
        numbers = n * (1 + lat) * 2
        names = body[:len(body) - numbers - 1].decode().split("\n")
        if len(names) != n or body[len(body) - numbers - 1:][:1] != b"\n":
            raise ValueError("LSA embedder state is damaged")
        floats = np.frombuffer(body[len(body) - numbers:], dtype="<f2").astype(np.float16)
        return LsaEmbedder(dim, vocab=names, idf=floats[:n],
                           latent=floats[n:].reshape(n, lat))


def latent_dims(dimension: int) -> int:
    return int(dimension * LATENT_SHARE)


def latent_rank(sigma: np.ndarray, rows: int) -> int:
    """Singular values kept: rows are unit vectors, so the total energy is `rows`."""
    reached = np.cumsum(sigma.astype(np.float64) ** 2) >= ENERGY * rows
    return int(reached.argmax()) + 1 if reached.any() else len(sigma)


def _hashed_column(feature: str, buckets: int) -> int:
    """A bucket in [0, buckets)."""
    return zlib.crc32(feature.encode()) % buckets


def _unit_rows(a: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    np.divide(a, norms, out=a, where=norms > 0)
    return a


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
