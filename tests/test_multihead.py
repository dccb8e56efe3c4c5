import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import (
    MultiHeadAttention,
    causal_mask,
    merge_heads,
    multi_head_attention_reference,
    scaled_dot_product_attention,
    split_heads,
)
from attention_course.multihead import from_torch_mha_mask


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(1, 5), st.integers(1, 4))
def test_split_merge_round_trip(batch, L, H, D):
    x = np.random.default_rng(L * H).standard_normal((batch, L, H * D))
    heads = split_heads(x, H)
    assert heads.shape == (batch, H, L, D)
    # head h holds features h*D:(h+1)*D of every position
    np.testing.assert_array_equal(heads[:, -1], x[..., (H - 1) * D:])
    np.testing.assert_array_equal(merge_heads(heads), x)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.sampled_from([(8, 1), (8, 2), (8, 4), (12, 3)]), st.booleans(),
       st.integers(0, 1000))
def test_vectorised_equals_loop_over_heads(L, EH, bias, seed):
    E, H = EH
    mha = MultiHeadAttention(E, H, bias=bias, seed=seed, dtype=np.float64)
    if bias:
        mha.in_proj_bias = np.random.default_rng(seed).standard_normal(3 * E)
    x = np.random.default_rng(seed + 1).standard_normal((2, L, E))
    out, w = mha(x, is_causal=True, average_attn_weights=False)
    ref_out, ref_w = multi_head_attention_reference(mha, x, is_causal=True)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)
    np.testing.assert_allclose(w, ref_w, atol=1e-12)


def test_one_head_equals_the_single_head_formula():
    E = 6
    mha = MultiHeadAttention(E, 1, seed=3, dtype=np.float64)
    mha.in_proj_bias = np.arange(3 * E) / 10
    mha.out_proj_bias = np.ones(E)
    x = np.random.default_rng(0).standard_normal((5, E))
    W_q, W_k, W_v, b_q, b_k, b_v = mha.projection_weights()
    single = scaled_dot_product_attention(x @ W_q.T + b_q, x @ W_k.T + b_k, x @ W_v.T + b_v)
    expected = single @ mha.out_proj_weight.T + mha.out_proj_bias
    np.testing.assert_allclose(mha(x)[0], expected, atol=1e-12)


def test_weights_averaged_per_head_or_none():
    mha = MultiHeadAttention(8, 4, seed=0)
    x = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
    out, avg = mha(x)
    _, per_head = mha(x, average_attn_weights=False)
    assert avg.shape == (2, 3, 3) and per_head.shape == (2, 4, 3, 3)
    np.testing.assert_allclose(avg, per_head.mean(1), atol=1e-6)
    assert mha(x, need_weights=False)[1] is None
    assert out.dtype == np.float32 and mha(x.astype(np.float64))[0].dtype == np.float64


def test_masks_true_takes_part_and_combine():
    mha = MultiHeadAttention(8, 2, seed=1, dtype=np.float64)
    x = np.random.default_rng(1).standard_normal((2, 4, 8))
    real = np.array([[True, True, True, False], [True, True, False, False]])
    _, w = mha(x, key_padding_mask=real, average_attn_weights=False)
    assert np.all(w[0, :, :, 3] == 0) and np.all(w[1, :, :, 2:] == 0)
    _, w2 = mha(x, attn_mask=causal_mask(4), key_padding_mask=real, average_attn_weights=False)
    assert np.all(np.triu(w2[0, 0], 1) == 0) and np.all(w2[1, :, :, 2:] == 0)
    _, w3 = mha(x, attn_mask=np.where(causal_mask(4), 0.0, -np.inf), key_padding_mask=real,
                average_attn_weights=False)
    np.testing.assert_allclose(w3, w2, atol=1e-12)


def test_cross_attention_lengths():
    mha = MultiHeadAttention(8, 2, seed=2)
    q = np.ones((3, 8), np.float32)
    kv = np.ones((7, 8), np.float32)
    out, w = mha(q, kv, kv)
    assert out.shape == (3, 8) and w.shape == (3, 7)


@pytest.mark.parametrize("H", [1, 2, 4, 8])
def test_parameter_count_does_not_depend_on_heads(H):
    assert MultiHeadAttention(16, H).num_parameters == 4 * 16 * 16 + 4 * 16
    assert MultiHeadAttention(16, H, bias=False).num_parameters == 4 * 16 * 16


def test_base_model_parameter_count():
    assert MultiHeadAttention(512, 8).num_parameters == 1_050_624


def test_seeded_init_is_reproducible_and_xavier_sized():
    a, b = MultiHeadAttention(64, 8, seed=5), MultiHeadAttention(64, 8, seed=5)
    np.testing.assert_array_equal(a.in_proj_weight, b.in_proj_weight)
    bound = np.sqrt(6 / (64 + 192))
    assert np.abs(a.in_proj_weight).max() <= bound and np.abs(a.in_proj_weight).max() > 0.9 * bound
    assert not np.array_equal(a.in_proj_weight, MultiHeadAttention(64, 8, seed=6).in_proj_weight)


