"""Notebook 02: its exercise checks accept the solution, refuse the stub and typical slips, and
its widget's data follows the controls."""

from functools import cache

import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt

from attention_course import project_qkv, softmax
from attention_course.checks import CheckFailed
from attention_course.checks import nb02 as nb02_checks
from attention_course.widgets import nb02
from notebook_tools import failure, load_solutions, stub

NAME = "02_qkv_projections.ipynb"


@pytest.fixture(scope="module")
def solutions():
    return load_solutions(NAME)


# --------------------------------------------------------------------------- every check
CHECKS = [
    ("qkv", nb02_checks.check_qkv),
    ("score_matrix", nb02_checks.check_score_matrix),
    ("cross_attention_weights", nb02_checks.check_cross_attention_weights),
    ("cosine", nb02_checks.check_cosine),
]


@pytest.mark.parametrize(("name", "check"), CHECKS, ids=[n for n, _ in CHECKS])
def test_check_passes_on_the_notebook_solution(solutions, name, check, capsys):
    check(solutions[name])
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize(("name", "check"), CHECKS, ids=[n for n, _ in CHECKS])
def test_check_lets_the_stub_fail_with_not_implemented(name, check):
    with pytest.raises(NotImplementedError):
        check(stub)


@pytest.mark.parametrize(("name", "check"), CHECKS, ids=[n for n, _ in CHECKS])
def test_check_refuses_something_that_is_not_a_function(name, check):
    with pytest.raises(CheckFailed, match="expected a function"):
        check(np.zeros(3))


def test_both_editions_hold_the_same_solutions():
    en, zh = load_solutions(NAME, "en"), load_solutions(NAME, "zh")
    assert set(en) == set(zh) == {"qkv", "score_matrix", "cross_attention_weights", "cosine"}


# --------------------------------------------------------------------------- exercise 1
def test_qkv_catches_a_transposed_W():
    msg = failure(nb02_checks.check_qkv, lambda X, W_Q, W_K, W_V: (X @ W_Q.T, X @ W_K.T, X @ W_V.T))
    assert "W is not square" in msg and "ValueError" in msg


def test_qkv_catches_a_transpose_even_where_shapes_allow_it():
    # Transposes only a square W, so that no shape error gives it away: the square case must.
    def sneaky(X, W_Q, W_K, W_V):
        t = [W.T if W.shape[0] == W.shape[1] else W for W in (W_Q, W_K, W_V)]
        return X @ t[0], X @ t[1], X @ t[2]

    assert "W is square" in failure(nb02_checks.check_qkv, sneaky)


def test_qkv_catches_W_Q_used_for_the_keys():
    msg = failure(nb02_checks.check_qkv, lambda X, W_Q, W_K, W_V: (X @ W_Q, X @ W_Q, X @ W_V))
    assert "item 1" in msg and "4 tokens" in msg


def test_qkv_catches_the_wrong_order():
    msg = failure(nb02_checks.check_qkv, lambda X, W_Q, W_K, W_V: (X @ W_Q, X @ W_V, X @ W_K))
    assert "item 1" in msg and "shape" in msg


def test_qkv_catches_no_batch_support():
    def two_d_only(X, W_Q, W_K, W_V):
        return tuple(np.einsum("ld,dk->lk", X, W) for W in (W_Q, W_K, W_V))

    assert "batch of 2 sentences" in failure(nb02_checks.check_qkv, two_d_only)


def test_qkv_message_speaks_chinese_when_asked():
    msg = failure(nb02_checks.check_qkv, lambda X, W_Q, W_K, W_V: (X @ W_Q, X @ W_Q, X @ W_V),
                  lang="zh")
    assert "未通过" in msg and "W 不是方阵" in msg and "提示" in msg


# --------------------------------------------------------------------------- exercise 2
def test_score_matrix_catches_K_Q_transposed():
    msg = failure(nb02_checks.check_score_matrix, lambda Q, K: K @ Q.T)
    assert "not symmetric" in msg


