"""Notebook 07: its exercise checks decide, and its widget follows its controls."""


import numpy as np
import pytest
from matplotlib import pyplot as plt
from matplotlib.figure import Figure

import widget_tools
from attention_course import backprop as bp
from attention_course import scaled_dot_product_attention, softmax
from attention_course.checks import nb07 as checks
from attention_course.gradcheck import numerical_gradient
from attention_course.optim import Adam
from attention_course.widgets import nb07 as widgets
from notebook_tools import failure, load_solutions

NAME = "07_learned_attention.ipynb"


@pytest.fixture(scope="module", params=["zh", "en"])
def solutions(request):
    return load_solutions(NAME, lang=request.param)


def swap(a):
    return np.swapaxes(a, -1, -2)


# --- exercise 1: the backward of masked attention -------------------------------------------

def backward_with(dz_of, scale_q=True, scale_k=True, transpose_k=True, use_mask=True):
    """A learner's backward built from parts, with one classic mistake switched on."""
    def learner(dout, q, k, v, mask):
        s = float(q.shape[-1]) ** -0.5
        scores = q @ swap(k) * s
        if use_mask:
            scores = np.where(mask, scores, -np.inf)
        A = softmax(scores, axis=-1)
        dA = dout @ swap(v)
        dZ = dz_of(A, dA)
        dq = dZ @ k * (s if scale_q else 1.0)
        dk = (swap(dZ) if transpose_k else dZ) @ q * (s if scale_k else 1.0)
        return dq, dk, swap(A) @ dout
    return learner


def full_jacobian(A, dA):
    return A * (dA - (dA * A).sum(-1, keepdims=True))


def diagonal_only(A, dA):
    return A * (1 - A) * dA


def test_backward_catches_the_missing_transpose():
    msg = failure(checks.check_masked_attention_backward, backward_with(full_jacobian, transpose_k=False))
    assert "dk is missing a transpose" in msg and "causal mask, L = S = 4" in msg


def test_backward_catches_the_diagonal_of_the_jacobian_only():
    msg = failure(checks.check_masked_attention_backward, backward_with(diagonal_only))
    assert "only the diagonal of the softmax Jacobian" in msg


def test_backward_catches_the_scale_forgotten_in_dq():
    msg = failure(checks.check_masked_attention_backward, backward_with(full_jacobian, scale_q=False))
    assert "dq is missing the scale" in msg


def test_backward_catches_the_scale_forgotten_in_dk():
    msg = failure(checks.check_masked_attention_backward, backward_with(full_jacobian, scale_k=False))
    assert "dk is missing the scale" in msg


def test_backward_catches_gradient_reaching_masked_keys():
    msg = failure(checks.check_masked_attention_backward, backward_with(full_jacobian, use_mask=False))
    assert "without the mask" in msg


def test_backward_refuses_the_library_backward():
    def via_library(dout, q, k, v, mask):
        return bp.attention_backward(dout, bp.attention_forward(q, k, v, attn_mask=mask)[2])
    msg = failure(checks.check_masked_attention_backward, via_library)
    assert "attention_backward" in msg


def test_backward_accepts_other_correct_answers():
    def explicit_jacobian(dout, q, k, v, mask):
        # the whole (L, S, S) Jacobian per row, the library's attention_forward for the weights
        _, A, _ = bp.attention_forward(q, k, v, attn_mask=mask)
        J = A[..., :, :, None] * np.eye(A.shape[-1]) - A[..., :, :, None] * A[..., :, None, :]
        dZ = np.einsum("...ij,...ijk->...ik", dout @ swap(v), J)
        s = q.dtype.type(1 / np.sqrt(q.shape[-1]))
        return dZ @ k * s, swap(dZ) @ q * s, swap(A) @ dout

    def float32_loose(dout, q, k, v, mask):             # computes in float32 when given float32
        return tuple(x.astype(q.dtype) for x in backward_with(full_jacobian)(dout, q, k, v, mask))

    checks.check_masked_attention_backward(explicit_jacobian, lang="en")
    checks.check_masked_attention_backward(float32_loose, lang="en")


# --- exercise 2: the gradient of the scale --------------------------------------------------

def scale_learner(weight):
    def learner(dout, q, k, v, s):
        raw = q @ swap(k)
        A = softmax(raw * s, axis=-1)
        dA = dout @ swap(v)
        return weight(A, dA, raw, s)
    return learner


def test_scale_gradient_catches_the_scaled_scores():
    msg = failure(checks.check_scale_gradient,
                  scale_learner(lambda A, dA, raw, s: float((full_jacobian(A, dA) * raw * s).sum())))
    assert "multiplied by the scaled scores" in msg


