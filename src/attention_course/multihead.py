"""Multi-head attention with the weight layout of ``torch.nn.MultiheadAttention``.

Mask convention: as everywhere in this library, a boolean mask marks with **True the positions
that take part**. PyTorch's ``nn.MultiheadAttention`` uses the opposite for its boolean
``attn_mask`` and ``key_padding_mask`` (True = ignore). A boolean mask copied verbatim from torch
code is still a valid mask here, so nothing fails: it silently lets through exactly the positions
torch blocks. Pass such masks through :func:`from_torch_mha_mask`. Floating masks are added to
the scores in both.
"""

from __future__ import annotations

import numpy as np

from ._validate import as_float_array, checking, combine_masks, compute_dtype, linear, positive_int
from .attention import causal_mask, scaled_dot_product_attention


def split_heads(x, num_heads: int) -> np.ndarray:
    """Cut the feature axis into ``num_heads`` slices and move the head axis forward.

    The short version to read: :func:`attention_course.minimal.split_heads`.

    Parameters
    ----------
    x : ndarray, shape (..., L, E)
    num_heads : int
        H; must divide E.

    Returns
    -------
    ndarray, shape (..., H, L, E // H)
        Head ``h`` holds features ``h*E/H : (h+1)*E/H`` of every position (a view when possible).

    Examples
    --------
    >>> split_heads(np.arange(8.0).reshape(2, 4), 2)
    array([[[0., 1.],
            [4., 5.]],
    <BLANKLINE>
           [[2., 3.],
            [6., 7.]]])
    """
    if checking():                                     # not inside backprop.unchecked()
        x = as_float_array(x, "x", min_ndim=2, allow_nonfinite=True)
        num_heads = positive_int(num_heads, "num_heads")
        if x.shape[-1] % num_heads:
            raise ValueError(f"the last axis of x (E={x.shape[-1]}) is not divisible by "
                             f"num_heads={num_heads}")
    H, E = num_heads, x.shape[-1]
    x = x.reshape(*x.shape[:-1], H, E // H)            # (..., L, H, E/H)
    return np.swapaxes(x, -3, -2)                      # (..., H, L, E/H)


def merge_heads(x) -> np.ndarray:
    """Inverse of :func:`split_heads`: concatenate the heads back along the feature axis.

    The short version to read: :func:`attention_course.minimal.merge_heads`.

    Parameters
    ----------
    x : ndarray, shape (..., H, L, D)

    Returns
    -------
    ndarray, shape (..., L, H * D)

    Examples
    --------
    >>> x = np.arange(24.0).reshape(2, 3, 4)
    >>> bool((merge_heads(split_heads(x, 2)) == x).all())
    True
    """
    if checking():
        x = as_float_array(x, "x", min_ndim=3, allow_nonfinite=True)
    H, L, D = x.shape[-3:]
    x = np.swapaxes(x, -3, -2)                         # (..., L, H, D)
    return x.reshape(*x.shape[:-2], H * D)             # (..., L, H*D)


def from_torch_mha_mask(mask) -> np.ndarray:
    """Convert a mask written for ``torch.nn.MultiheadAttention`` to this library's convention.

    PyTorch's ``nn.MultiheadAttention`` (its ``attn_mask`` and ``key_padding_mask``) reads a
    boolean True as "may **not** attend"; this library, like
    ``torch.nn.functional.scaled_dot_product_attention``, reads True as "takes part". A floating
    mask means the same in both (it is added to the scores) and is returned unchanged.

    Parameters
    ----------
    mask : array_like of bool or float, any shape
        An ``attn_mask`` (L, S) / (N·H, L, S) or a ``key_padding_mask`` (N, S) in torch's
        convention. A torch tensor works too, through NumPy (``mask.numpy()``).

    Returns
    -------
    ndarray, same shape
        Boolean: ``~mask`` (True = takes part). Floating: the mask as a NumPy array, unchanged.

    Raises
    ------
    TypeError
        A mask that is neither boolean nor floating (torch's old uint8 masks included: say
        ``mask.astype(bool)`` first if nonzero meant "blocked").
    ValueError
        A floating mask with NaN or +inf.

    Examples
    --------
    >>> torch_style = np.array([[False, True], [False, False]])   # True = blocked, as in torch
    >>> from_torch_mha_mask(torch_style)
    array([[ True, False],
           [ True,  True]])
    >>> from_torch_mha_mask(np.array([0.0, -np.inf]))             # additive: the same in both
    array([  0., -inf])
    """
    arr = np.asarray(mask)
    if arr.dtype == np.bool_:
        return ~arr
    if arr.dtype.type not in (np.float16, np.float32, np.float64):
        raise TypeError(
            f"mask must be boolean (torch: True = blocked) or floating (added to the scores); "
            f"got dtype {arr.dtype}"
        )
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise ValueError("mask may hold -inf (blocked) and finite values, not NaN or +inf")
    return arr


def check_layer_inputs(query, key, value, embed_dim: int):
    """Validate an attention layer's inputs; key defaults to query and value to key.

    query (..., L, E), key (..., S, E), value (..., S, E) with E = ``embed_dim``; returns the three
    as floating arrays. Shared by every layer that projects from width E.
    """
    query = as_float_array(query, "query", min_ndim=2)
    key = query if key is None else as_float_array(key, "key", min_ndim=2)
    value = key if value is None else as_float_array(value, "value", min_ndim=2)
    for name, a in (("query", query), ("key", key), ("value", value)):
        if a.shape[-1] != embed_dim:
            raise ValueError(f"{name} has shape {a.shape}; its last axis must be embed_dim={embed_dim}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same number of positions S; got key {key.shape} "
            f"and value {value.shape}"
        )
    return query, key, value


class MultiHeadAttention:
    """H attention heads side by side, then one output projection.

    Parameters
    ----------
    embed_dim : int
        E, the model width; every head works in width E // H.
    num_heads : int
        H; must divide ``embed_dim``.
    bias : bool
        Learnable biases on the input and output projections (PyTorch's default: True).
    seed : int, optional
        Seed for the initial weights: Xavier-uniform ``in_proj_weight``, uniform
        ``out_proj_weight`` in ±1/sqrt(E), zero biases (PyTorch's initialisation scheme).
    dtype : numpy dtype
        Dtype of the stored weights (default float32, as in PyTorch). At call time they are cast
        to the input's dtype, so the output dtype follows the input.

    Attributes (PyTorch's names and layout, so weights copy across unchanged)
    ----------
    in_proj_weight : ndarray, shape (3E, E)
        ``[W_q; W_k; W_v]`` stacked; a projection computes ``x @ W.T``.
    in_proj_bias : ndarray, shape (3E,) or None
    out_proj_weight : ndarray, shape (E, E)
    out_proj_bias : ndarray, shape (E,) or None

    Examples
    --------
    >>> mha = MultiHeadAttention(embed_dim=8, num_heads=2, seed=0)
    >>> x = np.ones((3, 8), dtype=np.float32)           # (L, E)
    >>> out, w = mha(x)
    >>> out.shape, w.shape
    ((3, 8), (3, 3))
    >>> mha(x, need_weights=False, average_attn_weights=False)[1] is None
    True
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True, seed=None,
                 dtype=np.float32):
        E = positive_int(embed_dim, "embed_dim")
        H = positive_int(num_heads, "num_heads")
        if E % H:
            raise ValueError(f"embed_dim={E} is not divisible by num_heads={H}")
        dtype = np.dtype(dtype)
        if dtype.type not in (np.float16, np.float32, np.float64):
            raise TypeError(f"dtype must be float16, float32 or float64; got {dtype}")
        self.embed_dim, self.num_heads, self.head_dim = E, H, E // H
        rng = np.random.default_rng(seed)
        xavier = np.sqrt(6.0 / (E + 3 * E))            # fan_in=E, fan_out=3E, as torch computes it
        self.in_proj_weight = rng.uniform(-xavier, xavier, (3 * E, E)).astype(dtype)
        bound = 1.0 / np.sqrt(E)
        self.out_proj_weight = rng.uniform(-bound, bound, (E, E)).astype(dtype)
        self.in_proj_bias = np.zeros(3 * E, dtype) if bias else None
        self.out_proj_bias = np.zeros(E, dtype) if bias else None

    def __repr__(self):
        return (f"MultiHeadAttention(embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"bias={self.in_proj_bias is not None})")

    @property
    def num_parameters(self) -> int:
        """4·E² weights plus 4·E biases (when ``bias``), whatever the number of heads."""
        arrays = [self.in_proj_weight, self.out_proj_weight, self.in_proj_bias, self.out_proj_bias]
        return int(sum(a.size for a in arrays if a is not None))

    def projection_weights(self):
        """The three input projections and their biases, ``(W_q, W_k, W_v, b_q, b_k, b_v)``.

        Each W is (E, E) in torch's (out, in) layout; each b is (E,) or None.
        """
        W_q, W_k, W_v = np.split(self.in_proj_weight, 3, axis=0)
        if self.in_proj_bias is None:
            return W_q, W_k, W_v, None, None, None
        b_q, b_k, b_v = np.split(self.in_proj_bias, 3)
        return W_q, W_k, W_v, b_q, b_k, b_v

    def _check_inputs(self, query, key, value):
        return check_layer_inputs(query, key, value, self.embed_dim)

    def __call__(self, query, key=None, value=None, attn_mask=None, key_padding_mask=None,
                 is_causal: bool = False, need_weights: bool = True,
                 average_attn_weights: bool = True):
        """Apply multi-head attention to batch-first inputs.

        Parameters
        ----------
        query : ndarray, shape (..., L, E)
        key : ndarray, shape (..., S, E), optional
            Defaults to ``query`` (self-attention).
        value : ndarray, shape (..., S, E), optional
            Defaults to ``key``.
        attn_mask : ndarray of bool or float, broadcastable to (..., H, L, S), optional
            Boolean True = takes part (the opposite of torch's MultiheadAttention: convert a
            torch mask with :func:`from_torch_mha_mask`); floating is added to the scores. An
            (L, S) mask applies to every sequence and head.
        key_padding_mask : ndarray of bool or float, shape (..., S), optional
            Boolean True = a real key (torch: True = padding; see :func:`from_torch_mha_mask`).
        is_causal : bool
            Apply the causal mask (top-left aligned). Here it is a real mask, not torch's
            hint; it combines with ``key_padding_mask`` (as torch's causal ``attn_mask`` plus
            padding would), but not with ``attn_mask``.
        need_weights : bool
            Return the attention weights (else ``None`` in their place).
        average_attn_weights : bool
            Average the weights over heads, (..., L, S); otherwise (..., H, L, S).

        Returns
        -------
        out : ndarray, shape (..., L, E), dtype of ``query``
        weights : ndarray, shape (..., L, S) or (..., H, L, S), or None

        Notes
        -----
        A query that may see no key gets zeros from the attention step (torch gives NaN there).
        """
        query, key, value = self._check_inputs(query, key, value)
        H = self.num_heads
        dtype = query.dtype
        # The output dtype follows the input: weights are cast to it, not the input to them.
        W_q, W_k, W_v, b_q, b_k, b_v = (None if a is None else a.astype(dtype, copy=False)
                                        for a in self.projection_weights())
        q = split_heads(linear(query, W_q, b_q), H)                  # (..., H, L, E/H)
        k = split_heads(linear(key, W_k, b_k), H)                    # (..., H, S, E/H)
        v = split_heads(linear(value, W_v, b_v), H)                  # (..., H, S, E/H)
        batch = np.broadcast_shapes(q.shape[:-3], k.shape[:-3], v.shape[:-3])
        L, S = q.shape[-2], k.shape[-2]
        if not isinstance(is_causal, (bool, np.bool_)):
            raise TypeError(f"is_causal must be True or False; got {is_causal!r}")
        if is_causal and attn_mask is not None:
            raise ValueError("attn_mask and is_causal=True cannot be combined; pass one of them")
        if is_causal and key_padding_mask is not None:
            # A decoder with padding: the triangle becomes an ordinary mask, so that it can be
            # combined with the padding (torch: a causal attn_mask plus key_padding_mask).
            attn_mask, is_causal = causal_mask(L, S), False
        mask = combine_masks(attn_mask, key_padding_mask, batch, H, L, S,
                              compute_dtype(dtype))
        heads, weights = scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=is_causal, return_weights=True
        )                                                             # (..., H, L, E/H), (..., H, L, S)
        W_o, b_o = (None if a is None else a.astype(dtype, copy=False)
                    for a in (self.out_proj_weight, self.out_proj_bias))
        out = linear(merge_heads(heads), W_o, b_o)                   # (..., L, E)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(axis=-3)                           # (..., L, S)
        return out, weights


def multi_head_attention_reference(mha: MultiHeadAttention, query, key=None, value=None,
                                   attn_mask=None, is_causal: bool = False):
    """The slow, readable version: one head at a time in a Python loop, then concatenate.

    Parameters
    ----------
    mha : MultiHeadAttention
        Supplies the weights.
    query : ndarray, shape (..., L, E)
    key, value : ndarray, shape (..., S, E), optional
        Default to ``query`` / ``key``.
    attn_mask : ndarray, broadcastable to (..., L, S), optional
        Same for every head; True = takes part.
    is_causal : bool

    Returns
    -------
    out : ndarray, shape (..., L, E)
    weights : ndarray, shape (..., H, L, S)
        Each head's weights, not averaged.

    Examples
    --------
    >>> mha = MultiHeadAttention(8, 2, seed=1, dtype=np.float64)
    >>> x = np.random.default_rng(0).normal(size=(5, 8))
    >>> fast, _ = mha(x)
    >>> slow, _ = multi_head_attention_reference(mha, x)
    >>> bool(np.allclose(fast, slow))
    True
    """
    if not isinstance(mha, MultiHeadAttention):
        raise TypeError(f"mha must be a MultiHeadAttention; got {type(mha).__name__}")
    query, key, value = mha._check_inputs(query, key, value)
    W_q, W_k, W_v, b_q, b_k, b_v = mha.projection_weights()
    D = mha.head_dim
    outs, weights = [], []
    for h in range(mha.num_heads):
        rows = slice(h * D, (h + 1) * D)            # head h owns these rows of each W
        q_h, k_h, v_h = (linear(x, W[rows], None if b is None else b[rows])
                         for x, W, b in ((query, W_q, b_q), (key, W_k, b_k), (value, W_v, b_v)))
        # q_h: (..., L, D); k_h, v_h: (..., S, D)
        o_h, w_h = scaled_dot_product_attention(
            q_h.astype(query.dtype), k_h.astype(query.dtype), v_h.astype(query.dtype),
            attn_mask=attn_mask, is_causal=is_causal, return_weights=True,
        )
        outs.append(o_h)
        weights.append(w_h)
    concat = np.concatenate(outs, axis=-1)          # (..., L, H*D)
    out = linear(concat, mha.out_proj_weight, mha.out_proj_bias).astype(query.dtype)
    return out, np.stack(weights, axis=-3)          # (..., H, L, S)
