"""The hashing embedder: a small deterministic fallback that needs no training and no
model file (`morphz serve --embedder hashing`).

A text's features are its index terms (shared/text/analyze.py, the lexical leg's own
analysis) and the character trigrams of each term padded with a space at both ends
(so "paused" and "pause" share most of their features, and CJK text gets character
features without a dictionary). Each feature is hashed into one of `dimension`
buckets with a sign taken from another bit of the same hash (signed feature hashing:
collisions cancel out on average instead of piling up), counts are damped by log1p,
and the vector is L2-normalized. Nothing is learned, so `fitted` returns the embedder
itself and its state is empty.

It captures spelling and shared word pieces, not meaning: "hold the launch" is close
to "launch on hold" but not to "release paused". Hashing is a 64-bit multiply-xorshift
mix over code points in numpy, batched over all texts of a call: identical on every
platform and in every process (Python's own hash() is salted per process).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from morphz.services.recall.embedding.api import EmbedderIdentity
from morphz.services.recall.embedding.textprep import clean
from morphz.shared.text.analyze import terms_text

NAME, VERSION = "hashing", "1"
DEFAULT_DIMENSION = 256
_M1, _M2, _M3 = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F),
                 np.uint64(0x165667B19E3779F9))
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_TERM_SALT = np.uint64(0x27D4EB2F165667C5)
_SEP = 0  # between texts of a batch: no trigram spans two texts


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: every input bit moves about half the output bits."""
    h = h ^ (h >> np.uint64(30))
    h = h * _MIX1
    h = h ^ (h >> np.uint64(27))
    h = h * _MIX2
    return h ^ (h >> np.uint64(31))


class HashingEmbedder:
    def __init__(self, dimension: int = DEFAULT_DIMENSION) -> None:
        if not 16 <= dimension <= 4096:
            raise ValueError(f"dimension must be 16..4096, got {dimension}")
        self.identity = EmbedderIdentity(NAME, VERSION, dimension)

    def embed(self, texts: Sequence[str], role: str = "passage") -> list[list[float]]:
        return self.embed_array(texts).tolist()  # one space for queries and passages

    def embed_array(self, texts: Sequence[str], role: str = "passage") -> np.ndarray:
        """embed() as a float32 array of shape (len(texts), dimension)."""
        dim = self.identity.dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        if not texts:
            return out
        # All texts as one code point array: " t1 t2 " NUL " t3 " NUL ...
        # (Cleaned first: a NUL inside a text would split it, a lone surrogate cannot
        # be encoded.)
        joined = "\0".join(f" {terms_text(clean(t))} " for t in texts) + "\0"
        cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        owner = np.cumsum(cps == _SEP) - (cps == _SEP)  # index of the text of each position
        # Trigrams: none across texts, none with a space in the middle (across terms).
        c0, c1, c2 = cps[:-2], cps[1:-1], cps[2:]
        keep = (c0 != _SEP) & (c1 != _SEP) & (c2 != _SEP) & (c1 != 32)
        grams = _mix((c0 * _M1) ^ (c1 * _M2) ^ (c2 * _M3))[keep]
        rows = [owner[:-2][keep]]
        hashes = [grams]
        # Whole terms: a rolling hash of each term's code points, read at its end.
        words, word_rows = self._term_hashes(cps, owner)
        rows.append(word_rows)
        hashes.append(words)
        h = np.concatenate(hashes)
        r = np.concatenate(rows).astype(np.int64)
        bucket = (h % np.uint64(dim)).astype(np.int64)
        sign = np.where((h >> np.uint64(63)) == 1, -1.0, 1.0)
        counts = np.bincount(r * dim + bucket, weights=sign, minlength=len(texts) * dim)
        out[:] = (np.sign(counts) * np.log1p(np.abs(counts))).reshape(len(texts), dim)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    @staticmethod
    def _term_hashes(cps: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One hash per term (a run of code points between spaces/separators)."""
        boundary = (cps == 32) | (cps == _SEP)
        starts = np.flatnonzero(~boundary & np.concatenate(([True], boundary[:-1])))
        if not len(starts):
            return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
        # Position-weighted sum of mixed code points within each term: order-sensitive.
        marker = np.zeros(len(cps), dtype=np.int64)
        marker[starts] = 1
        term_start = starts[np.maximum(np.cumsum(marker) - 1, 0)]
        offset = (np.arange(len(cps)) - term_start).astype(np.uint64)
        # Boundaries count 0 (they may sit before the first term: offset is junk there).
        parts = _mix(cps * _M1 + offset * _M2) * (~boundary).astype(np.uint64)
        # reduceat sums from each start to the next; what lies between is boundary (0).
        sums = np.add.reduceat(parts, starts)
        return _mix(sums ^ _TERM_SALT), owner[starts]

    def fitted(self, corpus: Sequence[str]) -> "HashingEmbedder":
        return self

    def state(self) -> bytes:
        return b""

    def restore(self, state: bytes) -> "HashingEmbedder":
        return self
