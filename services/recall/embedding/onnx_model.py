"""An embedder over a user-supplied ONNX sentence-embedding model, from a local folder:
`model.onnx` and the `tokenizer.json` of the Hugging Face tokenizers library.

Pretrained: nothing is learned from the context (`fitted` returns itself, the state is
empty). The model's outputs are mean-pooled over the real tokens (when it gives one
vector per token) and L2-normalized. The identity is the files' content: name "onnx",
version the sha256 of model.onnx then of tokenizer.json (16 hex digits each), so
another model or tokenizer in the same folder is another identity.

onnxruntime and tokenizers are imported when such an embedder is made (the `onnx`
extra of the package installs them): the default embedder needs neither.
"""
from __future__ import annotations

import hashlib
import os
from typing import Sequence

import numpy as np

from .api import EmbedderIdentity, Pretrained

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
MAX_TOKENS = 512
BATCH = 32


class OnnxEmbedder(Pretrained):
    def __init__(self, model_dir: str, *, max_tokens: int = MAX_TOKENS, threads: int = 1) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        model_path = os.path.join(model_dir, MODEL_FILE)
        tokenizer_path = os.path.join(model_dir, TOKENIZER_FILE)
        with open(model_path, "rb") as f:
            model_bytes = f.read()
        with open(tokenizer_path, "rb") as f:
            tokenizer_bytes = f.read()
        self._tokenizer = Tokenizer.from_str(tokenizer_bytes.decode())
        self._tokenizer.no_padding()  # batches are padded here, with a mask
        self._tokenizer.enable_truncation(max_tokens)
        self._pad = next((i for t in ("[PAD]", "<pad>") if (i := self._tokenizer.token_to_id(t))
                          is not None), 0)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            model_bytes, options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name: i for i in self._session.get_inputs()}
        if "input_ids" not in self._inputs:
            raise ValueError(f"{model_path}: the model takes no input_ids")
        version = (hashlib.sha256(model_bytes).hexdigest()[:16] + "."
                   + hashlib.sha256(tokenizer_bytes).hexdigest()[:16])
        self.identity = EmbedderIdentity("onnx", version, self._dimension())

    def _dimension(self) -> int:
        last = self._session.get_outputs()[0].shape[-1]
        if isinstance(last, int) and last > 0:
            return last
        return int(self._run([[1]], [[1]]).shape[-1])  # symbolic: ask the model

    def embed(self, texts: Sequence[str], role: str = "passage") -> list[list[float]]:
        # A user's model: no prefix convention is known, so both roles embed alike.
        out = np.zeros((len(texts), self.identity.dimension), dtype=np.float32)
        for start in range(0, len(texts), BATCH):
            encodings = self._tokenizer.encode_batch(list(texts[start:start + BATCH]))
            rows = [(start + i, e.ids) for i, e in enumerate(encodings) if e.ids]
            if not rows:
                continue  # nothing to embed: zeros
            width = max(len(ids) for _, ids in rows)
            ids = [ids + [self._pad] * (width - len(ids)) for _, ids in rows]
            mask = [[1] * len(ids) + [0] * (width - len(ids)) for _, ids in rows]
            vectors = self._run(ids, mask)
            out[[r for r, _ in rows]] = vectors
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out.tolist()

    def _run(self, ids: list[list[int]], mask: list[list[int]]) -> np.ndarray:
        """Pooled vectors (rows x dimension) of padded token ids."""
        dtype = np.int32 if "int32" in self._inputs["input_ids"].type else np.int64
        mask_array = np.asarray(mask, dtype=dtype)
        feed = {"input_ids": np.asarray(ids, dtype=dtype)}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = mask_array
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(mask_array)
        output = np.asarray(self._session.run(None, feed)[0], dtype=np.float32)
        if output.ndim == 2:  # the model pools itself
            return output
        weights = mask_array.astype(np.float32)[:, :, None]
        return (output * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
