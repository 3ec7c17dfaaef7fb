"""Vectors already computed, keyed by (embedder identity, text digest), so a rebuild
with an unchanged embedder embeds nothing again.

Where it lives: `<data dir>/recall/vector-cache/`, an LMDB environment beside the
per-context index folders and outside their generations: a rebuild's swap, or a reset
of the indexes, leaves it as it is (a vector depends only on the embedder and the
text). The key is sha256(identity)[:8] + sha256(text)[:16]; the identity is the
embedder's label, with the digest of its fitted state for an embedder learned from the
context's text (another fit embeds differently). The value is the vector as float16:
the vector leg quantizes what it is given, and it is given the float16 values whether
they were just computed or read back, so a rebuild from the cache writes the same
bytes (and fingerprint) as one that embedded everything.

Bounded: at most `max_bytes` of map (MAX_BYTES: about 4.5M vectors of 384 dimensions).
When it is full, the vectors of other identities go first (they are kept until then:
switching back to an embedder finds them); when it holds only the current identity's,
new vectors are not kept (the leg still gets them) and `full` says so. `prune` drops
every other identity's vectors at once (on demand).
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import threading
from dataclasses import dataclass
from typing import Optional

import lmdb
import numpy as np

from morphz.shared.lmdb_compact import rewrite_compacted
from morphz.shared.reader_gate import ReaderGate

_log = logging.getLogger("morphz.recall.vector_cache")
DIR = "vector-cache"
MAX_BYTES = 4 << 30
_DROP_BATCH = 10000  # keys deleted per write transaction when making room


def identity_key(label: str, state_digest: str = "") -> bytes:
    """The 8-byte prefix of an embedder identity's entries."""
    return hashlib.sha256(f"{label}|{state_digest}".encode()).digest()[:8]


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


@dataclass(frozen=True)
class CacheStats:
    """The vector cache's counts (inspect's vectors.cached, cache_hits, cache_misses):
    vectors held, lookups found and missed since the process began, whether it is full
    and its map file's size. All zeros where no cache is kept."""
    entries: int = 0
    hits: int = 0
    misses: int = 0
    full: bool = False
    bytes: int = 0


class VectorCache:
    """get_many / put_many of float16 vectors for one identity prefix at a time."""

    def __init__(self, root: str, *, max_bytes: int = MAX_BYTES) -> None:
        self.path = os.path.join(root, DIR)
        os.makedirs(self.path, exist_ok=True)
        # Derived data: no fsync per put (a process crash loses nothing: the writes are
        # in the page cache; a machine crash may lose the last ones, embedded again).
        # An environment a machine crash left unreadable is started over.
        try:
            self._env = self._open(max_bytes)
        except lmdb.Error:
            _log.warning("the vector cache %s does not open; starting it over", self.path,
                         exc_info=True)
            shutil.rmtree(self.path, ignore_errors=True)
            os.makedirs(self.path, exist_ok=True)
            self._env = self._open(max_bytes)
        self._lock = threading.Lock()
        self._gate = ReaderGate()  # compact() replaces the environment: readers wait
        self._max_bytes = max_bytes
        self.full = False
        self.hits = self.misses = 0

    def _open(self, max_bytes: int) -> "lmdb.Environment":
        return lmdb.open(self.path, map_size=max_bytes, subdir=True, max_dbs=0,
                         sync=False, metasync=False, readahead=False, lock=True)

    def get_many(self, prefix: bytes, digests: list[bytes]) -> list[Optional[np.ndarray]]:
        out: list[Optional[np.ndarray]] = []
        self._gate.enter()
        try:
            with self._env.begin(buffers=False) as txn:
                for d in digests:
                    raw = txn.get(prefix + d)
                    out.append(None if raw is None else np.frombuffer(raw, dtype=np.float16))
        finally:
            self._gate.leave()
        found = sum(v is not None for v in out)
        self.hits += found
        self.misses += len(out) - found
        return out

    def put_many(self, prefix: bytes, digests: list[bytes], vectors: np.ndarray) -> None:
        """Keep the vectors (float16 rows); room is made, or they are not kept."""
        rows = np.asarray(vectors, dtype=np.float16)
        with self._lock:
            for attempt in range(2):
                try:
                    with self._env.begin(write=True) as txn:
                        for d, v in zip(digests, rows):
                            txn.put(prefix + d, v.tobytes())
                    return
                except lmdb.MapFullError:
                    if attempt or not self._drop_others(prefix):
                        if not self.full:
                            _log.warning("the vector cache is full (%s): new vectors are "
                                         "not kept", self.path)
                        self.full = True
                        return

    def prune(self, keep: bytes) -> int:
        """Drop every entry of identities other than `keep`; how many went."""
        with self._lock:
            return self._drop_others(keep)

    def _drop_others(self, keep: bytes) -> int:
        dropped = 0
        while True:
            with self._env.begin(write=True) as txn:
                cur = txn.cursor()
                batch = [k for k in cur.iternext(keys=True, values=False)
                         if k[:8] != keep][:_DROP_BATCH]
                for k in batch:
                    txn.delete(k)
            dropped += len(batch)
            if len(batch) < _DROP_BATCH:
                break
        if dropped:
            self.full = False
        return dropped

    # -- erasure (docs/privacy.md) ---------------------------------------------------
    def erase(self, keep: bytes, digests: list[bytes]) -> int:
        """Drop what the cache holds of erased texts, then rewrite its file compacted (no
        freed page keeps their vectors): the entries of identity `keep` under these text
        digests (the vector leg keeps, for each row, the digests of the texts its vector
        was made from: index/passage_marks.py; the texts themselves are gone with the
        content), and every other identity's entries, which cannot be told apart (they are
        embedded again when that embedder comes back). How many went."""
        with self._lock:
            dropped = self._drop_others(keep)
            with self._env.begin(write=True) as txn:
                dropped += sum(bool(txn.delete(keep + d)) for d in set(digests))
            self._gate.exclusive(self._compact)
        return dropped

    def _compact(self) -> None:
        closed: list[bool] = []
        try:
            rewrite_compacted(self._env, lambda: closed.append(True))
        finally:
            if closed:
                self._env = self._open(self._max_bytes)

    def stats(self) -> CacheStats:
        self._gate.enter()  # not while compact() has the environment closed
        try:
            entries = self._env.stat()["entries"]
        finally:
            self._gate.leave()
        return CacheStats(entries, self.hits, self.misses, self.full,
                          os.path.getsize(os.path.join(self.path, "data.mdb")))

    def close(self) -> None:
        self._env.close()