def test_scale_gradient_catches_the_diagonal_only():
    msg = failure(checks.check_scale_gradient,
                  scale_learner(lambda A, dA, raw, s: float((A * (1 - A) * dA * raw).sum())))
    assert "only the diagonal" in msg


def test_scale_gradient_catches_the_scores_gradient_alone():
    msg = failure(checks.check_scale_gradient,
                  scale_learner(lambda A, dA, raw, s: float(full_jacobian(A, dA).sum())))
    assert "added up the scores' gradient alone" in msg


def test_scale_gradient_refuses_the_library_finite_differences():
    def numeric(dout, q, k, v, s):
        box = np.array([float(s)])
        return float(numerical_gradient(
            lambda: float((scaled_dot_product_attention(q, k, v, scale=box[0]) * dout).sum()), box)[0])
    msg = failure(checks.check_scale_gradient, numeric)
    assert "numerical_gradient" in msg


def test_scale_gradient_accepts_other_correct_answers():
    # ∂ℓ/∂s = Σ dZ ⊙ Z / s, Z the scaled scores (s ≠ 0 in every case); and a float32 answer
    checks.check_scale_gradient(
        scale_learner(lambda A, dA, raw, s: float((full_jacobian(A, dA) * (raw * s)).sum() / s)), lang="en")
    # a float32 number for float64 inputs is less precise than the inputs: refused
    msg = failure(checks.check_scale_gradient,
                  scale_learner(lambda A, dA, raw, s: np.float32((full_jacobian(A, dA) * raw).sum())))
    assert "less precise than the inputs" in msg


# --- exercise 3: one Adam step ----------------------------------------------------------------

