"""Backward passes: every operation of a tiny attention model as a forward/backward pair.

Each ``*_forward`` returns its output(s) and a ``cache``; the matching ``*_backward`` takes the
gradient of the loss with respect to that output (the *upstream* gradient) and the cache, and
returns the gradients with respect to the inputs and parameters. Chaining the backwards in the
reverse order of the forwards is backpropagation.

The forwards are the library's own (``scaled_dot_product_attention``'s checks and arithmetic, the
mask handling and the weight layout of ``MultiHeadAttention``), so a model trained here computes
what notebooks 01-06 computed, bit for bit. Masks follow the
library: a boolean mask is True where a position takes part, a floating mask is added to the
scores, and a query that may see no key gets a zero output and zero gradients (never NaN).

dtypes: float32 stays float32 and float64 stays float64, in every output and every gradient.
Scalars enter the arithmetic as Python numbers or as ``dtype.type(...)``: a NumPy float64 scalar
would silently turn float32 activations into float64 (and make training slower). float16 is
refused: these passes are written and tested for float32 and float64 only.

Every pass checks its arguments, so that a mistake is named where it is made. A loop that checked
its arrays once and calls the passes thousands of times runs them inside :func:`unchecked`: the
same functions then skip their checks, and the casts that come with them, and compute the same
numbers, bit for bit, on arrays that already have the forward's dtype.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from ._validate import (
    as_float_array,
    assume_valid,
    check_mask,
    check_same_dtype,
    checking,
    combine_masks,
    positive_int,
)
from .attention import attend_prepared, prepare_attention_inputs
from .multihead import merge_heads, split_heads
from .softmax import softmax, softmax_rows

__all__ = [
    "attention_backward",
    "attention_forward",
    "embedding_backward",
    "embedding_forward",
    "layernorm_backward",
    "layernorm_forward",
    "linear_backward",
    "linear_forward",
    "mha_backward",
    "mha_forward",
    "positional_backward",
    "positional_forward",
    "residual_backward",
    "residual_forward",
    "softmax_backward",
    "softmax_cross_entropy",
    "softmax_forward",
    "unchecked",
]

_TRAIN_DTYPES = (np.float32, np.float64)


def unchecked():
    """A context in which the passes of this module skip their argument checks (on this thread).

    For a loop whose arrays were checked once and are its own: ``tiny_model.train`` runs its
    first step checked and the others inside this block. The passes compute the same numbers
    either way, provided every array already has the forward's dtype: the checks also cast a
    floating mask and an upstream gradient to it, and inside this block nothing is cast. Only a
    mistake goes unnamed (a wrong shape gives a NumPy error, or a wrong answer). Masks must be
    None or made by the loop itself.

    Examples
    --------
    >>> y, _ = linear_forward(np.ones((2, 3)), np.ones((4, 3)))
    >>> with unchecked():
    ...     y_fast, _ = linear_forward(np.ones((2, 3)), np.ones((4, 3)))
    >>> bool((y == y_fast).all())
    True
    """
    return assume_valid()


# ---- helpers -------------------------------------------------------------------------------------

def _float_input(x, name: str, *, min_ndim: int = 1, allow_nonfinite: bool = False) -> np.ndarray:
    arr = as_float_array(x, name, min_ndim=min_ndim, allow_nonfinite=allow_nonfinite)
    if arr.dtype.type not in _TRAIN_DTYPES:
        raise TypeError(
            f"{name} has dtype {arr.dtype}; the backward passes need float32 or float64 "
            "(convert with .astype(np.float32))"
        )
    return arr


def _upstream(d, name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The upstream gradient, checked against the forward's output shape, in the forward's dtype.

    A float64 upstream gradient of a float32 forward is cast down rather than allowed to turn
    every gradient below it into float64.
    """
    arr = as_float_array(d, name, min_ndim=0)
    if arr.shape != tuple(shape):
        raise ValueError(
            f"{name} has shape {arr.shape}; it must have the shape of the forward's output, "
            f"{tuple(shape)}"
        )
    return arr.astype(dtype, copy=False)


def _check_cache(cache, op: str) -> dict:
    if not isinstance(cache, dict) or "op" not in cache:
        raise TypeError(f"cache must be the cache returned by {op}_forward; got {type(cache).__name__}")
    if cache["op"] != op:
        raise TypeError(
            f"cache comes from {cache['op']}_forward; {op}_backward needs the cache of {op}_forward"
        )
    return cache


def _sum_to_shape(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Undo broadcasting: an input that was broadcast receives the sum of its copies' gradients."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    stretched = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    if stretched:
        g = g.sum(axis=stretched, keepdims=True)
    return g


def _softmax_grad(dy: np.ndarray, y: np.ndarray) -> np.ndarray:
    # The Jacobian of softmax is diag(y) - y yᵀ; applied to dy without forming it (O(n), not O(n²)).
    # Where y == 0 (a masked entry, or a fully masked row) the gradient is exactly 0.
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))


