"""Notebook 04 (multi-head attention): its exercise checks and its widget."""

import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt

from attention_course import checks, head_patterns, merge_heads, scaled_dot_product_attention
from attention_course.checks import CheckFailed
from attention_course.checks import nb04 as nb04_checks
from attention_course.widgets import nb04
from notebook_tools import load_solutions, stub

NAME = "04_multi_head_attention.ipynb"


@pytest.fixture(scope="module")
def solutions():
    return load_solutions(NAME)


# --- exercise 1: split_heads -------------------------------------------------------------------

def split_without_transpose(x, num_heads):
    *batch, L, E = x.shape
    return x.reshape(*batch, num_heads, L, E // num_heads)      # heads split in the wrong order


def split_interleaved(x, num_heads):
    *batch, L, E = x.shape
    x = x.reshape(*batch, L, E // num_heads, num_heads)          # head h = every H-th feature
    return np.moveaxis(x, -1, -3)


def split_2d_only(x, num_heads):
    L, E = x.shape                                               # forgets leading batch axes
    return x.reshape(L, num_heads, E // num_heads).transpose(1, 0, 2)


def test_split_heads_check_passes_on_the_solution(solutions, capsys):
    nb04_checks.check_split_heads(solutions["my_split_heads"])
    assert "all 6 cases pass" in capsys.readouterr().out


def test_split_heads_check_lets_the_stub_through():
    with pytest.raises(NotImplementedError):
        nb04_checks.check_split_heads(stub)


@pytest.mark.parametrize("wrong, fragment", [
    (split_without_transpose, "x of shape (L=3, E=4), H=2"),
    (split_interleaved, "x of shape (L=3, E=4), H=2"),
    (split_2d_only, "a batch (B=2, L=4, E=6), H=2"),
])
def test_split_heads_check_catches(wrong, fragment):
    with pytest.raises(CheckFailed) as info:
        nb04_checks.check_split_heads(wrong)
    assert fragment in str(info.value)
    assert "Hint" in str(info.value)


def test_split_heads_check_speaks_chinese():
    checks.set_language("zh")
    with pytest.raises(CheckFailed) as info:
        nb04_checks.check_split_heads(split_without_transpose)
    assert "x 形状 (L=3, E=4),H=2" in str(info.value) and "提示" in str(info.value)


# --- exercise 2: merge_heads -------------------------------------------------------------------

def merge_without_transpose(x):
    *batch, H, L, D = x.shape
    return x.reshape(*batch, L, H * D)                           # mixes words across heads


def merge_interleaved(x):
    *batch, H, L, D = x.shape
    return np.moveaxis(x, -3, -1).reshape(*batch, L, H * D)      # feature-major: [h0f0, h1f0, ...]


def merge_reversed(x):
    return np.concatenate(list(np.moveaxis(x, -3, 0))[::-1], axis=-1)   # heads in reverse order


@pytest.mark.parametrize("wrong", [merge_without_transpose, merge_interleaved, merge_reversed])
def test_merge_heads_check_catches_wrong_concatenation_order(wrong):
    with pytest.raises(CheckFailed) as info:
        nb04_checks.check_merge_heads(wrong)
    assert "x of shape (H=2, L=3, D=2)" in str(info.value)


def test_merge_heads_check_passes_on_the_solution_and_not_on_the_stub(solutions, capsys):
    nb04_checks.check_merge_heads(solutions["my_merge_heads"])
    assert "all 5 cases pass" in capsys.readouterr().out
    with pytest.raises(NotImplementedError):
        nb04_checks.check_merge_heads(stub)


# --- exercise 3: number of parameters ----------------------------------------------------------

def params_without_output(d, h, bias=True):
    return 3 * d * d + (3 * d if bias else 0)                    # forgot W_O


def params_without_biases(d, h, bias=True):
    return 4 * d * d                                             # forgot the biases


def params_divided_by_heads(d, h, bias=True):
    return 4 * d * (d // h) + (4 * d if bias else 0)             # counted one head only


@pytest.mark.parametrize("wrong, fragment", [
    (params_without_output, "the base model of Vaswani et al.: d_model=512, h=8, with biases"),
    (params_without_biases, "the base model of Vaswani et al.: d_model=512, h=8, with biases"),
    (params_divided_by_heads, "the base model of Vaswani et al.: d_model=512, h=8, with biases"),
])
def test_num_parameters_check_catches(wrong, fragment):
    with pytest.raises(CheckFailed) as info:
        nb04_checks.check_num_parameters(wrong)
    assert fragment in str(info.value)
    assert "1050624" in str(info.value)                           # the expected count is shown


def test_num_parameters_check_is_exact():
    # Off by one on a million must still fail: the tolerance is zero.
    with pytest.raises(CheckFailed):
        nb04_checks.check_num_parameters(lambda d, h, bias=True: 4 * d * d + 4 * d * bias + 1)


def test_num_parameters_check_passes_on_the_solution_and_not_on_the_stub(solutions, capsys):
    nb04_checks.check_num_parameters(solutions["mha_num_parameters"])
    assert "all 6 cases pass" in capsys.readouterr().out
    with pytest.raises(NotImplementedError):
        nb04_checks.check_num_parameters(stub)


@given(h_exp=st.integers(0, 5), width=st.integers(1, 8), bias=st.booleans())
@settings(max_examples=25, deadline=None)
def test_solution_count_never_depends_on_the_number_of_heads(solutions, h_exp, width, bias):
    count = solutions["mha_num_parameters"]
    H = 2 ** h_exp
    d = H * width
    assert count(d, H, bias) == count(d, 1, bias) == 4 * d * d + 4 * d * bias


# --- exercise 4: the forward pass --------------------------------------------------------------

def _split(x, H):
    *batch, L, E = x.shape
    return np.swapaxes(x.reshape(*batch, L, H, E // H), -3, -2)


def forward_averaging_heads(x, W_q, W_k, W_v, W_o, num_heads):
    heads = scaled_dot_product_attention(_split(x @ W_q, num_heads), _split(x @ W_k, num_heads),
                                         _split(x @ W_v, num_heads))
    return np.tile(heads.mean(axis=-3), num_heads) @ W_o         # average instead of concatenate


def forward_without_output(x, W_q, W_k, W_v, W_o, num_heads):
    heads = scaled_dot_product_attention(_split(x @ W_q, num_heads), _split(x @ W_k, num_heads),
                                         _split(x @ W_v, num_heads))
    return merge_heads(heads)                                    # forgot W_o


def forward_single_wide_head(x, W_q, W_k, W_v, W_o, num_heads):
    return scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v) @ W_o   # no heads at all


def forward_naive_softmax(x, W_q, W_k, W_v, W_o, num_heads):
    q, k, v = (_split(x @ W, num_heads) for W in (W_q, W_k, W_v))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(scores)                                           # overflows on large scores
    return merge_heads((e / e.sum(-1, keepdims=True)) @ v) @ W_o


@pytest.mark.parametrize("wrong, fragment", [
    (forward_averaging_heads, "x of shape (L=4, E=6), H=2"),
    (forward_without_output, "x of shape (L=4, E=6), H=2"),
    (forward_single_wide_head, "x of shape (L=4, E=6), H=2"),
    (forward_naive_softmax, "large inputs"),
])
def test_forward_check_catches(wrong, fragment):
    with pytest.raises(CheckFailed) as info:
        nb04_checks.check_multi_head_forward(wrong)
    assert fragment in str(info.value)


def test_forward_check_passes_on_the_solution_and_not_on_the_stub(solutions, capsys):
    nb04_checks.check_multi_head_forward(solutions["multi_head_forward"])
    assert "all 6 cases pass" in capsys.readouterr().out
    with pytest.raises(NotImplementedError):
        nb04_checks.check_multi_head_forward(stub)


# --- the widget --------------------------------------------------------------------------------

@pytest.fixture
def explorer():
    matplotlib.use("Agg")
    ex = nb04.HeadExplorer(lang="en")
    yield ex
    plt.close("all")


def test_widget_starts_on_the_antecedent_head(explorer):
    data = explorer.data
    roles = head_patterns.TROPHY_ROLES["en"]
    assert data["weights"].shape == (3, 13, 13)
    assert data["patterns"][data["head"]] == "antecedent"
    assert data["shown"][roles["pronoun"]].argmax() == roles["antecedent"]
    np.testing.assert_allclose(data["average"], data["weights"].mean(axis=0))


def test_widget_head_slider_changes_the_shown_weights(explorer):
    explorer.controls["head"].value = 0                          # previous word
    shown = explorer.data["shown"]
    assert explorer.data["head"] == 0
    assert shown.argmax(-1).tolist() == [0] + list(range(12))
    explorer.controls["head"].value = 2                          # spread evenly
    np.testing.assert_allclose(explorer.data["shown"], 1 / 13)


def test_widget_number_of_heads_changes_weights_and_slider_range(explorer):
    n_params = explorer.data["num_parameters"]
    explorer.controls["num_heads"].value = 6
    assert explorer.data["weights"].shape == (6, 13, 13)
    assert explorer.controls["head"].max == 5
    assert explorer.data["head_dim"] == 16
    assert explorer.data["num_parameters"] == n_params           # same count for every H
    explorer.controls["head"].value = 5
    explorer.controls["num_heads"].value = 2
    assert explorer.controls["head"].value == 1                  # clamped to the new range
    assert explorer.data["head"] == 1 and explorer.data["weights"].shape == (2, 13, 13)
    explorer.controls["num_heads"].value = 1
    roles = head_patterns.TROPHY_ROLES["en"]
    # One head: only the previous-word pattern is left, and "it" no longer finds "trophy".
    assert explorer.data["shown"][roles["pronoun"]].argmax() == roles["pronoun"] - 1


def test_widget_figure_draws_in_both_languages(explorer):
    fig = explorer.figure()
    assert len(fig.axes) == 4                                    # two heatmaps, two colour bars
    assert "pronoun" in fig.axes[0].get_title()
    zh = nb04.HeadExplorer(lang="zh")
    fig_zh = zh.figure()
    assert "代词" in fig_zh.axes[0].get_title()
    assert [t.get_text() for t in fig_zh.axes[0].get_xticklabels()][0] == "奖杯"


def test_widget_refuses_bad_arguments():
    with pytest.raises(ValueError, match="lang"):
        nb04.HeadExplorer(lang="fr")
    with pytest.raises(ValueError, match="num_heads"):
        nb04.HeadExplorer(num_heads=5)
