"""Decoding with a KV cache, and the merge of partial softmax states."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import (
    attend_one,
    decode_causal,
    merge_softmax_states,
    online_softmax_attention,
    scaled_dot_product_attention,
    softmax_state,
)
from attention_course.decoding import state_output


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(1, 6), st.integers(1, 5), st.integers(0, 2**16))
def test_decoding_token_by_token_equals_causal_attention(n, d_k, d_v, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 2, n, d_k))
    v = rng.normal(size=(2, n, d_v))
    assert np.allclose(decode_causal(q, k, v), scaled_dot_product_attention(q, k, v, is_causal=True))


def test_one_new_token_needs_only_the_cache():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 9, 8))
    full = scaled_dot_product_attention(q, k, v, is_causal=True)
    for t in range(9):
        assert np.allclose(attend_one(q[t], k[:t + 1], v[:t + 1]), full[t])
    # A later token changes nothing for an earlier one: the cache of token 4 is complete.
    k2, v2 = k.copy(), v.copy()
    k2[5:], v2[5:] = 100.0, -100.0
    assert np.allclose(attend_one(q[4], k2[:5], v2[:5]), full[4])


def test_float32_stays_float32_and_large_scores_do_not_overflow():
    q = np.full(4, 30.0, np.float32)
    k = np.array([[30.0] * 4, [29.0] * 4], np.float32)      # scores 1800 and 1740: exp overflows
    v = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    out = attend_one(q, k, v)
    assert out.dtype == np.float32 and np.all(np.isfinite(out))
    assert np.allclose(out, [1.0, 0.0], atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10), st.integers(0, 10), st.floats(-50, 50), st.integers(0, 2**16))
def test_merging_two_chunks_equals_the_state_of_both(t1, t2, offset, seed):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=4)
    k = rng.normal(size=(t1 + t2, 4)) + offset / 4        # large offsets: scores far from 0
    v = rng.normal(size=(t1 + t2, 3))
    merged = merge_softmax_states(softmax_state(q, k[:t1], v[:t1]), softmax_state(q, k[t1:], v[t1:]))
    whole = softmax_state(q, k, v)
    for got, expected in zip(merged, whole, strict=True):
        assert np.allclose(got, expected, equal_nan=False)
    if t1 + t2:
        assert np.allclose(state_output(merged), attend_one(q, k, v))
    else:
        assert merged[0] == -np.inf and merged[1] == 0 and not np.isnan(merged[2]).any()


def test_merging_many_chunks_is_the_online_softmax_of_chunked():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(3, 40, 8))
    state = softmax_state(q[-1], k[:0], v[:0])
    for j0 in range(0, 40, 7):
        state = merge_softmax_states(state, softmax_state(q[-1], k[j0:j0 + 7], v[j0:j0 + 7]))
    assert np.allclose(state_output(state), online_softmax_attention(q, k, v, block_k=7)[-1])


def test_merge_is_order_free_and_batched():
    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 6, 4)), rng.normal(size=(2, 5, 6, 3))
    a, b = softmax_state(q, k[..., :2, :], v[..., :2, :]), softmax_state(q, k[..., 2:, :], v[..., 2:, :])
    ab, ba = merge_softmax_states(a, b), merge_softmax_states(b, a)
    assert all(np.allclose(x, y) for x, y in zip(ab, ba, strict=True))
    assert state_output(ab).shape == (2, 5, 3)


@pytest.mark.parametrize("args, match", [
    ((np.zeros(4), np.zeros((3, 5)), np.zeros((3, 2))), r"k_cache has shape \(3, 5\).*d_k = 4"),
    ((np.zeros(4), np.zeros((3, 4)), np.zeros((2, 2))), r"v_cache has shape \(2, 2\)"),
    ((np.zeros(4), np.zeros(4), np.zeros((2, 2))), "k_cache must have at least 2 axes"),
])
def test_cache_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        attend_one(*args)


def test_decode_bad_input():
    with pytest.raises(ValueError, match="same number n"):
        decode_causal(np.zeros((3, 4)), np.zeros((2, 4)), np.zeros((2, 4)))
