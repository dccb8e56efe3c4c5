"""No benchmark and no test writes over a file the repository tracks: the benchmarks write their
results in build/bench/, the browser test its screenshots in build/screenshots/, and only make
bench-store and make screenshots copy them to where the library and the READMEs read them.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from notebook_tools import ROOT

BUILD = ROOT / "build"
BENCH = ROOT / "benchmarks"
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")


def load_path(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module      # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def load(monkeypatch):
    """Load a benchmark script by its path, its own folder first on sys.path as when it runs."""
    monkeypatch.syspath_prepend(str(BENCH))
    return lambda name: load_path(BENCH / f"{name}.py", f"bench_{name}_writes")


def make_variable(name: str) -> str:
    return re.search(rf"^{name} := (.*)$", MAKEFILE, re.M).group(1)


def test_the_benchmarks_and_the_browser_test_write_under_build(load):
    assert load("run").OUT == BUILD / "bench" == ROOT / make_variable("BENCH_OUT")
    assert load("training").OUT == BUILD / "bench" / "bench_training.md"
    labdriver = load_path(ROOT / "tests" / "browser" / "labdriver.py", "labdriver_writes")
    assert labdriver.SCREENSHOTS == BUILD / "screenshots" == ROOT / make_variable("SHOTS")


def test_only_the_store_targets_copy_into_the_repository(load):
    stored = load("run").STORED.relative_to(ROOT).as_posix()
    assert f"cp $(BENCH_ATTENTION) {stored}/" in MAKEFILE
    assert "cp $(BENCH_OUT)/bench_training.md figures/" in MAKEFILE
    assert "cp $(SHOTS)/screenshot_*.png figures/" in MAKEFILE
    for target in ("bench", "test-browser"):
        recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", MAKEFILE, re.M).group(1)
        assert "cp " not in recipe and "figures/" not in recipe and stored not in recipe, target


@pytest.mark.slow   # a few seconds of timing
def test_a_full_bench_run_leaves_the_stored_run_alone(load, monkeypatch, tmp_path):
    """benchmarks/run.py without --out, as make bench runs it (made small): its files go to OUT,
    here a temporary folder, and the stored run is not touched."""
    bench = load("run")
    stored = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in bench.STORED.glob("bench_attention_*")}
    assert len(stored) == 4
    monkeypatch.setattr(bench, "OUT", tmp_path / "bench")
    monkeypatch.setenv("BENCH_NO_TORCH", "1")
    monkeypatch.delenv("BENCH_QUICK", raising=False)
    assert bench.main(["--sizes", "64", "--repeats", "1", "--no-memory", "--no-notebooks"]) == 0
    assert sorted(p.name for p in (tmp_path / "bench").iterdir()) == [
        "bench_attention_en.md", "bench_attention_en.png", "bench_attention_zh.md", "bench_attention_zh.png"]
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in bench.STORED.glob("bench_attention_*")} \
        == stored
