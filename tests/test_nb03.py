"""Notebook 03: its exercise checks decide, and its widget reacts to its controls.

For every check (the solution, the stub and the language: tests/test_every_check.py): it passes on
other correct answers (float32 throughout, einsum, loops, lists), lets the stub's NotImplementedError through,
fails on every classic mistake with a message that names the input (and the mistake when it
recognises it), and fails when the answer is, or calls, a function the exercise forbids.
"""

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib import pyplot as plt
from matplotlib.figure import Figure

from attention_course import (
    causal_mask,
    fast_attention,
    online_softmax_attention,
    scaled_dot_product_attention,
    softmax,
)
from attention_course.checks import CheckFailed
from attention_course.checks import nb03 as checks
from attention_course.widgets import nb03 as widgets
from notebook_tools import failure, load_solutions

NAME = "03_scaled_dot_product.ipynb"


@pytest.fixture(scope="module", params=["zh", "en"])
def solutions(request):
    return load_solutions(NAME, lang=request.param)


def swap(a):
    return np.swapaxes(a, -1, -2)




def test_check_messages_in_chinese():
    msg = failure(checks.check_attention, lambda q, k, v, mask=None: q, lang="zh")
    assert "练习 1" in msg and "输入：" in msg and "提示：" in msg


# --- exercise 1: attention with a mask ---------------------------------------------------------

def masked_softmax(scores, mask, fill=-np.inf, shift="row", guard=True, axis=-1):
    if mask is not None:
        scores = np.where(mask, scores, fill)
    m = scores.max(axis=axis, keepdims=True) if shift == "row" else scores.max()
    if guard:
        m = np.where(np.isfinite(m), m, 0)
    e = np.exp(scores - m)
    t = e.sum(axis=axis, keepdims=True)
    return np.divide(e, t, out=np.zeros_like(e), where=t > 0) if guard else e / t


def attention_with(transform=lambda q, k: q @ swap(k) / float(np.sqrt(q.shape[-1])), **kw):
    def learner(q, k, v, mask=None):
        return masked_softmax(transform(q, k), mask, **kw) @ v
    return learner


def test_other_correct_answers_pass(capsys):
    def einsum(q, k, v, mask=None):
        s = np.einsum("...ld,...sd->...ls", q, k) * q.dtype.type(1 / np.sqrt(q.shape[-1]))
        return np.einsum("...ls,...sd->...ld", masked_softmax(s, mask), v)

    def loops(q, k, v, mask=None):                       # one query at a time, in Python
        out = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=q.dtype)
        m = np.ones(q.shape[:-1] + (k.shape[-2],), bool) if mask is None else np.broadcast_to(
            mask, q.shape[:-1] + (k.shape[-2],))
        for idx in np.ndindex(*q.shape[:-1]):
            batch = idx[:-1]
            s = np.array([float(q[idx] @ k[batch + (j,)]) for j in range(k.shape[-2])])
            s = s / np.sqrt(q.shape[-1])
            s[~m[idx]] = -np.inf
            if np.isfinite(s).any():
                w = np.exp(s - s.max())
                out[idx] = (w / w.sum()) @ v[batch]
        return out

    def in_float32(q, k, v, mask=None):                  # computes in the inputs' dtype throughout
        scale = np.asarray(1 / np.sqrt(q.shape[-1]), dtype=q.dtype)
        return (masked_softmax(q @ swap(k) * scale, mask) @ v).astype(q.dtype)

    for learner in (einsum, loops, in_float32, attention_with()):
        checks.check_attention(learner, lang="en")
    assert capsys.readouterr().out.count("✓") == 4


@pytest.mark.parametrize("learner, words", [
    (attention_with(lambda q, k: q @ swap(k)), "without the 1/√d_k scale"),
    (attention_with(lambda q, k: q @ swap(k) / q.shape[-1]), "divides the scores by d_k"),
    (attention_with(axis=-2), "wrong axis"),
    (attention_with(lambda q, k: q @ k / np.sqrt(q.shape[-1])), "instead of by k transposed"),
    (attention_with(fill=-1e9), "large negative number"),
    (attention_with(guard=False), "-inf minus -inf"),
    (attention_with(shift="global"), "maximum of the whole array"),
], ids=["no scale", "divide by d_k", "wrong axis", "q@k", "fill -1e9", "no guard", "global max"])
def test_attention_names_each_classic_mistake(learner, words):
    assert words in failure(checks.check_attention, learner)