# ---- softmax -------------------------------------------------------------------------------------

def softmax_forward(x, mask=None):
    """Softmax over the last axis, with an optional mask.

    Parameters
    ----------
    x : ndarray, float32 or float64, shape (..., n)
        Scores. ``-inf`` entries are allowed (blocked).
    mask : ndarray of bool or float, broadcastable to (..., n), optional
        Boolean: True = the entry takes part. Floating: added to ``x`` before the softmax.

    Returns
    -------
    y : ndarray, shape (..., n), dtype of ``x``
        Rows sum to 1; a row with nothing allowed is all zeros.
    cache : dict
        For :func:`softmax_backward`.

    Examples
    --------
    >>> y, cache = softmax_forward(np.zeros((1, 3)), mask=np.array([True, True, False]))
    >>> y
    array([[0.5, 0.5, 0. ]])
    >>> softmax_backward(np.array([[1.0, 0.0, 5.0]]), cache)
    array([[ 0.25, -0.25,  0.  ]])
    """
    if checking():
        x = _float_input(x, "x", allow_nonfinite=True)
        if np.isnan(x).any() or np.isposinf(x).any():
            raise ValueError("x contains NaN or +inf; only -inf (blocked) is allowed")
        if mask is not None:
            mask = check_mask(mask, "mask", x.shape, x.dtype)
    z = x
    if mask is not None:
        z = np.where(mask, x, -np.inf).astype(x.dtype, copy=False) if mask.dtype == np.bool_ else x + mask
    y = softmax(z, axis=-1)                                          # (..., n)
    return y, {"op": "softmax", "y": y}


def softmax_backward(dy, cache):
    """Gradient of :func:`softmax_forward`: ``dx = y * (dy - sum(dy * y))`` row by row.

    The short version to read: :func:`attention_course.minimal.softmax_backward`.

    Parameters
    ----------
    dy : ndarray, shape (..., n)
        Gradient of the loss with respect to ``y``.
    cache : dict
        From :func:`softmax_forward`.

    Returns
    -------
    dx : ndarray, shape (..., n), dtype of the forward
        Zero at masked entries and in fully masked rows.
    """
    y = cache["y"]
    if checking():
        y = _check_cache(cache, "softmax")["y"]
        dy = _upstream(dy, "dy", y.shape, y.dtype)
    return _softmax_grad(dy, y)


# ---- scaled dot-product attention ----------------------------------------------------------------

def attention_forward(q, k, v, attn_mask=None, is_causal: bool = False, scale=None):
    """Scaled dot-product attention that remembers what its backward needs.

    Same validation, masks and causal triangle as
    :func:`attention_course.scaled_dot_product_attention`, and the same arithmetic
    (:func:`attention_course.attention.attend_prepared`): equal to it bit for bit.

    Parameters
    ----------
    q : ndarray, float32 or float64, shape (..., L, d_k)
    k : ndarray, shape (..., S, d_k)
    v : ndarray, shape (..., S, d_v)
        Leading axes broadcast against each other.
    attn_mask : ndarray of bool or float, broadcastable to (..., L, S), optional
        Boolean True = the key takes part; floating is added to the scaled scores.
    is_causal : bool
        Query i sees keys 0..i (top-left aligned, as torch's ``is_causal``).
    scale : float, optional
        Default ``1 / sqrt(d_k)``.

    Returns
    -------
    out : ndarray, shape (..., L, d_v)
    weights : ndarray, shape (..., L, S)
        The attention weights A.
    cache : dict
        For :func:`attention_backward`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.standard_normal((2, 4, 8)).astype(np.float32) for _ in range(3))
    >>> out, w, cache = attention_forward(q, k, v, is_causal=True)
    >>> out.shape, w.shape
    ((2, 4, 8), (2, 4, 4))
    >>> dout = np.ones_like(out)
    >>> dout[:, 3] = 0                 # only queries 0-2 send a gradient back...
    >>> dq, dk, dv = attention_backward(dout, cache)
    >>> float(np.abs(dk[:, 3]).max()), float(np.abs(dv[:, 3]).max()), dk.dtype  # ...and none sees key 3
    (0.0, 0.0, dtype('float32'))
    """
    check = checking()
    if check:
        q, k, v, attn_mask, scale, dtype, _ = prepare_attention_inputs(
            q, k, v, attn_mask, is_causal, scale)
        if dtype.type not in _TRAIN_DTYPES:
            raise TypeError(f"q, k and v have dtype {dtype}; the backward passes need float32 or float64")
    elif scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    L, S = q.shape[-2], k.shape[-2]
    mask = _causal(L, S) if is_causal else attn_mask
    # Causal or unmasked, every query sees at least one key: the guards for rows that see
    # nothing change no number there and are left out.
    normalise = partial(_normalise, open_rows=mask is None or bool(is_causal), check=check)
    out, weights = attend_prepared(q, k, v, mask, float(scale), normalise=normalise)
    # out (..., L, d_v), weights (..., L, S)
    cache = {"op": "attention", "q": q, "k": k, "v": v, "weights": weights, "out_shape": out.shape,
             "scale": float(scale)}
    return out, weights, cache


