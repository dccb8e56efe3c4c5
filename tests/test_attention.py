import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import (
    causal_mask,
    online_softmax_attention,
    padding_mask,
    scaled_dot_product_attention,
    sliding_window_mask,
)


def rand(rng, *shape, dtype=np.float64):
    return rng.standard_normal(shape).astype(dtype)


def test_default_scale_is_one_over_sqrt_e():
    rng = np.random.default_rng(0)
    q, k, v = rand(rng, 3, 16), rand(rng, 4, 16), rand(rng, 4, 2)
    _, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    s = q @ k.T / 4.0
    np.testing.assert_allclose(w, np.exp(s) / np.exp(s).sum(-1, keepdims=True))
    _, w2 = scaled_dot_product_attention(q, k, v, scale=1.0, return_weights=True)
    assert not np.allclose(w, w2)


def test_boolean_true_means_takes_part_and_float_mask_is_added():
    rng = np.random.default_rng(1)
    q, k, v = rand(rng, 2, 4), rand(rng, 3, 4), rand(rng, 3, 5)
    allowed = np.array([[True, False, True], [False, True, True]])
    _, w = scaled_dot_product_attention(q, k, v, attn_mask=allowed, return_weights=True)
    assert np.all(w[~allowed] == 0) and np.all(w[allowed] > 0)
    additive = np.where(allowed, 0.0, -np.inf)
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, attn_mask=additive),
                               scaled_dot_product_attention(q, k, v, attn_mask=allowed))
    bias = np.array([[0.0, 1.0, 2.0]])
    _, wb = scaled_dot_product_attention(q, k, v, attn_mask=bias, return_weights=True)
    s = q @ k.T / 2.0 + bias
    np.testing.assert_allclose(wb, np.exp(s) / np.exp(s).sum(-1, keepdims=True))


@pytest.mark.parametrize("L, S", [(3, 3), (2, 5), (5, 2)])
def test_causal_is_top_left_aligned(L, S):
    m = causal_mask(L, S)
    assert m.shape == (L, S)
    for i in range(L):
        for j in range(S):
            assert m[i, j] == (j <= i)
    rng = np.random.default_rng(2)
    q, k, v = rand(rng, L, 4), rand(rng, S, 4), rand(rng, S, 3)
    np.testing.assert_allclose(scaled_dot_product_attention(q, k, v, is_causal=True),
                               scaled_dot_product_attention(q, k, v, attn_mask=m))


def test_fully_masked_row_and_empty_keys_give_zeros():
    rng = np.random.default_rng(3)
    q, k, v = rand(rng, 3, 4), rand(rng, 5, 4), rand(rng, 5, 2)
    allowed = np.ones((3, 5), bool)
    allowed[1] = False
    out, w = scaled_dot_product_attention(q, k, v, attn_mask=allowed, return_weights=True)
    assert np.all(out[1] == 0) and np.all(w[1] == 0) and np.isfinite(out).all()
    out0 = scaled_dot_product_attention(q, np.zeros((0, 4)), np.zeros((0, 2)))
    assert out0.shape == (3, 2) and np.all(out0 == 0)
    assert scaled_dot_product_attention(np.zeros((0, 4)), k, v).shape == (0, 2)


def test_padding_mask():
    m = padding_mask([1, 3], 3)
    assert m.shape == (2, 1, 3)
    np.testing.assert_array_equal(m[:, 0], [[True, False, False], [True, True, True]])


def test_sliding_window_mask_counts():
    m = sliding_window_mask(10, 2)
    assert m.sum(1).max() == 5 and m[0].sum() == 3 and m[5, 3] and not m[5, 2]
    c = sliding_window_mask(10, 2, causal=True)
    assert np.all(c <= causal_mask(10)) and c[5, 3] and not c[5, 6]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_output_dtype_follows_input_without_upcast(dtype):
    rng = np.random.default_rng(4)
    q, k, v = (rand(rng, 2, 3, 8, dtype=dtype) for _ in range(3))
    out, w = scaled_dot_product_attention(q, k, v, return_weights=True, is_causal=True)
    assert out.dtype == dtype and w.dtype == dtype
    ref = scaled_dot_product_attention(*(a.astype(np.float64) for a in (q, k, v)), is_causal=True)
    tol = {np.float16: 2e-2, np.float32: 1e-5, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(out, ref, atol=tol, rtol=tol)


def test_leading_axes_broadcast():
    rng = np.random.default_rng(5)
    q = rand(rng, 2, 1, 3, 4)
    k = rand(rng, 1, 5, 6, 4)
    v = rand(rng, 6, 3)
    out = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 5, 3, 3)
    np.testing.assert_allclose(out[1, 4], scaled_dot_product_attention(q[1, 0], k[0, 4], v))


# ---- properties -----------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(1, 6), st.integers(0, 10_000))
def test_self_attention_is_permutation_equivariant(n, d, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, n, d)
    perm = rng.permutation(n)
    out = scaled_dot_product_attention(x, x, x)
    np.testing.assert_allclose(scaled_dot_product_attention(x[perm], x[perm], x[perm]), out[perm],
                               atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 8), st.integers(0, 10_000))
def test_causal_outputs_ignore_later_tokens(n, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, n, 4)
    t = int(rng.integers(0, n - 1))
    y = x.copy()
    y[t + 1:] = rand(rng, n - t - 1, 4)
    a = scaled_dot_product_attention(x, x, x, is_causal=True)
    b = scaled_dot_product_attention(y, y, y, is_causal=True)
    np.testing.assert_allclose(a[: t + 1], b[: t + 1], atol=1e-12)
    assert not np.allclose(a[t + 1:], b[t + 1:])


mask_kind = st.sampled_from(["none", "causal", "bool", "float"])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 9), st.integers(1, 17),
       st.integers(1, 17), mask_kind, st.integers(0, 10_000))
def test_online_softmax_equals_direct(L, S, E, bq, bk, kind, seed):
    rng = np.random.default_rng(seed)
    q, k, v = rand(rng, 2, L, E), rand(rng, 2, S, E), rand(rng, 2, S, 3)
    kwargs = {}
    if kind == "causal":
        kwargs["is_causal"] = True
    elif kind == "bool":
        kwargs["attn_mask"] = rng.random((2, L, S)) > 0.5      # some rows fully masked
    elif kind == "float":
        kwargs["attn_mask"] = np.where(rng.random((L, S)) > 0.3, rng.standard_normal((L, S)),
                                       -np.inf)
    direct = scaled_dot_product_attention(q, k, v, **kwargs)
    chunked = online_softmax_attention(q, k, v, block_q=bq, block_k=bk, **kwargs)
    np.testing.assert_allclose(chunked, direct, atol=1e-10)


def test_online_softmax_float32_stays_float32():
    rng = np.random.default_rng(6)
    q, k, v = (rand(rng, 50, 8, dtype=np.float32) for _ in range(3))
    out = online_softmax_attention(q, k, v, block_q=16, block_k=16)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, scaled_dot_product_attention(q, k, v), atol=1e-5)


def test_online_softmax_memory_does_not_grow_with_length():
    import tracemalloc

    def peak(n):
        rng = np.random.default_rng(0)
        q, k, v = (rand(rng, n, 16, dtype=np.float32) for _ in range(3))
        tracemalloc.start()
        online_softmax_attention(q, k, v, block_q=64, block_k=64, is_causal=True)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top - 2 * n * 16 * 4          # minus the output and its float32 copy

    small, large = peak(256), peak(2048)
    assert large < 4 * small + 200_000       # 8x longer: direct would need 64x the scores
    direct_scores = 2048 * 2048 * 4
    assert large < direct_scores / 20
