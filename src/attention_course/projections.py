"""Q, K and V: three learned projections of one embedding.

Notation follows the articles: a row vector per token and ``Q = X @ W_Q`` with ``W_Q`` of shape
(d_model, d_k). (PyTorch's ``nn.Linear`` stores the transpose, (out, in); ``MultiHeadAttention``
in this library follows torch for its own weights.)
"""

from __future__ import annotations

import numpy as np

from ._validate import as_float_array, check_same_dtype


def project_qkv(x, W_q, W_k, W_v):
    """Compute queries, keys and values from the same embeddings.

    Parameters
    ----------
    x : ndarray, shape (..., n, d_model)
        One embedding per token.
    W_q, W_k : ndarray, shape (d_model, d_k)
    W_v : ndarray, shape (d_model, d_v)

    Returns
    -------
    Q : ndarray, shape (..., n, d_k)
    K : ndarray, shape (..., n, d_k)
    V : ndarray, shape (..., n, d_v)

    Examples
    --------
    >>> x = np.ones((4, 6)); W = np.ones((6, 3))
    >>> [a.shape for a in project_qkv(x, W, W, np.ones((6, 2)))]
    [(4, 3), (4, 3), (4, 2)]
    """
    x = as_float_array(x, "x", min_ndim=2)
    d_model = x.shape[-1]
    mats = {}
    for name, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v)):
        W = as_float_array(W, name, min_ndim=2)
        if W.ndim != 2 or W.shape[0] != d_model:
            raise ValueError(
                f"{name} has shape {W.shape}; it must be (d_model, width) = ({d_model}, ...) "
                f"to multiply x of shape {x.shape}"
            )
        mats[name] = W
    if mats["W_q"].shape[1] != mats["W_k"].shape[1]:
        raise ValueError(
            f"W_q {mats['W_q'].shape} and W_k {mats['W_k'].shape} must give the same width d_k: "
            "queries and keys meet in a dot product"
        )
    check_same_dtype(x=x, **mats)
    return x @ mats["W_q"], x @ mats["W_k"], x @ mats["W_v"]


def cosine_similarity(a, b) -> np.ndarray:
    """Cosine of the angle between vectors, along the last axis.

    Parameters
    ----------
    a, b : ndarray, shape (..., d)
        Broadcast against each other.

    Returns
    -------
    ndarray, shape (...)
        In [-1, 1]; 0 where either vector is zero.

    Examples
    --------
    >>> float(cosine_similarity(np.array([1.0, 0.0]), np.array([1.0, 1.0])).round(4))
    0.7071
    """
    a = as_float_array(a, "a")
    b = as_float_array(b, "b")
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"a {a.shape} and b {b.shape} must share the last axis")
    dot = (a * b).sum(-1)
    norm = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return np.divide(dot, norm, out=np.zeros_like(dot), where=norm > 0)


def plane_rotation(d: int, angle: float, i: int = 0, j: int = 1) -> np.ndarray:
    """A d×d rotation by ``angle`` (radians) in the plane of axes ``i`` and ``j``.

    Used to turn a shared W into two different ones: ``W_k = W_q @ plane_rotation(...)``.

    Returns
    -------
    ndarray, float64, shape (d, d)

    Examples
    --------
    >>> plane_rotation(2, np.pi / 2).round(3)
    array([[ 0., -1.],
           [ 1.,  0.]])
    """
    if not (isinstance(d, (int, np.integer)) and d >= 2):
        raise ValueError(f"d must be an int >= 2; got {d!r}")
    if not (0 <= i < d and 0 <= j < d and i != j):
        raise ValueError(f"i and j must be two different axes in [0, {d}); got i={i}, j={j}")
    R = np.eye(d)
    c, s = np.cos(angle), np.sin(angle)
    R[i, i], R[i, j], R[j, i], R[j, j] = c, -s, s, c
    return R
