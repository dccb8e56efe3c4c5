"""attention_course.hooks: TransformerLens's names and shapes, the cache, hooks that change a run, and
the old entry points as wrappers that give the same numbers, on a tiny model and on the real one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import pretrained
from attention_course.hooks import (
    ActivationCache,
    HookPoint,
    act_name,
    mean_ablate_head,
    patch_activation,
    resample_ablate_head,
    zero_ablate_head,
)
from attention_course.tasks import repeat_batch
from attention_course.tiny_model import AttentionOnlyModel, repeat_model


@pytest.fixture(scope="module")
def tiny():
    return AttentionOnlyModel(vocab=12, d_model=16, n_layers=2, n_heads=2, max_len=10, seed=3)


@pytest.fixture(scope="module")
def tokens():
    return np.random.default_rng(0).integers(0, 12, size=(3, 10))


@pytest.fixture(scope="module")
def real():
    return pretrained.load()


# --- names -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "full"), [
    (("pattern", 3), "blocks.3.attn.hook_pattern"), (("attn", 3), "blocks.3.attn.hook_pattern"),
    (("attn_scores", 0), "blocks.0.attn.hook_attn_scores"), (("q", 2), "blocks.2.attn.hook_q"),
    (("rot_k", 1), "blocks.1.attn.hook_rot_k"), (("z", 5), "blocks.5.attn.hook_z"),
    (("resid_pre", 0), "blocks.0.hook_resid_pre"), (("resid_mid", 4), "blocks.4.hook_resid_mid"),
    (("attn_out", 1), "blocks.1.hook_attn_out"), (("mlp_out", 1), "blocks.1.hook_mlp_out"),
    (("post", 7), "blocks.7.mlp.hook_post"), (("pre", 7), "blocks.7.mlp.hook_pre"),
    (("scale", 2, "ln2"), "blocks.2.ln2.hook_scale"), (("normalized", 2), "blocks.2.ln1.hook_normalized"),
    (("scale",), "ln_final.hook_scale"), (("embed",), "hook_embed"), (("pos_embed",), "hook_pos_embed"),
    (("blocks.0.hook_resid_post",), "blocks.0.hook_resid_post"),
])
def test_short_names_spell_out_as_in_transformer_lens(args, full):
    assert act_name(*args) == full


@pytest.mark.parametrize(("args", "words"), [
    (("patern", 1), "no hook point is called 'patern'"), (("pattern",), "belongs to a layer"),
    (("pattern", -1), "layer must be an int >= 0"), (("scale", 1, "ln3"), "kind must be 'ln1' or 'ln2'"),
    ((3,), "name must be a str"),
])
def test_bad_names_say_what_is_wrong(args, words):
    with pytest.raises((ValueError, TypeError), match=words):
        act_name(*args)


# --- the tiny model ----------------------------------------------------------------------------

def test_the_tiny_cache_has_every_hook_point_in_order_with_its_shape(tiny, tokens):
    logits, cache = tiny.run_with_cache(tokens)
    assert list(cache) == tiny.hook_names()
    B, T, E, H, d = 3, 10, 16, 2, 8
    expect = {"hook_embed": (B, T, E), "hook_pos_embed": (B, T, E)}
    for layer in range(2):
        at = f"blocks.{layer}."
        expect.update({at + "hook_resid_pre": (B, T, E), at + "hook_attn_out": (B, T, E),
                       at + "hook_resid_post": (B, T, E), at + "attn.hook_attn_scores": (B, H, T, T),
                       at + "attn.hook_pattern": (B, H, T, T)})
        expect.update({at + f"attn.hook_{n}": (B, T, H, d) for n in "qkvz"})
    assert {k: v.shape for k, v in cache.items()} == expect
    assert logits.shape == (B, T, 12)


def test_run_with_cache_gives_forwards_numbers_bit_for_bit(tiny, tokens):
    logits, weights, _ = tiny.forward(tokens)
    got, cache = tiny.run_with_cache(tokens)
    assert np.array_equal(got, logits)
    for layer in range(2):
        assert np.array_equal(cache["pattern", layer], weights[layer])
    # what the hook points mean: the stream adds up, the pattern is the softmax of the scores
    for layer in range(2):
        assert np.allclose(cache["resid_pre", layer] + cache["attn_out", layer], cache["resid_post", layer])
        s = cache["attn_scores", layer]
        assert np.isneginf(s[..., np.triu_indices(10, 1)[0], np.triu_indices(10, 1)[1]]).all()
        e = np.exp(s - s.max(-1, keepdims=True))
        assert np.allclose(e / e.sum(-1, keepdims=True), cache["pattern", layer], atol=1e-6)
        z = np.einsum("bhqk,bkhd->bqhd", cache["pattern", layer], cache["v", layer])
        assert np.allclose(z, cache["z", layer], atol=1e-6)


def test_ablate_is_a_zero_hook_at_hook_z(tiny, tokens):
    old, _, _ = tiny.forward(tokens, ablate=[(1, 0)])
    new = tiny.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", zero_ablate_head(0))])
    assert np.array_equal(old, new)
    assert not np.allclose(old, tiny.forward(tokens)[0])


def test_training_is_unchanged_by_the_hook_points():
    # the library model's forward has no hook at all: training takes the path it always took
    m = repeat_model("2 layers", 0)
    batch = repeat_batch(1, 4, length=20)
    loss, grads = m.loss_and_grads(batch)
    logits, cache = m.run_with_cache(batch.tokens)
    assert np.array_equal(logits, m.forward(batch.tokens)[0])
    assert set(grads) == set(m.params) and np.isfinite(loss)


def test_patching_the_whole_stream_gives_the_other_run(tiny, tokens):
    other = np.roll(tokens, 1, axis=1)
    logits_other, cache_other = tiny.run_with_cache(other)
    src = cache_other["resid_pre", 1]
    patched = tiny.run_with_hooks(tokens, fwd_hooks=[(act_name("resid_pre", 1), patch_activation(src))])
    assert np.allclose(patched, logits_other, atol=1e-6)
    # one position only: the positions before it keep the clean run (causal), it and after change
    clean = tiny.run_with_hooks(tokens)
    at_six = patch_activation(src, positions=[6])
    one = tiny.run_with_hooks(tokens, fwd_hooks=[(act_name("resid_pre", 1), at_six)])
    assert np.array_equal(one[:, :6], clean[:, :6]) and not np.allclose(one[:, 6], clean[:, 6])


def test_a_hook_that_changes_the_pattern_changes_the_output(tiny, tokens):
    def look_at_zero(pattern, hook):
        out = np.zeros_like(pattern)
        out[..., 0] = 1.0
        return out
    _, cache = tiny.run_with_cache(tokens, fwd_hooks=[("blocks.0.attn.hook_pattern", look_at_zero)])
    v = cache["v", 0]                                                    # (B, T, H, d)
    assert np.allclose(cache["z", 0], np.broadcast_to(v[:, :1], v.shape))


def test_a_hook_that_returns_nothing_keeps_its_in_place_change(tiny, tokens):
    def halve(x, hook):
        x *= 0.5
    base = tiny.run_with_hooks(tokens)
    halved = tiny.run_with_hooks(tokens, fwd_hooks=[("hook_embed", halve)])
    assert not np.allclose(base, halved)


def test_name_filters_keep_only_what_was_asked(tiny, tokens):
    _, one = tiny.run_with_cache(tokens, names_filter="blocks.0.attn.hook_pattern")
    _, some = tiny.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_z"))
    assert list(one) == ["blocks.0.attn.hook_pattern"]
    assert list(some) == ["blocks.0.attn.hook_z", "blocks.1.attn.hook_z"]
    with pytest.raises(KeyError, match="names_filter"):
        one["q", 0]


def test_bad_hooks_get_clear_errors(tiny, tokens):
    with pytest.raises(ValueError, match="no hook point 'blocks.0.attn.hook_zz'"):
        tiny.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_zz", lambda x, h: x)])
    with pytest.raises(ValueError, match="returned shape"):
        tiny.run_with_hooks(tokens, fwd_hooks=[("hook_embed", lambda x, h: x[:, :2])])
    with pytest.raises(TypeError, match="must be a function"):
        tiny.run_with_hooks(tokens, fwd_hooks=[("hook_embed", 3)])
    with pytest.raises(TypeError, match=r"\(name, function\) pairs"):
        tiny.run_with_hooks(tokens, fwd_hooks=["hook_embed"])
    with pytest.raises(ValueError, match="has no head axis"):
        tiny.run_with_hooks(tokens, fwd_hooks=[("hook_embed", zero_ablate_head(0))])
    with pytest.raises(ValueError, match="head must be < 2"):
        tiny.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", zero_ablate_head(5))])


def test_cache_and_hook_point_helpers(tiny, tokens):
    _, cache = tiny.run_with_cache(tokens[:1], remove_batch_dim=True)
    assert cache["pattern", 0].shape == (2, 10, 10) and not cache.has_batch_dim
    with pytest.raises(ValueError, match="batch of 1"):
        tiny.run_with_cache(tokens, remove_batch_dim=True)
    assert HookPoint("blocks.4.attn.hook_z").layer() == 4
    with pytest.raises(ValueError, match="no layer"):
        HookPoint("hook_embed").layer()
    assert isinstance(cache, ActivationCache) and "blocks.1.hook_resid_post" in cache


# --- the ready-made hooks, by hand -------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(1, 5), st.integers(1, 4), st.integers(1, 3), st.data())
def test_mean_ablation_writes_the_reference_mean_everywhere(B, T, H, d, data):
    head = data.draw(st.integers(0, H - 1))
    rng = np.random.default_rng(B * 100 + T)
    refs = [rng.normal(size=(2, T + 1, H, d)), rng.normal(size=(1, T, H, d))]
    x = rng.normal(size=(B, T, H, d)).astype(np.float32)
    before = x.copy()
    out = mean_ablate_head(head, refs)(x, HookPoint("blocks.0.attn.hook_z"))
    by_hand = np.concatenate([refs[0][:, :, head].reshape(-1, d), refs[1][:, :, head].reshape(-1, d)]).mean(0)
    assert np.allclose(out[:, :, head], by_hand, atol=1e-6)
    others = [h for h in range(H) if h != head]
    assert np.array_equal(out[:, :, others], x[:, :, others]) and out.dtype == x.dtype
    assert np.array_equal(x, before)                                     # the input is not written to


def test_resampling_from_one_sequence_is_patching_that_head(tiny, tokens):
    other = np.roll(tokens, 3, axis=1)
    _, c_other = tiny.run_with_cache(other[:1])
    ref = c_other["z", 1]                                                # (1, T, H, d)
    a = tiny.run_with_hooks(tokens[:1], fwd_hooks=[("blocks.1.attn.hook_z", resample_ablate_head(1, ref))])
    b = tiny.run_with_hooks(tokens[:1], fwd_hooks=[("blocks.1.attn.hook_z", patch_activation(ref, head=1))])
    assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="same positions and heads"):
        tiny.run_with_hooks(tokens[:1, :5],
                            fwd_hooks=[("blocks.1.attn.hook_z", resample_ablate_head(1, ref))])


# --- the real model ----------------------------------------------------------------------------

def test_the_real_models_wrappers_are_its_cache(real):
    ids = real.encode("The trophy did not fit into the suitcase because it was too big.")
    logits, cache = real.run_with_cache(ids)
    T, c = len(ids), real.config
    assert list(cache) == real.hook_names()
    old, w = real.forward(ids, return_weights=True)
    assert np.array_equal(logits[0], old)                                # keeping changes no number
    assert np.array_equal(np.stack([cache["pattern", i][0] for i in range(c.n_layers)]), w)
    hs = real.hidden_states(ids)
    assert np.array_equal(hs[0], cache["embed"][0]) and np.array_equal(hs[7], cache["resid_post", 6][0])
    x, q, k, v = real.attention_inputs(ids, 13)
    assert np.array_equal(q, cache["rot_q", 13][0].transpose(1, 0, 2))
    assert np.array_equal(k, cache["rot_k", 13][0].transpose(1, 0, 2))
    assert np.array_equal(x, cache["resid_pre", 13][0])
    # grouped-query attention: G key/value heads at hook_k and hook_v, H query heads in the pattern
    assert cache["k", 3].shape == (1, T, c.G, c.d_k) and cache["v", 3].shape == (1, T, c.G, c.d_k)
    assert cache["q", 3].shape == (1, T, c.H, c.d_k) and cache["pattern", 3].shape == (1, c.H, T, T)
    assert cache["pre", 3].shape == (1, T, c.d_ff) and cache["scale", 3, "ln2"].shape == (1, T, 1)
    # the stream adds up, and the norm's scale is the root mean square
    assert np.allclose(cache["resid_mid", 4], cache["resid_pre", 4] + cache["attn_out", 4], atol=1e-5)
    assert np.allclose(cache["resid_post", 4], cache["resid_mid", 4] + cache["mlp_out", 4], atol=1e-5)
    r = cache["resid_pre", 4]
    assert np.allclose(cache["scale", 4, "ln1"], np.sqrt((r.astype(np.float64) ** 2).mean(-1, keepdims=True)
                                                          + c.rms_eps), rtol=1e-5)


def test_the_real_models_ablation_and_batch(real):
    ids = pretrained.repeated_random_tokens(12, 1)
    old = real.forward(ids, ablate=[(17, 3), (18, 6)])
    new = real.run_with_hooks(ids, fwd_hooks=[("blocks.17.attn.hook_z", zero_ablate_head(3)),
                                              ("blocks.18.attn.hook_z", zero_ablate_head(6))])
    assert np.array_equal(old, new[0])
    two = np.stack([ids, pretrained.repeated_random_tokens(12, 2)])
    batch = real.run_with_hooks(two)
    # float32 through 30 layers: a batch of two rounds differently from one row when OpenBLAS splits
    # the work over threads (up to 1.2e-4 on logits of about 20 with two threads)
    assert np.allclose(batch[1], real.forward(two[1]), atol=1e-3)
    # the step-by-step path (a hook on the pattern that changes nothing) gives the same logits
    same = real.run_with_hooks(ids, fwd_hooks=[(lambda n: n.endswith("hook_pattern"), lambda x, h: x.copy())])
    assert np.allclose(same[0], real.forward(ids), atol=1e-3)


def test_the_real_models_bad_tokens(real):
    with pytest.raises(TypeError, match="not a str"):
        real.run_with_cache("hello")
    with pytest.raises(ValueError, match=r"shape \(T,\) or \(B, T\)"):
        real.run_with_cache(np.zeros((1, 2, 3), dtype=int))
    with pytest.raises(ValueError, match="ids must lie in"):
        real.run_with_hooks(np.array([[1, 2], [3, 10**6]]))


# --- what a fresh review asked for ----------------------------------------------------------

def test_a_zeroed_heads_scores_keep_the_causal_mask(tiny, tokens):
    zeroed = [("blocks.0.attn.hook_attn_scores", zero_ablate_head(1))]
    _, cache = tiny.run_with_cache(tokens, fwd_hooks=zeroed)
    w = cache["pattern", 0][:, 1]                                        # (B, T, T): head 1, scores all 0
    T = w.shape[-1]
    assert np.allclose(w, np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None])


def test_resampling_gives_each_sequence_one_reference_sequence(tiny, tokens):
    refs = np.random.default_rng(4).normal(size=(5, 10, 2, 8)).astype(np.float32)
    x = np.zeros((6, 10, 2, 8), np.float32)
    out = resample_ablate_head(0, refs, seed=1)(x, HookPoint("blocks.0.attn.hook_z"))
    for row in out[:, :, 0]:
        assert any(np.array_equal(row, r) for r in refs[:, :, 0])
    assert not out[:, :, 1].any()
    with pytest.raises(TypeError, match="reference must be one array"):
        resample_ablate_head(0, [refs, refs])


def test_patching_one_head_at_some_positions():
    src = np.arange(2 * 4 * 3 * 2, dtype=float).reshape(2, 4, 3, 2)     # (B, T, H, d)
    at_z, at_pattern = HookPoint("blocks.0.attn.hook_z"), HookPoint("blocks.0.attn.hook_pattern")
    out = patch_activation(src, positions=[1, 3], head=2)(np.zeros_like(src), at_z)
    want = np.zeros_like(src)
    want[:, [1, 3], 2] = src[:, [1, 3], 2]
    assert np.array_equal(out, want)
    pat = np.random.default_rng(0).random((1, 3, 4, 4))                 # (B, H, query, key)
    out = patch_activation(pat, positions=[2], head=1)(np.zeros_like(pat), at_pattern)
    assert np.array_equal(out[0, 1, 2], pat[0, 1, 2]) and out.sum() == pat[0, 1, 2].sum()


def test_negative_layers_count_from_the_end_and_tokens_shapes(tiny, tokens):
    _, cache = tiny.run_with_cache(tokens[0])                            # (T,) is a batch of one
    assert np.array_equal(cache["pattern", -1], cache["pattern", 1]) and cache["pattern", -1].shape[0] == 1
    with pytest.raises(ValueError, match=r"shape \(B, n\)"):
        tiny.forward(tokens[0])                                          # the training forward wants (B, n)