def test_causal_with_key_padding_is_a_decoder_with_padding():
    # is_causal together with key_padding_mask used to raise "attn_mask and is_causal=True
    # cannot be combined" although no attn_mask was given.
    mha = MultiHeadAttention(8, 2, seed=4, dtype=np.float64)
    mha.out_proj_bias = np.arange(8.0)
    x = np.random.default_rng(4).standard_normal((2, 5, 8))
    real = np.ones((2, 5), bool)
    real[0, :2] = False                                  # left padding
    real[1, 3:] = False                                  # right padding
    out, w = mha(x, key_padding_mask=real, is_causal=True, average_attn_weights=False)
    allowed = causal_mask(5) & real[:, None, None, :]    # (2, 1, 5, 5)
    assert np.all(w[~np.broadcast_to(allowed, w.shape)] == 0)
    np.testing.assert_allclose(w.sum(-1), allowed.any(-1).repeat(2, axis=1).astype(float),
                               atol=1e-12)
    # Queries 0 and 1 of the left-padded sequence see no key: the attention step gives zeros,
    # so the output is the output bias (torch gives NaN there).
    np.testing.assert_allclose(out[0, :2], np.broadcast_to(mha.out_proj_bias, (2, 8)))
    ref, ref_w = mha(x, attn_mask=allowed, average_attn_weights=False)
    np.testing.assert_allclose(out, ref, atol=1e-12)
    np.testing.assert_allclose(w, ref_w, atol=1e-12)
    with pytest.raises(TypeError, match="is_causal must be True or False"):
        mha(x, key_padding_mask=real, is_causal=1)


# ---- masks written for torch.nn.MultiheadAttention (True = blocked) ---------------------------

def test_from_torch_mha_mask_flips_booleans_and_keeps_additive_masks():
    blocked = np.array([[False, True, True], [False, False, True]])
    allowed = from_torch_mha_mask(blocked)
    np.testing.assert_array_equal(allowed, ~blocked)
    assert allowed.dtype == np.bool_ and allowed.shape == blocked.shape
    additive = np.array([[0.0, -np.inf, -1e9]], np.float32)
    same = from_torch_mha_mask(additive)
    assert same.dtype == np.float32
    np.testing.assert_array_equal(same, additive)
    np.testing.assert_array_equal(from_torch_mha_mask([[True, False]]), [[False, True]])
    with pytest.raises(TypeError, match=r"mask must be boolean \(torch: True = blocked\).*uint8"):
        from_torch_mha_mask(np.array([[0, 1]], np.uint8))
    with pytest.raises(ValueError, match="not NaN or \\+inf"):
        from_torch_mha_mask(np.array([0.0, np.inf]))


def test_a_torch_mask_copied_verbatim_changes_the_numbers_and_the_helper_fixes_it():
    # Both masks are valid, so nothing fails: only the numbers tell the mistake apart.
    mha = MultiHeadAttention(8, 2, seed=5, dtype=np.float64)
    x = np.random.default_rng(5).standard_normal((2, 4, 8))
    torch_attn = np.triu(np.ones((4, 4), bool), 1)           # torch: True = may not attend
    torch_pad = np.array([[False, False, False, True], [False, False, True, True]])
    right, w = mha(x, attn_mask=from_torch_mha_mask(torch_attn),
                   key_padding_mask=from_torch_mha_mask(torch_pad), average_attn_weights=False)
    np.testing.assert_allclose(right, mha(x, is_causal=True, key_padding_mask=~torch_pad)[0])
    assert np.all(w[..., torch_attn] == 0) and np.all(w[1, ..., 2:] == 0)
    wrong, w_wrong = mha(x, attn_mask=torch_attn, key_padding_mask=torch_pad,
                         average_attn_weights=False)
    assert not np.allclose(wrong, right)
    assert np.all(w_wrong[..., ~torch_attn] == 0)            # it blocks what torch lets through


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_from_torch_mha_mask_gives_torchs_numbers(mask_kind):
    torch = pytest.importorskip("torch", reason="PyTorch not installed")
    rng = np.random.default_rng(6)
    E, H, N, L, S = 12, 3, 2, 5, 6
    ref = torch.nn.MultiheadAttention(E, H, batch_first=True)
    mha = MultiHeadAttention(E, H)
    mha.in_proj_weight = ref.in_proj_weight.detach().numpy()
    mha.in_proj_bias = ref.in_proj_bias.detach().numpy()
    mha.out_proj_weight = ref.out_proj.weight.detach().numpy()
    mha.out_proj_bias = ref.out_proj.bias.detach().numpy()
    q = rng.standard_normal((N, L, E)).astype(np.float32)
    kv = rng.standard_normal((N, S, E)).astype(np.float32)
    attn = rng.random((L, S)) < 0.3                          # torch: True = blocked
    attn[:, 0] = False
    pad = np.zeros((N, S), bool)
    pad[1, 4:] = True
    if mask_kind == "float":
        attn = np.where(attn, -np.inf, rng.standard_normal((L, S))).astype(np.float32)
        pad = np.where(pad, np.finfo(np.float32).min, 0.0).astype(np.float32)
    with torch.no_grad():
        t_out, t_w = ref(torch.from_numpy(q), torch.from_numpy(kv), torch.from_numpy(kv),
                         attn_mask=torch.from_numpy(attn), key_padding_mask=torch.from_numpy(pad),
                         average_attn_weights=False)
    out, w = mha(q, kv, kv, attn_mask=from_torch_mha_mask(attn),
                 key_padding_mask=from_torch_mha_mask(torch.from_numpy(pad)),
                 average_attn_weights=False)
    np.testing.assert_allclose(out, t_out.numpy(), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(w, t_w.numpy(), atol=1e-5, rtol=1e-5)
