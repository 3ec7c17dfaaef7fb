"""What the CPU can run: the x86 build of the e5 engine uses AVX2 instructions (a CPU
without them stops the process with SIGILL, which no try/except catches), so the
engine is loaded only where the flags say it can run."""
from __future__ import annotations

import platform
from typing import Callable

CpuFlags = Callable[[], frozenset[str]]


def proc_cpuinfo_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The first processor's feature flags (Linux); empty where there is no such file."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def runs_e5_engine(flags: CpuFlags = proc_cpuinfo_flags, machine: str = "") -> tuple[bool, str]:
    """(whether the e5 engine's build runs here, why not when it does not)."""
    machine = (machine or platform.machine()).lower()
    if machine in ("x86_64", "amd64"):
        if "avx2" in flags():
            return True, ""
        return False, "this x86 CPU lacks AVX2, which the e5 engine's build needs"
    if machine in ("aarch64", "arm64"):
        return True, ""
    return False, f"the e5 engine has no build for {machine}"


# Instructions that add uint8 x int8 products in 32 bits (no 16-bit pair sums to overflow).
_INT8_DOT = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


def int8_weight_bits(flags: CpuFlags = proc_cpuinfo_flags, machine: str = "") -> int:
    """Bits of an int8 weight e5_graph.py may use here: 8, or 7 on an x86 CPU without
    VNNI/AMX, whose AVX2 int8 kernel sums pairs of products in 16 bits (ONNX Runtime's
    own advice for such CPUs: "reduce_range")."""
    machine = (machine or platform.machine()).lower()
    if machine in ("x86_64", "amd64") and not (_INT8_DOT & flags()):
        return 7
    return 8
