"""Every public boundary refuses bad input with a message naming argument, got and needed."""

import numpy as np
import pytest

from attention_course import (
    MultiHeadAttention,
    causal_mask,
    cosine_similarity,
    merge_heads,
    online_softmax_attention,
    padding_mask,
    project_qkv,
    scaled_dot_product_attention,
    split_heads,
)

f32 = np.float32
q = np.ones((2, 3, 4), f32)
k = np.ones((2, 5, 4), f32)
v = np.ones((2, 5, 6), f32)

ATTENTION_FUNCTIONS = [scaled_dot_product_attention, online_softmax_attention]

CASES = {
    "wrong rank": ((np.ones(4, f32), k, v), {}, ValueError, r"q must have at least 2 axes; got shape \(4,\)"),
    "E mismatch": ((q, np.ones((2, 5, 3), f32), v), {}, ValueError, r"q and k must share the last axis E.*E=4.*E=3"),
    "S mismatch": ((q, k, np.ones((2, 4, 6), f32)), {}, ValueError, r"same number of positions S.*S=5.*S=4"),
    "batch mismatch": ((np.ones((3, 3, 4), f32), k, v), {}, ValueError, r"leading \(batch\) axes do not broadcast: q \(3,\), k \(2,\)"),
    "integer q": ((np.ones((3, 4), int), k[0], v[0]), {}, TypeError, "q must have a floating dtype.*int64"),
    "mixed dtypes": ((q.astype(np.float64), k, v), {}, TypeError, "share one dtype; got q=float64, k=float32"),
    "NaN in k": ((q, np.where(k > 0, np.nan, k), v), {}, ValueError, "k contains NaN"),
    "inf in v": ((q, k, np.full_like(v, np.inf)), {}, ValueError, "v contains inf"),
    "mask shape": ((q, k, v), {"attn_mask": np.ones((3, 4), bool)}, ValueError, r"attn_mask has shape \(3, 4\); it must broadcast to \(2, 3, 5\)"),
    "mask dtype": ((q, k, v), {"attn_mask": np.ones((3, 5), int)}, TypeError, "attn_mask must be boolean.*int64"),
    "mask NaN": ((q, k, v), {"attn_mask": np.full((3, 5), np.nan, f32)}, ValueError, "attn_mask may hold -inf"),
    "mask and causal": ((q, k, v), {"attn_mask": np.ones((3, 5), bool), "is_causal": True}, ValueError, "cannot be combined"),
    "is_causal not bool": ((q, k, v), {"is_causal": "yes"}, TypeError, "is_causal must be True or False"),
    "zero width": ((np.ones((3, 0), f32), np.ones((5, 0), f32), v[0]), {}, ValueError, "last axis E >= 1"),
    "bad scale": ((q, k, v), {"scale": float("nan")}, ValueError, "scale must be a finite number"),
}


@pytest.mark.parametrize("fn", ATTENTION_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("case", list(CASES))
def test_attention_bad_input(fn, case):
    args, kwargs, err, pattern = CASES[case]
    with pytest.raises(err, match=pattern):
        fn(*args, **kwargs)


def test_minus_inf_in_float_mask_is_allowed():
    m = np.zeros((3, 5), f32)
    m[:, 0] = -np.inf
    assert np.isfinite(scaled_dot_product_attention(q, k, v, attn_mask=m)).all()


def test_masks_and_heads_bad_input():
    with pytest.raises(ValueError, match="L must be >= 0; got L=-1"):
        causal_mask(-1)
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, S=3\]; got \[4\]"):
        padding_mask([4], 3)
    with pytest.raises(TypeError, match="lengths must be a 1-D array of ints"):
        padding_mask([1.5], 3)
    with pytest.raises(ValueError, match="E=10.*not divisible by num_heads=3"):
        split_heads(np.ones((2, 10)), 3)
    with pytest.raises(ValueError, match="x must have at least 3 axes"):
        merge_heads(np.ones((2, 10)))
    with pytest.raises(ValueError, match="num_heads must be positive; got num_heads=0"):
        split_heads(np.ones((2, 10)), 0)


def test_multihead_bad_input():
    with pytest.raises(ValueError, match="embed_dim=10 is not divisible by num_heads=3"):
        MultiHeadAttention(10, 3)
    with pytest.raises(TypeError, match="embed_dim must be an int"):
        MultiHeadAttention(8.0, 2)
    mha = MultiHeadAttention(8, 2, seed=0)
    with pytest.raises(ValueError, match=r"query has shape \(3, 6\); its last axis must be embed_dim=8"):
        mha(np.ones((3, 6), f32))
    with pytest.raises(ValueError, match="key and value must have the same number of positions"):
        mha(np.ones((3, 8), f32), np.ones((4, 8), f32), np.ones((5, 8), f32))
    with pytest.raises(ValueError, match=r"key_padding_mask has shape \(2, 3\); it must be"):
        mha(np.ones((2, 4, 8), f32), key_padding_mask=np.ones((2, 3), bool))
    with pytest.raises(ValueError, match=r"attn_mask has shape \(3, 3\); it must broadcast to \(2, 4, 4\)"):
        mha(np.ones((4, 8), f32), attn_mask=np.ones((3, 3), bool))
    with pytest.raises(ValueError, match="cannot be combined"):
        mha(np.ones((4, 8), f32), attn_mask=causal_mask(4), is_causal=True)
    with pytest.raises(TypeError, match="query must have a floating dtype"):
        mha(np.ones((4, 8), int))


def test_projection_bad_input():
    x = np.ones((4, 6))
    with pytest.raises(ValueError, match=r"W_k has shape \(3, 6\); it must be \(d_model, width\) = \(6, ...\)"):
        project_qkv(x, np.ones((6, 3)), np.ones((3, 6)), np.ones((6, 3)))
    with pytest.raises(ValueError, match="must give the same width d_k"):
        project_qkv(x, np.ones((6, 3)), np.ones((6, 2)), np.ones((6, 3)))
    with pytest.raises(ValueError, match="must share the last axis"):
        cosine_similarity(np.ones(3), np.ones(4))
