"""What a benchmark ran on, for its header: the CPU, NumPy's SIMD level and the BLAS kernel.

The same speed ratio can differ between an AVX2 and an AVX-512 machine, so every benchmark names
the CPU kind it measured with :func:`cpu_kind`. The BLAS kernel is the one OpenBLAS picked when
NumPy loaded it (``architecture`` in threadpoolctl's report); ``OPENBLAS_CORETYPE`` forces another.
"""

from __future__ import annotations

import os
import platform


def cpu_name() -> str:
    """The CPU's model name, or the machine type where the system does not say."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def numpy_simd() -> dict:
    """NumPy's SIMD extensions: the baseline it was built for, and what it found on this CPU.

    ``level`` is the last extension found (NumPy lists them from the narrowest), else the
    baseline's last.
    """
    try:
        from numpy._core._multiarray_umath import (
            __cpu_baseline__,
            __cpu_dispatch__,
            __cpu_features__,
        )
    except ImportError:                 # NumPy 1.x
        try:
            from numpy.core._multiarray_umath import (
                __cpu_baseline__,
                __cpu_dispatch__,
                __cpu_features__,
            )
        except ImportError:
            return {"level": "unknown", "baseline": [], "found": [], "not_found": []}
    found = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    baseline = list(__cpu_baseline__)
    level = found[-1] if found else (baseline[-1] if baseline else "none")
    return {"level": level, "baseline": baseline, "found": found,
            "not_found": [f for f in __cpu_dispatch__ if f not in found]}


def blas_kernel() -> str:
    """NumPy's BLAS and the kernel it runs, e.g. ``openblas Haswell``."""
    import numpy  # noqa: F401 - loads the BLAS that threadpool_info reports
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl is not installed)"
    for info in threadpool_info():
        if info.get("user_api") == "blas":
            return f"{info.get('internal_api')} {info.get('architecture') or '(kernel not reported)'}"
    return "none found"


def cpu_kind() -> str:
    """One line: CPU name and logical cores, NumPy's SIMD level, the BLAS kernel."""
    return (f"{cpu_name()}, {os.cpu_count()} logical cores; NumPy SIMD {numpy_simd()['level']}; "
            f"BLAS {blas_kernel()}")

def torch_description() -> dict:
    """PyTorch's version, build, CPU capability, parallel backend and threads (en and zh)."""
    import torch

    build = torch.version.git_version[:10] if getattr(torch.version, "git_version", None) else "?"
    capability = torch.backends.cpu.get_cpu_capability()
    backend = next((line.split(":", 1)[1].strip() for line in
                    torch.__config__.parallel_info().splitlines()
                    if line.startswith("ATen parallel backend")), "?")
    threads = torch.get_num_threads()
    return {"en": f"PyTorch {torch.__version__} (build {build}, CPU capability {capability}, "
                  f"parallel backend {backend}, {threads} thread{'' if threads == 1 else 's'})",
            "zh": f"PyTorch {torch.__version__}（构建 {build}，CPU 指令集 {capability}，"
                  f"并行后端 {backend}，{threads} 个线程）"}


def load_average() -> float | None:
    """The 1-minute load average, or None where the system has none (Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def load_text() -> str:
    """The 1-, 5- and 15-minute load averages as text."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        return "not available"