def adam_learner(update):
    def learner(p, g, m, v, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        b1, b2 = betas
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        return update(p, m, v, t, lr, b1, b2, eps), m, v
    return learner


def test_adam_catches_no_bias_correction():
    msg = failure(checks.check_adam_step,
                  adam_learner(lambda p, m, v, t, lr, b1, b2, eps: p - lr * m / (np.sqrt(v) + eps)))
    assert "left out the bias correction" in msg


def test_adam_catches_the_power_off_by_one():
    msg = failure(checks.check_adam_step, adam_learner(
        lambda p, m, v, t, lr, b1, b2, eps:
        p - lr * (m / (1 - b1 ** (t + 1))) / (np.sqrt(v / (1 - b2 ** (t + 1))) + eps)))
    assert "wrong power" in msg


def test_adam_catches_eps_inside_the_root():
    msg = failure(checks.check_adam_step, adam_learner(
        lambda p, m, v, t, lr, b1, b2, eps: p - lr * (m / (1 - b1 ** t)) / np.sqrt(v / (1 - b2 ** t) + eps)))
    assert "inside the square root" in msg


def test_adam_refuses_the_library_optimiser():
    def via_adam(p, g, m, v, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        params = {"p": np.array(p, copy=True)}
        opt = Adam(params, lr=lr, betas=betas, eps=eps)
        opt.m["p"][...], opt.v["p"][...], opt.t = m, v, t - 1
        opt.step({"p": g})
        return params["p"], opt.m["p"], opt.v["p"]
    msg = failure(checks.check_adam_step, via_adam)
    assert "step" in msg and "not to use" in msg


def test_adam_accepts_other_correct_answers():
    # torch's order of operations (step size and denominator corrected separately), in place on copies
    def torch_order(p, g, m, v, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        p, m, v = p.copy(), m.copy(), v.copy()
        m *= betas[0]
        m += (1 - betas[0]) * g
        v *= betas[1]
        v += (1 - betas[1]) * g * g
        step = lr / (1 - betas[0] ** t)
        p -= step * m / (np.sqrt(v) / np.sqrt(1 - betas[1] ** t) + eps)
        return p, m, v
    checks.check_adam_step(torch_order, lang="en")


# --- exercise 4: find the planted bug ---------------------------------------------------------

def test_find_bugs_catches_a_finder_that_sees_nothing():
    msg = failure(checks.check_find_bugs, lambda backward: set())
    assert "dq without the scale" in msg and "expected dq" in msg


def test_find_bugs_catches_a_finder_that_blames_everything():
    msg = failure(checks.check_find_bugs, lambda backward: {"dq", "dk", "dv"})
    assert "a correct backward" in msg and "expected ∅" in msg


def test_find_bugs_refuses_the_library_gradient_checker():
    def with_library(backward):
        rng = np.random.default_rng(0)
        q, k, v, dout = (rng.normal(size=s) for s in ((3, 4), (5, 4), (5, 2), (3, 2)))
        wrong = []

        def loss():
            return float((scaled_dot_product_attention(q, k, v) * dout).sum())

        for name, x, g in zip(("dq", "dk", "dv"), (q, k, v), backward(dout, q, k, v), strict=True):
            numeric = numerical_gradient(loss, x)
            if not np.allclose(g, numeric, rtol=1e-5, atol=1e-8):
                wrong.append(name)
        return wrong
    msg = failure(checks.check_find_bugs, with_library)
    assert "numerical_gradient" in msg


def test_find_bugs_accepts_other_correct_answers(solutions):
    # a list instead of a set, and a finder that compares with a looser tolerance in its own way
    checks.check_find_bugs(lambda backward: sorted(solutions["find_bugs"](backward)), lang="en")


def test_planted_suspects_are_what_they_claim():
    # the correct suspect equals the library; each planted one differs exactly where it says
    rng = np.random.default_rng(0)
    q, k, v, dout = (rng.normal(size=s) for s in ((3, 4), (5, 4), (5, 2), (3, 2)))
    right = bp.attention_backward(dout, bp.attention_forward(q, k, v)[2])
    for bug, expected, _ in checks.SUSPECTS:
        got = checks._suspect(bug)(dout, q, k, v)
        differ = {n for n, a, b in zip(("dq", "dk", "dv"), got, right, strict=True) if not np.allclose(a, b)}
        assert differ == expected, bug


# --- the widget -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs():
    return widget_tools.small_runs07()


def test_slider_moves_through_the_checkpoints(runs):
    ex = widgets.TrainingExplorer(lang="en", runs=runs, task="library", progress=100)
    assert ex.data["step"] == 20 and ex.data["map"].shape == (1, 6)
    ex.controls["progress"].value = 0
    assert ex.data["step"] == 0
    assert np.allclose(ex.data["map"], runs["library"].maps[0, 0, 0])
    assert ex.data["loss_at"] == runs["library"].loss[0]
    ex.controls["progress"].value = 50
    assert ex.data["step"] == 10 and ex.data["accuracy"] == runs["library"].accuracy[10]


def test_task_picks_the_run_and_heads_count_from_0(runs):
    ex = widgets.TrainingExplorer(lang="en", runs=runs, task="previous")
    assert (ex.data["layer"], ex.data["head"]) == (0, 0) and ex.data["map"].shape == (8, 8)
    assert np.allclose(ex.data["map"], runs["previous"].maps[-1, 0, 0])
    assert ex.controls["head"].disabled                         # one head: nothing to pick
    assert ex.controls["head"].options == (("layer 0, head 0", 0),)
    ex.controls["task"].value = "library"
    assert ex.data["task"] == "library" and ex.data["map"].shape == (1, 6)


def test_labels_and_figure_in_both_languages(runs):
    for lang, word, head in (("zh", "查 ", "层 0 头 0"), ("en", "find ", "layer 0, head 0")):
        ex = widgets.TrainingExplorer(lang=lang, runs=runs, task="library")
        assert ex.data["rows"][0].startswith(word)
        assert all(":" in c for c in ex.data["cols"])
        fig = ex.figure()
        assert isinstance(fig, Figure)
        texts = " ".join(t.get_text() for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label))
        assert ("键（被看的词）" if lang == "zh" else "key (word looked at)") in texts
        assert head in texts and "step 20" in texts.replace("第 20 步", "step 20")
        image = fig.axes[0].images[0]
        assert image.get_clim() == (0, 1)                        # weights on a 0–1 scale
        plt.close(fig)


def test_a_change_redraws_only_the_changing_artists(runs):
    ex = widgets.TrainingExplorer(lang="en", runs=runs, task="previous")
    fig = ex.figure()
    art = ex.build(fig, ex.data)
    data = ex.compute(progress=0, task="previous", head=0)
    changed = ex.update(art, data)
    assert art["image"] in changed and np.allclose(art["image"].get_array(), runs["previous"].maps[0, 0, 0])
    assert "step 0" in art["map_title"].get_text()
    plt.close(fig)


def test_bad_arguments(runs):
    with pytest.raises(ValueError, match="lang"):
        widgets.TrainingExplorer(lang="fr", runs=runs)
    with pytest.raises(ValueError, match="'copy'"):
        widgets.TrainingExplorer(lang="en", runs={"copy": runs["library"]})
    with pytest.raises(ValueError, match="'repeat'"):           # notebook 08's runs belong to its explorer
        widgets.TrainingExplorer(lang="en", runs={"repeat": runs["previous"]})