def test_K_Q_transposed_is_seen_only_by_the_non_symmetric_cases():
    # Why the check needs a non-symmetric case: on Q = K both orders agree.
    from attention_course.checks import check_function

    cases = nb02_checks._score_cases()
    symmetric = [c for c in cases if "symmetric" in c.label["en"] and "not" not in c.label["en"]]
    assert len(symmetric) == 1
    check_function(lambda Q, K: K @ Q.T, nb02_checks._scores, symmetric, name="x")
    with pytest.raises(CheckFailed):
        check_function(lambda Q, K: K @ Q.T, nb02_checks._scores, cases[:1], name="x")


def test_score_matrix_catches_Q_transposed_times_K():
    msg = failure(nb02_checks.check_score_matrix, lambda Q, K: Q.T @ K)
    assert "shape" in msg and "4 queries" in msg


def test_score_matrix_catches_an_early_scale():
    msg = failure(nb02_checks.check_score_matrix, lambda Q, K: Q @ K.T / np.sqrt(K.shape[-1]))
    assert "4 queries" in msg


def test_score_matrix_message_in_chinese():
    msg = failure(nb02_checks.check_score_matrix, lambda Q, K: K @ Q.T, lang="zh")
    assert "不对称" in msg and "K @ Q.T" in msg


# --------------------------------------------------------------------------- exercise 3
def _cross(X_query, X_source, W_Q, W_K, *, swap=False, scale=True, axis=-1):
    if swap:
        X_query, X_source = X_source, X_query
    Q, K = X_query @ W_Q, X_source @ W_K
    s = Q @ K.T
    return softmax(s / np.sqrt(K.shape[-1]) if scale else s, axis=axis)


def test_cross_catches_swapped_sources():
    msg = failure(nb02_checks.check_cross_attention_weights,
                  lambda a, b, W_Q, W_K: _cross(a, b, W_Q, W_K, swap=True))
    assert "L=3, S=5" in msg and "shape (5, 3)" in msg


def test_cross_catches_swapped_sources_when_the_lengths_agree():
    # Transposed back to (L, S), a swap can only be seen in the values: the L = S case sees it.
    msg = failure(nb02_checks.check_cross_attention_weights,
                  lambda a, b, W_Q, W_K: _cross(a, b, W_Q, W_K, swap=True).T
                  if a.shape[0] == b.shape[0] else _cross(a, b, W_Q, W_K))
    assert "L = S" in msg


def test_cross_catches_a_missing_scale():
    msg = failure(nb02_checks.check_cross_attention_weights,
                  lambda a, b, W_Q, W_K: _cross(a, b, W_Q, W_K, scale=False))
    assert "L=3, S=5" in msg


def test_cross_catches_softmax_over_the_wrong_axis():
    msg = failure(nb02_checks.check_cross_attention_weights,
                  lambda a, b, W_Q, W_K: _cross(a, b, W_Q, W_K, axis=0))
    assert "L=3, S=5" in msg


def test_cross_catches_a_softmax_that_overflows():
    def naive(X_query, X_source, W_Q, W_K):
        Q, K = X_query @ W_Q, X_source @ W_K
        e = np.exp(Q @ K.T / np.sqrt(K.shape[-1]))
        return e / e.sum(-1, keepdims=True)

    msg = failure(nb02_checks.check_cross_attention_weights, naive)
    assert "very large scores" in msg and "NaN" in msg


def test_cross_catches_W_Q_used_for_the_keys():
    msg = failure(nb02_checks.check_cross_attention_weights,
                  lambda a, b, W_Q, W_K: _cross(a, b, W_Q, W_Q))
    assert "L=3, S=5" in msg


# --------------------------------------------------------------------------- exercise 4
def test_cosine_catches_a_missing_normalisation():
    msg = failure(nb02_checks.check_cosine, lambda a, b: np.sum(a * b, axis=-1))
    assert "length is not 1" in msg and "Hint" in msg


def test_cosine_catches_half_a_normalisation():
    msg = failure(nb02_checks.check_cosine,
                  lambda a, b: np.sum(a * b, axis=-1) / np.linalg.norm(a, axis=-1))
    assert "length is not 1" in msg


def test_cosine_catches_nan_for_a_zero_vector():
    def no_guard(a, b):
        return np.sum(a * b, axis=-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))

    msg = failure(nb02_checks.check_cosine, no_guard)
    assert "zero vector" in msg and "NaN" in msg


