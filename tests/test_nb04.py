"""Notebook 04 (multi-head attention): its exercise checks and its widget.

For every check (the solution, the stub and the language: tests/test_every_check.py): it passes on
other correct answers (einsum, loops, float32, lists), lets the stub's NotImplementedError through, fails on
every classic mistake with a message naming the input (and the mistake), and fails when the
answer is, or calls, a function the exercise forbids.
"""

import matplotlib
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt

from attention_course import (
    GroupedQueryAttention,
    MultiHeadAttention,
    grouped_query_attention,
    head_patterns,
    merge_heads,
    repeat_kv,
    scaled_dot_product_attention,
)
from attention_course.checks import nb04 as nb04_checks
from attention_course.widgets import nb04
from notebook_tools import failure, load_solutions

NAME = "04_multi_head_attention.ipynb"


def test_check_messages_in_chinese():
    msg = failure(nb04_checks.check_grouped_attention, lambda q, k, v: q, lang="zh")
    assert "练习 2" in msg and "输入：" in msg and "提示：" in msg


# --- exercise 1: each head's share ------------------------------------------------------------

def blocks(heads, W_O):
    return W_O.reshape(heads.shape[-3], heads.shape[-1], -1)


def test_contributions_other_correct_answers_pass(capsys):
    def loops(heads, W_O):
        h, d_v = heads.shape[-3], heads.shape[-1]
        return np.stack([heads[..., i, :, :] @ W_O[i * d_v:(i + 1) * d_v] for i in range(h)], axis=-3)

    def einsum(heads, W_O):
        return np.einsum("...hld,hde->...hle", heads, blocks(heads, W_O))

    def as_list(heads, W_O):                       # a list of h arrays: right for unbatched heads only
        d_v = heads.shape[-1]
        parts = [heads[..., i, :, :] @ W_O[i * d_v:(i + 1) * d_v] for i in range(heads.shape[-3])]
        return np.stack(parts, axis=-3).tolist()

    for fn in (loops, einsum, as_list):
        nb04_checks.check_head_contributions(fn, lang="en")
    assert capsys.readouterr().out.count("✓") == 3


@pytest.mark.parametrize("learner, words", [
    (lambda H, W: np.stack([H[..., i, :, :] @ W[:, i * H.shape[-1]:(i + 1) * H.shape[-1]].T
                            for i in range(H.shape[-3])], axis=-3), "by **columns**"),
    (lambda H, W: np.einsum("...hld,dhe->...hle", H, W.reshape(H.shape[-1], H.shape[-3], -1)),
     "grouped the wrong way"),
    (lambda H, W: H @ blocks(H, W) / H.shape[-3], "divided by h"),
    (lambda H, W: H @ blocks(H, W)[:1], "the same block"),
    (lambda H, W: merge_heads(H) @ W, "keeping the head axis"),
], ids=["columns", "wrong grouping", "averaged", "one block", "summed"])
def test_contributions_catch_each_classic_mistake(learner, words):
    assert words in failure(nb04_checks.check_head_contributions, learner)


def test_contributions_catch_a_transposed_w_o_with_the_worst_index():
    msg = failure(nb04_checks.check_head_contributions, lambda H, W: H @ blocks(H, W.T))
    assert "values differ; the largest difference is at index" in msg and "h = 3 heads" in msg


@settings(max_examples=20, deadline=None)
@given(h=st.integers(1, 4), L=st.integers(1, 4), d_v=st.integers(1, 3), d_model=st.integers(1, 6),
       seed=st.integers(0, 100))
def test_solution_contributions_add_up_to_the_output(h, L, d_v, d_model, seed):
    rng = np.random.default_rng(seed)
    heads, W_O = rng.normal(size=(2, h, L, d_v)), rng.normal(size=(h * d_v, d_model))
    parts = load_solutions(NAME)["head_contributions"](heads, W_O)
    np.testing.assert_allclose(parts.sum(axis=-3), merge_heads(heads) @ W_O, atol=1e-12)


# --- exercise 2: grouped-query attention --------------------------------------------------------

