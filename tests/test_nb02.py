"""Notebook 02: its exercise checks accept the solution, refuse the stub and typical slips, and
its widget's data follows the controls."""

from functools import cache

import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt

import attention_course
from attention_course import project_qkv, softmax
from attention_course.checks import CheckFailed
from attention_course.checks import nb02 as nb02_checks
from attention_course.widgets import nb02
from notebook_tools import failure, load_solutions

NAME = "02_qkv_projections.ipynb"


# --------------------------------------------------------------------------- exercise 1
def _blocks(W):
    E = W.shape[1]
    return W[:E], W[E:2 * E], W[2 * E:]


def in_proj_right(X, W):
    q, k, v = _blocks(W)
    return X @ q.T, X @ k.T, X @ v.T


def in_proj_einsum(X, W):
    return tuple(np.einsum("...nd,ed->...ne", X, block) for block in np.split(np.asarray(W), 3))


def in_proj_via_project_qkv(X, W):
    q, k, v = _blocks(np.asarray(W))
    return project_qkv(X, q.T, k.T, v.T)            # the library's projection is allowed here


def in_proj_as_lists(X, W):
    return [m.tolist() for m in in_proj_right(np.asarray(X), np.asarray(W))]


def in_proj_in_float64(X, W):
    return in_proj_right(np.asarray(X, dtype=float), np.asarray(W, dtype=float))


@pytest.mark.parametrize("right", [in_proj_right, in_proj_einsum, in_proj_via_project_qkv,
                                   in_proj_as_lists, in_proj_in_float64])
def test_in_proj_accepts_other_correct_answers(right, capsys):
    nb02_checks.check_qkv_from_in_proj(right)
    assert "all 4 cases pass" in capsys.readouterr().out


def no_transpose(X, W):
    q, k, v = _blocks(W)
    return X @ q, X @ k, X @ v


def wrong_order(X, W):
    q, k, v = _blocks(W)
    return X @ k.T, X @ q.T, X @ v.T


def split_along_columns(X, W):
    return tuple(X @ block for block in np.array_split(W, 3, axis=1))


def whole_matrix(X, W):
    out = X @ W.T                                    # (..., n, 3E): right, but not split
    return out, out, out


def no_batch(X, W):
    q, k, v = _blocks(W)
    return tuple(np.einsum("nd,ed->ne", X, b) for b in (q, k, v))


@pytest.mark.parametrize("wrong, fragment", [
    (no_transpose, "4 tokens, d_model = 3"), (wrong_order, "item 0"),
    (split_along_columns, "4 tokens"), (whole_matrix, "shape"),
    (no_batch, "a batch of 2 sentences"),
], ids=["no-transpose", "order", "columns", "unsplit", "no-batch"])
def test_in_proj_catches(wrong, fragment):
    assert fragment in failure(nb02_checks.check_qkv_from_in_proj, wrong)


def test_in_proj_message_in_chinese():
    msg = failure(nb02_checks.check_qkv_from_in_proj, no_transpose, lang="zh")
    assert "未通过" in msg and "提示" in msg and "4 个词" in msg


def test_in_proj_reference_is_how_torch_projects():
    # The check's reading of in_proj_weight is torch's: F.linear(x, W) split into three chunks.
    torch = pytest.importorskip("torch")
    X = np.random.default_rng(0).normal(size=(2, 3, 4))
    W = np.random.default_rng(1).normal(size=(12, 4))
    expected = torch.nn.functional.linear(torch.from_numpy(X), torch.from_numpy(W)).chunk(3, dim=-1)
    for got, want in zip(nb02_checks._qkv_from_in_proj_reference(X, W), expected, strict=True):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- exercise 2
def one_way_shared(X, i, j):
    W_Q, W_K = load_solutions(NAME, "en")["one_way"](X, i, j)
    return W_Q, W_Q                                  # W_K = W_Q: scores are symmetric


def one_way_forgets_row_j(X, i, j):
    P = np.linalg.pinv(np.asarray(X, dtype=float))
    return 20 * P[:, i:i + 1], P[:, j:j + 1]         # i asks, j answers; j's own row stays even


def one_way_backwards(X, i, j):
    return load_solutions(NAME, "en")["one_way"](X, j, i)


def one_way_too_gentle(X, i, j):
    P = np.linalg.pinv(np.asarray(X, dtype=float))
    return (P[:, i] + P[:, j])[:, None], P[:, j:j + 1]   # the right pattern, scores of only 1


def one_way_overflows(X, i, j):
    P = np.linalg.pinv(np.asarray(X, dtype=float))
    return 1e200 * (P[:, i] + P[:, j])[:, None], 1e200 * P[:, j:j + 1]


def one_way_wrong_shape(X, i, j):
    W_Q, W_K = load_solutions(NAME, "en")["one_way"](X, i, j)
    return W_Q.T, W_K.T