def _normalise(scores, axis=-1, *, open_rows: bool, check: bool):
    # The row softmax written over the scores; no key at all (S = 0) leaves nothing to normalise.
    if scores.size == 0:
        return scores
    return softmax_rows(scores, axis, open_rows=open_rows, inplace=True, check=check)


_CAUSAL: dict = {}


def _causal(L: int, S: int) -> np.ndarray:
    # Read-only, so that one triangle per size can be shared by every call.
    if (L, S) not in _CAUSAL:
        tri = np.tri(L, S, dtype=bool)
        tri.flags.writeable = False
        _CAUSAL[L, S] = tri
    return _CAUSAL[L, S]


def attention_backward(dout, cache):
    """Gradients of :func:`attention_forward` with respect to q, k and v.

    The short version to read: :func:`attention_course.minimal.attention_backward`.

    With scores ``Z = q kᵀ · scale (+ mask)`` and ``A = softmax(Z)``:
    ``dv = Aᵀ dout``, ``dA = dout vᵀ``, ``dZ = A * (dA - rowsum(dA * A))``,
    ``dq = dZ k · scale``, ``dk = dZᵀ q · scale``.

    Parameters
    ----------
    dout : ndarray, shape (..., L, d_v)
    cache : dict
        From :func:`attention_forward`.

    Returns
    -------
    dq : ndarray, shape of q, (..., L, d_k)
    dk : ndarray, shape of k, (..., S, d_k)
    dv : ndarray, shape of v, (..., S, d_v)
        Each summed over the leading axes its input was broadcast along. A masked key gets no
        gradient from the queries that may not see it; a fully masked query gets dq = 0.
    """
    c = cache
    if checking():
        c = _check_cache(cache, "attention")
        dout = _upstream(dout, "dout", c["out_shape"], c["weights"].dtype)
    q, k, v, w = c["q"], c["k"], c["v"], c["weights"]
    dtype = w.dtype
    dv = np.swapaxes(w, -1, -2) @ dout                               # (..., S, d_v)
    dw = dout @ np.swapaxes(v, -1, -2)                               # (..., L, S)
    dz = _softmax_grad(dw, w) * dtype.type(c["scale"])               # (..., L, S), scale folded in
    dq = dz @ k                                                      # (..., L, d_k)
    dk = np.swapaxes(dz, -1, -2) @ q                                 # (..., S, d_k)
    return _sum_to_shape(dq, q.shape), _sum_to_shape(dk, k.shape), _sum_to_shape(dv, v.shape)


# ---- linear --------------------------------------------------------------------------------------

def linear_forward(x, weight, bias=None):
    """``y = x Wᵀ + b``, with ``torch.nn.Linear``'s layout (weight is (out, in)).

    Parameters
    ----------
    x : ndarray, float32 or float64, shape (..., in_features)
    weight : ndarray, shape (out_features, in_features), dtype of x
    bias : ndarray, shape (out_features,), optional

    Returns
    -------
    y : ndarray, shape (..., out_features)
    cache : dict
        For :func:`linear_backward`.

    Examples
    --------
    >>> x = np.array([[1.0, 2.0]]); W = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    >>> y, cache = linear_forward(x, W, np.zeros(3))
    >>> y
    array([[1., 3., 4.]])
    >>> dx, dW, db = linear_backward(np.ones((1, 3)), cache)
    >>> dx, db
    (array([[2., 3.]]), array([1., 1., 1.]))
    """
    if checking():
        x, weight, bias = _linear_inputs(x, weight, bias)
    # One (N, in) @ (in, out) product over all positions: a 3-D x @ W.T loops over the batch in
    # many small products, which is slower for the tiny models of notebook 07.
    y = x.reshape(-1, x.shape[-1]) @ weight.T                        # (N, out), N = all positions
    if bias is not None:
        y += bias
    y = y.reshape(*x.shape[:-1], weight.shape[0])                    # (..., out)
    return y, {"op": "linear", "x": x, "weight": weight, "has_bias": bias is not None}


def _linear_inputs(x, weight, bias):
    x = _float_input(x, "x")
    weight = _float_input(weight, "weight", min_ndim=2)
    if weight.ndim != 2 or x.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"weight has shape {weight.shape} and x has shape {x.shape}; weight must be "
            f"(out_features, in_features) with in_features = x.shape[-1] = {x.shape[-1]}"
        )
    arrays = {"x": x, "weight": weight}
    if bias is not None:
        bias = _float_input(bias, "bias")
        if bias.shape != weight.shape[:1]:
            raise ValueError(
                f"bias has shape {bias.shape}; it must be (out_features,) = {weight.shape[:1]}"
            )
        arrays["bias"] = bias
    check_same_dtype(**arrays)
    return x, weight, bias


