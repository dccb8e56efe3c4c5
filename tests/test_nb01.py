"""Notebook 01 (the library analogy): its exercise checks and its two widgets."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt

from attention_course import examples, softmax
from attention_course.checks import CheckFailed
from attention_course.checks import nb01 as checks
from attention_course.widgets import nb01 as widgets
from notebook_tools import load_solutions, stub

NAME = "01_library_analogy.ipynb"


@pytest.fixture(scope="module", params=["en", "zh"])
def solutions(request):
    return load_solutions(NAME, lang=request.param)


# --- each check passes on the notebook's solution and stops the stub ------------------------

CHECKS = [
    ("stable_softmax", checks.check_stable_softmax),
    ("softmax_with_temperature", checks.check_softmax_with_temperature),
    ("weight_ratio", checks.check_weight_ratio),
    ("soft_lookup", checks.check_soft_lookup),
]


@pytest.mark.parametrize("fn_name, check", CHECKS, ids=[c[0] for c in CHECKS])
def test_check_passes_on_the_notebook_solution(solutions, fn_name, check, capsys):
    check(solutions[fn_name], lang="en")
    assert "pass" in capsys.readouterr().out


@pytest.mark.parametrize("fn_name, check", CHECKS, ids=[c[0] for c in CHECKS])
def test_check_lets_the_stub_error_through(fn_name, check):
    with pytest.raises(NotImplementedError):
        check(stub, lang="en")


def fails_on(check, wrong, fragment, lang="en"):
    """The check rejects ``wrong`` and its message names the case containing ``fragment``."""
    with pytest.raises(CheckFailed) as info:
        check(wrong, lang=lang)
    assert fragment in str(info.value), str(info.value)
    return str(info.value)


# --- stable softmax ---------------------------------------------------------------------------

def naive_softmax(x):
    e = np.exp(x)
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


def test_stable_softmax_catches_overflow():
    msg = fails_on(checks.check_stable_softmax, naive_softmax, "large logits [1e4, 0, -1e4]")
    assert "NaN" in msg and "Hint" in msg


def test_stable_softmax_catches_the_wrong_axis():
    fails_on(checks.check_stable_softmax, softmax_over_first_axis, "3×4 matrix")


def test_stable_softmax_catches_missing_keepdims():
    msg = fails_on(checks.check_stable_softmax, softmax_without_keepdims, "3×4 matrix")
    assert "raised ValueError" in msg


def test_stable_softmax_catches_one_budget_for_the_whole_array():
    fails_on(checks.check_stable_softmax, softmax_over_everything, "3×4 matrix")


def test_stable_softmax_message_in_chinese():
    msg = fails_on(checks.check_stable_softmax, naive_softmax, "很大的 logits", lang="zh")
    assert "提示" in msg


# --- softmax with temperature -----------------------------------------------------------------

def test_temperature_catches_multiplying():
    fails_on(checks.check_softmax_with_temperature, lambda s, T: softmax(s * T), "T = 0.5")


def test_temperature_catches_ignoring_t():
    fails_on(checks.check_softmax_with_temperature, lambda s, T: softmax(s), "T = 0.5")


def test_temperature_catches_an_unnormalised_power():
    fails_on(checks.check_softmax_with_temperature, lambda s, T: softmax(s) ** (1 / T),
             "T = 0.5")


def test_temperature_catches_overflow_at_low_temperature():
    fails_on(checks.check_softmax_with_temperature, lambda s, T: naive_softmax(s / T),
             "T = 0.001")


# --- ratio of two weights ---------------------------------------------------------------------

@pytest.mark.parametrize("wrong", [
    lambda a, b: a / b,                                   # ratio of the scores
    lambda a, b: a - b,                                   # difference, not exponentiated
    lambda a, b: float(np.exp(b - a)),                    # upside down
    lambda a, b: float(softmax(np.array([a, b]))[0]),     # a weight, not a ratio
], ids=["score-ratio", "difference", "inverted", "weight-not-ratio"])
def test_weight_ratio_catches(wrong):
    fails_on(checks.check_weight_ratio, wrong, "'cat' 3.0 vs 'a' 1.2")


def test_weight_ratio_catches_a_fit_to_the_first_case_only():
    # Right for 3.0 vs 1.2 by luck of a constant, wrong elsewhere.
    fails_on(checks.check_weight_ratio, lambda a, b: 6.049647464412945, "1.2 vs 3.0")


WEIGHT_RATIO_SOLUTION = load_solutions(NAME)["weight_ratio"]


@given(a=st.floats(-20, 20), b=st.floats(-20, 20))
@settings(max_examples=50, deadline=None)
def test_weight_ratio_solution_matches_a_real_softmax_row(a, b):
    # The notebook's claim: the ratio ignores every other word in the row.
    fn = WEIGHT_RATIO_SOLUTION
    w = softmax(np.array([a, b, 7.0, -3.0, 0.1]))
    assert fn(a, b) == pytest.approx(w[0] / w[1], rel=1e-9)


# --- soft lookup ------------------------------------------------------------------------------

def hard_lookup(queries, keys, values):
    return values[np.argmax(queries @ keys.T, axis=-1)]


def keys_as_values(queries, keys, values):
    return softmax(queries @ keys.T, axis=-1) @ keys


def scaled_lookup(queries, keys, values):
    return softmax(queries @ keys.T / np.sqrt(keys.shape[-1]), axis=-1) @ values


def lookup_softmax_over_questions(queries, keys, values):
    return softmax(queries @ keys.T, axis=0) @ values


def lookup_with_naive_softmax(queries, keys, values):
    return naive_softmax(queries @ keys.T) @ values


@pytest.mark.parametrize("wrong", [hard_lookup, keys_as_values, scaled_lookup,
                                   lookup_softmax_over_questions])
def test_soft_lookup_catches_on_the_course_shelf(wrong):
    fails_on(checks.check_soft_lookup, wrong, "three questions")


def test_soft_lookup_catches_overflow():
    fails_on(checks.check_soft_lookup, lookup_with_naive_softmax, "scores reach 1500")


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
