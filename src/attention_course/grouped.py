"""Grouped-query attention: H query heads share G key/value heads.

Multi-head attention gives every head its own keys and values. When text is generated one
token at a time, those keys and values are kept (the KV cache) for every earlier token, layer
and head, and that memory, not the arithmetic, is what limits long contexts. Grouped-query
attention (Ainslie et al. 2023) keeps H query heads but only G key/value heads, G dividing H:
query heads ``h`` with the same ``h // (H / G)`` form a group and read the same keys and
values. G = H is ordinary multi-head attention; G = 1 is multi-query attention (Shazeer 2019).
The cache shrinks by the factor H / G, and so do the key and value projections.

Shapes follow :mod:`.multihead`: heads on the third axis from the end, ``(..., H, L, d_k)``.
"""

from __future__ import annotations

import numpy as np

from ._validate import as_float_array, linear, positive_int
from .attention import causal_mask, scaled_dot_product_attention
from .multihead import MultiHeadAttention, check_layer_inputs, merge_heads, split_heads

__all__ = ["GroupedQueryAttention", "grouped_query_attention", "repeat_kv"]


def _group_sizes(H: int, G: int) -> int:
    if H % G:
        raise ValueError(
            f"the number of query heads H={H} must be a multiple of the number of key/value "
            f"heads G={G}"
        )
    return H // G


def repeat_kv(x, num_heads: int) -> np.ndarray:
    """Repeat each of G key/value heads for the H / G query heads of its group.

    Parameters
    ----------
    x : ndarray, shape (..., G, S, d)
        Keys or values, one set per key/value head.
    num_heads : int
        H, the number of query heads; a multiple of G.

    Returns
    -------
    ndarray, shape (..., H, S, d)
        Head ``h`` holds key/value head ``h // (H // G)``: consecutive query heads share one.

    Examples
    --------
    >>> k = np.arange(2.0).reshape(2, 1, 1)                 # G = 2 heads, S = 1, d = 1
    >>> repeat_kv(k, 4)[:, 0, 0].tolist()
    [0.0, 0.0, 1.0, 1.0]
    """
    x = as_float_array(x, "x", min_ndim=3)
    H = positive_int(num_heads, "num_heads")
    return np.repeat(x, _group_sizes(H, x.shape[-3]), axis=-3)


