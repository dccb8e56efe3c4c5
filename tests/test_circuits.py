"""attention_course.circuits: head-detector scores, copying scores and direct logit attribution,
against values computed by hand (other formulations) and, once each, against the real model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import circuits, pretrained
from attention_course.tiny_model import AttentionOnlyModel


def _pattern_by_loops(tok, kind):
    T = len(tok)
    out = np.zeros((T, T), dtype=bool)
    for t in range(T):
        for j in range(T):
            if kind == "previous_token":
                out[t, j] = j == t - 1
            elif kind == "duplicate_token":
                out[t, j] = j < t and tok[j] == tok[t]
            else:                                    # the key after an earlier copy of the query's token
                out[t, j] = 1 <= j <= t and tok[j - 1] == tok[t] and j - 1 < t
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=12), st.sampled_from(circuits.HEAD_KINDS))
def test_detection_patterns_equal_loops_over_every_pair(tok, kind):
    got = circuits.detection_pattern(np.array(tok), kind)
    assert got.shape == (1, len(tok), len(tok))
    assert np.array_equal(got[0], _pattern_by_loops(tok, kind))


def test_scores_of_planted_heads_by_hand():
    T = 6
    tok = np.array([[4, 5, 6, 4, 5, 6]])
    prev = np.zeros((1, 1, T, T))
    prev[0, 0, 0, 0] = 1.0
    prev[0, 0, np.arange(1, T), np.arange(T - 1)] = 1.0                  # a perfect previous-token head
    induction = np.zeros((1, 1, T, T))
    induction[0, 0, :3, 0] = 1.0
    induction[0, 0, np.arange(3, T), np.arange(1, T - 2)] = 1.0          # looks at the token after the copy
    both = np.concatenate([prev, induction], axis=1)                     # (B, H, T, T)
    score = {k: circuits.head_detector_scores(both, tok, k) for k in circuits.HEAD_KINDS}
    assert np.allclose(score["previous_token"][0], [5 / 6, 1 / 6])         # row 1 of the second: key 0
    assert np.allclose(score["induction"][0], [0.0, 3 / 6])
    assert np.allclose(score["duplicate_token"][0], [0.0, 0.0])
    # without key 0, the induction head's rows 0-2 have no weight left: 3 of 3
    assert np.allclose(circuits.head_detector_scores(both, tok, "induction", exclude_bos=True)[0, 1], 1.0)
    # a head on itself has nothing left when the current token is excluded
    own = np.broadcast_to(np.eye(T), (1, 1, T, T))
    assert circuits.head_detector_scores(own, tok, "previous_token", exclude_current_token=True)[0, 0] == 0.0


def test_bad_input_to_the_scores():
    with pytest.raises(ValueError, match="kind must be one of"):
        circuits.detection_pattern([1, 2, 3], "induction_head")
    with pytest.raises(ValueError, match="T >= 2"):
        circuits.detection_pattern([1], "induction")
    with pytest.raises(ValueError, match="do not fit patterns"):
        circuits.head_detector_scores(np.full((1, 2, 4, 4), 0.25), [1, 2, 3], "induction")
    with pytest.raises(ValueError, match=r"\[batch, head, query, key\]"):
        circuits.head_detector_scores(np.ones((4, 4)), [1, 2, 3, 4], "induction")


def _tiny_with_ov(sign):
    m = AttentionOnlyModel(vocab=6, d_model=6, n_layers=1, n_heads=1, d_k=6, positional="none", seed=0)
    m.params["embed"][:] = np.eye(6)
    m.params["W_U"][:] = np.eye(6)
    W = m.projections(0)
    W["W_V"][:] = np.eye(6)
    W["W_O"][:] = sign * np.eye(6)
    return m


def test_copying_scores_of_planted_and_random_ov_circuits():
    assert np.allclose(circuits.copying_scores(_tiny_with_ov(+1)), 1.0)
    assert np.allclose(circuits.copying_scores(_tiny_with_ov(-1)), -1.0)
    m = AttentionOnlyModel(vocab=10, d_model=8, n_layers=2, n_heads=2, seed=5)
    got = circuits.copying_scores(m)
    for layer in range(2):
        for head in range(2):
            w = m.head_weights(layer, head)
            full = m.params["embed"] @ w["W_V"] @ w["W_O"] @ m.params["W_U"]      # (V, V), formed here
            lam = np.linalg.eigvals(full.astype(np.float64))
            assert got[layer, head] == pytest.approx((lam.sum() / np.abs(lam).sum()).real, abs=1e-5)
    with pytest.raises(ValueError, match="as many outputs as input tokens"):
        circuits.copying_scores(AttentionOnlyModel(vocab=8, n_classes=64))


def test_tiny_direct_logit_attribution_adds_up_to_the_logit():
    m = AttentionOnlyModel(vocab=9, d_model=12, n_layers=2, n_heads=3, seed=2)
    tok = np.random.default_rng(1).integers(0, 9, size=(2, 8))
    logits, cache = m.run_with_cache(tok)
    dla = circuits.direct_logit_attribution(m, cache, tok)               # (2, 3, 2, 7)
    target = tok[:, 1:]
    # the input's own direct path: embedding and position straight to the read-out
    stream = (cache["embed"] + cache["pos_embed"])[:, :-1] @ m.params["W_U"]
    rest = np.take_along_axis(stream, target[..., None], -1)[..., 0]
    right = np.take_along_axis(logits[:, :-1], target[..., None], -1)[..., 0]
    assert np.allclose(dla.sum(axis=(0, 1)) + rest, right, atol=1e-4)
    # centred: minus the head's mean over the vocabulary, computed here from the full logits
    centred = circuits.direct_logit_attribution(m, cache, tok, centred=True)
    for layer in range(2):
        for head in range(3):
            full = cache["z", layer][:, :-1, head] @ m.head_weights(layer, head)["W_O"] @ m.params["W_U"]
            assert np.allclose(centred[layer, head], dla[layer, head] - full.mean(-1), atol=1e-5)
    with pytest.raises(TypeError, match="ActivationCache"):
        circuits.direct_logit_attribution(m, {"z": 1}, tok)
    _, only = m.run_with_cache(tok, names_filter="blocks.0.attn.hook_z")
    with pytest.raises(KeyError, match="blocks.1.attn.hook_z"):
        circuits.direct_logit_attribution(m, only, tok)


@pytest.fixture(scope="module")
def real():
    return pretrained.load()


def test_real_model_scores_agree_with_the_course_measures(real):
    period = 15
    ids = pretrained.repeated_random_tokens(period, 4)
    _, cache = real.run_with_cache(ids)
    _, w = real.forward(ids, return_weights=True)
    ind = circuits.head_detector_scores(cache, ids, "induction")
    assert np.allclose(2 * ind, pretrained.induction_scores(w, period), atol=1e-6)
    prev = circuits.head_detector_scores(cache, ids, "previous_token")
    T = 2 * period
    assert np.allclose(prev * T / (T - 1), pretrained.previous_token_scores(w), atol=1e-6)
    # the direct logit attribution of every head, the embedding and every MLP add up to the logit
    logits, full = real.run_with_cache(ids[:12])
    dla = circuits.direct_logit_attribution(real, full, ids[:12])        # (30, 9, 1, 11)
    parts = full["embed"] + sum(full["mlp_out", i] for i in range(30))
    scale = full["ln_final.hook_scale"]
    out = ((parts / scale * real.final_norm) @ real.W_out.T)[0, :-1]
    rest = out[np.arange(11), ids[1:12]]
    right = logits[0, np.arange(11), ids[1:12]]
    assert np.allclose(dla.sum(axis=(0, 1))[0] + rest, right, atol=2e-2, rtol=1e-3)
    copy = circuits.copying_scores(real)
    assert copy.shape == (30, 9) and (np.abs(copy) <= 1 + 1e-9).all()


def test_the_detector_refuses_a_cache_with_some_layers_only():
    m = AttentionOnlyModel(vocab=9, d_model=12, n_layers=3, n_heads=2, seed=2)
    tok = np.random.default_rng(1).integers(0, 9, size=(2, 8))
    _, some = m.run_with_cache(tok, names_filter=["blocks.0.attn.hook_pattern", "blocks.2.attn.hook_pattern"])
    with pytest.raises(ValueError, match=r"every layer's hook_pattern.*\[0, 2\]"):
        circuits.head_detector_scores(some, tok, "induction")
    _, first = m.run_with_cache(tok, names_filter="blocks.0.attn.hook_pattern")
    with pytest.raises(ValueError, match="every layer's hook_pattern"):
        circuits.head_detector_scores(first, tok, "induction")


def test_real_copying_scores_and_centred_attribution_by_another_route(real):
    scores = circuits.copying_scores(real)
    c = real.config
    for layer, head in ((18, 6), (29, 1)):
        p, g = real.layers[layer], head // (c.H // c.G)
        # the d x d core built from the (V, d) and (d, V) factors, not from the (E, E) product
        W_V = (p["W_v"][g * c.d_k:(g + 1) * c.d_k] * p["attn_norm"]).T.astype(np.float64)    # (E, d)
        W_O = p["W_o"][:, head * c.d_k:(head + 1) * c.d_k].T.astype(np.float64)               # (d, E)
        A = real.embedding.astype(np.float64) @ W_V                                          # (V, d)
        B = W_O @ (real.W_out.astype(np.float64) * real.final_norm).T                        # (d, V)
        lam = np.linalg.eigvals(B @ A)
        assert scores[layer, head] == pytest.approx((lam.sum() / np.abs(lam).sum()).real, abs=2e-3)
    ids = pretrained.repeated_random_tokens(6, 3)
    _, cache = real.run_with_cache(ids)
    centred = circuits.direct_logit_attribution(real, cache, ids, centred=True)
    raw = circuits.direct_logit_attribution(real, cache, ids)
    z = cache["z", 18][0, :-1, 6]
    full = (z @ real.layers[18]["W_o"][:, 6 * 64:7 * 64].T / cache["ln_final.hook_scale"][0, :-1]
            * real.final_norm) @ real.W_out.T                                                 # (T-1, V)
    assert np.allclose(centred[18, 6, 0], raw[18, 6, 0] - full.mean(-1), atol=1e-4)


def test_notebook_08s_measures_equal_its_checks_references():
    from attention_course.checks import nb08

    rng = np.random.default_rng(3)
    for B, n, vocab in ((3, 9, 4), (2, 12, 6), (4, 7, 3)):
        w = rng.random((B, n, n)) ** 3
        w = np.tril(w) / np.tril(w).sum(-1, keepdims=True)
        tok = rng.integers(0, vocab, size=(B, n))
        assert circuits.induction_attention(w, tok) == pytest.approx(nb08._reference_induction(w, tok))
        for offset in (0, 1, n - 1):
            assert np.allclose(circuits.offset_weights(w, offset), nb08._reference_offset(w, offset))
    with pytest.raises(ValueError, match="offset must be in 0..3"):
        circuits.offset_weights(np.ones((1, 4, 4)), 4)
    with pytest.raises(ValueError, match="no query's token came before"):
        circuits.induction_attention(np.ones((1, 3, 3)) / 3, [[1, 2, 3]])
