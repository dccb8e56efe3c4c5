"""The course's ideas in their shortest readable form: one short function per idea.

Each function here is what a notebook builds by hand, written to be read next to the notebook:
no input checks, no options beyond the idea itself, no care for speed. Each names the
full-featured function of the library that ``tests/test_minimal.py`` tests it equal to on the
same inputs (float64 and float32); use those in code (they check their inputs, take every option
and are fast), read these.

Conventions are the library's: a boolean mask is True where a position takes part, float32 in
gives float32 out (scalars enter as Python floats), and the backward passes take the forward's
inputs instead of a cache and recompute what they need, so that each reads on its own. Every
function is at most 25 lines of code, with the shape of each array it makes in a comment.
"""

from __future__ import annotations

import math

import numpy as np

# ---- forward: notebooks 01-05 ---------------------------------------------------------------------


def softmax(x):
    """Stable softmax over the last axis.

    Full-featured version (tested equal): :func:`attention_course.softmax.softmax`.

    Parameters
    ----------
    x : ndarray, float32 or float64, shape (..., n), n >= 1
        Scores; ``-inf`` means blocked (weight 0).

    Returns
    -------
    ndarray, shape (..., n), dtype of ``x``
        Rows sum to 1; a row that is entirely ``-inf`` gives zeros.

    Examples
    --------
    >>> softmax(np.array([[0.0, np.log(3.0)], [-np.inf, -np.inf]]))
    array([[0.25, 0.75],
           [0.  , 0.  ]])
    """
    row_max = x.max(axis=-1, keepdims=True)                            # (..., 1)
    # softmax does not change when a row is shifted, and exp of a shifted row cannot overflow;
    # an all -inf row is shifted by 0 instead, since -inf - (-inf) is NaN
    e = np.exp(x - np.where(np.isfinite(row_max), row_max, 0))         # (..., n)
    total = e.sum(axis=-1, keepdims=True)                              # (..., 1)
    return e / np.where(total > 0, total, 1)                           # (..., n), 0 / 1 = 0 when blocked


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q kᵀ / sqrt(E), masked) v, and the weights.

    Full-featured version (tested equal):
    :func:`attention_course.attention.scaled_dot_product_attention` with ``attn_mask=mask`` and
    ``return_weights=True``.

    Parameters
    ----------
    q : ndarray, shape (..., L, E)
    k : ndarray, shape (..., S, E), S >= 1
    v : ndarray, shape (..., S, Ev)
    mask : ndarray of bool, broadcastable to (..., L, S) without adding axes, optional
        True = the key takes part for that query.

    Returns
    -------
    out : ndarray, shape (..., L, Ev)
        Zeros for a query that may see no key.
    weights : ndarray, shape (..., L, S)

    Examples
    --------
    >>> q = np.array([[1.0, 0.0]]); k = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> out, w = scaled_dot_product_attention(q, k, np.array([[10.0], [20.0]]))
    >>> w.round(3), out.round(3)
    (array([[0.67, 0.33]]), array([[13.302]]))
    """
    # 1/sqrt(E) keeps the scores' spread at about 1 whatever the width, so softmax does not saturate
    scores = q @ np.swapaxes(k, -1, -2) * (1.0 / math.sqrt(q.shape[-1]))   # (..., L, S)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)                       # (..., L, S)
    weights = softmax(scores)                                          # (..., L, S)
    return weights @ v, weights                                        # (..., L, Ev), (..., L, S)


def split_heads(x, num_heads):
    """Cut the feature axis into ``num_heads`` slices and move the head axis forward.

    Full-featured version (tested equal): :func:`attention_course.multihead.split_heads`.

    Parameters
    ----------
    x : ndarray, shape (..., L, E)
    num_heads : int
        H, a divisor of E.

    Returns
    -------
    ndarray, shape (..., H, L, E // H)

    Examples
    --------
    >>> split_heads(np.arange(8.0).reshape(2, 4), 2)[1]
    array([[2., 3.],
           [6., 7.]])
    """
    x = x.reshape(*x.shape[:-1], num_heads, x.shape[-1] // num_heads)     # (..., L, H, E/H)
    return np.swapaxes(x, -3, -2)                                          # (..., H, L, E/H)


def merge_heads(x):
    """Put the heads back side by side along the feature axis: the inverse of :func:`split_heads`.

    Full-featured version (tested equal): :func:`attention_course.multihead.merge_heads`.

    Parameters
    ----------
    x : ndarray, shape (..., H, L, D)

    Returns
    -------
    ndarray, shape (..., L, H * D)

    Examples
    --------
    >>> merge_heads(split_heads(np.arange(8.0).reshape(2, 4), 2))
    array([[0., 1., 2., 3.],
           [4., 5., 6., 7.]])
    """
    H, L, D = x.shape[-3:]
    x = np.swapaxes(x, -3, -2)                                             # (..., L, H, D)
    return x.reshape(*x.shape[:-2], H * D)                                 # (..., L, H*D)


def apply_rotary(x, positions=None, base=10000.0):
    """RoPE: turn each feature pair (x[2i], x[2i+1]) of position p by the angle p · omega_i.

    Full-featured version (tested equal): :func:`attention_course.positional.apply_rotary`.

    Parameters
    ----------
    x : ndarray, shape (..., L, D), D even
        Queries or keys.
    positions : array_like of int, shape (L,), optional
        Default ``0 .. L-1``.
    base : float
        ``omega_i = base ** (-2i / D)``.

    Returns
    -------
    ndarray, shape (..., L, D), dtype of ``x``

    Examples
    --------
    >>> apply_rotary(np.array([[1.0, 0.0], [1.0, 0.0]])).round(3)   # positions 0 and 1, omega_0 = 1
    array([[1.   , 0.   ],
           [0.54 , 0.841]])
    """
    L, D = x.shape[-2:]
    pos = np.arange(L) if positions is None else np.asarray(positions)     # (L,)
    omega = base ** (-np.arange(0, D, 2) / D)                              # (D/2,)
    angles = pos[:, None] * omega                                          # (L, D/2)
    c, s = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)  # (L, D/2) each
    even, odd = x[..., 0::2], x[..., 1::2]                                 # (..., L, D/2) each
    # a 2-D rotation of each pair; stacking on a new last axis puts the pairs back in place
    turned = np.stack([even * c - odd * s, even * s + odd * c], axis=-1)   # (..., L, D/2, 2)
    return turned.reshape(x.shape)                                         # (..., L, D)


# ---- backward: notebook 07 ------------------------------------------------------------------------


def softmax_backward(dy, x):
    """Gradient of ``y = softmax(x)`` (last axis) with respect to ``x``.

    Full-featured version (tested equal): :func:`attention_course.backprop.softmax_backward` after
    :func:`attention_course.backprop.softmax_forward` (whose ``mask`` is ``-inf`` in ``x`` here).

    Parameters
    ----------
    dy : ndarray, shape (..., n)
        Gradient of the loss with respect to ``y``.
    x : ndarray, shape (..., n)
        The forward's scores; ``-inf`` = blocked.

    Returns
    -------
    dx : ndarray, shape (..., n)
        Zero at blocked entries.

    Examples
    --------
    >>> softmax_backward(np.array([[1.0, 0.0, 5.0]]), np.array([[0.0, 0.0, -np.inf]]))
    array([[ 0.25, -0.25,  0.  ]])
    """
    y = softmax(x)                                                     # (..., n)
    # the Jacobian diag(y) - y yᵀ applied to dy without forming it: dx = y * (dy - <dy, y>)
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))             # (..., n)


def attention_backward(dout, q, k, v, mask=None):
    """Gradients of :func:`scaled_dot_product_attention`'s output with respect to q, k and v.

    Full-featured version (tested equal): :func:`attention_course.backprop.attention_backward`
    after :func:`attention_course.backprop.attention_forward` with ``attn_mask=mask``. That one
    also sums the gradients over broadcast batch axes; here q, k and v share their leading axes.

    Parameters
    ----------
    dout : ndarray, shape (..., L, Ev)
    q, k, v, mask
        The forward's inputs: (..., L, E), (..., S, E), (..., S, Ev) and a boolean mask
        broadcastable to (..., L, S) or None. The weights are recomputed from them.

    Returns
    -------
    dq : ndarray, shape (..., L, E)
    dk : ndarray, shape (..., S, E)
    dv : ndarray, shape (..., S, Ev)

    Examples
    --------
    >>> q = k = v = np.eye(2)
    >>> dq, dk, dv = attention_backward(np.ones((2, 2)), q, k, v)
    >>> dv.sum(axis=0)                  # each query's weights sum to 1, so all of dout reaches v
    array([2., 2.])
    """
    _, w = scaled_dot_product_attention(q, k, v, mask)                 # (..., L, S)
    scale = 1.0 / math.sqrt(q.shape[-1])
    dv = np.swapaxes(w, -1, -2) @ dout                                 # (..., S, Ev)  dv = Aᵀ dout
    dw = dout @ np.swapaxes(v, -1, -2)                                 # (..., L, S)   dA = dout vᵀ
    # dZ = A * (dA - rowsum(dA * A)), times the scale the scores were multiplied by
    dz = w * (dw - (dw * w).sum(axis=-1, keepdims=True)) * scale       # (..., L, S)
    dq = dz @ k                                                        # (..., L, E)   dq = dZ k
    dk = np.swapaxes(dz, -1, -2) @ q                                   # (..., S, E)   dk = dZᵀ q
    return dq, dk, dv


def linear_backward(dy, x, weight):
    """Gradients of ``y = x Wᵀ + b`` (``torch.nn.Linear``'s layout: W is (out, in)).

    Full-featured version (tested equal): :func:`attention_course.backprop.linear_backward` after
    :func:`attention_course.backprop.linear_forward` (which gives ``dbias`` None without a bias).

    Parameters
    ----------
    dy : ndarray, shape (..., out)
    x : ndarray, shape (..., in)
    weight : ndarray, shape (out, in)

    Returns
    -------
    dx : ndarray, shape (..., in)
    dweight : ndarray, shape (out, in)
    dbias : ndarray, shape (out,)

    Examples
    --------
    >>> dx, dW, db = linear_backward(np.ones((1, 3)), np.array([[1.0, 2.0]]), np.ones((3, 2)))
    >>> dx, db
    (array([[3., 3.]]), array([1., 1., 1.]))
    """
    # every position used the same W and b, so their gradients add up over all positions
    dy2 = dy.reshape(-1, dy.shape[-1])                                 # (N, out), N = all positions
    dx = dy @ weight                                                   # (..., in)   dx = dy W
    dweight = dy2.T @ x.reshape(-1, x.shape[-1])                       # (out, in)   dW = dyᵀ x
    dbias = dy2.sum(axis=0)                                            # (out,)      db = Σ dy
    return dx, dweight, dbias


def embedding_backward(dx, tokens, table):
    """Gradient of the lookup ``x = table[tokens]`` with respect to the table.

    Full-featured version (tested equal): :func:`attention_course.backprop.embedding_backward`
    after :func:`attention_course.backprop.embedding_forward`.

    Parameters
    ----------
    dx : ndarray, shape (B, n, E)
    tokens : ndarray of int, shape (B, n)
    table : ndarray, shape (vocab, E)
        Only its shape and dtype are used.

    Returns
    -------
    dtable : ndarray, shape (vocab, E)
        Row t: the sum of ``dx`` over the positions that hold token t.

    Examples
    --------
    >>> embedding_backward(np.ones((1, 3, 2)), np.array([[2, 0, 2]]), np.zeros((3, 2)))
    array([[1., 1.],
           [0., 0.],
           [2., 2.]])
    """
    dtable = np.zeros_like(table)                                      # (vocab, E)
    # unbuffered: a token that occurs twice gets both gradients (dtable[tokens] += dx keeps one)
    np.add.at(dtable, tokens, dx)                                      # (vocab, E)
    return dtable


def positional_backward(dy, pe):
    """Gradients of ``y = x + pe[:n]``: ``dx = dy``, and ``dpe`` the batch's sum in rows 0..n-1.

    Full-featured version (tested equal): :func:`attention_course.backprop.positional_backward`
    after :func:`attention_course.backprop.positional_forward`.

    Parameters
    ----------
    dy : ndarray, shape (B, n, E)
    pe : ndarray, shape (max_len, E), max_len >= n
        The forward's table (``x`` is not needed: addition passes the gradient through).

    Returns
    -------
    dx : ndarray, shape (B, n, E)
    dpe : ndarray, shape (max_len, E), dtype of ``pe``
        Zero in the rows of positions that were not used.

    Examples
    --------
    >>> dx, dpe = positional_backward(np.ones((2, 3, 1)), np.zeros((4, 1)))
    >>> dpe.ravel()                     # positions 0-2 used by both sequences, 3 by none
    array([2., 2., 2., 0.])
    """
    dpe = np.zeros_like(pe)                                            # (max_len, E)
    dpe[:dy.shape[-2]] = dy.reshape(-1, *dy.shape[-2:]).sum(axis=0)    # (n, E): each sequence adds
    return dy, dpe                                                     # (B, n, E), (max_len, E)


def residual_backward(dy):
    """Gradients of ``y = x + f(x)`` with respect to ``x`` and ``f(x)``: both are ``dy``.

    Full-featured version (tested equal): :func:`attention_course.backprop.residual_backward`
    after :func:`attention_course.backprop.residual_forward`.

    Parameters
    ----------
    dy : ndarray, shape (..., E)
        The forward's inputs are not needed.

    Returns
    -------
    dx, dfx : ndarray, shape (..., E)
        The gradient reaches the input directly, not only through the sublayer: that is why a
        deep stack of residual blocks still trains.

    Examples
    --------
    >>> residual_backward(np.array([1.0, 2.0]))
    (array([1., 2.]), array([1., 2.]))
    """
    return dy, dy                                                      # (..., E), (..., E)


def layernorm_backward(dy, x, gamma, eps=1e-5):
    """Gradients of LayerNorm over the last axis, ``y = (x - mean) / sqrt(var + eps) * gamma + beta``.

    Full-featured version (tested equal): :func:`attention_course.backprop.layernorm_backward`
    after :func:`attention_course.backprop.layernorm_forward`.

    Parameters
    ----------
    dy : ndarray, shape (..., E)
    x : ndarray, shape (..., E)
    gamma : ndarray, shape (E,)
    eps : float
        As in the forward (``beta`` is not needed).

    Returns
    -------
    dx : ndarray, shape (..., E)
    dgamma, dbeta : ndarray, shape (E,)

    Examples
    --------
    >>> dx, dgamma, dbeta = layernorm_backward(np.ones((1, 2)), np.array([[1.0, 3.0]]), np.ones(2))
    >>> dx, dbeta                       # a shift of every entry changes nothing after normalising
    (array([[0., 0.]]), array([1., 1.]))
    """
    E = x.shape[-1]
    rstd = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)          # (..., 1), biased var as torch
    xhat = (x - x.mean(axis=-1, keepdims=True)) * rstd                 # (..., E)
    g = dy * gamma                                                     # (..., E)   dxhat
    # dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)): the mean and var depend on x too
    dx = rstd * (g - g.mean(axis=-1, keepdims=True) - xhat * (g * xhat).mean(axis=-1, keepdims=True))
    dgamma = (dy * xhat).reshape(-1, E).sum(axis=0)                    # (E,)
    dbeta = dy.reshape(-1, E).sum(axis=0)                              # (E,)
    return dx, dgamma, dbeta                                           # (..., E), (E,), (E,)


def softmax_cross_entropy(logits, targets, mask=None):
    """Mean cross-entropy of a softmax over classes, and its gradient.

    Full-featured version (tested equal): :func:`attention_course.backprop.softmax_cross_entropy`.

    Parameters
    ----------
    logits : ndarray, shape (..., C)
    targets : ndarray of int, shape (...)
        The right class at each position.
    mask : ndarray of bool, broadcastable to (...), optional
        True = the position counts; the mean is over those (none: loss 0, gradient 0).

    Returns
    -------
    loss : float
    dlogits : ndarray, shape (..., C)

    Examples
    --------
    >>> loss, dlogits = softmax_cross_entropy(np.zeros((2, 4)), np.array([1, 3]))
    >>> round(loss, 4), dlogits[0]      # log 4: four equally likely classes
    (1.3863, array([ 0.125, -0.375,  0.125,  0.125]))
    """
    keep = np.broadcast_to(True if mask is None else mask, targets.shape)      # (...)
    count = max(int(keep.sum()), 1)                # no position counts: 0 / 1, not 0 / 0
    shifted = logits - logits.max(axis=-1, keepdims=True)                      # (..., C)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))      # (..., C)
    # where a position does not count its target may be anything; class 0 stands in
    onehot = np.eye(logits.shape[-1], dtype=logits.dtype)[np.where(keep, targets, 0)]   # (..., C)
    # -mean log p[target]; adding 0.0 turns the -0.0 of an empty sum into 0.0
    loss = -float((log_p * onehot)[keep].sum(dtype=np.float64)) / count + 0.0
    dlogits = (np.exp(log_p) - onehot) * keep[..., None] / count               # (..., C)  (p - y) / N
    return loss, dlogits


def mha_backward(dout, query, key, value, params, num_heads, mask=None):
    """Gradients of multi-head attention (``torch.nn.MultiheadAttention``'s weights and biases).

    Full-featured version (tested equal): :func:`attention_course.backprop.mha_backward` after
    :func:`attention_course.backprop.mha_forward` with ``attn_mask=mask``. Built from this module's
    :func:`linear_backward`, :func:`attention_backward` and the head reshapes.

    Parameters
    ----------
    dout : ndarray, shape (B, L, E)
    query : ndarray, shape (B, L, E)
    key, value : ndarray, shape (B, S, E)
    params : dict
        ``in_proj_weight`` (3E, E) = [W_Q; W_K; W_V], ``in_proj_bias`` (3E,), ``out_proj_weight``
        (E, E), ``out_proj_bias`` (E,): all four (zeros for none; the full function takes None).
    num_heads : int
        h, a divisor of E.
    mask : ndarray of bool, broadcastable to (B, h, L, S), optional

    Returns
    -------
    dquery : ndarray, shape (B, L, E)
    dkey, dvalue : ndarray, shape (B, S, E)
    grads : dict
        The gradient of each array of ``params``, under its key.

    Examples
    --------
    >>> E = 4; params = {"in_proj_weight": np.eye(3 * E, E), "in_proj_bias": np.zeros(3 * E),
    ...                  "out_proj_weight": np.eye(E), "out_proj_bias": np.zeros(E)}
    >>> x = np.ones((1, 3, E))
    >>> *_, grads = mha_backward(np.ones((1, 3, E)), x, x, x, params, 2)
    >>> grads["out_proj_bias"]          # db = dout summed over the 3 positions
    array([3., 3., 3., 3.])
    """
    W_q, W_k, W_v = np.split(params["in_proj_weight"], 3)                      # (E, E) each
    b_q, b_k, b_v = np.split(params["in_proj_bias"], 3)                        # (E,) each
    # the forward again, for what the backward needs: the heads' q, k, v and the merged output
    q = split_heads(query @ W_q.T + b_q, num_heads)                            # (B, h, L, d_k)
    k = split_heads(key @ W_k.T + b_k, num_heads)                              # (B, h, S, d_k)
    v = split_heads(value @ W_v.T + b_v, num_heads)                            # (B, h, S, d_k)
    heads, _ = scaled_dot_product_attention(q, k, v, mask)                     # (B, h, L, d_k)
    dmerged, dW_o, db_o = linear_backward(dout, merge_heads(heads), params["out_proj_weight"])
    dq, dk, dv = attention_backward(split_heads(dmerged, num_heads), q, k, v, mask)  # (B, h, ·, d_k)
    dquery, dW_q, db_q = linear_backward(merge_heads(dq), query, W_q)          # (B, L, E)
    dkey, dW_k, db_k = linear_backward(merge_heads(dk), key, W_k)              # (B, S, E)
    dvalue, dW_v, db_v = linear_backward(merge_heads(dv), value, W_v)          # (B, S, E)
    grads = {"in_proj_weight": np.concatenate([dW_q, dW_k, dW_v]),             # (3E, E)
             "in_proj_bias": np.concatenate([db_q, db_k, db_v]),               # (3E,)
             "out_proj_weight": dW_o, "out_proj_bias": db_o}                   # (E, E), (E,)
    return dquery, dkey, dvalue, grads
