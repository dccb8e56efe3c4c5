"""Notebook 03: its exercise checks decide, and its widget reacts to its controls."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt
from matplotlib.figure import Figure

from attention_course import causal_mask, padding_mask, scaled_dot_product_attention, softmax
from attention_course.checks import CheckFailed
from attention_course.checks import nb03 as checks
from attention_course.widgets import nb03 as widgets
from notebook_tools import load_solutions, stub

NAME = "03_scaled_dot_product.ipynb"


@pytest.fixture(scope="module", params=["zh", "en"])
def solutions(request):
    return load_solutions(NAME, lang=request.param)


def fails(check, learner, lang="en"):
    """The CheckFailed message a check raises on ``learner`` (the test fails if none is raised)."""
    with pytest.raises(CheckFailed) as info:
        check(learner, lang=lang)
    return str(info.value)


def swap(a):
    return np.swapaxes(a, -1, -2)


# --- every check: passes the notebook's solution, lets the stub's error through -------------

CHECKS = [
    ("my_attention", checks.check_attention),
    ("my_causal_mask", checks.check_causal_mask),
    ("my_padding_mask", checks.check_padding_mask),
    ("stable_softmax", checks.check_stable_softmax),
]


@pytest.mark.parametrize("name, check", CHECKS, ids=[n for n, _ in CHECKS])
def test_check_passes_on_the_solution_with_one_line(solutions, name, check, capsys):
    check(solutions[name], lang="en")
    out = capsys.readouterr().out
    assert out.startswith("✓") and out.count("\n") == 1, out


@pytest.mark.parametrize("name, check", CHECKS, ids=[n for n, _ in CHECKS])
def test_check_lets_the_stub_error_through(name, check):
    with pytest.raises(NotImplementedError):
        check(stub, lang="en")


def test_check_refuses_something_that_is_not_a_function():
    assert "expected a function" in fails(checks.check_attention, 42)


# --- exercise 1: attention --------------------------------------------------------------------

def test_attention_catches_the_missing_scale():
    msg = fails(checks.check_attention, lambda q, k, v: softmax(q @ swap(k)) @ v)
    assert "L = S = 3 positions" in msg
    assert "without the 1/√d_k scale" in msg


def test_attention_catches_dividing_by_d_k():
    msg = fails(checks.check_attention, lambda q, k, v: softmax(q @ swap(k) / q.shape[-1]) @ v)
    assert "divides the scores by d_k" in msg


def test_attention_catches_softmax_over_the_wrong_axis():
    msg = fails(checks.check_attention,
                lambda q, k, v: softmax(q @ swap(k) / np.sqrt(q.shape[-1]), axis=-2) @ v)
    assert "wrong axis" in msg


def test_attention_catches_k_not_transposed():
    msg = fails(checks.check_attention, lambda q, k, v: softmax(q @ k / np.sqrt(k.shape[-1])) @ v)
    assert "L = S = 3 positions" in msg and "raised ValueError" in msg
    assert "q @ k instead of q @ kᵀ" in msg


def test_attention_catches_transpose_of_all_axes_on_a_batch():
    # .T is right for a matrix and wrong for (B, H, S, E): only the batch case can see it.
    msg = fails(checks.check_attention, lambda q, k, v: softmax(q @ k.T / np.sqrt(q.shape[-1])) @ v)
    assert "leading batch axes" in msg
    assert "np.swapaxes(k, -1, -2)" in msg


def test_attention_message_in_chinese():
    msg = fails(checks.check_attention, lambda q, k, v: softmax(q @ swap(k)) @ v, lang="zh")
    assert "L = S = 3 个位置" in msg and "没有除以 √d_k" in msg


# --- exercise 2: causal mask ------------------------------------------------------------------

def test_causal_catches_the_upper_triangle():
    msg = fails(checks.check_causal_mask, lambda L, S: np.triu(np.ones((L, S), dtype=bool)))
    assert "L = S = 4" in msg and "upper triangle" in msg


def test_causal_catches_true_meaning_blocked():
    msg = fails(checks.check_causal_mask, lambda L, S: ~causal_mask(L, S))
    assert "L = S = 4" in msg and "exactly inverted" in msg


def test_causal_catches_a_blocked_diagonal():
    msg = fails(checks.check_causal_mask, lambda L, S: np.tri(L, S, k=-1, dtype=bool))
    assert "blocks the diagonal" in msg


def test_causal_catches_a_triangle_aligned_bottom_right():
    # Right whenever L == S, so only the L != S cases can see it.
    msg = fails(checks.check_causal_mask, lambda L, S: np.tri(L, S, k=S - L, dtype=bool))
    assert "L = 3 queries, S = 5 keys (L < S)" in msg
    assert "bottom-right" in msg


def test_causal_catches_a_square_mask_when_l_differs_from_s():
    msg = fails(checks.check_causal_mask, lambda L, S: causal_mask(L))
    assert "(L < S)" in msg and "shape (3, 3), expected (3, 5)" in msg


def test_causal_catches_a_float_mask():
    msg = fails(checks.check_causal_mask, lambda L, S: np.tri(L, S))
    assert "L = S = 4" in msg and "dtype is not bool" in msg


@settings(max_examples=40, deadline=None)
@given(i=st.integers(0, 3), j=st.integers(0, 3))
def test_causal_catches_any_single_wrong_entry(i, j):
    def one_off(L, S):
        m = causal_mask(L, S)
        m[i % L, j % S] = ~m[i % L, j % S]
        return m
    msg = fails(checks.check_causal_mask, one_off)
    assert "L = S = 4" in msg


# --- exercise 3: padding mask -----------------------------------------------------------------

def test_padding_catches_off_by_one_letting_padding_in():
    msg = fails(checks.check_padding_mask,
                lambda lengths, S: (np.arange(S) <= np.asarray(lengths)[:, None])[:, None, :])
    assert "lengths = [3, 1], S = 4" in msg and "Off by one" in msg


def test_padding_catches_off_by_one_blocking_the_last_word():
    msg = fails(checks.check_padding_mask,
                lambda lengths, S: (np.arange(S) < np.asarray(lengths)[:, None] - 1)[:, None, :])
    assert "lengths = [3, 1], S = 4" in msg and "block the last real word" in msg


def test_padding_catches_the_inverted_mask():
    msg = fails(checks.check_padding_mask, lambda lengths, S: ~padding_mask(lengths, S))
    assert "inverted" in msg


def test_padding_catches_the_missing_query_axis():
    msg = fails(checks.check_padding_mask, lambda lengths, S: padding_mask(lengths, S)[:, 0, :])
    assert "shape (2, 4), expected (2, 1, 4)" in msg and "(B, 1, S)" in msg


def test_padding_catches_an_empty_sentence_treated_as_length_one():
    def at_least_one(lengths, S):
        return padding_mask(np.maximum(np.asarray(lengths), 1), S)
    msg = fails(checks.check_padding_mask, at_least_one, lang="zh")
    assert "有一个空句子" in msg


# --- exercise 4: stable softmax ---------------------------------------------------------------

def naive_softmax(x):
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def shift_without_guard(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_softmax_catches_the_naive_overflow():
    msg = fails(checks.check_stable_softmax, naive_softmax)
    assert "large logits" in msg and "NaN" in msg and "Subtract each row's maximum" in msg


def test_softmax_catches_nan_on_a_fully_masked_row():
    msg = fails(checks.check_stable_softmax, shift_without_guard)
    assert "a fully masked second row" in msg and "Use 0 as that row's maximum" in msg


def test_softmax_catches_the_wrong_axis():
    msg = fails(checks.check_stable_softmax, lambda x: softmax(x, axis=0))
    assert "wrong axis" in msg


def test_softmax_catches_float32_promoted_to_float64():
    msg = fails(checks.check_stable_softmax, lambda x: softmax(np.asarray(x, dtype=np.float64)))
    assert "float32 logits" in msg and "dtype float64, expected float32" in msg


def test_softmax_checks_leak_no_warning():
    # pyproject turns RuntimeWarning into errors: a warning from the check itself would fail here.
    fails(checks.check_stable_softmax, naive_softmax)


# --- the notebook's solutions agree with the library on shapes the checks do not try ----------

@settings(max_examples=30, deadline=None)
@given(L=st.integers(1, 5), S=st.integers(1, 5), E=st.integers(1, 6), Ev=st.integers(1, 4),
       seed=st.integers(0, 2**16))
def test_solution_attention_matches_the_library(L, S, E, Ev, seed):
    sol = load_solutions(NAME)["my_attention"]
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(2, L, E)), rng.normal(size=(2, S, E)), rng.normal(size=(2, S, Ev))
    assert np.allclose(sol(q, k, v), scaled_dot_product_attention(q, k, v))


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(st.lists(st.one_of(st.floats(-1e4, 1e4), st.just(-np.inf)),
                              min_size=3, max_size=3), min_size=1, max_size=4))
def test_solution_softmax_matches_the_library(rows):
    sol = load_solutions(NAME)["stable_softmax"]
    x = np.array(rows)
    got = sol(x)
    assert not np.isnan(got).any()
    assert np.allclose(got, softmax(x))


# --- the widget -------------------------------------------------------------------------------

@pytest.fixture
def explorer():
    ex = widgets.ScaleExplorer(lang="en", d_k=64, scale=True)
    yield ex
    plt.close("all")


def test_widget_slider_without_scale_saturates_the_softmax(explorer):
    explorer.controls["scale"].value = False
    at_64 = dict(explorer.data)
    explorer.controls["d_k"].value = 256
    at_256 = explorer.data
    assert at_256["d_k"] == 256 and not at_256["scale"]
    assert at_256["score_std"] == pytest.approx(16, rel=0.1)          # √256
    assert at_256["max_weight"] > at_64["max_weight"] > 0.8
    assert at_256["jacobian_norm"] < at_64["jacobian_norm"]


def test_widget_switch_brings_the_spread_back_to_one(explorer):
    explorer.controls["d_k"].value = 1024
    explorer.controls["scale"].value = False
    off = dict(explorer.data)
    explorer.controls["scale"].value = True
    on = explorer.data
    assert off["score_std"] == pytest.approx(32, rel=0.1)             # √1024
    assert on["score_std"] == pytest.approx(1, rel=0.1)
    assert on["jacobian_norm"] > 5 * off["jacobian_norm"]
    # The same query in both settings: the switch only swaps which bars are current.
    assert np.allclose(on["weights"], off["other_weights"])


def test_widget_curves_cover_every_width(explorer):
    curves = explorer.data["curves"]
    assert curves["d_k"] == list(widgets.D_K_OPTIONS)
    unscaled = curves["unscaled"]["max_weight"]
    assert unscaled == sorted(unscaled)                               # saturation grows with d_k
    assert max(curves["scaled"]["jacobian_norm"]) - min(curves["scaled"]["jacobian_norm"]) < 0.05


@settings(max_examples=9, deadline=None)
@given(d_k=st.sampled_from(widgets.D_K_OPTIONS), seed=st.integers(0, 5))
def test_widget_scale_never_sharpens_the_weights(d_k, seed):
    # softmax(c·x) puts more on its largest entry as c grows, row by row; √d_k > 1 is such a c.
    on = widgets.saturation_stats(d_k, True, n_queries=50, seed=seed)
    off = widgets.saturation_stats(d_k, False, n_queries=50, seed=seed)
    assert off["max_weight"] >= on["max_weight"]
    assert off["score_std"] == pytest.approx(np.sqrt(d_k) * on["score_std"])


def test_widget_is_seeded(explorer):
    again = widgets.ScaleExplorer(lang="en", d_k=64, scale=True)
    assert again.data["score_std"] == explorer.data["score_std"]
    assert np.array_equal(again.data["weights"], explorer.data["weights"])


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_widget_figure_draws_three_panels_with_the_numbers(lang):
    ex = widgets.ScaleExplorer(lang=lang, d_k=256, scale=False)
    fig = ex.figure()
    assert isinstance(fig, Figure) and len(fig.axes) == 3
    title = fig._suptitle.get_text()
    assert "d_k = 256" in title and f"{ex.data['max_weight']:.2f}" in title
    assert len(fig.axes[0].patches) == 2 * widgets.N_KEYS              # both settings' bars
    plt.close(fig)


def test_widget_refuses_unknown_width_and_language():
    with pytest.raises(ValueError, match="d_k must be one of"):
        widgets.ScaleExplorer(d_k=100)
    with pytest.raises(ValueError, match="lang"):
        widgets.ScaleExplorer(lang="fr")


def test_softmax_jacobian_rows_sum_to_zero_and_match_finite_differences():
    x = np.array([0.5, 0.3, 1.2, 3.0])
    J = widgets.softmax_jacobian(softmax(x))
    eps = 1e-6
    numeric = np.stack([(softmax(x + eps * e) - softmax(x - eps * e)) / (2 * eps)
                        for e in np.eye(4)], axis=1)
    assert np.allclose(J, numeric, atol=1e-8)
    assert np.allclose(J.sum(axis=1), 0)
