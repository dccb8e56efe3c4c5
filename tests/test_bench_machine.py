"""Every benchmark names the CPU kind it measured: the CPU, NumPy's SIMD level and the BLAS kernel
(a ratio on an AVX2 machine with OpenBLAS's Haswell kernel says nothing of an AVX-512 one)."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from threadpoolctl import threadpool_info

from notebook_tools import ROOT

BENCH = ROOT / "benchmarks"
SCRIPTS = ("run", "pretrained", "training", "widgets", "grading")


@pytest.fixture
def load(monkeypatch):
    """Load a benchmark script by its path, its own folder first on sys.path as when it runs."""
    monkeypatch.syspath_prepend(str(BENCH))

    def load(name):
        spec = importlib.util.spec_from_file_location(f"bench_{name}_machine", BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


def test_cpu_kind_names_the_simd_level_numpy_found_and_the_kernel_blas_runs(load):
    machine = load("machine")
    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    assert blas, "NumPy's BLAS is loaded (threadpoolctl sees it)"
    kind = machine.cpu_kind()
    assert f"; BLAS {blas[0]['internal_api']} {blas[0]['architecture']}" in kind
    simd = machine.numpy_simd()
    assert simd["level"] in simd["found"] or simd["level"] in simd["baseline"]
    assert set(simd["found"]).isdisjoint(simd["not_found"])
    assert f"; NumPy SIMD {simd['level']};" in kind
    assert kind.startswith(machine.cpu_name())


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_benchmark_prints_that_cpu_kind(load, name):
    script = load(name)
    # the function the script imported is benchmarks/machine.py's, not one of its own
    assert script.cpu_kind is sys.modules["machine"].cpu_kind
    assert sys.modules["machine"].__file__ == str(BENCH / "machine.py")
    assert "cpu_kind()" in (BENCH / f"{name}.py").read_text(encoding="utf-8")