def test_attention_catches_the_inverted_mask():
    def inverted(q, k, v, mask=None):
        return masked_softmax(q @ swap(k) / np.sqrt(q.shape[-1]), None if mask is None else ~mask) @ v
    assert "wrong way round" in failure(checks.check_attention, inverted)


def test_attention_catches_the_mask_applied_after_the_softmax():
    def after(q, k, v, mask=None):
        w = softmax(q @ swap(k) / np.sqrt(q.shape[-1]))
        return (w if mask is None else w * mask) @ v
    # softmax is forbidden, so write the softmax out for this mistake
    def after_own(q, k, v, mask=None):
        w = masked_softmax(q @ swap(k) / np.sqrt(q.shape[-1]), None)
        return (w if mask is None else w * mask) @ v
    assert "after the softmax" in failure(checks.check_attention, after_own)
    assert "softmax" in failure(checks.check_attention, after)


def test_attention_catches_the_transpose_of_all_axes_on_a_batch():
    msg = failure(checks.check_attention, attention_with(lambda q, k: q @ k.T / np.sqrt(q.shape[-1])))
    assert "batch axes" in msg


def test_attention_catches_float32_promoted_to_float64():
    msg = failure(checks.check_attention, attention_with(lambda q, k: q @ swap(k) / np.sqrt(q.shape[-1])))
    assert "float32" in msg and "dtype float64, expected float32" in msg and "promotes" in msg


def test_attention_catches_a_mask_that_is_ignored():
    msg = failure(checks.check_attention, lambda q, k, v, mask=None: attention_with()(q, k, v))
    assert "causal mask" in msg


@pytest.mark.parametrize("forbidden", [
    scaled_dot_product_attention,
    lambda q, k, v, mask=None: scaled_dot_product_attention(q, k, v, attn_mask=mask),
    lambda q, k, v, mask=None: fast_attention(q, k, v, attn_mask=mask),
    lambda q, k, v, mask=None: online_softmax_attention(q, k, v, attn_mask=mask),
    lambda q, k, v, mask=None: softmax(np.where(mask, q @ swap(k), -np.inf) / np.sqrt(q.shape[-1])
                                       if mask is not None else q @ swap(k) / np.sqrt(q.shape[-1])) @ v,
    functools.partial(scaled_dot_product_attention),
], ids=["is sdpa", "calls sdpa", "fast", "online", "softmax", "partial"])
def test_attention_refuses_the_library_under_any_name(forbidden):
    msg = failure(checks.check_attention, forbidden)
    assert "asks you not to use" in msg


def test_attention_refuses_a_renamed_softmax():
    my_softmax = softmax

    def learner(q, k, v, mask=None):
        s = q @ swap(k) / float(np.sqrt(q.shape[-1]))
        return my_softmax(s if mask is None else np.where(mask, s, -np.inf)) @ v
    assert "softmax" in failure(checks.check_attention, learner)


def test_attention_refuses_torch_once_the_learner_has_loaded_it():
    torch = pytest.importorskip("torch")

    def through_torch(q, k, v, mask=None):
        m = None if mask is None else torch.from_numpy(
            np.broadcast_to(mask, q.shape[:-1] + (k.shape[-2],)).copy())
        return torch.nn.functional.scaled_dot_product_attention(
            torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), attn_mask=m).numpy()

    def torch_softmax(q, k, v, mask=None):
        s = torch.from_numpy(q @ swap(k) / float(np.sqrt(q.shape[-1])))
        return s.softmax(-1).numpy() @ v

    msg = failure(checks.check_attention, through_torch)
    assert "scaled_dot_product_attention, which this exercise" in msg
    assert "softmax, which this exercise" in failure(checks.check_attention, torch_softmax)


# --- exercise 2: the causal mask of a continuation -------------------------------------------

def continuation_ref(L, S):
    return np.arange(S)[None, :] <= (S - L + np.arange(L))[:, None]


