"""Notebook 09: its exercise checks catch the classic mistakes and pass other correct answers, and
its widget follows its controls."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib import pyplot as plt

from attention_course import pretrained, softmax
from attention_course.checks import nb09 as checks
from attention_course.widgets import nb09 as widgets
from notebook_tools import failure, load_solutions

NAME = "09_real_model.ipynb"


@pytest.fixture(scope="module", params=["zh", "en"])
def solutions(request):
    return load_solutions(NAME, lang=request.param)


@pytest.fixture(scope="module")
def model():
    return pretrained.load()


# --- exercise 1 ------------------------------------------------------------------------------

def layer_with(rope="pairs", causal=True, sharing="block", transpose=False):
    """A learner's layer_attention with one classic mistake switched on."""
    def learner(x, p, positions, H, G, base, eps):
        T, E = x.shape
        d = E // H
        h = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * p["attn_norm"]
        W_q = p["W_q"] if transpose else p["W_q"].T
        q = (h @ W_q).reshape(T, H, d).transpose(1, 0, 2)
        k = (h @ p["W_k"].T).reshape(T, G, d).transpose(1, 0, 2)
        angle = np.asarray(positions)[:, None] * base ** (-np.arange(0, d, 2) / d)
        cos, sin = np.cos(angle).astype(x.dtype), np.sin(angle).astype(x.dtype)

        def rotate(a):
            if rope == "none":
                return a
            if rope == "halves":
                a1, a2 = a[..., :d // 2], a[..., d // 2:]
                return np.concatenate([a1 * cos - a2 * sin, a1 * sin + a2 * cos], axis=-1)
            out = np.empty_like(a)
            out[..., 0::2] = a[..., 0::2] * cos - a[..., 1::2] * sin
            out[..., 1::2] = a[..., 0::2] * sin + a[..., 1::2] * cos
            return out

        group = np.arange(H) % G if sharing == "cyclic" else np.arange(H) // (H // G)
        q, k = rotate(q), rotate(k)[group]
        scores = q @ k.transpose(0, 2, 1) * float(d) ** -0.5
        if causal:
            scores = np.where(np.tril(np.ones((T, T), dtype=bool)), scores, -np.inf)
        return softmax(scores, axis=-1)
    return learner


def test_layer_attention_passes_when_right():
    checks.check_layer_attention(layer_with())


def test_layer_attention_another_formulation_passes():
    def learner(x, p, positions, H, G, base, eps):       # complex numbers, np.repeat, einsum
        T, E = x.shape
        d = E // H
        h = x * (1.0 / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps)) * p["attn_norm"]
        q = np.einsum("te,fe->tf", h, p["W_q"]).reshape(T, H, d).swapaxes(0, 1)
        k = np.einsum("te,fe->tf", h, p["W_k"]).reshape(T, G, d).swapaxes(0, 1)
        turn = np.exp(1j * np.outer(positions, base ** (-np.arange(0, d, 2) / d)))

        def rot(a):
            z = (a[..., 0::2] + 1j * a[..., 1::2]) * turn
            return np.stack([z.real, z.imag], axis=-1).reshape(a.shape).astype(x.dtype)
        q, k = rot(q), np.repeat(rot(k), H // G, axis=0)
        s = np.einsum("htd,hsd->hts", q, k) / np.sqrt(d)
        s = s + np.triu(np.full((T, T), -np.inf), 1)
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    checks.check_layer_attention(learner)


@pytest.mark.parametrize(("mistake", "hint"), [
    (dict(rope="halves"), "RoPE on the wrong pairs"),
    (dict(causal=False), "No causal mask"),
    (dict(sharing="cyclic"), "Key/value heads shared the wrong way"),
    (dict(transpose=True), "A transposed projection"),
    (dict(rope="none"), "No RoPE"),
])
def test_layer_attention_catches_the_classic_mistakes(mistake, hint):
    msg = failure(checks.check_layer_attention, layer_with(**mistake))
    assert hint in msg, msg


def test_layer_attention_forbids_the_library():
    from attention_course import grouped_query_attention

    def learner(x, p, positions, H, G, base, eps):
        q = layer_with()(x, p, positions, H, G, base, eps)
        grouped_query_attention(np.zeros((1, 1, 2)), np.zeros((1, 1, 2)), np.zeros((1, 1, 2)))
        return q
    assert "not to use" in failure(checks.check_layer_attention, learner)


def test_layer_attention_solution_gives_the_real_models_weights(solutions, model):
    ids = model.encode("The trophy did not fit into the suitcase because it was too big.")
    x, *_ = model.attention_inputs(ids, 13)
    c = model.config
    mine = solutions["layer_attention"](x, model.layers[13], np.arange(len(ids)), c.H, c.G,
                                        c.rope_base, c.rms_eps)
    _, w = model.forward(ids, return_weights=True, layers=[13])
    np.testing.assert_allclose(mine, w[0], atol=1e-5)


# --- exercise 2 ------------------------------------------------------------------------------

def test_induction_score_solution_and_other_designs_pass(solutions):
    checks.check_induction_score(solutions["my_induction_score"])

    def minimum(w, period):                     # the weakest row instead of the mean
        t = np.arange(period, 2 * period)
        return w[..., t, t - period + 1].min(-1)

    def as_float32_list(w, period):              # float32, returned as nested lists
        t = np.arange(period, 2 * period)
        return w.astype(np.float32)[..., t, t - period + 1].sum(-1).tolist()
    checks.check_induction_score(minimum)
    checks.check_induction_score(as_float32_list)


@pytest.mark.parametrize(("learner", "hint"), [
    (lambda w, p: w[..., np.arange(p, 2 * p), np.arange(0, p)].mean(-1), "duplicate-token"),
    (lambda w, p: w[..., np.arange(1, 2 * p), np.arange(0, 2 * p - 1)].mean(-1), "previous token"),
    (lambda w, p: w[..., :, 0].mean(-1), "t - period + 1"),
    (lambda w, p: w.mean(axis=(-1, -2)), "t - period + 1"),
])
def test_induction_score_catches_the_classic_mistakes(learner, hint):
    msg = failure(checks.check_induction_score, learner)
    assert hint in msg, msg


def test_induction_score_wrong_shape_and_nan():
    assert "shape" in failure(checks.check_induction_score, lambda w, p: np.zeros(3))
    assert "NaN" in failure(checks.check_induction_score,
                            lambda w, p: np.full(w.shape[:2], np.nan))


def test_induction_score_forbids_the_library():
    msg = failure(checks.check_induction_score, pretrained.induction_scores)
    assert "not to use" in msg


def test_induction_score_forbids_the_head_detector():
    from attention_course import circuits

    def via_detector(weights, period):
        tokens = np.tile(np.arange(period), 2)
        return 2 * circuits.head_detector_scores(weights[:, None], tokens, "induction")
    assert "head_detector_scores" in failure(checks.check_induction_score, via_detector)


def test_the_planted_induction_heads_are_found_by_the_library_score():
    maps, planted = checks._synthetic_maps(0, 6, 9, 12)
    assert checks._top(pretrained.induction_scores(maps, 12), checks.N_TOP) == planted
    np.testing.assert_allclose(maps.sum(-1), 1.0)
    assert np.all(np.triu(maps, 1) == 0)


# --- exercise 3 ------------------------------------------------------------------------------

def test_core_share_solution_and_another_formulation(solutions):
    checks.check_core_share(solutions["core_share"])

    def learner(config, T):
        c = config
        attn_params = c.d_model * c.d_k * (2 * c.H + 2 * c.G)
        mlp_params = 3 * c.d_model * c.d_ff
        core = 4 * T * T * c.d_k * c.H
        rest = 2 * T * (attn_params + mlp_params)
        return core / (core + rest + 2 * T * c.d_model * c.vocab_size / c.n_layers)
    checks.check_core_share(learner)


@pytest.mark.parametrize(("mistake", "hint"), [
    (dict(kv_full=True), "k and v projections with H heads"),
    (dict(no_output=True), "output layer"),
    (dict(linear_core=True), "T², not T"),
])
def test_core_share_catches_the_classic_mistakes(mistake, hint):
    msg = failure(checks.check_core_share, lambda c, T: checks._share_variant(c, T, **mistake))
    assert hint in msg, msg


def test_core_share_forbids_the_library():
    def learner(config, T):
        f = pretrained.forward_flops(config, T)
        return f["attention_core"] / sum(f.values())
    assert "not to use" in failure(checks.check_core_share, learner)


# --- the widget ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def explorer(model):
    return widgets.RealModelExplorer(model, lang="en")


def test_explorer_compute_is_pure_and_counts_from_zero(explorer, model):
    data = explorer.compute(sentence="trophy (big)", text="", layer=18, head=6)
    T = len(model.encode(widgets.SENTENCES["trophy (big)"]))
    assert data["weights"].shape == (T, T) and data["grid"].shape == (30, 9)
    assert data["tokens"][0].startswith("0:")
    np.testing.assert_allclose(data["weights"].sum(-1), 1.0, atol=1e-5)
    _, w = model.forward(model.encode(widgets.SENTENCES["trophy (big)"]), return_weights=True,
                         layers=[18])
    np.testing.assert_allclose(data["weights"], w[0, 6], atol=1e-6)
    assert 0.0 <= data["grid"].min() and data["grid"].max() <= 1.0


def test_explorer_prepared_sentences_need_no_forward_pass(explorer, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("a prepared sentence ran the model again")
    monkeypatch.setattr(explorer.model, "forward", refuse)
    for name in list(widgets.SENTENCES) + ["repeat"]:
        explorer.controls["sentence"].value = name
        explorer.controls["layer"].value = 17
        explorer.controls["head"].value = 3
    assert explorer.data["weights"].shape == (24, 24)


def test_explorer_free_text_runs_once(explorer, monkeypatch):
    calls = []
    real = explorer.model.forward
    monkeypatch.setattr(explorer.model, "forward", lambda *a, **k: calls.append(1) or real(*a, **k))
    explorer.controls["text"].value = "A dog bites a man."
    explorer.controls["sentence"].value = "free"
    explorer.controls["head"].value = 0
    explorer.controls["head"].value = 1
    assert len(calls) == 1
    assert [t.split(":", 1)[1] for t in explorer.data["tokens"]] == ["A", " dog", " bites", " a",
                                                                     " man", "."]


def test_explorer_figure_and_bad_arguments(explorer, model):
    fig = explorer.figure()
    assert len(fig.axes) == 4                     # two heatmaps, two colour bars
    plt.close(fig)
    with pytest.raises(ValueError, match="sentence must be one of"):
        widgets.RealModelExplorer(model, sentence="nope")
    with pytest.raises(ValueError, match="lang"):
        widgets.RealModelExplorer(model, lang="fr")
