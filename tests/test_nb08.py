"""Notebook 08: its exercise checks decide, its models are the same size, its widget follows its controls."""

from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt

from attention_course import tasks
from attention_course.checks import nb08 as checks
from attention_course.tiny_model import AttentionOnlyModel, train
from attention_course.widgets import nb08 as widgets
from notebook_tools import failure, load_solutions

NAME = "08_induction_circuit.ipynb"


@pytest.fixture(scope="module", params=["zh", "en"])
def solutions(request):
    return load_solutions(NAME, lang=request.param)


def targets(tokens, shift=1, include_self=False):
    """A learner's target mask, with a classic mistake switched on."""
    B, n = tokens.shape
    out = np.zeros((B, n, n), dtype=bool)
    for b in range(B):
        for t in range(n):
            for j in range(n):
                src = j - shift
                earlier = src <= t if include_self else src < t
                if 0 <= src < n and earlier and tokens[b, src] == tokens[b, t]:
                    out[b, t, j] = True
    return out


def score_with(mask_of, all_queries=False):
    def learner(weights, tokens):
        mask = mask_of(np.asarray(tokens))
        per_query = (np.asarray(weights) * mask).sum(-1)
        return float(per_query.mean() if all_queries else per_query[mask.any(-1)].mean())
    return learner


# --- exercise 1: the induction score ---------------------------------------------------------

def test_induction_accepts_loops_and_refuses_a_less_precise_result():
    checks.check_induction_score(score_with(targets), lang="en")
    # the one dtype rule of every check: float64 in, float32 out is a mistake
    msg = failure(checks.check_induction_score, lambda w, t: np.float32(score_with(targets)(w, t)))
    assert "less precise than the inputs" in msg


def test_induction_catches_the_duplicate_token_score():
    msg = failure(checks.check_induction_score, score_with(lambda t: targets(t, shift=0)))
    assert "earlier copies of the same token" in msg


def test_induction_catches_the_offset_the_wrong_way():
    msg = failure(checks.check_induction_score, score_with(lambda t: targets(t, shift=-1)))
    assert "wrong way" in msg


def test_induction_catches_the_mean_over_every_query():
    msg = failure(checks.check_induction_score, score_with(targets, all_queries=True))
    assert "every query" in msg


def test_induction_catches_the_query_counted_as_its_own_copy():
    msg = failure(checks.check_induction_score, score_with(lambda t: targets(t, include_self=True)),
                  lang="zh")
    assert "未通过" in msg and "t + 1" in msg


def test_a_perfect_induction_head_scores_1_on_a_trained_pattern():
    # period 4, every query looking 3 back: the position right after the last copy of its token
    tokens = np.resize(np.array([2, 0, 3, 1]), (1, 12))
    w = np.zeros((1, 12, 12))
    w[0, np.arange(12), np.maximum(np.arange(12) - 3, 0)] = 1.0
    assert checks._reference_induction(w, tokens) == pytest.approx(1.0)


# --- exercise 2: the K-composition table -----------------------------------------------------

def test_k_composition_accepts_other_orders_and_refuses_a_less_precise_result():
    checks.check_k_composition(lambda E, Q, K, V, Wo: np.einsum("iq,jq->ij", E @ Q, E @ V @ Wo @ K),
                               lang="en")
    msg = failure(checks.check_k_composition,
                  lambda E, Q, K, V, Wo: ((E @ Q) @ (E @ V @ Wo @ K).T).astype(np.float32))
    assert "less precise than the inputs" in msg


@pytest.mark.parametrize(("wrong", "says"), [
    (lambda E, Q, K, V, Wo: ((E @ Q) @ (E @ V @ Wo @ K).T).T, "transposed"),
    (lambda E, Q, K, V, Wo: (E @ Q) @ (E @ K).T, "direct query-key table"),
    (lambda E, Q, K, V, Wo: (E @ Q) @ (E @ V @ K).T, "W_O⁽⁰⁾ (d_k, d_model)"),   # shapes do not fit
])
def test_k_composition_catches_the_classic_mistakes(wrong, says):
    assert says in failure(checks.check_k_composition, wrong)


def test_k_composition_refuses_the_models_own_table():
    def via_model(E, W_Q, W_K, W_V0, W_O0):
        return AttentionOnlyModel.k_composition_table(model)
    model = AttentionOnlyModel(5, d_model=6, n_layers=2, d_k=3, max_len=4, seed=0)
    msg = failure(checks.check_k_composition, via_model)
    assert "k_composition_table" in msg


def test_induction_refuses_the_head_detectors_pattern():
    from attention_course import circuits

    def via_detector(weights, tokens):
        target = circuits.detection_pattern(tokens, "induction")
        has = target.any(-1)
        return float((weights * target).sum(-1)[has].mean())
    assert "detection_pattern" in failure(checks.check_induction_score, via_detector)


