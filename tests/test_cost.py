import re
from pathlib import Path

import numpy as np
import pytest

from attention_course import attention_flops, attention_memory_bytes, max_length_for_memory


def test_flops_are_four_n_squared_d_per_head_and_quadruple_when_n_doubles():
    assert attention_flops(100, 8) == 4 * 100**2 * 8
    assert attention_flops(200, 8) == 4 * attention_flops(100, 8)
    assert attention_flops(10, 8, S=20, d_v=4, num_heads=3, batch=2) == 2 * 2 * 3 * 10 * 20 * 12


def test_memory_of_the_score_matrix():
    assert attention_memory_bytes(1000) == 4_000_000
    assert attention_memory_bytes(1000, 10, num_heads=2, batch=3, dtype=np.float64) == 480_000


@pytest.mark.parametrize("budget", [24 * 2**30, 10**6, 1234567])
def test_max_length_is_the_largest_that_fits(budget):
    n = max_length_for_memory(budget)
    assert attention_memory_bytes(n) <= budget < attention_memory_bytes(n + 1)


def test_cost_bad_input():
    with pytest.raises(ValueError, match="L must be positive; got L=0"):
        attention_flops(0, 8)
    with pytest.raises(ValueError, match="budget_bytes"):
        max_length_for_memory(-1)


def test_the_stored_bench_ships_with_the_library_in_both_languages():
    import importlib.util
    from importlib import resources

    from attention_course.cost import stored_bench
    from notebook_tools import ROOT

    en, zh = stored_bench("en"), stored_bench("zh")
    assert (en.name, zh.name) == ("bench_attention_en.md", "bench_attention_zh.md")
    for run in (en, zh):
        assert run.png[:8] == b"\x89PNG\r\n\x1a\n"
        # what notebook 06 reads from it: the header's two rates and the rows of the table
        assert re.search(r"[\d.]+ GFLOP/s", run.text) and re.search(r"= [\d.]+ G/s", run.text)
        assert "| 2048 | fast_attention |" in run.text
    assert "直接公式" in zh.text and "direct NumPy" in en.text and "直接公式" not in en.text
    assert en.png != zh.png
    # one copy: the bench writes where the library reads, and figures/ keeps none
    data = resources.files("attention_course") / "data"
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.STORED.resolve() == Path(str(data)).resolve()
    assert not list((ROOT / "figures").glob("bench_attention_*"))


@pytest.mark.parametrize("lang", ["fr", "EN", None, ""])
def test_stored_bench_names_the_languages_it_has(lang):
    from attention_course.cost import stored_bench

    with pytest.raises(ValueError, match=r"lang must be one of \('en', 'zh'\); got"):
        stored_bench(lang)