@pytest.mark.parametrize("right", [
    lambda L, S: causal_mask(S)[S - L:],                              # the library's masks are allowed
    lambda L, S: np.tri(L, S, k=S - L, dtype=bool),
    lambda L, S: [[j <= S - L + i for j in range(S)] for i in range(L)],
], ids=["last rows of the full mask", "np.tri", "lists"])
def test_continuation_other_correct_answers_pass(right, capsys):
    checks.check_continuation_mask(right, lang="en")
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize("learner, words", [
    (lambda L, S: causal_mask(L, S), "top-left corner"),
    (lambda L, S: np.hstack([np.zeros((L, S - L), dtype=bool), np.tri(L, dtype=bool)]), "already read"),
    (lambda L, S: ~continuation_ref(L, S), "exactly inverted"),
    (lambda L, S: np.eye(L, S, k=S - L, dtype=bool), "only its own position"),
    (lambda L, S: np.tri(L, S, k=S - L - 1, dtype=bool), "own position too"),
    (lambda L, S: ~np.tri(L, S, k=S - L - 1, dtype=bool), "upper triangle"),
    (lambda L, S: continuation_ref(L, S).astype(int), "not bool"),
    (lambda L, S: continuation_ref(S, S), "shape"),
], ids=["top-left", "cache left out", "inverted", "diagonal only", "diagonal masked", "upper", "int",
        "square"])
def test_continuation_names_each_classic_mistake(learner, words):
    assert words in failure(checks.check_continuation_mask, learner)


def test_continuation_speaks_chinese():
    msg = failure(checks.check_continuation_mask, lambda L, S: causal_mask(L, S), lang="zh")
    assert "左上角" in msg and "输入" in msg


@settings(max_examples=30, deadline=None)
@given(i=st.integers(0, 2), j=st.integers(0, 6))
def test_continuation_catches_any_single_wrong_entry(i, j):
    def one_wrong(L, S):
        m = continuation_ref(L, S)
        if (L, S) == (3, 7):
            m[i, j] = ~m[i, j]
        return m
    msg = failure(checks.check_continuation_mask, one_wrong)
    assert f"index ({i}, {j})" in msg


# --- exercise 3: sentences packed into one row ------------------------------------------------

def packed_ref(lengths, causal):
    sentence = np.repeat(np.arange(len(lengths)), lengths)
    m = sentence[:, None] == sentence[None, :]
    return m & np.tri(len(sentence), dtype=bool) if causal else m


def packed_blocks(lengths, causal):
    S = int(np.sum(lengths))
    m = np.zeros((S, S), dtype=bool)
    start = 0
    for n in lengths:
        m[start:start + n, start:start + n] = causal_mask(n) if causal else True
        start += n
    return m


def packed_lists(lengths, causal):
    owner = [k for k, n in enumerate(lengths) for _ in range(n)]
    return [[owner[i] == owner[j] and (not causal or j <= i) for j in range(len(owner))]
            for i in range(len(owner))]


def packed_from_offsets(lengths, causal):
    ends = np.cumsum(lengths)
    sentence = np.searchsorted(ends, np.arange(ends[-1]), side="right")
    m = np.equal.outer(sentence, sentence)
    return m & causal_mask(len(sentence)) if causal else m


@pytest.mark.parametrize("right", [packed_blocks, packed_lists, packed_from_offsets],
                         ids=["blocks", "lists", "offsets"])
def test_packed_other_correct_answers_pass(right, capsys):
    checks.check_packed_mask(right, lang="en")
    assert capsys.readouterr().out.startswith("✓")


def _shifted(lengths, causal):
    sentence = np.searchsorted(np.cumsum(lengths), np.arange(int(np.sum(lengths))), side="left")
    m = sentence[:, None] == sentence[None, :]
    return m & np.tri(len(sentence), dtype=bool) if causal else m


