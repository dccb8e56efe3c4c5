"""The kernel stage (make test-kernels): which kernels it runs where, how it knows a switch took
effect, and that the kernel variables are set in that stage alone."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("kernel_stage", ROOT / "maintainer" / "kernel_stage.py")
stage = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = stage           # dataclasses look their module up there
spec.loader.exec_module(stage)

AVX512 = {"SSE3": True, "AVX": True, "AVX2": True, "AVX512_SKX": True,
          "X86_V4": True, "AVX512_ICL": True, "AVX512_SPR": True}
AVX2 = {**AVX512, "AVX512_SKX": False, "X86_V4": False, "AVX512_ICL": False, "AVX512_SPR": False}


def seen(arch="Haswell", features=AVX2, api="openblas"):
    return {"blas": [(api, arch)], "features": dict(features)}


def planned(default):
    return {k.name: k.skipped for k in stage.plan(default, stage.kernels())}


DEFAULT = "it is this CPU's default kernel, which make test's nbval ran"


def test_an_avx512_cpu_runs_every_kernel_but_its_default():
    skipped = planned(seen("SkylakeX", AVX512))
    assert skipped.pop("OpenBLAS SkylakeX") == DEFAULT
    assert not any(skipped.values())


def test_an_avx2_cpu_skips_the_avx512_kernels_and_still_runs_two():
    skipped = planned(seen("Haswell", AVX2))
    assert skipped["OpenBLAS SkylakeX"] == skipped["NumPy without AVX-512"] == "this CPU lacks AVX512_SKX"
    assert skipped["OpenBLAS Haswell"] == DEFAULT
    assert not skipped["OpenBLAS Sandybridge"] and not skipped["OpenBLAS Prescott"]
    assert sum(not s for s in skipped.values()) >= stage.MIN_UNDER_CI


def test_an_arm_cpu_or_another_blas_runs_no_openblas_kernel():
    assert all(planned(seen("neoversen1", {"ASIMD": True})).values())
    accelerate = planned(seen(None, AVX2, api="accelerate"))
    assert accelerate["OpenBLAS Sandybridge"] == "NumPy's BLAS here is not OpenBLAS"


def test_a_switch_that_did_not_take_effect_is_reported():
    sandy, prescott, _, _, numpy_off = stage.kernels()
    assert stage.took_effect(sandy, seen("Sandybridge")) == ""
    assert "got BLAS openblas Haswell" in stage.took_effect(sandy, seen("Haswell"))
    assert stage.took_effect(prescott, seen("Katmai")) == ""
    # older NumPy names are ignored without a word: the features still read True
    assert "X86_V4" in stage.took_effect(numpy_off, seen("SkylakeX", AVX512))
    off = {**AVX512, "X86_V4": False, "AVX512_ICL": False, "AVX512_SPR": False}
    assert stage.took_effect(numpy_off, seen("SkylakeX", off)) == ""


def test_the_stage_runs_every_notebook_under_one_kernel_and_the_trained_ones_under_all():
    by_name = {k.name: k.notebooks for k in stage.kernels()}
    assert len(stage.NOTEBOOKS) == 18
    assert by_name["OpenBLAS Sandybridge"] == stage.NOTEBOOKS
    trained = ["07", "07", "08", "08", "09", "09"]
    assert sorted(Path(nb).name[:2] for nb in by_name["OpenBLAS Prescott"]) == trained


@pytest.mark.parametrize("variable", ["OPENBLAS_CORETYPE", "NPY_DISABLE_CPU_FEATURES"])
def test_the_kernel_variables_are_set_in_the_stage_alone(variable):
    # Unsetting (env -u, the stage's clean environment) is allowed; setting one anywhere else would
    # run every later test on a kernel the learner's CPU does not pick.
    setting = re.compile(rf"{variable}\s*=|\[[\"']{variable}[\"']\]\s*=|{variable}[\"']\s*:")
    folders = ("src", "tests", "notebooks", "instructor", "classroom")
    places = [p for d in folders for p in (ROOT / d).rglob("*")
              if p.suffix in (".py", ".ipynb", ".sh") and p.is_file()]
    places += [ROOT / "Makefile"]
    found = [str(p.relative_to(ROOT)) for p in places
             if p != Path(__file__) and setting.search(p.read_text(encoding="utf-8"))]
    assert found == []


def test_the_margin_check_runs_the_sweep_under_the_kernel_and_reports_its_verdict(monkeypatch, capsys):
    calls = []

    def fake_run(command, env, cwd):
        calls.append((command, env))
        return type("Done", (), {"returncode": len(calls) - 1})()      # passes, then fails

    monkeypatch.setattr(stage.subprocess, "run", fake_run)
    assert stage.margins("py", "OpenBLAS Haswell", {"OPENBLAS_CORETYPE": "Haswell"}) is True
    assert stage.margins("py", "OpenBLAS Haswell", {"OPENBLAS_CORETYPE": "Haswell"}) is False
    assert calls[0][0] == ["py", "-m", "attention_course.sweep", "--notebook-seeds"]
    assert calls[0][1]["OPENBLAS_CORETYPE"] == "Haswell"
    assert "OpenBLAS Haswell: margins NOT kept" in capsys.readouterr().out