def linear_backward(dy, cache):
    """Gradients of :func:`linear_forward`.

    The short version to read: :func:`attention_course.minimal.linear_backward`.

    Parameters
    ----------
    dy : ndarray, shape (..., out_features)
    cache : dict
        From :func:`linear_forward`.

    Returns
    -------
    dx : ndarray, shape (..., in_features)
        ``dy W``.
    dweight : ndarray, shape (out_features, in_features)
        ``dyᵀ x`` summed over every leading axis (each position used the same W).
    dbias : ndarray, shape (out_features,), or None when the forward had no bias
    """
    c = cache
    if checking():
        c = _check_cache(cache, "linear")
        dy = _upstream(dy, "dy", c["x"].shape[:-1] + (c["weight"].shape[0],), c["x"].dtype)
    x, weight = c["x"], c["weight"]
    out_f, in_f = weight.shape
    dy2 = dy.reshape(-1, out_f)                                      # (N, out), N = all positions
    dx = (dy2 @ weight).reshape(x.shape)                             # (..., in)
    dweight = dy2.T @ x.reshape(-1, in_f)                            # (out, in)
    dbias = dy2.sum(axis=0) if c["has_bias"] else None               # (out,)
    return dx, dweight, dbias


# ---- multi-head attention ------------------------------------------------------------------------

_MHA_KEYS = ("in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias")


def _check_mha_params(params):
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of arrays ({', '.join(_MHA_KEYS)}); "
                        f"got {type(params).__name__}")
    unknown = set(params) - set(_MHA_KEYS)
    if unknown:
        raise KeyError(f"params has unknown keys {sorted(unknown)}; expected {list(_MHA_KEYS)}")
    for key in ("in_proj_weight", "out_proj_weight"):
        if params.get(key) is None:
            raise KeyError(f"params needs {key!r}")
    W_in = _float_input(params["in_proj_weight"], "params['in_proj_weight']", min_ndim=2)
    E = W_in.shape[1]
    if W_in.shape != (3 * E, E):
        raise ValueError(f"params['in_proj_weight'] has shape {W_in.shape}; it must be (3E, E)")
    expected = {"in_proj_bias": (3 * E,), "out_proj_weight": (E, E), "out_proj_bias": (E,)}
    out = {"in_proj_weight": W_in}
    for key, shape in expected.items():
        if params.get(key) is None:
            out[key] = None
            continue
        a = _float_input(params[key], f"params[{key!r}]")
        if a.shape != shape:
            raise ValueError(f"params[{key!r}] has shape {a.shape}; with E={E} it must be {shape}")
        out[key] = a
    return out, E


