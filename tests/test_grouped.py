"""Grouped-query attention equals repeating the key/value heads, and MultiHeadAttention at G = H."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import MultiHeadAttention, scaled_dot_product_attention
from attention_course.grouped import GroupedQueryAttention, grouped_query_attention, repeat_kv

HG = [(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (6, 3), (6, 2), (8, 4)]


def test_repeat_kv_gives_consecutive_query_heads_the_same_group():
    k = np.arange(3.0).reshape(3, 1, 1)                       # G = 3 heads holding 0, 1, 2
    assert repeat_kv(k, 6)[:, 0, 0].tolist() == [0, 0, 1, 1, 2, 2]   # not tiled: 0, 1, 2, 0, 1, 2


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(HG), st.integers(1, 5), st.integers(1, 5), st.integers(0, 2),
       st.booleans(), st.integers(0, 10_000))
def test_equals_attention_over_repeated_keys_and_values(HG, L, S, batch, masked, seed):
    H, G = HG
    rng = np.random.default_rng(seed)
    lead = (2,) * batch
    q = rng.normal(size=(*lead, H, L, 4))
    k = rng.normal(size=(*lead, G, S, 4))
    v = rng.normal(size=(*lead, G, S, 3))
    mask = rng.random((*lead, H, L, S)) > 0.4 if masked else None   # fully masked rows happen
    out, w = grouped_query_attention(q, k, v, attn_mask=mask, return_weights=True)
    ref, ref_w = scaled_dot_product_attention(q, repeat_kv(k, H), repeat_kv(v, H), attn_mask=mask,
                                              return_weights=True)
    assert out.shape == (*lead, H, L, 3) and w.shape == (*lead, H, L, S)
    np.testing.assert_allclose(out, ref, atol=1e-12)
    np.testing.assert_allclose(w, ref_w, atol=1e-12)


@pytest.mark.parametrize("mask_shape", [(5, 5), (1, 5, 5), (2, 1, 5, 5)])
def test_masks_without_a_head_axis_broadcast_over_every_head(mask_shape):
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 4, 5, 4)), rng.normal(size=(2, 2, 5, 4)), rng.normal(size=(2, 2, 5, 4))
    mask = rng.random(mask_shape) > 0.3
    ref = scaled_dot_product_attention(q, repeat_kv(k, 4), repeat_kv(v, 4), attn_mask=mask)
    np.testing.assert_allclose(grouped_query_attention(q, k, v, attn_mask=mask), ref, atol=1e-12)
    causal = scaled_dot_product_attention(q, repeat_kv(k, 4), repeat_kv(v, 4), is_causal=True)
    np.testing.assert_allclose(grouped_query_attention(q, k, v, is_causal=True), causal, atol=1e-12)


def test_float32_stays_float32():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(4, 3, 8)).astype(np.float32), rng.normal(size=(2, 3, 8)).astype(np.float32)
    assert grouped_query_attention(q, k, k).dtype == np.float32
    gqa = GroupedQueryAttention(8, 4, 2, seed=0)
    assert gqa(rng.normal(size=(3, 8)).astype(np.float32))[0].dtype == np.float32


@settings(max_examples=20, deadline=None)
@given(st.sampled_from([(8, 1), (8, 2), (8, 4), (12, 3), (12, 6)]), st.booleans(), st.booleans(),
       st.integers(0, 1000))
def test_layer_with_g_equal_h_is_multi_head_attention(EH, bias, causal, seed):
    E, H = EH
    mha = MultiHeadAttention(E, H, bias=bias, seed=seed, dtype=np.float64)
    if bias:
        mha.in_proj_bias = np.random.default_rng(seed).normal(size=3 * E)
        mha.out_proj_bias = np.random.default_rng(seed + 1).normal(size=E)
    gqa = GroupedQueryAttention.from_multi_head(mha)
    assert gqa.num_kv_heads == H and gqa.num_parameters == mha.num_parameters
    x = np.random.default_rng(seed + 2).normal(size=(2, 5, E))
    out, w = gqa(x, is_causal=causal, average_attn_weights=False)
    ref, ref_w = mha(x, is_causal=causal, average_attn_weights=False)
    np.testing.assert_allclose(out, ref, atol=1e-12)
    np.testing.assert_allclose(w, ref_w, atol=1e-12)


def test_layer_equals_its_heads_written_out_with_repeated_keys():
    rng = np.random.default_rng(3)
    gqa = GroupedQueryAttention(12, 6, 2, seed=3, dtype=np.float64)
    gqa.k_proj_bias = rng.normal(size=gqa.k_proj_bias.shape)
    x = rng.normal(size=(4, 12))
    out, w = gqa(x, average_attn_weights=False)
    d = gqa.head_dim
    for h in range(6):
        g = h // 3                                          # 6 query heads, 3 per group
        q = x @ gqa.q_proj_weight[h * d:(h + 1) * d].T
        k = x @ gqa.k_proj_weight[g * d:(g + 1) * d].T + gqa.k_proj_bias[g * d:(g + 1) * d]
        v = x @ gqa.v_proj_weight[g * d:(g + 1) * d].T
        ref, ref_w = scaled_dot_product_attention(q, k, v, return_weights=True)
        np.testing.assert_allclose(w[h], ref_w, atol=1e-12)
        np.testing.assert_allclose(out @ np.linalg.inv(gqa.out_proj_weight.T)[:, h * d:(h + 1) * d],
                                   ref, atol=1e-9)


@pytest.mark.parametrize("E, H, G", [(512, 8, 8), (512, 8, 2), (512, 8, 1), (12, 6, 3)])
def test_parameter_count(E, H, G):
    d = E // H
    expected = E * E + 2 * E * G * d + E * E + (E + 2 * G * d + E)
    assert GroupedQueryAttention(E, H, G).num_parameters == expected
    assert GroupedQueryAttention(E, H, G, bias=False).num_parameters == expected - (2 * E + 2 * G * d)
    for bias in (True, False):
        layer = GroupedQueryAttention(E, H, G, bias=bias)
        shapes = GroupedQueryAttention.parameter_shapes(E, H, G, bias=bias)
        assert {name: getattr(layer, name).shape for name in shapes} == shapes
        assert all(getattr(layer, name) is None for name in ("q_proj_bias", "out_proj_bias")) != bias


def test_bad_input_names_the_argument():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="H=4 must be a multiple of .* G=3"):
        grouped_query_attention(rng.normal(size=(4, 2, 3)), rng.normal(size=(3, 2, 3)),
                                rng.normal(size=(3, 2, 3)))
    with pytest.raises(ValueError, match="k and v .* got k \\(2, 2, 3\\) and v \\(1, 2, 3\\)"):
        grouped_query_attention(rng.normal(size=(4, 2, 3)), rng.normal(size=(2, 2, 3)),
                                rng.normal(size=(1, 2, 3)))
    with pytest.raises(ValueError, match="head axis .* must be 1 or H=4"):
        grouped_query_attention(rng.normal(size=(4, 2, 3)), rng.normal(size=(2, 2, 3)),
                                rng.normal(size=(2, 2, 3)), attn_mask=np.ones((2, 2, 2), bool))
    with pytest.raises(ValueError, match="num_kv_heads"):
        GroupedQueryAttention(8, 4, 0)
    with pytest.raises(ValueError, match="multiple"):
        GroupedQueryAttention(12, 4, 3)
    with pytest.raises(ValueError, match="embed_dim=8"):
        GroupedQueryAttention(8, 4, 2)(np.ones((3, 6)))