@pytest.mark.parametrize("learner, words", [
    (lambda n, c: np.tri(int(np.sum(n)), dtype=bool) if c else np.ones((int(np.sum(n)),) * 2, dtype=bool),
     "across sentence boundaries"),
    (lambda n, c: packed_ref(n, False), "With causal True"),
    (lambda n, c: packed_ref(n, True), "With causal False"),
    (_shifted, "off by one"),
    (lambda n, c: ~packed_ref(n, c), "exactly inverted"),
    (lambda n, c: packed_ref(n, c).astype(int), "not bool"),
    (lambda n, c: packed_ref(n, c) if isinstance(n, np.ndarray) else n + 1, "Python list"),
], ids=["no boundaries", "causal ignored", "always causal", "boundaries off by one", "inverted",
        "int", "list input"])
def test_packed_names_each_classic_mistake(learner, words):
    assert words in failure(checks.check_packed_mask, learner)


def test_packed_speaks_chinese():
    msg = failure(checks.check_packed_mask, lambda n, c: packed_ref(n, False), lang="zh")
    assert "causal 为 True 时" in msg and "输入" in msg


@settings(max_examples=30, deadline=None)
@given(i=st.integers(0, 4), j=st.integers(0, 4))
def test_packed_catches_any_single_wrong_entry(i, j):
    def one_wrong(lengths, causal):
        m = packed_ref(lengths, causal)
        if causal and list(lengths) == [3, 2]:
            m[i, j] = ~m[i, j]
        return m
    assert f"index ({i}, {j})" in failure(checks.check_packed_mask, one_wrong)


# --- exercise 4: the scale for variance σ² ----------------------------------------------------

def test_scale_other_correct_answers_pass(capsys):
    checks.check_score_scale(lambda d, var: 1 / np.sqrt(d * var**2), lang="en")
    checks.check_score_scale(lambda d, var: float(np.float32(1.0) / (var * np.sqrt(d))), lang="en")
    checks.check_score_scale(lambda d, var: d ** -0.5 / var, lang="en")
    assert capsys.readouterr().out.count("✓") == 3


@pytest.mark.parametrize("learner", [
    lambda d, var: 1 / np.sqrt(d),                 # ignores σ²
    lambda d, var: 1 / np.sqrt(d * var),           # divides by σ, not σ²
    lambda d, var: 1 / (var * d),                  # d_k instead of √d_k
    lambda d, var: var * np.sqrt(d),               # multiplies instead of divides
    lambda d, var: 1 / (var**2 * np.sqrt(d)),      # σ⁴
    lambda d, var: np.sqrt(var) / np.sqrt(d),
], ids=["no sigma", "sigma", "d_k", "upside down", "sigma^4", "sqrt var on top"])
def test_scale_catches_each_classic_mistake_and_measures_it(learner):
    msg = failure(checks.check_score_scale, learner)
    assert "σ² = " in msg and "variance" in msg and "20,000 random pairs" in msg


def test_scale_message_gives_the_measured_variance():
    msg = failure(checks.check_score_scale, lambda d, var: 1 / np.sqrt(d))
    assert "d_k = 16, σ² = 4.0" in msg and "variance 16" in msg   # σ⁴ = 16 left in


def test_scale_refuses_a_non_number():
    assert "expected a number" in failure(checks.check_score_scale, lambda d, var: "one eighth")


# --- the notebook's solutions agree with the library on shapes the checks do not try ----------

@settings(max_examples=30, deadline=None)
@given(L=st.integers(1, 5), S=st.integers(1, 5), E=st.integers(1, 6), Ev=st.integers(1, 4),
       seed=st.integers(0, 1000), masked=st.booleans(), f32=st.booleans())
def test_solution_attention_matches_the_library(L, S, E, Ev, seed, masked, f32):
    dtype = np.float32 if f32 else np.float64
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=s).astype(dtype) for s in ((2, L, E), (2, S, E), (2, S, Ev)))
    mask = rng.random((2, L, S)) > 0.5 if masked else None
    mine = load_solutions(NAME)["my_attention"](q, k, v, mask)
    assert mine.dtype == dtype
    np.testing.assert_allclose(mine, scaled_dot_product_attention(q, k, v, attn_mask=mask),
                               rtol=1e-5 if f32 else 1e-12, atol=1e-5 if f32 else 1e-12)


def test_checks_leak_no_warning(recwarn):
    checks.check_attention(attention_with(), lang="en")
    with pytest.raises(CheckFailed):
        checks.check_attention(attention_with(guard=False), lang="en")
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


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
