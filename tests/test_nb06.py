"""Notebook 06: its exercise checks accept the solution, refuse the stub and typical slips, and
its widget's projections follow the controls."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt

from attention_course import attention_flops, max_length_for_memory, sliding_window_mask
from attention_course.checks import CheckFailed
from attention_course.checks import nb06 as nb06_checks
from attention_course.widgets import nb06
from notebook_tools import failure, load_solutions, stub

NAME = "06_quadratic_cost.ipynb"
GIB = 2**30


@pytest.fixture(scope="module")
def solutions():
    return load_solutions(NAME)


# --------------------------------------------------------------------------- every check
CHECKS = [
    ("predicted_flops", nb06_checks.check_predicted_flops),
    ("score_memory_bytes", nb06_checks.check_score_memory),
    ("longest_sequence", nb06_checks.check_longest_sequence),
    ("window_mask", nb06_checks.check_window_mask),
]


@pytest.mark.parametrize(("name", "check"), CHECKS, ids=[n for n, _ in CHECKS])
def test_check_passes_on_the_notebook_solution(solutions, name, check, capsys):
    check(solutions[name])
    out = capsys.readouterr().out
    assert out.startswith("✓") and out.count("\n") == 1


@pytest.mark.parametrize(("name", "check"), CHECKS, ids=[n for n, _ in CHECKS])
def test_check_lets_the_stub_fail_with_not_implemented(name, check):
    with pytest.raises(NotImplementedError):
        check(stub)


@pytest.mark.parametrize(("name", "check"), CHECKS, ids=[n for n, _ in CHECKS])
def test_check_refuses_something_that_is_not_a_function(name, check):
    with pytest.raises(CheckFailed, match="expected a function"):
        check(42)


def test_both_editions_hold_the_same_solutions():
    en, zh = load_solutions(NAME, "en"), load_solutions(NAME, "zh")
    assert set(en) == set(zh) == {name for name, _ in CHECKS}


# --------------------------------------------------------------------------- exercise 1
def test_flops_catches_forgetting_the_second_product():
    msg = failure(nb06_checks.check_predicted_flops, lambda L, S, d: 2 * L * S * d)
    assert "L = S = 1024, d = 64" in msg and "268435456" in msg and "134217728" in msg
    assert "weights @ V" in msg


def test_flops_catches_counting_a_multiply_add_as_one():
    msg = failure(nb06_checks.check_predicted_flops, lambda L, S, d: L * S * d)
    assert "L = S = 1024, d = 64" in msg


def test_flops_catches_squaring_L_when_there_are_S_keys():
    msg = failure(nb06_checks.check_predicted_flops, lambda L, S, d: 4 * L * L * d)
    assert "L = 3 queries, S = 5 keys" in msg


def test_flops_message_speaks_chinese():
    msg = failure(nb06_checks.check_predicted_flops, lambda L, S, d: 2 * L * S * d, lang="zh")
    assert "注意力的运算量 未通过" in msg and "提示" in msg


@settings(max_examples=30, deadline=None)
@given(k=st.integers(1, 3), scale=st.sampled_from([1, 2, 3, 8]))
def test_flops_refuses_any_other_constant(k, scale):
    # 4 is the only constant that passes: a multiple of L·S·d with any other factor fails.
    factor = k * scale
    if factor == 4:
        return
    with pytest.raises(CheckFailed):
        nb06_checks.check_predicted_flops(lambda L, S, d: factor * L * S * d)


# --------------------------------------------------------------------------- exercise 2
def test_memory_catches_forgetting_the_heads():
    msg = failure(nb06_checks.check_score_memory,
                  lambda n, heads, batch, dtype: batch * n * n * np.dtype(dtype).itemsize)
    assert "n = 1024, 8 heads, batch 1, float32" in msg and "33554432" in msg


def test_memory_catches_eight_bytes_for_float32():
    msg = failure(nb06_checks.check_score_memory,
                  lambda n, heads, batch, dtype: batch * heads * n * n * 8)
    assert "n = 1024, 1 head, batch 1, float32" in msg and "itemsize" in msg


def test_memory_catches_forgetting_the_batch():
    msg = failure(nb06_checks.check_score_memory,
                  lambda n, heads, batch, dtype: heads * n * n * np.dtype(dtype).itemsize)
    assert "batch 4" in msg


def test_memory_catches_a_hard_coded_four_bytes():
    msg = failure(nb06_checks.check_score_memory,
                  lambda n, heads, batch, dtype: batch * heads * n * n * 4)
    assert "float16" in msg


# --------------------------------------------------------------------------- exercise 3
def test_longest_catches_the_missing_square_root():
    msg = failure(nb06_checks.check_longest_sequence,
                  lambda b, heads, dtype: int(b / (heads * np.dtype(dtype).itemsize)))
    assert "24 GiB, 1 head, float32" in msg and "80264" in msg and "square root" in msg


def test_longest_catches_rounding_up():
    def ceil(b, heads, dtype):
        return math.ceil(math.sqrt(b / (heads * np.dtype(dtype).itemsize)))
    msg = failure(nb06_checks.check_longest_sequence, ceil)
    assert "24 GiB, 1 head, float32" in msg and "80265" in msg


def test_longest_catches_rounding_to_nearest_only_where_it_goes_up():
    def nearest(b, heads, dtype):
        return round(math.sqrt(b / (heads * np.dtype(dtype).itemsize)))
    msg = failure(nb06_checks.check_longest_sequence, nearest)
    assert "24 GiB, 1 head, float32" in msg     # 80264.85 rounds to 80265, which does not fit


def test_longest_catches_forgetting_the_heads():
    msg = failure(nb06_checks.check_longest_sequence,
                  lambda b, heads, dtype: int(math.sqrt(b / np.dtype(dtype).itemsize)))
    assert "24 GiB, 8 heads, float32" in msg


def test_longest_catches_eight_bytes_for_float32():
    msg = failure(nb06_checks.check_longest_sequence,
                  lambda b, heads, dtype: int(math.sqrt(b / (heads * 8))))
    assert "24 GiB, 1 head, float32" in msg and "56755" in msg


@settings(max_examples=60, deadline=None)
@given(budget=st.integers(1, 10**13), heads=st.integers(1, 64),
       dtype=st.sampled_from([np.float16, np.float32, np.float64]))
def test_longest_solution_is_the_largest_n_that_fits(solutions, budget, heads, dtype):
    n = solutions["longest_sequence"](budget, heads, dtype)
    per = heads * np.dtype(dtype).itemsize
    assert n * n * per <= budget < (n + 1) ** 2 * per
    assert n == max_length_for_memory(budget, num_heads=heads, dtype=dtype)


# --------------------------------------------------------------------------- exercise 4
def test_window_catches_an_off_by_one_window():
    msg = failure(nb06_checks.check_window_mask,
                  lambda n, r: np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) < r)
    assert "n = 6, r = 1 (one neighbour each side)" in msg and "|i - j| <= r" in msg


def test_window_catches_one_neighbour_too_many():
    msg = failure(nb06_checks.check_window_mask,
                  lambda n, r: np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) <= r + 1)
    assert "n = 6, r = 1" in msg


def test_window_catches_a_one_sided_window():
    msg = failure(nb06_checks.check_window_mask,
                  lambda n, r: sliding_window_mask(n, r, causal=True))
    assert "n = 6, r = 1" in msg


def test_window_catches_ones_and_zeros_instead_of_booleans():
    msg = failure(nb06_checks.check_window_mask, lambda n, r: sliding_window_mask(n, r).astype(int))
    assert "n = 6, r = 1" in msg and "boolean" in msg


def test_window_catches_a_window_that_wraps_around_the_sentence():
    def wraps(n, r):
        offset = (np.arange(n)[None, :] - np.arange(n)[:, None]) % n
        return (offset <= r) | (offset >= n - r)
    msg = failure(nb06_checks.check_window_mask, wraps)
    assert "n = 6, r = 1" in msg


# --------------------------------------------------------------------------- the widget
@pytest.fixture
def explorer():
    measured = {"n": [256, 512], "seconds": [1e-3, 4e-3], "peak_bytes": [8e5, 3.2e6]}
    return nb06.CostExplorer(lang="en", rate=1e10, measured=measured)


def test_widget_doubling_n_quadruples_full_work_and_memory_but_not_the_tile(explorer):
    explorer.controls["n"].value = 4096
    before = explorer.data["at"]
    explorer.controls["n"].value = 8192
    after = explorer.data["at"]
    assert after["full"]["flops"] == 4 * before["full"]["flops"]
    assert after["full"]["bytes"] == 4 * before["full"]["bytes"]
    assert after["full"]["seconds"] == pytest.approx(4 * before["full"]["seconds"])
    assert after["chunked"]["bytes"] == before["chunked"]["bytes"] == 8 * 128 * 128 * 4
    assert after["chunked"]["flops"] == after["full"]["flops"]
    assert 1.9 < after["windowed"]["flops"] / before["windowed"]["flops"] < 2.1


def test_widget_heads_multiply_memory_and_move_the_wall(explorer):
    explorer.controls["heads"].value = 1
    one = explorer.data
    explorer.controls["heads"].value = 4
    four = explorer.data
    assert four["at"]["full"]["bytes"] == 4 * one["at"]["full"]["bytes"]
    assert one["wall"] == max_length_for_memory(24 * GIB) == 80264
    assert four["wall"] == max_length_for_memory(24 * GIB, num_heads=4)


def test_widget_width_and_window_change_the_projection(explorer):
    explorer.controls["d"].value = 128
    assert explorer.data["at"]["full"]["flops"] == attention_flops(16384, 128, num_heads=8)
    narrow = explorer.data["at"]["windowed"]["bytes"]
    explorer.controls["window"].value = 512
    assert explorer.data["at"]["windowed"]["bytes"] > 3.9 * narrow


def test_widget_time_is_work_over_the_rate(explorer):
    data = explorer.data
    for kind in ("full", "chunked", "windowed"):
        assert data["at"][kind]["seconds"] == pytest.approx(data["at"][kind]["flops"] / 1e10)
    curves = data["curves"]
    assert np.allclose(np.diff(np.log(curves["full"]["seconds"])) / np.diff(np.log(curves["n"])), 2)


def test_widget_says_when_full_attention_stops_fitting(explorer):
    explorer.controls["heads"].value = 8
    explorer.controls["n"].value = 16384
    assert explorer.data["fits"] == {"full": True, "chunked": True, "windowed": True}
    explorer.controls["n"].value = 32768            # beyond the 8-head wall of 28377
    assert explorer.data["fits"]["full"] is False and explorer.data["fits"]["chunked"] is True


def test_widget_figure_draws_in_both_languages(explorer):
    fig = explorer.figure()
    assert len(fig.axes) == 2
    assert "16,384" in fig.axes[0].get_title()
    plt.close(fig)
    zh = nb06.CostExplorer(lang="zh", rate=1e10)
    fig = zh.figure()
    assert "完整" in fig.axes[0].get_title()
    plt.close(fig)


def test_widget_refuses_a_rate_that_is_not_positive():
    with pytest.raises(ValueError, match="rate must be a positive"):
        nb06.CostExplorer(rate=0)


def test_measure_rate_gives_a_positive_rate():
    assert nb06.measure_rate(n=64, d=8, repeats=1) > 0


@settings(deadline=None)
@given(n=st.sampled_from([2**p for p in range(9, 19)]), heads=st.integers(1, 32),
       window=st.sampled_from([32, 64, 128, 256, 512]))
def test_projection_never_ranks_windowed_above_full(n, heads, window):
    p = nb06.project(n, 64, heads, window, rate=1e9)
    assert p["windowed"]["flops"] <= p["full"]["flops"]
    assert p["windowed"]["bytes"] <= p["full"]["bytes"]
    assert p["chunked"]["bytes"] <= p["full"]["bytes"]



def test_widget_title_warns_when_full_attention_does_not_fit(explorer):
    data = explorer.compute(n=65536, d=64, heads=8, window=128)
    fig = explorer.draw(data)
    assert "does not fit" in fig.axes[1].get_title()
    plt.close(fig)
    fig = explorer.draw(explorer.compute(n=4096, d=64, heads=8, window=128))
    assert "does not fit" not in fig.axes[1].get_title()
    plt.close(fig)
