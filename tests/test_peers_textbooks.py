"""Cases from two textbook codebases, ported: every path must give their numbers.

* Raschka, *Build a Large Language Model (From Scratch)*, chapter 3 (the LLMs-from-scratch
  repository): the six-token sentence "Your journey starts with one step" with 3-wide
  embeddings, the weights and context vectors the chapter prints, and its causal masking.
* Rush et al., *The Annotated Transformer*: ``subsequent_mask``, masks that ``masked_fill`` the
  scores with -1e9 (so a fully padded row averages the values instead of giving zeros), source
  and target masks of shape (B, 1, S) and (B, L, S), and the multi-head layer's size.

The expected numbers are the printed outputs of those texts (4 decimals), not recomputed here.
"""

import numpy as np
import pytest
from test_paths_agree import PATHS, assert_paths_agree

from attention_course import MultiHeadAttention, causal_mask, scaled_dot_product_attention

# "Your journey starts with one step": one 3-wide embedding per token.
SENTENCE = np.array([[0.43, 0.15, 0.89],   # Your
                     [0.55, 0.87, 0.66],   # journey
                     [0.57, 0.85, 0.64],   # starts
                     [0.22, 0.58, 0.33],   # with
                     [0.77, 0.25, 0.10],   # one
                     [0.05, 0.80, 0.55]],  # step
                    np.float32)


@pytest.mark.parametrize("path", list(PATHS))
def test_llms_from_scratch_simplified_self_attention(path):
    # Section 3.3: scores x·xᵀ with no scaling, weights, context vectors.
    out = PATHS[path](SENTENCE, SENTENCE, SENTENCE, scale=1.0)
    printed = np.array([[0.4421, 0.5931, 0.5790],
                        [0.4419, 0.6515, 0.5683],
                        [0.4431, 0.6496, 0.5671],
                        [0.4304, 0.6298, 0.5510],
                        [0.4671, 0.5910, 0.5266],
                        [0.4177, 0.6503, 0.5645]])
    np.testing.assert_allclose(out, printed, atol=6e-5)


def test_llms_from_scratch_weights_of_journey():
    # The query "journey" (token 2): its scores and its weights, as printed.
    _, w = scaled_dot_product_attention(SENTENCE, SENTENCE, SENTENCE, scale=1.0,
                                        return_weights=True)
    np.testing.assert_allclose((SENTENCE @ SENTENCE.T)[1],
                               [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865], atol=6e-5)
    np.testing.assert_allclose(w[1], [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581], atol=6e-5)
    assert abs(float(w[1].sum()) - 1.0) < 1e-6


# torch.manual_seed(123) followed by three torch.rand(3, 2): the chapter's W_query, W_key, W_value.
W_QUERY = np.array([[0.29611194, 0.51656228], [0.25167072, 0.68855679], [0.07397246, 0.86652195]],
                   np.float32)
W_KEY = np.array([[0.13657987, 0.10247904], [0.18405646, 0.72644675], [0.31525391, 0.68710667]],
                 np.float32)
W_VALUE = np.array([[0.07563531, 0.19663817], [0.31641197, 0.40174013], [0.11856830, 0.82739538]],
                   np.float32)


@pytest.mark.parametrize("path", list(PATHS))
def test_llms_from_scratch_self_attention_with_trainable_weights(path):
    # Section 3.4 (SelfAttention_v1): scores scaled by 1/sqrt(d_k) with d_k = 2.
    q, k, v = SENTENCE @ W_QUERY, SENTENCE @ W_KEY, SENTENCE @ W_VALUE
    np.testing.assert_allclose(q[1], [0.4306, 1.4551], atol=6e-5)
    out = PATHS[path](q, k, v)
    printed = np.array([[0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203],
                        [0.2948, 0.7939], [0.2927, 0.7891], [0.2990, 0.8040]])
    np.testing.assert_allclose(out, printed, atol=6e-5)


