"""Notebook 01 (the library analogy): its exercise checks and its two widgets."""


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt

import attention_course
from attention_course import examples, softmax
from attention_course.checks import CheckFailed
from attention_course.checks import nb01 as checks
from attention_course.widgets import nb01 as widgets
from notebook_tools import failure, load_solutions

NAME = "01_library_analogy.ipynb"


def fails_on(check, wrong, fragment, lang="en"):
    """The check rejects ``wrong`` and its message contains ``fragment``."""
    with pytest.raises(CheckFailed) as info:
        check(wrong, lang=lang)
    assert fragment in str(info.value), str(info.value)
    return str(info.value)


# --- exercise 1: stable softmax ---------------------------------------------------------------

def naive_softmax(x):
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def softmax_global_max(x):
    e = np.exp(x - x.max())                         # one shift for the whole array
    return e / e.sum(axis=-1, keepdims=True)


def softmax_over_first_axis(x):
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def softmax_without_keepdims(x):
    e = np.exp(x - x.max(axis=-1))
    return e / e.sum(axis=-1)


def softmax_over_everything(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def softmax_forgets_to_normalise(x):
    return np.exp(x - x.max(axis=-1, keepdims=True))


def softmax_float32_naive(x):
    # right in float64, but float32 exp(100) overflows
    return naive_softmax(x) if x.dtype == np.float32 else softmax(x)


@pytest.mark.parametrize("wrong, fragment", [
    (naive_softmax, "large logits [1e4, 0, -1e4]"),
    (softmax_global_max, "three rows of very different scale"),
    (softmax_over_first_axis, "3×4 matrix"),
    (softmax_without_keepdims, "3×4 matrix"),
    (softmax_over_everything, "3×4 matrix"),
    (softmax_forgets_to_normalise, "the scores of 'it is a cat'"),
])
def test_stable_softmax_catches(wrong, fragment):
    fails_on(checks.check_stable_softmax, wrong, fragment)


def test_global_max_is_caught_only_by_rows_of_different_scale():
    # Before the new case, subtracting the global maximum passed every case (issue 11).
    msg = fails_on(checks.check_stable_softmax, softmax_global_max, "very different scale")
    assert "NaN" in msg


def test_stable_softmax_catches_float32_overflow():
    with pytest.raises(CheckFailed, match="exp\\(100\\) overflows in float32"):
        checks.check_stable_softmax(lambda x: naive_softmax(x) if x.dtype == np.float32
                                    else softmax_fine(x), lang="en")


def softmax_fine(x):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_in_float32(x):
    x = np.asarray(x, dtype=np.float32)             # another correct answer: float32 throughout
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_with_a_loop(x):
    x = np.asarray(x, dtype=float)
    flat = x.reshape(-1, x.shape[-1])
    out = np.empty_like(flat)
    for i, row in enumerate(flat):                  # loops are allowed in this exercise
        e = np.exp(row - row.max())
        out[i] = e / e.sum()
    return out.reshape(x.shape)


def softmax_via_logsumexp(x):
    x = np.asarray(x, dtype=float)
    m = x.max(axis=-1, keepdims=True)
    return np.exp(x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))


@pytest.mark.parametrize("right", [softmax_fine, softmax_with_a_loop, softmax_via_logsumexp])
def test_stable_softmax_accepts_other_correct_answers(right, capsys):
    checks.check_stable_softmax(right, lang="en")
    assert "all 10 cases pass" in capsys.readouterr().out


def test_stable_softmax_refuses_float32_out_for_float64_in():
    # the one dtype rule: a result at least as precise as the inputs
    msg = failure(checks.check_stable_softmax, softmax_in_float32)
    assert "dtype float32, less precise than the inputs (float64)" in msg


from attention_course.softmax import softmax as renamed_softmax  # noqa: E402


def wraps_the_library(x):
    return renamed_softmax(x, axis=-1)


@pytest.mark.parametrize("cheat", [softmax, renamed_softmax, wraps_the_library,
                                   lambda x: attention_course.softmax(x)],
                         ids=["softmax", "renamed", "wrapper", "lambda"])