def test_grouped_other_correct_answers_pass(capsys):
    def loops(q, k, v):
        h, G = q.shape[-3], k.shape[-3]
        outs = [scaled_dot_product_attention(q[..., i, :, :], k[..., i // (h // G), :, :],
                                             v[..., i // (h // G), :, :]) for i in range(h)]
        return np.stack(outs, axis=-3)

    def by_hand_float32(q, k, v):                   # the whole attention, in the inputs' dtype
        per = q.shape[-3] // k.shape[-3]
        qg = q.reshape(*q.shape[:-3], k.shape[-3], per, *q.shape[-2:])
        s = qg @ np.swapaxes(k, -1, -2)[..., None, :, :] * q.dtype.type(1 / np.sqrt(q.shape[-1]))
        w = np.exp(s - s.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        out = w @ v[..., None, :, :]
        return out.reshape(*q.shape[:-1], v.shape[-1])

    for fn in (loops, by_hand_float32):
        nb04_checks.check_grouped_attention(fn, lang="en")
    assert capsys.readouterr().out.count("✓") == 2


def tiled(q, k, v):
    per = q.shape[-3] // k.shape[-3]
    return scaled_dot_product_attention(q, np.concatenate([k] * per, -3), np.concatenate([v] * per, -3))


def averaged_queries(q, k, v):
    G, per = k.shape[-3], q.shape[-3] // k.shape[-3]
    qm = q.reshape(*q.shape[:-3], G, per, *q.shape[-2:]).mean(-3)
    return np.repeat(scaled_dot_product_attention(qm, k, v), per, axis=-3)


def first_group_only(q, k, v):
    h = q.shape[-3]
    return scaled_dot_product_attention(q, np.repeat(k[..., :1, :, :], h, -3),
                                        np.repeat(v[..., :1, :, :], h, -3))


def unscaled(q, k, v):
    per = q.shape[-3] // k.shape[-3]
    return scaled_dot_product_attention(q, np.repeat(k, per, -3), np.repeat(v, per, -3), scale=1.0)


def scaled_by_all_heads(q, k, v):
    per = q.shape[-3] // k.shape[-3]
    return scaled_dot_product_attention(q, np.repeat(k, per, -3), np.repeat(v, per, -3),
                                        scale=float(1 / np.sqrt(q.shape[-1] * q.shape[-3])))


@pytest.mark.parametrize("learner, words", [
    (tiled, "dealt the key/value heads out in turn"),
    (averaged_queries, "averaged the query heads"),
    (first_group_only, "used key/value head 0"),
    (unscaled, "not divided by √d_k"),
    (scaled_by_all_heads, "width of one head"),
], ids=["tile", "mean of queries", "first group", "no scale", "scale of all heads"])
def test_grouped_catch_each_classic_mistake(learner, words):
    assert words in failure(nb04_checks.check_grouped_attention, learner)


@pytest.mark.parametrize("forbidden", [
    grouped_query_attention,
    lambda q, k, v: grouped_query_attention(q, k, v),
    lambda q, k, v: scaled_dot_product_attention(q, repeat_kv(k, q.shape[-3]), repeat_kv(v, q.shape[-3])),
], ids=["is it", "calls it", "repeat_kv"])
def test_grouped_refuses_the_library_under_any_name(forbidden):
    assert "asks you not to use" in failure(nb04_checks.check_grouped_attention, forbidden)


def test_grouped_refuses_the_layer():
    def through_the_layer(q, k, v):
        GroupedQueryAttention.__call__(None, q)         # any use of the layer's forward
    assert "asks you not to use" in failure(nb04_checks.check_grouped_attention, through_the_layer)


# --- exercise 3: parameters of a grouped-query layer ----------------------------------------------

def test_parameters_other_correct_answers_pass(capsys):
    def per_projection(d, h, G, bias=True):
        shapes = [(d, d), (G * (d // h), d), (G * (d // h), d), (d, d)]
        return sum(a * b + (a if bias else 0) for a, b in shapes)

    nb04_checks.check_grouped_num_parameters(per_projection, lang="en")
    nb04_checks.check_grouped_num_parameters(
        lambda d, h, G, bias=True: np.int64(per_projection(d, h, G, bias)), lang="en")
    assert capsys.readouterr().out.count("✓") == 2


@pytest.mark.parametrize("learner, words", [
    (lambda d, h, G, bias=True: 4 * d * d + 4 * d * bias, "plain multi-head attention"),
    (lambda d, h, G, bias=True: 2 * d * d + 2 * d * G * d + bias * (2 * d + 2 * G * d), "G·d_model wide"),
    (lambda d, h, G, bias=True: d * d + 2 * d * G * (d // h) + bias * (d + 2 * G * (d // h)), "W_O"),
    (lambda d, h, G, bias=True: 2 * d * d + 2 * d * G * (d // h) + 2 * d + 2 * G * (d // h),
     "no biases"),
    (lambda d, h, G, bias=True: 2 * d * d + 2 * d * G * (d // h) + bias * 4 * d, "biases are miscounted"),
    (lambda d, h, G, bias=True: d * d + 3 * d * G * (d // h) + bias * (d + 3 * G * (d // h)),
     "W_Q for G heads"),
    (lambda d, h, G, bias=True: float(2 * d * d + 2 * d * G * (d // h)) + 0.5, "got"),
], ids=["mha", "kv width", "no W_O", "bias ignored", "bias 4d", "Q grouped", "not an int"])
def test_parameters_catch_each_classic_mistake(learner, words):
    assert words in failure(nb04_checks.check_grouped_num_parameters, learner)


@pytest.mark.parametrize("forbidden", [
    lambda d, h, G, bias=True: GroupedQueryAttention(d, h, G, bias=bias).num_parameters,
    lambda d, h, G, bias=True: MultiHeadAttention(d, h, bias=bias).num_parameters if G == h else 0,
    lambda d, h, G, bias=True: sum(np.prod(s) for s in GroupedQueryAttention.parameter_shapes(
        d, h, G, bias).values()),
], ids=["grouped layer", "mha layer", "the layer's shapes"])
def test_parameters_refuse_building_a_layer(forbidden):
    assert "asks you not to use" in failure(nb04_checks.check_grouped_num_parameters, forbidden)


@settings(max_examples=30, deadline=None)
@given(d_k=st.integers(1, 8), G=st.integers(1, 4), per=st.integers(1, 4), bias=st.booleans())
def test_solution_count_matches_the_layer(d_k, G, per, bias):
    h = G * per
    count = load_solutions(NAME)["grouped_num_parameters"](h * d_k, h, G, bias)
    assert count == GroupedQueryAttention(h * d_k, h, G, bias=bias).num_parameters


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
    # One head: one budget for both relations, about half each (the equal gains are set by hand).
    row = explorer.data["shown"][roles["pronoun"]]
    assert explorer.data["patterns"] == ["both"]
    assert abs(row[roles["pronoun"] - 1] - 0.5) < 0.02 and abs(row[roles["antecedent"]] - 0.5) < 0.02


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