@pytest.mark.parametrize("wrong, fragment", [
    (one_way_shared, "must be at"),
    (one_way_forgets_row_j, "must be at most 0.1"),
    (one_way_backwards, "must be at least 0.9"),
    (one_way_too_gentle, "must be at least 0.9"),
    (one_way_overflows, "NaN"),
    (one_way_wrong_shape, "must be (d_model, d_k)"),
    (lambda X, i, j: np.eye(X.shape[1]), "expected the pair"),
], ids=["shared-from-the-solution", "row-j-even", "backwards", "too-gentle", "overflow", "shape",
        "not-a-pair"])
def test_one_way_catches(wrong, fragment):
    msg = failure(nb02_checks.check_one_way, wrong)
    assert fragment in msg and "'it is a cat'" in msg


def one_way_wide(X, i, j):
    """Another correct answer: d_k = 3, and word j looks at a third word instead of itself."""
    X = np.asarray(X, dtype=float)
    n = X.shape[0]
    P = np.linalg.pinv(X)
    m = next(t for t in range(n) if t != i) if n > 2 else j
    target = j if n == 2 else next(t for t in range(n) if t not in (i,))
    W_Q = np.zeros((X.shape[1], 3))
    W_K = np.zeros((X.shape[1], 3))
    W_Q[:, 0] = 30 * P[:, i]
    W_K[:, 0] = P[:, j]
    W_Q[:, 1] = 30 * P[:, j]
    W_K[:, 1] = P[:, target]
    del m
    return W_Q, W_K


def one_way_lstsq_float32(X, i, j):
    X = np.asarray(X, dtype=np.float32)
    E = np.eye(X.shape[0], dtype=np.float32)
    P = np.linalg.lstsq(X, E, rcond=None)[0]         # (d_model, n), in float32
    return (25 * (P[:, i] + P[:, j]))[:, None], P[:, j][:, None]


@pytest.mark.parametrize("right", [one_way_wide, one_way_lstsq_float32])
def test_one_way_accepts_other_correct_answers(right, capsys):
    nb02_checks.check_one_way(right)
    assert "all 6 cases pass" in capsys.readouterr().out


def test_one_way_message_in_chinese():
    msg = failure(nb02_checks.check_one_way, one_way_forgets_row_j, lang="zh")
    assert "应至多 0.1" in msg and "提示" in msg


def test_one_way_solution_on_the_notebook_sentence():
    from attention_course import examples

    X = examples.toy_embeddings(examples.IT_IS_A_CAT["en"], 8, seed=3)
    W_Q, W_K = load_solutions(NAME, "zh")["one_way"](X, 0, 3)
    A = softmax((X @ W_Q) @ (X @ W_K).T / np.sqrt(W_K.shape[1]), axis=-1)
    assert A[0, 3] > 0.99 and A[3, 0] < 0.01


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


@pytest.mark.parametrize("kwargs", [{"scale": False}, {"axis": 0}], ids=["no-scale", "axis-0"])
def test_cross_catches(kwargs):
    msg = failure(nb02_checks.check_cross_attention_weights,
                  lambda a, b, W_Q, W_K: _cross(a, b, W_Q, W_K, **kwargs))
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


def cross_by_the_library(X_query, X_source, W_Q, W_K):
    Q, K = X_query @ W_Q, X_source @ W_K
    return attention_course.scaled_dot_product_attention(Q, K, K, return_weights=True)[1]


def test_cross_refuses_the_library_attention():
    assert "scaled_dot_product_attention" in failure(nb02_checks.check_cross_attention_weights,
                                                     cross_by_the_library)


def cross_in_float32(X_query, X_source, W_Q, W_K):
    Q = np.float32(X_query) @ np.float32(W_Q)
    K = np.float32(X_source) @ np.float32(W_K)
    s = Q @ K.T / np.float32(np.sqrt(K.shape[-1]))
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def cross_with_a_loop(X_query, X_source, W_Q, W_K):
    K = X_source @ W_K
    return np.array([softmax(K @ (x @ W_Q) / np.sqrt(K.shape[-1])) for x in X_query])


@pytest.mark.parametrize("right", [lambda a, b, q, k: _cross(a, b, q, k), cross_with_a_loop])
def test_cross_accepts_other_correct_answers(right, capsys):
    nb02_checks.check_cross_attention_weights(right)
    assert "all 5 cases pass" in capsys.readouterr().out


def test_cross_refuses_float32_out_for_float64_in():
    # the one dtype rule: float64 inputs need a float64 result, whatever the tolerance would allow
    msg = failure(nb02_checks.check_cross_attention_weights, cross_in_float32)
    assert "less precise than the inputs (float64)" in msg and "L=3, S=5" in msg


# --------------------------------------------------------------------------- exercise 4
def _unit_upper(d_k):
    return np.eye(d_k) + np.triu(np.ones((d_k, d_k)), k=1)      # invertible, not orthogonal


def same_scores_by_rotation(W_Q, W_K):
    R = attention_course.plane_rotation(np.shape(W_Q)[1], 0.7)   # orthogonal: R Rᵀ = I
    return np.asarray(W_Q) @ R, np.asarray(W_K) @ R


