"""Cases from the keras and flax attention suites, ported: every path must pass them.

* keras ``ops.dot_product_attention``: inputs laid out (batch, length, heads, head_dim); an
  additive ``bias`` (batch, heads, L, S); a boolean ``mask`` (True = attend, as here) that may be
  combined with ``is_causal``; masked scores are *replaced* by ``-0.7 · finfo.max``, so a fully
  masked row averages the values.
* flax ``MultiHeadDotProductAttention``: "decoding equals full causal" - feeding a sequence one
  token at a time against a growing key/value cache gives, step by step, the rows of one causal
  pass over the whole sequence; the cache may also be a fixed-size buffer whose unwritten slots
  are masked.
"""

import numpy as np
import pytest
from test_paths_agree import (
    PATHS,
    assert_paths_agree,
    mha_path,  # noqa: F401  (a fixture)
    tolerance,
)

from attention_course import MultiHeadAttention, causal_mask, scaled_dot_product_attention


def heads_first(x):
    """keras/flax layout (B, T, N, H) to this library's (B, N, T, H)."""
    return np.swapaxes(x, -3, -2)


def keras_mask(mask, is_causal, L, S, dtype):
    """What keras does to the scores, as an additive mask: blocked scores become -0.7·max."""
    keep = np.ones((L, S), bool) if mask is None else mask
    if is_causal:
        keep = keep & causal_mask(L, S)
    return np.where(keep, 0.0, -0.7 * float(np.finfo(dtype).max)).astype(dtype)


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("scale", [None, 0.3])
@pytest.mark.parametrize("masking", ["none", "mask", "causal", "mask_and_causal"])
def test_keras_dot_product_attention_cases(path, bias, scale, masking):
    rng = np.random.default_rng(0)
    B, T, S, N, H = 2, 3, 4, 2, 5          # keras: (batch, length, heads, head_dim)
    query = rng.normal(size=(B, T, N, H)).astype(np.float32)
    key = rng.normal(size=(B, S, N, H)).astype(np.float32)
    value = rng.normal(size=(B, S, N, H)).astype(np.float32)
    mask = None
    if masking in ("mask", "mask_and_causal"):
        mask = rng.random((B, N, T, S)) < 0.7
        mask[0, 1, 2] = False              # one fully masked row
    add = keras_mask(mask, masking in ("causal", "mask_and_causal"), T, S, np.float32)
    if bias:
        add = add + rng.normal(size=(B, N, T, S)).astype(np.float32)
    q, k, v = heads_first(query), heads_first(key), heads_first(value)
    out = assert_paths_agree(q, k, v, paths=(path,), attn_mask=add, scale=scale)
    out = heads_first(out)                  # back to keras's (B, T, N, H)
    assert out.shape == (B, T, N, H)
    # Where some key is allowed, keras's replacement equals a boolean mask plus the bias.
    keep = np.ones((B, N, T, S), bool) if mask is None else mask.copy()
    if masking in ("causal", "mask_and_causal"):
        keep &= causal_mask(T, S)
    boolean = scaled_dot_product_attention(
        q, k, v, scale=scale, attn_mask=np.where(keep, add if bias else 0.0, -np.inf))
    seen = keep.any(-1)                     # (B, N, T)
    np.testing.assert_allclose(heads_first(out)[seen], boolean[seen], atol=2e-5, rtol=1e-5)
    if not seen.all():
        # keras's fully masked row: all scores equal -0.7·max (the bias is lost against it),
        # so the weights are uniform and the row is the mean of the values.
        b, n, t = np.argwhere(~seen)[0]
        np.testing.assert_allclose(out[b, t, n], value[b, :, n].mean(0), atol=1e-6)


@pytest.mark.parametrize("path", list(PATHS))
def test_keras_causal_with_fewer_queries_than_keys_is_top_left(path):
    # keras and torch both align the causal triangle to the top-left corner when L != S.
    rng = np.random.default_rng(1)
    q = rng.normal(size=(1, 2, 3, 4)).astype(np.float32)
    k, v = (rng.normal(size=(1, 2, 6, 4)).astype(np.float32) for _ in range(2))
    out = PATHS[path](q, k, v, is_causal=True)
    np.testing.assert_allclose(out[..., 0, :], v[..., 0, :], atol=1e-6)   # query 0: key 0 only
    np.testing.assert_allclose(out, PATHS[path](q, k, v, attn_mask=causal_mask(3, 6)), atol=1e-6)


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_keras_fully_masked_row_in_every_dtype(path, dtype):
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(2, 3, 4)).astype(dtype) for _ in range(3))
    keep = np.ones((3, 3), bool)
    keep[1] = False
    out = PATHS[path](q, k, v, attn_mask=keras_mask(keep, False, 3, 3, dtype))
    assert out.dtype == dtype
    if dtype == np.float16:
        # float16 is computed in float32 (as PyTorch does on a CPU), where -0.7·max of float16
        # (-45852) does not swamp the scores: a constant added to a whole row cancels in the
        # softmax, and the row is the unmasked one.
        want = scaled_dot_product_attention(q, k, v)[:, 1]
        rtol = 4e-3
    else:
        # Swamped in float32 and float64: uniform weights, the mean of the values (keras).
        want = v.mean(1)
        rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out[:, 1].astype(np.float64), want.astype(np.float64),
                               rtol=rtol, atol=rtol)


# ---------------------------------------------------------------- flax: decoding = full causal

@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_flax_decoding_one_token_at_a_time_equals_full_causal(path, dtype):
    rng = np.random.default_rng(3)
    B, N, n, H = 2, 3, 7, 4
    q, k, v = (rng.normal(size=(B, N, n, H)).astype(dtype) for _ in range(3))
    full = PATHS[path](q, k, v, is_causal=True)
    rtol, atol = tolerance(q, k, v)
    for i in range(n):
        # A growing cache: keys and values 0..i.
        step = PATHS[path](q[..., i:i + 1, :], k[..., :i + 1, :], v[..., :i + 1, :])
        np.testing.assert_allclose(step[..., 0, :], full[..., i, :], rtol=rtol, atol=atol)
        # A fixed-size cache of n slots, the unwritten ones masked (flax's decode cache).
        written = (np.arange(n) <= i)[None, :]
        cached = PATHS[path](q[..., i:i + 1, :], k, v, attn_mask=written)
        np.testing.assert_allclose(cached[..., 0, :], full[..., i, :], rtol=rtol, atol=atol)


@pytest.mark.usefixtures("mha_path")
def test_flax_decoding_multi_head_layer_equals_full_causal():
    rng = np.random.default_rng(4)
    mha = MultiHeadAttention(12, 3, seed=4, dtype=np.float64)
    mha.in_proj_bias = rng.normal(size=36)
    x = rng.normal(size=(2, 6, 12))
    full, _ = mha(x, is_causal=True, need_weights=False)
    for i in range(6):
        step, _ = mha(x[:, i:i + 1], x[:, :i + 1], need_weights=False)
        np.testing.assert_allclose(step[:, 0], full[:, i], atol=1e-12)