def mha_forward(query, key, value, params, num_heads, *, attn_mask=None, is_causal=False,
                key_padding_mask=None):
    """Multi-head attention with the weights of :class:`attention_course.MultiHeadAttention`.

    Parameters
    ----------
    query : ndarray, float32 or float64, shape (B, L, E)
        Any leading axes work; (B, L, E) is the usual case. E is d_model.
    key : ndarray, shape (B, S, E)
    value : ndarray, shape (B, S, E)
        For self-attention pass the same array three times (and add the three gradients).
    params : dict
        ``in_proj_weight`` (3E, E) = [W_Q; W_K; W_V] in torch's (out, in) layout,
        ``out_proj_weight`` (E, E), and optionally ``in_proj_bias`` (3E,), ``out_proj_bias`` (E,)
        (missing or None = no bias). The dtype must be that of ``query``.
    num_heads : int
        h; must divide E. Each head works in width d_k = E // h.
    attn_mask : ndarray of bool or float, broadcastable to (B, h, L, S), optional
        True = takes part (an (L, S) mask applies to every sequence and head).
    is_causal : bool
        Causal mask, top-left aligned; combines with ``key_padding_mask`` but not ``attn_mask``.
    key_padding_mask : ndarray of bool or float, shape (B, S), optional
        True = a real key (torch's ``nn.MultiheadAttention`` uses True = padding).

    Returns
    -------
    out : ndarray, shape (B, L, E)
        Equal to ``MultiHeadAttention(...)(query, key, value)[0]`` with the same weights, up to
        the rounding of one matrix product over all positions instead of one per sequence.
    weights : ndarray, shape (B, h, L, S)
        Each head's attention weights (not averaged).
    cache : dict
        For :func:`mha_backward`.

    Examples
    --------
    >>> from attention_course import MultiHeadAttention
    >>> mha = MultiHeadAttention(8, 2, seed=0)
    >>> params = {name: getattr(mha, name) for name in
    ...           ("in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias")}
    >>> x = np.random.default_rng(0).standard_normal((3, 5, 8)).astype(np.float32)  # (B, n, E)
    >>> out, w, cache = mha_forward(x, x, x, params, 2, is_causal=True)
    >>> bool(np.allclose(out, mha(x, is_causal=True)[0], rtol=1e-6, atol=1e-6)), w.shape
    (True, (3, 2, 5, 5))
    >>> dquery, dkey, dvalue, grads = mha_backward(np.ones_like(out), cache)
    >>> grads["in_proj_weight"].shape, grads["in_proj_weight"].dtype
    ((24, 8), dtype('float32'))
    """
    if checking():
        query, key, value, params, num_heads = _mha_inputs(query, key, value, params, num_heads,
                                                           attn_mask, is_causal)
    H = num_heads
    W_q, W_k, W_v = np.split(params["in_proj_weight"], 3, axis=0)    # (E, E) each, views
    b_q = b_k = b_v = None
    if params.get("in_proj_bias") is not None:
        b_q, b_k, b_v = np.split(params["in_proj_bias"], 3)
    qp, c_q = linear_forward(query, W_q, b_q)                        # (B, L, E)
    kp, c_k = linear_forward(key, W_k, b_k)                          # (B, S, E)
    vp, c_v = linear_forward(value, W_v, b_v)                        # (B, S, E)
    q, k, v = split_heads(qp, H), split_heads(kp, H), split_heads(vp, H)  # (B, h, ·, d_k)
    batch = np.broadcast_shapes(q.shape[:-3], k.shape[:-3], v.shape[:-3])
    L, S = q.shape[-2], k.shape[-2]
    if is_causal and key_padding_mask is not None:
        # The triangle becomes an ordinary mask so that it can be combined with the padding,
        # as MultiHeadAttention does.
        attn_mask, is_causal = _causal(L, S), False
    mask = combine_masks(attn_mask, key_padding_mask, batch, H, L, S, query.dtype)
    heads, weights, c_att = attention_forward(q, k, v, attn_mask=mask, is_causal=bool(is_causal))
    merged = merge_heads(heads)                                      # (B, L, E)
    out, c_out = linear_forward(merged, params["out_proj_weight"], params.get("out_proj_bias"))
    cache = {"op": "mha", "num_heads": H, "c_q": c_q, "c_k": c_k, "c_v": c_v, "c_att": c_att,
             "c_out": c_out, "has_in_bias": b_q is not None, "out_shape": out.shape}
    return out, weights, cache                                       # (B, L, E), (B, h, L, S)


def _mha_inputs(query, key, value, params, num_heads, attn_mask, is_causal):
    p, E = _check_mha_params(params)
    H = positive_int(num_heads, "num_heads")
    if E % H:
        raise ValueError(f"num_heads={H} must divide E={E} (from params['in_proj_weight'])")
    query = _float_input(query, "query", min_ndim=2)
    key = _float_input(key, "key", min_ndim=2)
    value = _float_input(value, "value", min_ndim=2)
    for name, a in (("query", query), ("key", key), ("value", value)):
        if a.shape[-1] != E:
            raise ValueError(f"{name} has shape {a.shape}; its last axis must be E={E}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same number of positions S; got key {key.shape} "
            f"and value {value.shape}"
        )
    check_same_dtype(query=query, key=key, value=value,
                     **{k_: a for k_, a in p.items() if a is not None})
    if not isinstance(is_causal, (bool, np.bool_)):
        raise TypeError(f"is_causal must be True or False; got {is_causal!r}")
    if is_causal and attn_mask is not None:
        raise ValueError("attn_mask and is_causal=True cannot be combined; pass one of them")
    return query, key, value, p, H


def mha_backward(dout, cache):
    """Gradients of :func:`mha_forward`.

    The short version to read: :func:`attention_course.minimal.mha_backward`.

    Parameters
    ----------
    dout : ndarray, shape (B, L, E)
    cache : dict
        From :func:`mha_forward`.

    Returns
    -------
    dquery : ndarray, shape (B, L, E)
    dkey : ndarray, shape (B, S, E)
    dvalue : ndarray, shape (B, S, E)
        In self-attention the gradient of the shared input is ``dquery + dkey + dvalue``.
    grads : dict
        ``in_proj_weight`` (3E, E), ``out_proj_weight`` (E, E), and ``in_proj_bias`` (3E,),
        ``out_proj_bias`` (E,) for the biases the forward had: the keys of ``params``.
    """
    c = cache
    if checking():
        c = _check_cache(cache, "mha")
        dout = _upstream(dout, "dout", c["out_shape"], c["c_out"]["x"].dtype)
    H = c["num_heads"]
    dmerged, dW_o, db_o = linear_backward(dout, c["c_out"])          # (B, L, E)
    dq, dk, dv = attention_backward(split_heads(dmerged, H), c["c_att"])  # (B, h, ·, d_k)
    dquery, dW_q, db_q = linear_backward(merge_heads(dq), c["c_q"])  # (B, L, E)
    dkey, dW_k, db_k = linear_backward(merge_heads(dk), c["c_k"])    # (B, S, E)
    dvalue, dW_v, db_v = linear_backward(merge_heads(dv), c["c_v"])  # (B, S, E)
    grads = {"in_proj_weight": np.concatenate([dW_q, dW_k, dW_v], axis=0),   # (3E, E)
             "out_proj_weight": dW_o}                                          # (E, E)
    if c["has_in_bias"]:
        grads["in_proj_bias"] = np.concatenate([db_q, db_k, db_v])          # (3E,)
    if db_o is not None:
        grads["out_proj_bias"] = db_o                                        # (E,)
    return dquery, dkey, dvalue, grads