def test_cosine_catches_a_matrix_product_instead_of_a_row_wise_dot():
    def matmul(a, b):
        return (a @ b) / (np.linalg.norm(a) * np.linalg.norm(b))

    assert "row by row" in failure(nb02_checks.check_cosine, matmul)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=3, max_size=3),
       st.floats(0.1, 10), st.booleans())
def test_cosine_solution_property_scale_invariance(solutions, vec, factor, flip):
    # The notebook's cosine ignores length: scaling one vector by c > 0 changes nothing,
    # by -c flips the sign.
    cosine = solutions["cosine"]
    a = np.array(vec)
    b = np.array([1.0, -2.0, 0.5])
    c = -factor if flip else factor
    assert np.isclose(cosine(a, c * b), np.sign(c) * cosine(a, b), atol=1e-9)
    assert -1 - 1e-12 <= cosine(a, b) <= 1 + 1e-12


# --------------------------------------------------------------------------- widget
@cache
def _pure_explorer(lang="en"):
    """One explorer for pure compute() calls (never has its controls touched)."""
    return nb02.SymmetryExplorer(lang=lang)


@pytest.fixture
def explorer():
    ex = nb02.SymmetryExplorer(lang="en")
    yield ex
    plt.close("all")


def test_widget_shared_makes_the_scores_symmetric(explorer):
    explorer.controls["shared"].value = False
    explorer.controls["angle"].value = 90
    assert explorer.data["asymmetry"] > 0.5
    assert explorer.data["forward"] != pytest.approx(explorer.data["backward"])
    explorer.controls["shared"].value = True
    S = explorer.data["scores"]
    assert explorer.data["asymmetry"] < 1e-12
    assert np.allclose(S, S.T)
    assert explorer.data["forward"] == pytest.approx(explorer.data["backward"])


def test_widget_angle_changes_the_data_and_redraws(explorer):
    explorer.controls["shared"].value = False
    explorer.controls["angle"].value = 0
    before, redraws = explorer.data["asymmetry"], explorer.redraws
    explorer.controls["angle"].value = 45
    assert explorer.redraws == redraws + 1
    assert before < 1e-12 < 0.1 < explorer.data["asymmetry"]
    explorer.controls["angle"].value = 180
    assert explorer.data["asymmetry"] < 1e-12     # a half turn is symmetric again


def test_widget_slider_greys_out_when_shared(explorer):
    explorer.controls["shared"].value = True
    assert explorer.controls["angle"].disabled
    explorer.controls["shared"].value = False
    assert not explorer.controls["angle"].disabled


def test_widget_shared_scores_are_the_notebooks_projection():
    ex = _pure_explorer()
    Q, K, _ = project_qkv(ex._x, ex.W_q, ex.W_q, ex.W_q)
    assert np.allclose(ex.compute(shared=True, angle=0)["scores"], Q @ K.T)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 180))
def test_widget_asymmetry_follows_sin_theta(deg):
    data = _pure_explorer().compute(shared=False, angle=deg)
    expected = data["asym_limit"] * abs(np.sin(np.deg2rad(deg)))
    assert data["asymmetry"] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert np.abs(data["scores"]).max() <= data["score_limit"] + 1e-12


def test_widget_figure_draws_both_heatmaps_with_the_measure(explorer):
    explorer.controls["shared"].value = False
    explorer.controls["angle"].value = 90
    fig = explorer.figure()
    assert isinstance(fig, matplotlib.figure.Figure)
    titles = [ax.get_title() for ax in fig.axes]
    assert any(f"max {explorer.data['asymmetry']:.3f}" in t for t in titles)
    assert any("it→cat" in t for t in titles)


def test_widget_speaks_chinese():
    ex = _pure_explorer("zh")
    assert ex.tokens == ["它", "是", "一只", "猫"]
    assert "共用" in ex.controls["shared"].options[0][0]
    fig = ex.draw(ex.compute(shared=True, angle=0))
    assert any("它→猫" in ax.get_title() for ax in fig.axes)
    plt.close(fig)
    # same vectors in both languages: the editions show the same numbers
    assert np.allclose(ex.compute(shared=False, angle=60)["scores"],
                       _pure_explorer("en").compute(shared=False, angle=60)["scores"])


def test_widget_refuses_an_unknown_language():
    with pytest.raises(ValueError, match="lang"):
        nb02.SymmetryExplorer(lang="fr")