def test_stable_softmax_refuses_the_library_function_under_any_name(cheat):
    msg = fails_on(checks.check_stable_softmax, cheat, "softmax")
    assert "not to use" in msg


def test_stable_softmax_message_in_chinese():
    msg = fails_on(checks.check_stable_softmax, softmax_global_max, "尺度相差很大", lang="zh")
    assert "提示" in msg and "NaN" in msg
    assert "不用它" in fails_on(checks.check_stable_softmax, wraps_the_library, "softmax", lang="zh")


# --- exercise 2: softmax run backwards --------------------------------------------------------

def log_only(w):
    return np.log(w)


def global_shift(w):
    log_w = np.log(w)
    return log_w - log_w.max()


def mean_shift(w):
    log_w = np.log(w)
    return log_w - log_w.mean(axis=-1, keepdims=True)


@pytest.mark.parametrize("wrong, fragment", [
    (lambda w: w, "softmax of your scores is not these weights"),
    (np.exp, "softmax of your scores is not these weights"),
    (log_only, "largest score of each row should be 0"),
    (mean_shift, "largest score of each row should be 0"),
    (lambda w: np.log(w)[..., :-1], "shape"),
], ids=["weights", "exp", "log-unshifted", "mean-shift", "wrong-shape"])
def test_scores_for_catches(wrong, fragment):
    fails_on(checks.check_scores_for, wrong, fragment)


def test_scores_for_catches_one_shift_for_the_whole_batch():
    msg = fails_on(checks.check_scores_for, global_shift, "two rows")
    assert "should be 0" in msg


def scores_by_loop(w):
    w = np.asarray(w, dtype=float)
    out = np.empty_like(w)
    for idx in np.ndindex(w.shape[:-1]):            # one row at a time
        out[idx] = np.log(w[idx] / w[idx].max())
    return out


@pytest.mark.parametrize("right", [
    scores_by_loop,
    lambda w: np.log(np.asarray(w)) - np.log(np.asarray(w).max(axis=-1, keepdims=True)),
    lambda w: np.log(np.float32(w) / np.float32(w).max(-1, keepdims=True)),
    lambda w: (np.log(w) - np.log(w).max(axis=-1, keepdims=True)).tolist(),
], ids=["loop", "log-of-max", "float32", "list"])
def test_scores_for_accepts_other_correct_answers(right, capsys):
    checks.check_scores_for(right, lang="en")
    assert "all 5 cases pass" in capsys.readouterr().out


def test_scores_for_message_in_chinese():
    assert "最大的分数应为 0" in fails_on(checks.check_scores_for, log_only, "凭眼估的权重", lang="zh")


@given(st.lists(st.floats(0.01, 10), min_size=2, max_size=6))
@settings(max_examples=40, deadline=None)
def test_scores_for_solution_inverts_softmax(raw):
    w = np.array(raw) / np.sum(raw)
    s = load_solutions(NAME, "en")["scores_for"](w)
    np.testing.assert_allclose(softmax(s), w, rtol=1e-10)
    assert s.max() == 0.0


# --- exercise 3: how much to raise a score ----------------------------------------------------

def budget_ignored(scores, k, target):
    return float(np.log(target / softmax(scores)[k]))      # as if the others did not shrink


def difference_of_weights(scores, k, target):
    return float(target - softmax(scores)[k])


def upside_down(scores, k, target):
    w = softmax(scores)[k]
    return float(np.log(w / (1 - w)) - np.log(target / (1 - target)))


def with_naive_softmax(scores, k, target):
    w = naive_softmax(np.asarray(scores, dtype=float))[k]
    return float(np.log(target / (1 - target)) - np.log(w / (1 - w)))


@pytest.mark.parametrize("wrong, fragment", [
    (budget_ignored, "'cat' (k = 3) to weight 0.9"),
    (difference_of_weights, "'cat' (k = 3) to weight 0.9"),
    (upside_down, "'cat' (k = 3) to weight 0.9"),
    (with_naive_softmax, "scores near 1000"),
    (lambda s, k, t: 1.0, "'cat' (k = 3) to weight 0.9"),
])
def test_score_increase_catches(wrong, fragment):
    fails_on(checks.check_score_increase, wrong, fragment)