# ---- embedding, positional encoding, residual ----------------------------------------------------

def embedding_forward(tokens, table):
    """Look up each token's row of the embedding table.

    Parameters
    ----------
    tokens : ndarray of int, shape (B, n)
        Any shape works; each entry in [0, vocab).
    table : ndarray, float32 or float64, shape (vocab, E)

    Returns
    -------
    x : ndarray, shape (B, n, E)
    cache : dict
        For :func:`embedding_backward`.

    Examples
    --------
    >>> table = np.arange(6.0).reshape(3, 2)
    >>> x, cache = embedding_forward(np.array([[2, 0, 2]]), table)
    >>> x.tolist()
    [[[4.0, 5.0], [0.0, 1.0], [4.0, 5.0]]]
    >>> embedding_backward(np.ones((1, 3, 2)), cache)    # token 2 was used twice
    array([[1., 1.],
           [0., 0.],
           [2., 2.]])
    """
    if checking():
        table = _float_input(table, "table", min_ndim=2)
        if table.ndim != 2:
            raise ValueError(f"table has shape {table.shape}; it must be (vocab, E)")
        tokens = np.asarray(tokens)
        if tokens.dtype.kind not in "iu":
            raise TypeError(f"tokens must be integer token ids; got dtype {tokens.dtype}, "
                            f"shape {tokens.shape}")
        vocab = table.shape[0]
        if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab):
            raise ValueError(f"tokens must lie in [0, vocab={vocab}) for a table of shape "
                             f"{table.shape}; got values from {tokens.min()} to {tokens.max()}")
    x = table[tokens]                                                # (B, n, E)
    return x, {"op": "embedding", "tokens": tokens, "table_shape": table.shape, "dtype": table.dtype}


def embedding_backward(dx, cache):
    """Gradient of :func:`embedding_forward` with respect to the table.

    The short version to read: :func:`attention_course.minimal.embedding_backward`.

    Parameters
    ----------
    dx : ndarray, shape (B, n, E)
    cache : dict

    Returns
    -------
    dtable : ndarray, shape (vocab, E)
        Row t is the sum of ``dx`` over every position that holds token t (zero for tokens that
        did not occur).
    """
    c = cache
    if checking():
        c = _check_cache(cache, "embedding")
        dx = _upstream(dx, "dx", c["tokens"].shape + (c["table_shape"][1],), c["dtype"])
    vocab, E = c["table_shape"]
    flat = c["tokens"].reshape(-1)                                   # (N,)
    dx2 = dx.reshape(-1, E)                                          # (N, E)
    # A token that occurs twice must be counted twice (dtable[tokens] += dx would count it once).
    if flat.size * vocab <= 2**22:
        # one-hot (N, vocab) transposed times dx: one matrix product, far faster than add.at
        onehot = (flat[:, None] == np.arange(vocab)).astype(c["dtype"])
        return onehot.T @ dx2                                        # (vocab, E)
    dtable = np.zeros((vocab, E), dtype=c["dtype"])
    np.add.at(dtable, flat, dx2)
    return dtable


def positional_forward(x, pe):
    """Add a positional encoding: ``y = x + pe[:n]``.

    Parameters
    ----------
    x : ndarray, float32 or float64, shape (B, n, E)
        Any leading axes; the position axis is the second to last.
    pe : ndarray, shape (max_len, E), max_len >= n
        Fixed (e.g. ``sinusoidal_positional_encoding``, which is float64) or learned. It is cast to
        the dtype of ``x``, so a float64 table does not turn float32 activations into float64.

    Returns
    -------
    y : ndarray, shape (B, n, E), dtype of x
    cache : dict
        For :func:`positional_backward`.

    Examples
    --------
    >>> y, cache = positional_forward(np.zeros((2, 3, 4), np.float32), np.ones((10, 4)))
    >>> y.dtype, y.shape
    (dtype('float32'), (2, 3, 4))
    >>> dx, dpe = positional_backward(np.ones((2, 3, 4), np.float32), cache)
    >>> dpe[:4, 0]             # positions 0-2 were used by both sequences, 3-9 by none
    array([2., 2., 2., 0.])
    """
    if checking():
        x = _float_input(x, "x", min_ndim=2)
        pe = _float_input(pe, "pe", min_ndim=2)
        n, E = x.shape[-2:]
        if pe.ndim != 2 or pe.shape[1] != E or pe.shape[0] < n:
            raise ValueError(f"pe has shape {pe.shape}; for x of shape {x.shape} it must be "
                             f"(max_len, E={E}) with max_len >= n={n}")
    y = x + pe[:x.shape[-2]].astype(x.dtype, copy=False)             # (B, n, E)
    return y, {"op": "positional", "x_shape": x.shape, "x_dtype": x.dtype, "pe_shape": pe.shape,
               "pe_dtype": pe.dtype}


