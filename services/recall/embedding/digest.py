"""A weights file's digest, part of a pretrained embedder's identity: computed once per
process and file version (hashing e5's 72 MB takes about 0.1 s), kept for later
embedders of the same process (each worker process hashes once)."""
from __future__ import annotations

import functools
import hashlib
import os


def file_digest(path: str) -> str:
    """sha256 of the file's bytes, in hex."""
    st = os.stat(path)
    return _digest(path, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _digest(path: str, size: int, mtime_ns: int) -> str:  # size, mtime: the cache key
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