def test_llms_from_scratch_masking_after_softmax_renormalised_equals_masking_before():
    # Section 3.5.1: zero the weights above the diagonal and renormalise each row, or put -inf
    # there before the softmax: the chapter shows both give the same causal weights.
    q, k, v = SENTENCE @ W_QUERY, SENTENCE @ W_KEY, SENTENCE @ W_VALUE
    _, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    simple = w * causal_mask(6)
    simple /= simple.sum(-1, keepdims=True)
    _, causal = scaled_dot_product_attention(q, k, v, is_causal=True, return_weights=True)
    np.testing.assert_allclose(causal, simple, atol=1e-6)
    assert np.all(causal[0] == [1, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("path", list(PATHS))
def test_llms_from_scratch_causal_context_vectors_ignore_later_tokens(path):
    # A decoder's row i may not change when tokens after i change.
    q, k, v = SENTENCE @ W_QUERY, SENTENCE @ W_KEY, SENTENCE @ W_VALUE
    out = PATHS[path](q, k, v, is_causal=True)
    later = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)
    k2, v2 = k.copy(), v.copy()
    k2[3:], v2[3:] = later, later
    out2 = PATHS[path](q, k2, v2, is_causal=True)
    np.testing.assert_array_equal(out[:3], out2[:3])
    assert not np.allclose(out[3:], out2[3:])


# ---------------------------------------------------------------- the annotated transformer

def subsequent_mask_like_the_annotated_transformer(size):
    """Its subsequent_mask: (1, size, size), True where a position may be looked at."""
    return np.triu(np.ones((1, size, size)), k=1) == 0


def test_annotated_subsequent_mask_is_the_causal_mask():
    for size in (1, 2, 5, 10):
        np.testing.assert_array_equal(subsequent_mask_like_the_annotated_transformer(size)[0],
                                      causal_mask(size))


@pytest.mark.parametrize("path", list(PATHS))
def test_annotated_masked_fill_minus_1e9_and_boolean_mask(path):
    # The annotated transformer writes scores.masked_fill(mask == 0, -1e9). Wherever a query
    # sees some key, that is the boolean mask; a fully padded query averages the values
    # (-1e9 is finite), where a boolean or -inf mask gives zeros.
    rng = np.random.default_rng(1)
    B, H, n, d_k = 2, 4, 5, 8
    q, k, v = (rng.normal(size=(B, H, n, d_k)).astype(np.float32) for _ in range(3))
    pad = 0
    src = np.array([[3, 7, 1, 9, pad], [4, 2, pad, pad, pad]])
    src_mask = (src != pad)[:, None, :]                     # (B, 1, S): keys that are tokens
    tgt_mask = src_mask & subsequent_mask_like_the_annotated_transformer(n)   # (B, L, S)
    for mask in (src_mask, tgt_mask):
        keep = mask[:, None]                                # the heads axis: mask.unsqueeze(1)
        filled = np.where(keep, 0.0, -1e9).astype(np.float32)
        out_bool = assert_paths_agree(q, k, v, paths=(path,), attn_mask=keep)
        out_fill = assert_paths_agree(q, k, v, paths=(path,), attn_mask=filled)
        np.testing.assert_allclose(out_fill, out_bool, atol=2e-6)
    # A sentence of padding only: every key blocked.
    none = np.zeros((B, 1, 1, n), bool)
    out = PATHS[path](q, k, v, attn_mask=np.where(none, 0.0, -1e9).astype(np.float32))
    np.testing.assert_allclose(out, np.broadcast_to(v.mean(-2, keepdims=True), out.shape),
                               atol=1e-6)
    assert np.all(PATHS[path](q, k, v, attn_mask=none) == 0)


def test_annotated_multi_headed_attention_size():
    # MultiHeadedAttention(h=8, d_model=512): four d_model × d_model linear layers with biases,
    # d_k = d_model // h = 64.
    mha = MultiHeadAttention(512, 8)
    assert mha.head_dim == 64
    assert mha.num_parameters == 4 * (512 * 512 + 512)


def test_annotated_decoder_mask_equals_causal_with_key_padding():
    # The decoder's mask (tgt != pad) & subsequent_mask, given to the multi-head layer, is
    # is_causal together with key_padding_mask here.
    rng = np.random.default_rng(2)
    mha = MultiHeadAttention(16, 4, seed=2, dtype=np.float64)
    tgt = np.array([[5, 6, 7, 0], [8, 9, 0, 0]])
    x = rng.normal(size=(2, 4, 16))
    tgt_mask = (tgt != 0)[:, None, :] & subsequent_mask_like_the_annotated_transformer(4)
    want, _ = mha(x, attn_mask=tgt_mask[:, None])
    got, _ = mha(x, is_causal=True, key_padding_mask=tgt != 0)
    np.testing.assert_allclose(got, want, atol=1e-12)