def positional_backward(dy, cache):
    """Gradients of :func:`positional_forward`.

    The short version to read: :func:`attention_course.minimal.positional_backward`.

    Parameters
    ----------
    dy : ndarray, shape (B, n, E)
    cache : dict

    Returns
    -------
    dx : ndarray, shape (B, n, E)
        Equal to ``dy`` (addition passes the gradient through).
    dpe : ndarray, shape (max_len, E), dtype of pe
        ``dy`` summed over the batch in rows 0..n-1, zero below (positions not used).
    """
    c = cache
    if checking():
        c = _check_cache(cache, "positional")
        dy = _upstream(dy, "dy", c["x_shape"], c["x_dtype"])
    n = c["x_shape"][-2]
    dpe = np.zeros(c["pe_shape"], dtype=c["pe_dtype"])
    dpe[:n] = dy.reshape(-1, *c["x_shape"][-2:]).sum(axis=0)
    return dy, dpe


def residual_forward(x, fx):
    """The residual connection ``y = x + f(x)``.

    Parameters
    ----------
    x : ndarray, shape (..., E)
    fx : ndarray, same shape and dtype
        The output of the sublayer.

    Returns
    -------
    y : ndarray, same shape
    cache : dict

    Examples
    --------
    >>> y, cache = residual_forward(np.ones(3), np.full(3, 2.0))
    >>> y, residual_backward(np.array([1.0, 2.0, 3.0]), cache)[0]
    (array([3., 3., 3.]), array([1., 2., 3.]))
    """
    if checking():
        x = _float_input(x, "x")
        fx = _float_input(fx, "fx")
        if x.shape != fx.shape:
            raise ValueError(f"x has shape {x.shape} and fx has shape {fx.shape}; they must be equal")
        check_same_dtype(x=x, fx=fx)
    return x + fx, {"op": "residual", "shape": x.shape, "dtype": x.dtype}


def residual_backward(dy, cache):
    """Gradients of :func:`residual_forward`: the gradient reaches both branches unchanged.

    The short version to read: :func:`attention_course.minimal.residual_backward`.

    That is why a deep stack of residual blocks still trains: ``dx`` gets ``dy`` directly, not
    only through the sublayer.

    Returns
    -------
    dx, dfx : ndarray, shape of x
        Both equal to ``dy``.
    """
    if checking():
        c = _check_cache(cache, "residual")
        dy = _upstream(dy, "dy", c["shape"], c["dtype"])
    return dy, dy


# ---- LayerNorm -----------------------------------------------------------------------------------

def layernorm_forward(x, gamma, beta, eps=1e-5):
    """LayerNorm over the last axis, like ``torch.nn.LayerNorm(E)``.

    ``y = (x - mean) / sqrt(var + eps) * gamma + beta`` with the biased variance (divide by E).

    Parameters
    ----------
    x : ndarray, float32 or float64, shape (..., E)
    gamma, beta : ndarray, shape (E,), dtype of x
    eps : float

    Returns
    -------
    y : ndarray, shape (..., E)
    cache : dict

    Examples
    --------
    >>> y, cache = layernorm_forward(np.array([[1.0, 3.0]]), np.ones(2), np.zeros(2), eps=0.0)
    >>> y
    array([[-1.,  1.]])
    >>> dx, dgamma, dbeta = layernorm_backward(np.array([[1.0, 1.0]]), cache)
    >>> dx, dbeta                  # a shift of every entry changes nothing after normalising
    (array([[0., 0.]]), array([1., 1.]))
    """
    if checking():
        x = _float_input(x, "x")
        gamma = _float_input(gamma, "gamma")
        beta = _float_input(beta, "beta")
        E = x.shape[-1]
        for name, a in (("gamma", gamma), ("beta", beta)):
            if a.shape != (E,):
                raise ValueError(f"{name} has shape {a.shape}; for x of shape {x.shape} it must be "
                                 f"(E,) = ({E},)")
        check_same_dtype(x=x, gamma=gamma, beta=beta)
        if not (np.isscalar(eps) and np.isfinite(eps) and eps >= 0):
            raise ValueError(f"eps must be a finite number >= 0; got {eps!r}")
    mean = x.mean(axis=-1, keepdims=True)                            # (..., 1)
    xc = x - mean
    var = (xc * xc).mean(axis=-1, keepdims=True)                     # (..., 1), biased as torch
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))                    # (..., 1)
    xhat = xc * rstd                                                 # (..., E)
    y = xhat * gamma + beta
    return y, {"op": "layernorm", "xhat": xhat, "rstd": rstd, "gamma": gamma}