def _grouped_mask(mask, H: int, G: int):
    """A mask broadcastable to (..., H, L, S), rearranged to broadcast to (..., G, H/G, L, S)."""
    if mask is None:
        return None
    arr = np.asarray(mask)
    if arr.ndim < 3:                                   # (L, S) or (S,): the same for every head
        return arr
    heads = arr.shape[-3]
    if heads == 1:
        return arr[..., None, :, :]                    # (..., 1, 1, L, S)
    if heads != H:
        raise ValueError(
            f"attn_mask has shape {arr.shape}; its head axis (third from the end) must be 1 or "
            f"H={H}"
        )
    return arr.reshape(*arr.shape[:-3], G, H // G, *arr.shape[-2:])


def grouped_query_attention(q, k, v, attn_mask=None, is_causal: bool = False,
                            scale: float | None = None, return_weights: bool = False):
    """Scaled dot-product attention where H query heads share G key/value heads.

    Parameters
    ----------
    q : ndarray, shape (..., H, L, d_k)
        Queries of H heads.
    k : ndarray, shape (..., G, S, d_k)
        Keys of G heads; G divides H.
    v : ndarray, shape (..., G, S, d_v)
        Values of the same G heads.
    attn_mask : ndarray of bool or float, broadcastable to (..., H, L, S), optional
        As in :func:`~attention_course.scaled_dot_product_attention`: True = takes part.
    is_causal : bool
    scale : float, optional
        Default ``1 / sqrt(d_k)``.
    return_weights : bool

    Returns
    -------
    out : ndarray, shape (..., H, L, d_v)
        Equal to ``scaled_dot_product_attention(q, repeat_kv(k, H), repeat_kv(v, H))``,
        computed without copying the keys and values H / G times.
    weights : ndarray, shape (..., H, L, S), only if ``return_weights``

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = rng.normal(size=(4, 3, 8)), rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 5, 6))
    >>> out = grouped_query_attention(q, k, v)              # H = 4 query heads, G = 2
    >>> out.shape
    (4, 3, 6)
    >>> bool(np.allclose(out, scaled_dot_product_attention(q, repeat_kv(k, 4), repeat_kv(v, 4))))
    True
    """
    q = as_float_array(q, "q", min_ndim=3)
    k = as_float_array(k, "k", min_ndim=3)
    v = as_float_array(v, "v", min_ndim=3)
    H, G = q.shape[-3], k.shape[-3]
    if v.shape[-3] != G:
        raise ValueError(
            f"k and v must have the same number of key/value heads G (third axis from the end); "
            f"got k {k.shape} and v {v.shape}"
        )
    per_group = _group_sizes(H, G)
    L, S = q.shape[-2], k.shape[-2]
    if attn_mask is None:
        # Each query row is scored on its own, so the H/G query heads of a group can be stacked
        # as H/G·L rows against the group's keys: one matrix product per group, not per head.
        rows = q.reshape(*q.shape[:-3], G, per_group * L, q.shape[-1])    # (..., G, H/G·L, d_k)
        mask = np.tile(causal_mask(L, S), (per_group, 1)) if is_causal else None
        result = scaled_dot_product_attention(rows, k, v, attn_mask=mask, scale=scale,
                                              return_weights=return_weights)
        if return_weights:
            out, weights = result
            return (out.reshape(*out.shape[:-3], H, L, out.shape[-1]),
                    weights.reshape(*weights.shape[:-3], H, L, S))
        return result.reshape(*result.shape[:-3], H, L, result.shape[-1])
    # (..., H, L, d_k) -> (..., G, H/G, L, d_k); keys get a size-1 axis and broadcast over it.
    q_grouped = q.reshape(*q.shape[:-3], G, per_group, *q.shape[-2:])
    result = scaled_dot_product_attention(
        q_grouped, k[..., None, :, :], v[..., None, :, :],
        attn_mask=_grouped_mask(attn_mask, H, G), is_causal=is_causal, scale=scale,
        return_weights=return_weights,
    )
    if return_weights:
        out, weights = result
        return (out.reshape(*out.shape[:-4], H, *out.shape[-2:]),
                weights.reshape(*weights.shape[:-4], H, *weights.shape[-2:]))
    return result.reshape(*result.shape[:-4], H, *result.shape[-2:])


class GroupedQueryAttention:
    """A grouped-query attention layer: H query heads, G key/value heads, width E.

    Parameters
    ----------
    embed_dim : int
        E, the model width; each head is ``d_k = E // H`` wide.
    num_heads : int
        H, query heads; divides E.
    num_kv_heads : int
        G, key/value heads; divides H. G = H is :class:`MultiHeadAttention`.
    bias : bool
    seed : int, optional
        Seed of the initial weights (uniform in ±1/sqrt(E)); biases start at 0.
    dtype : numpy dtype
        Of the stored weights; at call time they are cast to the input's dtype.

    Attributes (PyTorch's (out, in) layout: a projection computes ``x @ W.T``)
    ----------
    q_proj_weight : (E, E)
    k_proj_weight, v_proj_weight : (G·d_k, E)
    out_proj_weight : (E, E)
    q_proj_bias : (E,); k_proj_bias, v_proj_bias : (G·d_k,); out_proj_bias : (E,); or None

    Examples
    --------
    >>> gqa = GroupedQueryAttention(embed_dim=8, num_heads=4, num_kv_heads=2, seed=0)
    >>> out, w = gqa(np.ones((3, 8), dtype=np.float32), average_attn_weights=False)
    >>> out.shape, w.shape, gqa.num_parameters
    ((3, 8), (4, 3, 3), 216)
    """

    def __init__(self, embed_dim: int, num_heads: int, num_kv_heads: int, bias: bool = True,
                 seed=None, dtype=np.float32):
        E = positive_int(embed_dim, "embed_dim")
        H = positive_int(num_heads, "num_heads")
        G = positive_int(num_kv_heads, "num_kv_heads")
        if E % H:
            raise ValueError(f"embed_dim={E} is not divisible by num_heads={H}")
        _group_sizes(H, G)
        dtype = np.dtype(dtype)
        if dtype.type not in (np.float16, np.float32, np.float64):
            raise TypeError(f"dtype must be float16, float32 or float64; got {dtype}")
        self.embed_dim, self.num_heads, self.num_kv_heads, self.head_dim = E, H, G, E // H
        kv = G * self.head_dim
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(E)
        self.q_proj_weight = rng.uniform(-bound, bound, (E, E)).astype(dtype)
        self.k_proj_weight = rng.uniform(-bound, bound, (kv, E)).astype(dtype)
        self.v_proj_weight = rng.uniform(-bound, bound, (kv, E)).astype(dtype)
        self.out_proj_weight = rng.uniform(-bound, bound, (E, E)).astype(dtype)
        self.q_proj_bias = np.zeros(E, dtype) if bias else None
        self.k_proj_bias = np.zeros(kv, dtype) if bias else None
        self.v_proj_bias = np.zeros(kv, dtype) if bias else None
        self.out_proj_bias = np.zeros(E, dtype) if bias else None

    @staticmethod
    def parameter_shapes(embed_dim: int, num_heads: int, num_kv_heads: int,
                         bias: bool = True) -> dict[str, tuple[int, ...]]:
        """The shape of every weight and bias of such a layer, without building it.

        Examples
        --------
        >>> GroupedQueryAttention.parameter_shapes(8, 4, 2, bias=False)["k_proj_weight"]
        (4, 8)
        """
        E = positive_int(embed_dim, "embed_dim")
        H = positive_int(num_heads, "num_heads")
        G = positive_int(num_kv_heads, "num_kv_heads")
        if E % H:
            raise ValueError(f"embed_dim={E} is not divisible by num_heads={H}")
        _group_sizes(H, G)
        kv = G * (E // H)
        shapes = {"q_proj_weight": (E, E), "k_proj_weight": (kv, E), "v_proj_weight": (kv, E),
                  "out_proj_weight": (E, E)}
        if bias:
            shapes.update(q_proj_bias=(E,), k_proj_bias=(kv,), v_proj_bias=(kv,), out_proj_bias=(E,))
        return shapes

    @classmethod
    def from_multi_head(cls, mha: MultiHeadAttention) -> GroupedQueryAttention:
        """The same layer as ``mha`` written with G = H key/value heads (weights copied)."""
        if not isinstance(mha, MultiHeadAttention):
            raise TypeError(f"mha must be a MultiHeadAttention; got {type(mha).__name__}")
        bias = mha.in_proj_bias is not None
        layer = cls(mha.embed_dim, mha.num_heads, mha.num_heads, bias=bias,
                    dtype=mha.in_proj_weight.dtype)
        W_q, W_k, W_v, b_q, b_k, b_v = mha.projection_weights()
        layer.q_proj_weight, layer.k_proj_weight, layer.v_proj_weight = W_q.copy(), W_k.copy(), W_v.copy()
        layer.out_proj_weight = mha.out_proj_weight.copy()
        if bias:
            layer.q_proj_bias, layer.k_proj_bias, layer.v_proj_bias = b_q.copy(), b_k.copy(), b_v.copy()
            layer.out_proj_bias = mha.out_proj_bias.copy()
        return layer

    def __repr__(self):
        return (f"GroupedQueryAttention(embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"num_kv_heads={self.num_kv_heads}, bias={self.q_proj_bias is not None})")

    def _arrays(self):
        return [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight, self.out_proj_weight,
                self.q_proj_bias, self.k_proj_bias, self.v_proj_bias, self.out_proj_bias]

    @property
    def num_parameters(self) -> int:
        """The sizes of all weights and biases added up."""
        return int(sum(a.size for a in self._arrays() if a is not None))

    def __call__(self, query, key=None, value=None, attn_mask=None, is_causal: bool = False,
                 need_weights: bool = True, average_attn_weights: bool = True):
        """Apply the layer to batch-first inputs.

        Parameters
        ----------
        query : ndarray, shape (..., L, E)
        key, value : ndarray, shape (..., S, E), optional
            Default to ``query`` / ``key``.
        attn_mask : ndarray of bool or float, broadcastable to (..., H, L, S), optional
            True = takes part.
        is_causal : bool
        need_weights, average_attn_weights : bool
            As in :class:`MultiHeadAttention`.

        Returns
        -------
        out : ndarray, shape (..., L, E)
        weights : ndarray, shape (..., L, S) or (..., H, L, S), or None
        """
        E, H, G = self.embed_dim, self.num_heads, self.num_kv_heads
        query, key, value = check_layer_inputs(query, key, value, E)
        dtype = query.dtype
        cast = [None if a is None else a.astype(dtype, copy=False) for a in self._arrays()]
        W_q, W_k, W_v, W_o, b_q, b_k, b_v, b_o = cast

        q = split_heads(linear(query, W_q, b_q), H)                   # (..., H, L, d_k)
        k = split_heads(linear(key, W_k, b_k), G)                     # (..., G, S, d_k)
        v = split_heads(linear(value, W_v, b_v), G)                   # (..., G, S, d_k)
        heads, weights = grouped_query_attention(q, k, v, attn_mask=attn_mask,
                                                 is_causal=is_causal, return_weights=True)
        out = linear(merge_heads(heads), W_o, b_o)                    # (..., L, E)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(axis=-3)
        return out, weights