# --- exercise 3: the weight on one offset ----------------------------------------------------

def test_offset_accepts_a_loop_and_a_list():
    checks.check_weight_on_offset(
        lambda w, o: [float(np.mean([w[b, t, t - o] for b in range(len(w))])) for t in range(o, w.shape[-1])],
        lang="en")


@pytest.mark.parametrize(("wrong", "says"), [
    (lambda w, o: w[:, np.arange(w.shape[-1]), np.arange(w.shape[-1]) - o].mean(0), "wrapped around"),
    (lambda w, o: w[:, np.arange(o, w.shape[-1]) - o, np.arange(o, w.shape[-1])].mean(0), "swapped"),
    (lambda w, o: w[:, np.arange(o, w.shape[-1]), np.arange(o, w.shape[-1]) - o].mean(1), "wrong axis"),
])
def test_offset_catches_the_classic_mistakes(wrong, says):
    assert says in failure(checks.check_weight_on_offset, wrong)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 9), st.integers(0, 8), st.integers(1, 4), st.integers(0, 2**16))
def test_notebook_solutions_agree_with_the_references(solutions, n, offset, B, seed):
    rng = np.random.default_rng(seed)
    w = checks._weights(rng, B, n)
    offset = min(offset, n - 1)
    np.testing.assert_allclose(solutions["weight_on_offset"](w, offset), checks._reference_offset(w, offset))
    tokens = checks._repeats(rng, B, n, 3)
    if checks._targets(tokens).any():
        expected = checks._reference_induction(w, tokens)
        assert solutions["induction_score"](w, tokens) == pytest.approx(expected)


# --- the models and the widget ---------------------------------------------------------------

def test_the_two_repeat_models_and_the_two_token_models_have_the_same_size():
    assert widgets.repeat_model("2 layers").n_parameters() == widgets.repeat_model("1 layer").n_parameters()
    assert widgets.two_token_model(1).n_parameters() == widgets.two_token_model(2).n_parameters()
    with pytest.raises(ValueError, match="kind"):
        widgets.repeat_model("3 layers")


@pytest.fixture(scope="module")
def runs():
    rep = partial(tasks.repeat_batch, batch_size=4, length=20)
    two = partial(tasks.previous_two_batch, batch_size=4, length=10)
    rep_eval, two_eval = tasks.repeat_batch(1, 8, length=20), tasks.previous_two_batch(1, 8, length=10)
    return {
        "repeat": train(widgets.repeat_model("2 layers"), rep, 20, eval_batch=rep_eval),
        "control": train(widgets.repeat_model("1 layer"), rep, 10, eval_batch=rep_eval),
        "two_heads": train(widgets.two_token_model(2), two, 10, eval_batch=two_eval),
    }


def test_head_menu_follows_the_task(runs):
    ex = widgets.InductionExplorer(lang="en", runs=runs, head=1, progress=100)
    assert (ex.data["layer"], ex.data["head"]) == (1, 0)
    assert [label for label, _ in ex.controls["head"].options] == ["layer 0, head 0", "layer 1, head 0"]
    assert np.allclose(ex.data["map"], runs["repeat"].maps[-1, 1, 0])
    ex.controls["task"].value = "control"
    assert [label for label, _ in ex.controls["head"].options] == ["layer 0, head 0", "layer 0, head 1"]
    assert (ex.data["layer"], ex.data["head"]) == (0, 1)
    assert np.allclose(ex.data["map"], runs["control"].maps[-1, 0, 1])
    ex.controls["head"].value = 0
    assert (ex.data["layer"], ex.data["head"]) == (0, 0)


def test_the_slider_moves_in_steps_of_one_percent(runs):
    ex = widgets.InductionExplorer(lang="en", runs=runs)
    assert ex.controls["progress"].step == 1 and ex.controls["progress"].value == 15
    ex.controls["progress"].value = 50
    assert ex.data["step"] == 10 and ex.data["accuracy"] == runs["repeat"].accuracy[10]


def test_figure_in_both_languages(runs):
    for lang, head in (("zh", "层 1 头 0"), ("en", "layer 1, head 0")):
        fig = widgets.InductionExplorer(lang=lang, runs=runs, progress=100).figure()
        texts = " ".join(t.get_text() for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label))
        assert head in texts
        assert fig.axes[0].images[0].get_clim() == (0, 1)
        plt.close(fig)


def test_bad_arguments(runs):
    with pytest.raises(ValueError, match="'library'"):
        widgets.InductionExplorer(lang="en", runs={"library": runs["repeat"]})
    with pytest.raises(ValueError, match="lang"):
        widgets.InductionExplorer(lang="de", runs=runs)
