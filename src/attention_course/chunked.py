"""Exact attention computed in blocks with an online softmax.

The direct formula builds the whole (L, S) score matrix. Here the keys are visited in blocks:
for each block of queries we keep a running maximum ``m``, a running sum ``l`` of
``exp(score - m)`` and a running weighted sum of values; when a later block raises the maximum,
what was accumulated is rescaled by ``exp(m_old - m_new)``. The result is the same softmax, to
rounding, and the working memory is one (block_q, block_k) tile instead of (L, S)
(Milakov & Gimelshein 2018; Rabe & Staats 2021; the forward pass of FlashAttention).
"""

from __future__ import annotations

import numpy as np

from ._validate import compute_dtype, positive_int
from .attention import prepare_attention_inputs


def online_softmax_attention(q, k, v, attn_mask=None, is_causal: bool = False,
                             scale: float | None = None, block_q: int = 128,
                             block_k: int = 128) -> np.ndarray:
    """Same result as :func:`scaled_dot_product_attention`, without ever holding (L, S).

    Parameters
    ----------
    q : ndarray, shape (..., L, E)
    k : ndarray, shape (..., S, E)
    v : ndarray, shape (..., S, Ev)
    attn_mask : ndarray of bool or float, broadcastable to (..., L, S), optional
        True = takes part; floating masks are added. Only one tile of it is read at a time.
    is_causal : bool
        Top-left causal triangle; key blocks entirely above it are skipped.
    scale : float, optional
        Default 1/sqrt(E).
    block_q, block_k : int
        Tile sizes.

    Returns
    -------
    ndarray, shape (..., L, Ev), dtype of q
        Fully masked rows give zeros, as in the direct formula.

    Examples
    --------
    >>> from attention_course.attention import scaled_dot_product_attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.normal(size=(2, 50, 8)) for _ in range(3))
    >>> a = online_softmax_attention(q, k, v, is_causal=True, block_q=16, block_k=7)
    >>> bool(np.allclose(a, scaled_dot_product_attention(q, k, v, is_causal=True)))
    True
    """
    q, k, v, mask, scale, dtype, batch = prepare_attention_inputs(
        q, k, v, attn_mask, is_causal, scale
    )
    bq = positive_int(block_q, "block_q")
    bk = positive_int(block_k, "block_k")
    cdtype = compute_dtype(dtype)
    L, S, Ev = q.shape[-2], k.shape[-2], v.shape[-1]
    q = np.broadcast_to(q, batch + q.shape[-2:]).astype(cdtype, copy=False)
    k = np.broadcast_to(k, batch + k.shape[-2:]).astype(cdtype, copy=False)
    v = np.broadcast_to(v, batch + v.shape[-2:]).astype(cdtype, copy=False)
    if mask is not None:
        mask = np.broadcast_to(mask, batch + (L, S))         # a view: nothing is copied
    out = np.zeros(batch + (L, Ev), dtype=cdtype)
    neg_inf = cdtype.type(-np.inf)
    for i0 in range(0, L, bq):
        i1 = min(i0 + bq, L)
        qi = q[..., i0:i1, :] * cdtype.type(scale)           # (..., bq, E)
        m = np.full(batch + (i1 - i0, 1), neg_inf, cdtype)   # running max
        denom = np.zeros(batch + (i1 - i0, 1), cdtype)       # running sum of exp
        acc = np.zeros(batch + (i1 - i0, Ev), cdtype)        # running sum of exp · v
        # With a causal mask, keys beyond the last query of this block are never seen.
        k_end = min(S, i1) if is_causal else S
        for j0 in range(0, k_end, bk):
            j1 = min(j0 + bk, k_end)
            s = qi @ np.swapaxes(k[..., j0:j1, :], -1, -2)   # (..., bq, bk)
            if is_causal:
                # The triangle is built tile by tile: a full (L, S) mask would defeat the point.
                below = np.arange(j0, j1)[None, :] <= np.arange(i0, i1)[:, None]
                s = np.where(below, s, neg_inf)
            elif mask is not None:
                tile = mask[..., i0:i1, j0:j1]
                s = np.where(tile, s, neg_inf) if tile.dtype == np.bool_ else s + tile
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            # Rows that have seen only blocked keys keep m = -inf; shift them by 0 instead.
            shift = np.where(np.isfinite(m_new), m_new, 0)
            p = np.exp(s - shift)                            # (..., bq, bk)
            rescale = np.exp(m - shift)                      # 0 while m is still -inf
            denom = denom * rescale + p.sum(axis=-1, keepdims=True)
            acc = acc * rescale + p @ v[..., j0:j1, :]
            m = m_new
        out[..., i0:i1, :] = np.divide(acc, denom, out=np.zeros_like(acc), where=denom > 0)
    return out.astype(dtype, copy=False)