def layernorm_backward(dy, cache):
    """Gradients of :func:`layernorm_forward`.

    The short version to read: :func:`attention_course.minimal.layernorm_backward`.

    Returns
    -------
    dx : ndarray, shape (..., E)
        ``rstd * (g - mean(g) - xhat * mean(g * xhat))`` with ``g = dy * gamma``.
    dgamma, dbeta : ndarray, shape (E,)
        Summed over every leading axis.
    """
    c = cache
    if checking():
        c = _check_cache(cache, "layernorm")
        dy = _upstream(dy, "dy", c["xhat"].shape, c["xhat"].dtype)
    xhat, rstd, gamma = c["xhat"], c["rstd"], c["gamma"]
    g = dy * gamma
    dx = rstd * (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    E = xhat.shape[-1]
    dgamma = (dy * xhat).reshape(-1, E).sum(axis=0)
    dbeta = dy.reshape(-1, E).sum(axis=0)
    return dx, dgamma, dbeta


# ---- the loss ------------------------------------------------------------------------------------

def softmax_cross_entropy(logits, targets, mask=None):
    """Mean cross-entropy of a softmax over classes, and its gradient in one go.

    The short version to read: :func:`attention_course.minimal.softmax_cross_entropy`.

    Parameters
    ----------
    logits : ndarray, float32 or float64, shape (..., C)
    targets : ndarray of int, shape (...)
        The right class of each position, in [0, C) (anything where ``mask`` is False).
    mask : ndarray of bool, broadcastable to targets' shape (...), optional
        True = the position counts. The loss is the mean over the positions that count (as torch's
        ``cross_entropy`` with ``ignore_index``); with none, loss 0 and gradient 0.

    Returns
    -------
    loss : float
    dlogits : ndarray, shape (..., C), dtype of logits
        ``(softmax(logits) - onehot(targets)) / count`` at the positions that count, 0 elsewhere.

    Examples
    --------
    >>> loss, dlogits = softmax_cross_entropy(np.zeros((2, 4)), np.array([1, 3]))
    >>> round(loss, 4), dlogits[0]             # log 4: four equally likely classes
    (1.3863, array([ 0.125, -0.375,  0.125,  0.125]))
    """
    if checking():
        logits, targets, keep = _loss_inputs(logits, targets, mask)
    else:
        keep = np.ones(targets.shape, dtype=bool) if mask is None else np.broadcast_to(mask, targets.shape)
    count = int(keep.sum())                    # a Python int: dividing by it keeps float32 float32
    if count == 0:
        return 0.0, np.zeros_like(logits)
    C = logits.shape[-1]
    rows = np.arange(keep.size)                                      # (N,), N = all positions
    safe = np.where(keep, targets, 0).reshape(-1)                    # (N,): a class to read
    shifted = logits - logits.max(axis=-1, keepdims=True)            # (..., C)
    e = np.exp(shifted)
    total = e.sum(axis=-1, keepdims=True)                            # (..., 1)
    logp_target = shifted.reshape(-1, C)[rows, safe] - np.log(total).reshape(-1)   # (N,)
    loss = -float(logp_target[keep.reshape(-1)].sum(dtype=np.float64)) / count
    dlogits = e / total                                              # softmax, (..., C)
    dlogits.reshape(-1, C)[rows, safe] -= 1                          # a view: dlogits changes
    dlogits *= keep[..., None]
    dlogits /= count
    return loss, dlogits


def _loss_inputs(logits, targets, mask):
    logits = _float_input(logits, "logits")
    targets = np.asarray(targets)
    if targets.dtype.kind not in "iu":
        raise TypeError(f"targets must be integer class ids; got dtype {targets.dtype}")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets has shape {targets.shape}; for logits of shape {logits.shape} "
                         f"it must be {logits.shape[:-1]} (one class per position)")
    if mask is None:
        keep = np.ones(targets.shape, dtype=bool)
    else:
        keep = np.asarray(mask)
        if keep.dtype != np.bool_:
            raise TypeError(f"mask must be boolean (True = the position counts); got dtype {keep.dtype}")
        try:
            keep = np.broadcast_to(keep, targets.shape)
        except ValueError:
            raise ValueError(f"mask has shape {keep.shape}; it must broadcast to targets' shape "
                             f"{targets.shape}") from None
    C = logits.shape[-1]
    counted = targets[keep]
    if counted.size and (counted.min() < 0 or counted.max() >= C):
        raise ValueError(f"targets must lie in [0, C={C}) where they count; got values from "
                         f"{counted.min()} to {counted.max()}")
    return logits, targets, keep