def increase_by_bisection(scores, k, target):
    scores = np.asarray(scores, dtype=float)
    lo, hi = -100.0, 100.0
    while hi - lo > 1e-13:                          # another correct answer: search for δ
        mid = (lo + hi) / 2
        raised = scores.copy()
        raised[k] += mid
        lo, hi = (mid, hi) if softmax(raised)[k] < target else (lo, mid)
    return (lo + hi) / 2


def increase_from_log_weights(scores, k, target):
    s = np.asarray(scores)
    others = np.delete(s, k)
    m = max(s.max(), 0)
    rest = np.log(np.exp(others - m).sum()) + m
    return np.log(target) - np.log1p(-target) - (s[k] - rest)


@pytest.mark.parametrize("right", [increase_by_bisection, increase_from_log_weights])
def test_score_increase_accepts_other_correct_answers(right, capsys):
    checks.check_score_increase(right, lang="en")
    assert "all 6 cases pass" in capsys.readouterr().out


@given(st.lists(st.floats(-5, 5), min_size=2, max_size=6), st.floats(0.01, 0.99), st.data())
@settings(max_examples=40, deadline=None)
def test_score_increase_solution_reaches_the_target(raw, target, data):
    scores = np.array(raw)
    k = data.draw(st.integers(0, len(raw) - 1))
    delta = load_solutions(NAME, "en")["score_increase"](scores, k, target)
    raised = scores.copy()
    raised[k] += delta
    assert softmax(raised)[k] == pytest.approx(target, rel=1e-9)


# --- exercise 4: the lookup at T → 0 ---------------------------------------------------------

def lookup_by_argmax(queries, keys, values):
    return values[np.argmax(queries @ keys.T, axis=-1)]          # a tie goes to the first book


def lookup_global_max(queries, keys, values):
    scores = queries @ keys.T
    top = scores == scores.max()                                  # one best score for all questions
    return (top / top.sum(axis=-1, keepdims=True)) @ values


def lookup_unnormalised(queries, keys, values):
    scores = queries @ keys.T
    return (scores == scores.max(axis=-1, keepdims=True)) @ values   # tied books counted in full


def lookup_mixes_keys(queries, keys, values):
    scores = queries @ keys.T
    top = scores == scores.max(axis=-1, keepdims=True)
    return (top / top.sum(axis=-1, keepdims=True)) @ keys


def lookup_at_temperature(temperature):
    def lookup(queries, keys, values):
        scores = queries @ keys.T / temperature                   # a small T is not yet the limit
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ values
    return lookup


def lookup_with_the_library_softmax(queries, keys, values):
    return softmax(queries @ keys.T / 1e-12, axis=-1) @ values


def lookup_with_a_loop(queries, keys, values):
    return np.array([values[keys @ q == (keys @ q).max()].mean(axis=0) for q in queries])


def lookup_with_a_while(queries, keys, values):
    rows, i = [], 0
    while i < len(queries):
        s = keys @ queries[i]
        rows.append(values[s == s.max()].mean(axis=0))
        i += 1
    return np.array(rows)


@pytest.mark.parametrize("wrong, fragment", [
    (lookup_by_argmax, "three questions"), (lookup_global_max, "three questions"),
    (lookup_unnormalised, "three questions"), (lookup_mixes_keys, "three questions"),
    (lookup_at_temperature(0.01), "three questions"), (lookup_at_temperature(1e-4), "only 0.001"),
    (lookup_with_the_library_softmax, "not to use"),
    (lookup_with_a_loop, "comprehension"), (lookup_with_a_while, "while loop"),
])
def test_zero_temperature_lookup_catches(wrong, fragment):
    fails_on(checks.check_zero_temperature_lookup, wrong, fragment)


def lookup_einsum(queries, keys, values):
    scores = np.einsum("ld,sd->ls", queries, keys)
    top = (scores >= scores.max(axis=-1, keepdims=True)).astype(float)
    return np.einsum("ls,sv->lv", top / top.sum(axis=-1, keepdims=True), values)