def same_scores_by_column_scales(W_Q, W_K):
    c = np.arange(1.0, np.shape(W_Q)[1] + 1)                     # a different number per column
    return np.asarray(W_Q) * c, np.asarray(W_K) / c


def same_scores_in_float32(W_Q, W_K):
    A = _unit_upper(np.shape(W_Q)[1]).astype(np.float32)
    W_Q, W_K = np.asarray(W_Q, dtype=np.float32), np.asarray(W_K, dtype=np.float32)
    return W_Q @ A, W_K @ np.linalg.inv(A).T


def same_scores_as_lists(W_Q, W_K):
    A = _unit_upper(np.shape(W_Q)[1])
    return (np.asarray(W_Q) @ A).tolist(), (np.asarray(W_K) @ np.linalg.inv(A).T).tolist()


@pytest.mark.parametrize("right", [same_scores_by_rotation, same_scores_by_column_scales,
                                   same_scores_as_lists],
                         ids=["rotation", "column scales", "lists"])
def test_same_scores_accepts_other_correct_answers(right, capsys):
    nb02_checks.check_same_scores(right, lang="en")
    assert capsys.readouterr().out.startswith("✓")


def test_same_scores_refuses_a_float32_pair_for_float64_inputs():
    # the one dtype rule of every check: the result is at least as precise as the inputs
    with pytest.raises(CheckFailed, match="less precise than the inputs"):
        nb02_checks.check_same_scores(same_scores_in_float32, lang="en")


@pytest.mark.parametrize("wrong, fragment", [
    (lambda W_Q, W_K: (W_Q, W_K), "is a multiple of W_Q"),
    (lambda W_Q, W_K: (2 * np.asarray(W_Q), np.asarray(W_K) / 2), "is a multiple of W_Q"),
    (lambda W_Q, W_K: (W_K, W_Q), "swapped roles"),
    (lambda W_Q, W_K: (2 * np.asarray(W_Q) @ attention_course.plane_rotation(np.shape(W_Q)[1], 0.5),
                       2 * np.asarray(W_K) @ attention_course.plane_rotation(np.shape(W_Q)[1], 0.5)),
     "4 times the original"),
    # the same matrix on both sides, not orthogonal: it does not cancel out
    (lambda W_Q, W_K: (np.asarray(W_Q) @ _unit_upper(np.shape(W_Q)[1]),
                       np.asarray(W_K) @ _unit_upper(np.shape(W_Q)[1])), "differ from the original"),
    # the inverse without its transpose
    (lambda W_Q, W_K: (np.asarray(W_Q) @ _unit_upper(np.shape(W_Q)[1]),
                       np.asarray(W_K) @ np.linalg.inv(_unit_upper(np.shape(W_Q)[1]))),
     "differ from the original"),
    (lambda W_Q, W_K: (np.asarray(W_Q).T, np.asarray(W_K).T), "must keep the shape"),
    (lambda W_Q, W_K: np.asarray(W_Q), "expected the pair"),
    (lambda W_Q, W_K: (np.full(np.shape(W_Q), np.nan), np.asarray(W_K)), "NaN"),
], ids=["unchanged", "c and 1/c", "swapped", "rescaled", "A and A",
        "inverse without transpose", "transposed", "one matrix", "nan"])
def test_same_scores_catches_each_classic_mistake(wrong, fragment):
    assert fragment in failure(nb02_checks.check_same_scores, wrong)


def test_same_scores_speaks_chinese():
    msg = failure(nb02_checks.check_same_scores, lambda W_Q, W_K: (W_K, W_Q), lang="zh")
    assert "角色换了" in msg and "输入" in msg


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), d_model=st.integers(2, 8), d_k=st.integers(2, 5))
def test_same_scores_solution_keeps_every_score(seed, d_model, d_k):
    # the notebook's answer keeps X W_Q (X W_K)ᵀ for any X and any pair, and changes both matrices
    same_scores = load_solutions(NAME, "en")["same_scores"]
    rng = np.random.default_rng(seed)
    W_Q, W_K = rng.normal(size=(d_model, d_k)), rng.normal(size=(d_model, d_k))
    X = rng.normal(size=(7, d_model))
    W_Q2, W_K2 = same_scores(W_Q, W_K)
    np.testing.assert_allclose((X @ W_Q2) @ (X @ W_K2).T, (X @ W_Q) @ (X @ W_K).T, rtol=1e-9, atol=1e-9)
    assert not np.allclose(W_Q2, W_Q) and not np.allclose(W_K2, W_K)


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


def one_way_as_lists(X, i, j):
    W_Q, W_K = load_solutions(NAME, "en")["one_way"](X, i, j)
    return [W_Q.tolist(), W_K.tolist()]


def test_one_way_accepts_lists(capsys):
    nb02_checks.check_one_way(one_way_as_lists)
    assert "all 6 cases pass" in capsys.readouterr().out
