"""The embedder a recall index uses unless told otherwise: multilingual-e5-small
(e5.py), or, where its engine cannot run (an x86 CPU without AVX2, cpu.py), Google's
USE multilingual v3 (use.py), which says why it serves (`inspect` shows it).

Chosen by tests/quality/hybrid_eval.py: e5 finds more paraphrased memories than USE,
and as a question-to-passage model it is the one that lifted a public benchmark of
long conversations (issue 39); USE is ten times faster and runs on any CPU."""
from __future__ import annotations

from .api import Embedder
from .cpu import CpuFlags, proc_cpuinfo_flags, runs_e5_engine


def default_embedder(cpu_flags: CpuFlags = proc_cpuinfo_flags, machine: str = "") -> Embedder:
    runs, why = runs_e5_engine(cpu_flags, machine)
    if runs:
        from .e5 import E5Embedder  # noqa: PLC0415
        return E5Embedder()
    from .use import UseEmbedder  # noqa: PLC0415
    return UseEmbedder(note=f"fallback from e5-small: {why}")