def lookup_scaled(queries, keys, values):
    # dividing every score by √d_k changes no ranking, so the limit is the same
    scores = np.asarray(queries) @ np.asarray(keys).T / np.sqrt(np.shape(keys)[-1])
    top = np.isclose(scores, scores.max(axis=-1, keepdims=True), rtol=0, atol=1e-12)
    return (top / top.sum(axis=-1, keepdims=True)) @ np.asarray(values)


def lookup_lists(queries, keys, values):
    scores = np.asarray(queries) @ np.asarray(keys).T
    top = scores == scores.max(axis=-1, keepdims=True)
    return ((top / top.sum(axis=-1, keepdims=True)) @ np.asarray(values)).tolist()


@pytest.mark.parametrize("right", [lookup_einsum, lookup_scaled, lookup_lists])
def test_zero_temperature_lookup_accepts_other_correct_answers(right, capsys):
    checks.check_zero_temperature_lookup(right, lang="en")
    assert "all 8 cases pass" in capsys.readouterr().out


def test_zero_temperature_lookup_message_in_chinese():
    assert "不写循环" in fails_on(checks.check_zero_temperature_lookup, lookup_with_a_loop, "推导式",
                                 lang="zh")


@given(st.lists(st.lists(st.integers(-3, 3), min_size=2, max_size=2), min_size=1, max_size=4),
       st.floats(0.001, 0.01))
@settings(max_examples=40, deadline=None)
def test_zero_temperature_solution_is_the_limit_of_the_soft_lookup(queries, temperature):
    # integer scores: a gap is at least 1, so softmax(scores / T) is within e^(-1/T) of the limit
    queries = np.array(queries, dtype=float)
    keys = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 2.0]])
    values = np.arange(12.0).reshape(4, 3)
    cold = softmax(queries @ keys.T / temperature, axis=-1) @ values
    limit = load_solutions(NAME, "en")["zero_temperature_lookup"](queries, keys, values)
    np.testing.assert_allclose(limit, cold, atol=1e-9)


# --- widgets ----------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_budget_explorer_starts_at_the_articles_scores():
    ex = widgets.BudgetExplorer(lang="en")
    np.testing.assert_allclose(ex.data["scores"], examples.IT_CAT_SCORES)
    np.testing.assert_allclose(ex.data["weights"], softmax(examples.IT_CAT_SCORES))
    assert ex.data["tokens"] == examples.IT_IS_A_CAT["en"]
    assert ex.data["top"] == 3


def test_budget_explorer_lowering_cat_hands_its_weight_to_the_others():
    ex = widgets.BudgetExplorer(lang="zh")
    before = ex.data["weights"].copy()
    ex.controls["score_3"].value = 0.0
    after = ex.data["weights"]
    assert ex.redraws == 1
    assert after[3] < before[3]
    assert (after[:3] > before[:3]).all()
    assert after.sum() == pytest.approx(1.0)
    assert ex.data["top"] == 2                     # 一只 (1.2) is now the highest score


def test_budget_explorer_low_temperature_sharpens():
    ex = widgets.BudgetExplorer(lang="en")
    top_before = ex.data["weights"].max()
    ex.controls["temperature"].value = 0.1
    assert ex.data["temperature"] == pytest.approx(0.1)
    assert ex.data["weights"].max() > top_before
    assert ex.data["weights"].max() > 0.999


@given(scores=st.lists(st.floats(-2, 5), min_size=4, max_size=4),
       temperature=st.floats(0.1, 10))
@settings(max_examples=40, deadline=None)
def test_budget_explorer_data_is_always_a_budget(scores, temperature):
    ex = widgets.BudgetExplorer.__new__(widgets.BudgetExplorer)    # compute() needs no widgets
    ex.tokens = examples.IT_IS_A_CAT["en"]
    data = ex.compute(score_0=scores[0], score_1=scores[1], score_2=scores[2],
                      score_3=scores[3], temperature=temperature)
    w = data["weights"]
    assert (w >= 0).all() and w.sum() == pytest.approx(1.0)
    # softmax with temperature: log-ratios are score differences divided by T.
    assert np.log(w[0] / w[1]) == pytest.approx((scores[0] - scores[1]) / temperature, abs=1e-6)


