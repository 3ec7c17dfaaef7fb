"""The vector leg's log (vector_index.py): an append-only file of records, one per write.

A record: a header (magic, upserts, deletes, length of the JSON part), the JSON part (each
upsert's key, session, time, the turn before it and the turn it answers, then the deleted
keys), the upserts' vectors as int8 rows, one float32 scale a row
(v ~ q * scale, scale = max|v| / 127), and (format 3) each upsert's passage digests: the
vector cache's keys of the texts its vector was made from (core/passages.py), so an
erasure can drop from the cache what was embedded of a text that is gone. Older records
are read as they were written (format 1: float32 rows, quantized as they are read; format
2: no turns, no digests).
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Iterator, Optional

import numpy as np

FORMAT = 3
_MAGIC_F32, _MAGIC_Q8, _MAGIC = b"MZV1", b"MZV2", b"MZV3"
_HEAD = struct.Struct("<4sIII")  # magic, upserts, deletes, length of the JSON part
DIGEST_BYTES = 16  # vector_cache.text_key's
PASSAGES = 2  # digests a row keeps: the turn as said, the turn read after its context


@dataclass
class VecDoc:
    key: str
    session: str
    time_us: Optional[int]
    # A turn's (core/passages.py): the key of the turn before it in its session, "" for a
    # session's first; None for a frame or a runtime event.
    prev: Optional[str] = None
    # The key of the turn whose vector the row mixes in (the turn before it, or the call a
    # tool result answers); None: none.
    source: Optional[str] = None
    # The vector cache's keys of the texts its vector was made from: its own, then that turn's.
    digests: tuple[bytes, ...] = ()


def quantized(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 rows, float32 scale per row): row ~ q * scale; an all-zero row stays zero."""
    vectors = np.asarray(vectors, dtype=np.float32)
    peak = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors), np.float32)
    scale = (peak / 127.0).astype(np.float32)
    safe = np.where(scale > 0, scale, 1.0)[:, None]
    return np.rint(vectors / safe).astype(np.int8), scale


class Dequantized:
    """Rows of an int8 matrix as float32, for code that indexes a float matrix."""

    def __init__(self, q: np.ndarray, scale: np.ndarray) -> None:
        self._q, self._scale = q, scale

    def __getitem__(self, rows) -> np.ndarray:
        return self._q[rows].astype(np.float32) * self._scale[rows][:, None]


def encode(docs: list[VecDoc], q: np.ndarray, scale: np.ndarray,
           deletes: list[str]) -> bytes:
    """One record of these upserts (already quantized) and deletes."""
    fields = json.dumps([[d.key, d.session, d.time_us, d.prev, d.source] for d in docs]
                        + [deletes], ensure_ascii=False, separators=(",", ":")).encode()
    digests = np.zeros((len(docs), PASSAGES, DIGEST_BYTES), dtype=np.uint8)
    for i, d in enumerate(docs):
        for j, digest in enumerate(d.digests[:PASSAGES]):
            digests[i, j] = np.frombuffer(digest, dtype=np.uint8)
    return (_HEAD.pack(_MAGIC, len(docs), len(deletes), len(fields)) + fields +
            np.ascontiguousarray(q, np.int8).tobytes() +
            np.ascontiguousarray(scale, np.float32).tobytes() + digests.tobytes())


def records(data: bytes, dim: int, name: str) -> Iterator[
        tuple[list[VecDoc], list[str], np.ndarray, np.ndarray]]:
    """(docs, deletes, int8 rows, scales) of each record of `data` (a log's committed
    bytes; `name` says which in an error)."""
    at, end = 0, len(data)
    while at < end:
        magic, ups, dels, flen = _HEAD.unpack_from(data, at)
        if magic not in (_MAGIC, _MAGIC_Q8, _MAGIC_F32):
            raise ValueError(f"vector log {name} is damaged at {at}")
        at += _HEAD.size
        fields = json.loads(data[at:at + flen])
        at += flen
        if magic == _MAGIC_F32:  # format 1: float32, quantized as it is read
            q, scale = quantized(np.frombuffer(data, dtype=np.float32, count=ups * dim,
                                               offset=at).reshape(ups, dim))
            at += ups * dim * 4
        else:
            q = np.frombuffer(data, dtype=np.int8, count=ups * dim, offset=at).reshape(ups, dim)
            at += ups * dim
            scale = np.frombuffer(data, dtype=np.float32, count=ups, offset=at)
            at += ups * 4
        digests: list[tuple[bytes, ...]] = [()] * ups
        if magic == _MAGIC:
            block = np.frombuffer(data, dtype=np.uint8, count=ups * PASSAGES * DIGEST_BYTES,
                                  offset=at).reshape(ups, PASSAGES, DIGEST_BYTES)
            at += ups * PASSAGES * DIGEST_BYTES
            digests = [tuple(bytes(d) for d in row if d.any()) for row in block]
        docs = [VecDoc(*f, digests=dg) for f, dg in zip(fields[:ups], digests)]
        yield docs, (fields[ups] if dels else []), q, scale