def test_budget_explorer_draws_two_panels():
    fig = widgets.BudgetExplorer(lang="zh").figure()
    assert len(fig.axes) == 2
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == examples.IT_IS_A_CAT["zh"]


def test_library_explorer_switches_question_and_mode():
    ex = widgets.LibraryExplorer(lang="en")
    assert ex.data["question"] == "How do I look after a cat?"
    np.testing.assert_allclose(ex.data["weights"].round(3), [0.521, 0.427, 0.026, 0.026])
    ex.controls["question"].value = "Cats and quantum physics"
    w = ex.data["weights"]
    assert w[0] == pytest.approx(w[3]) and w[0] > 0.4       # the tie shares the budget
    ex.controls["mode"].value = "exact"
    np.testing.assert_array_equal(ex.data["weights"], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(ex.data["blend"], examples.BOOK_VALUES[0])
    assert ex.redraws == 2


def test_library_explorer_speaks_chinese():
    ex = widgets.LibraryExplorer(lang="zh")
    assert list(ex.controls["question"].options) == list(examples.QUESTIONS["zh"])
    assert ex.data["books"] == examples.BOOKS["zh"]
    fig = ex.figure()
    assert len(fig.axes) == 2
    assert fig.axes[0].get_title() == "怎么照顾猫？"


def test_explorers_refuse_an_unknown_language():
    with pytest.raises(ValueError, match="lang"):
        widgets.BudgetExplorer(lang="fr")
    with pytest.raises(ValueError, match="lang"):
        widgets.LibraryExplorer(lang="fr")


@given(query=st.lists(st.floats(-3, 3), min_size=4, max_size=4))
@settings(max_examples=40, deadline=None)
def test_library_lookup_blends_within_the_books(query):
    keys, values = examples.BOOK_KEYS, examples.BOOK_VALUES
    scores, w, blend = widgets.library_lookup(query, keys, values)
    assert w.sum() == pytest.approx(1.0)
    # A blend is a weighted average: each axis lies between the books' smallest and largest.
    assert (blend >= values.min(axis=0) - 1e-12).all()
    assert (blend <= values.max(axis=0) + 1e-12).all()
    _, w_exact, blend_exact = widgets.library_lookup(query, keys, values, mode="exact")
    assert w_exact.sum() == 1.0 and w_exact[np.argmax(scores)] == 1.0
    np.testing.assert_array_equal(blend_exact, values[np.argmax(scores)])


def test_library_lookup_rejects_mismatched_shapes_and_modes():
    with pytest.raises(ValueError, match="same E"):
        widgets.library_lookup([1.0, 0.0], examples.BOOK_KEYS, examples.BOOK_VALUES)
    with pytest.raises(ValueError, match="one row per key"):
        widgets.library_lookup([1.0, 0.0, 0.0, 0.0], examples.BOOK_KEYS, np.ones((3, 2)))
    with pytest.raises(ValueError, match="mode"):
        widgets.library_lookup([1.0, 0.0, 0.0, 0.0], examples.BOOK_KEYS,
                               examples.BOOK_VALUES, mode="hard")


from attention_course.attention import scaled_dot_product_attention as attend  # noqa: E402
from attention_course.fast import fast_attention as quick  # noqa: E402
from attention_course.softmax import softmax as renamed_softmax  # noqa: E402


def lookup_renamed_attention(queries, keys, values):
    return attend(queries, keys, values, scale=1e-12)


def lookup_renamed_fast(queries, keys, values):
    return quick(queries, keys, values, scale=1e-12)


def lookup_renamed_softmax(queries, keys, values):
    return renamed_softmax(queries @ keys.T, temperature=1e-12) @ values


@pytest.mark.parametrize("cheat", [lookup_renamed_attention, lookup_renamed_fast, lookup_renamed_softmax,
                                   attend],
                         ids=["renamed-sdpa", "renamed-fast", "renamed-softmax", "sdpa-itself"])
def test_zero_temperature_lookup_refuses_the_library_under_any_name(cheat):
    assert "not to use" in fails_on(checks.check_zero_temperature_lookup, cheat, "three questions")
