"""Sinusoidal positional encoding (Vaswani et al. 2017, §3.5) and its shift property."""

from __future__ import annotations

import numpy as np

from ._validate import finite_number, nonnegative_int, positive_int


def _check_d_model(d_model) -> int:
    d = positive_int(d_model, "d_model")
    if d % 2:
        raise ValueError(f"d_model must be even (sine/cosine pairs); got d_model={d}")
    return d


def _check_base(base) -> float:
    return finite_number(base, "base", above=1)


def frequencies(d_model: int, base: float = 10000.0) -> np.ndarray:
    """Angular frequency of each sine/cosine pair.

    Returns
    -------
    ndarray, shape (d_model // 2,)
        ``omega_i = base ** (-2i / d_model)``: from 1 (wavelength 2π) down towards 1/base
        (wavelength close to base·2π).

    Examples
    --------
    >>> frequencies(4)
    array([1.  , 0.01])
    """
    d = _check_d_model(d_model)
    base = _check_base(base)
    return base ** (-np.arange(0, d, 2) / d)


def sinusoidal_positional_encoding(num_positions: int, d_model: int,
                                   base: float = 10000.0) -> np.ndarray:
    """The fixed encoding added to the embeddings so that attention can tell positions apart.

    ``PE[pos, 2i] = sin(pos · omega_i)`` and ``PE[pos, 2i+1] = cos(pos · omega_i)`` with
    ``omega_i = base^(-2i/d_model)``.

    Parameters
    ----------
    num_positions : int
        P, how many positions (0 .. P-1).
    d_model : int
        D, the embedding width; must be even.
    base : float
        10000 in the paper.

    Returns
    -------
    ndarray, float64, shape (P, D)

    Examples
    --------
    >>> sinusoidal_positional_encoding(2, 4).round(4)
    array([[0.    , 1.    , 0.    , 1.    ],
           [0.8415, 0.5403, 0.01  , 1.    ]])
    """
    P = nonnegative_int(num_positions, "num_positions")
    omega = frequencies(d_model, base)                         # (D/2,)
    angles = np.arange(P)[:, None] * omega[None, :]            # (P, D/2)
    pe = np.empty((P, 2 * omega.size))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def position_shift_matrix(k: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The linear map that moves an encoding ``k`` positions on: ``PE[pos + k] = PE[pos] @ M``.

    It is block diagonal: for each pair (sin, cos) of frequency omega a 2×2 rotation by the angle
    ``k · omega``, the same for every ``pos``. That is why a model can learn relative offsets
    from absolute encodings.

    Parameters
    ----------
    k : int
        The offset (may be negative).
    d_model : int
        D, even.
    base : float

    Returns
    -------
    ndarray, float64, shape (D, D)

    Examples
    --------
    >>> pe = sinusoidal_positional_encoding(10, 8)
    >>> bool(np.allclose(pe[3] @ position_shift_matrix(4, 8), pe[7]))
    True
    """
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an int offset; got {type(k).__name__} {k!r}")
    omega = frequencies(d_model, base)
    c, s = np.cos(k * omega), np.sin(k * omega)
    M = np.zeros((2 * omega.size, 2 * omega.size))
    # Row vector convention: [sin a, cos a] @ [[c, -s], [s, c]] = [sin(a+b), cos(a+b)].
    M[0::2, 0::2][np.diag_indices(omega.size)] = c
    M[0::2, 1::2][np.diag_indices(omega.size)] = -s
    M[1::2, 0::2][np.diag_indices(omega.size)] = s
    M[1::2, 1::2][np.diag_indices(omega.size)] = c
    return M


def apply_rotary(x, positions=None, base: float = 10000.0) -> np.ndarray:
    """Rotary position embedding (RoPE, Su et al. 2021): rotate each feature pair by pos·omega.

    Applied to queries and keys (not added to the embeddings), it makes the score between
    positions m and n depend only on the offset n - m.

    The short version to read: :func:`attention_course.minimal.apply_rotary`.

    Parameters
    ----------
    x : ndarray, shape (..., L, D)
        Queries or keys; D even. Pairs are (x[2i], x[2i+1]).
    positions : array_like of int, shape (L,), optional
        Default ``0 .. L-1``.
    base : float

    Returns
    -------
    ndarray, shape (..., L, D), dtype of x

    Examples
    --------
    >>> q = np.ones((1, 2)); k = np.ones((1, 2))
    >>> a = apply_rotary(q, [3]) @ apply_rotary(k, [1]).T
    >>> b = apply_rotary(q, [7]) @ apply_rotary(k, [5]).T
    >>> bool(np.allclose(a, b))
    True
    """
    from ._validate import as_float_array

    x = as_float_array(x, "x", min_ndim=2)
    L, D = x.shape[-2:]
    pos = np.arange(L) if positions is None else np.asarray(positions)
    if pos.shape != (L,):
        raise ValueError(f"positions has shape {pos.shape}; it must be (L,) = ({L},)")
    return rotate_pairs(x, *rotary_tables(pos, D, base, x.dtype))


def rotary_tables(positions: np.ndarray, D: int, base: float, dtype) -> tuple:
    """cos and sin of pos · omega_i: the angles :func:`apply_rotary` turns each feature pair by.

    Unchecked; for a caller that rotates many tensors at the same positions (every layer of a
    model) and makes the tables once, then turns each tensor with :func:`rotate_pairs`.

    Parameters
    ----------
    positions : ndarray of int, shape (L,)
        The position of each of the L rows to turn.
    D : int
        The feature width, even: D/2 pairs with ``omega_i = base ** (-2i / D)`` (:func:`frequencies`).
    base : float
        RoPE's base.
    dtype : data-type
        That of the tables: the dtype of the tensors they will turn.

    Returns
    -------
    c, s : ndarray, shape (L, D/2), ``dtype``
        ``cos(positions[l] · omega_i)`` and ``sin(positions[l] · omega_i)``.

    Examples
    --------
    >>> c, s = rotary_tables(np.array([0, 1, 2]), 4, 10000.0, np.float32)
    >>> c.shape, c.dtype, bool(np.allclose(c**2 + s**2, 1))
    ((3, 2), dtype('float32'), True)
    """
    angles = positions[:, None] * frequencies(D, base)[None, :]        # (L, D/2)
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def rotate_pairs(x: np.ndarray, c: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The rotation of :func:`apply_rotary`, unchecked: each pair (x[2i], x[2i+1]) turned by its angle.

    Parameters
    ----------
    x : ndarray, float, shape (..., L, D)
        Queries or keys; D even. Not written to.
    c, s : ndarray, shape (L, D/2)
        The cosines and sines of the angles, from :func:`rotary_tables`, in the dtype of ``x``.

    Returns
    -------
    ndarray, shape (..., L, D), dtype of ``x``
        ``(x[2i]·c - x[2i+1]·s, x[2i]·s + x[2i+1]·c)`` in every pair.

    Examples
    --------
    >>> x = np.array([[1.0, 0.0], [1.0, 0.0]])                # L = 2 positions, D = 2
    >>> rotate_pairs(x, *rotary_tables(np.array([0, 1]), 2, 10000.0, x.dtype)).round(3)
    array([[1.   , 0.   ],
           [0.54 , 0.841]])
    """
    # The pairs are taken apart once, so that the arithmetic runs on contiguous arrays, into copies
    # that are then used as scratch space (the in-place steps below). A strided slice is copied
    # anyway; np.ascontiguousarray would return the caller's memory itself when the slice is
    # already contiguous (D = 2 and every other axis of length 1), and the rotation would write it.
    even = x[..., 0::2].copy()                                  # (..., L, D/2)
    odd = x[..., 1::2].copy()
    out = np.empty_like(x)
    first = even * c
    first -= odd * s
    out[..., 0::2] = first                                      # even·cos − odd·sin
    even *= s
    odd *= c
    even += odd
    out[..., 1::2] = even                                       # even·sin + odd·cos
    return out


def alibi_bias(query_positions, key_positions=None, slope: float = 0.5) -> np.ndarray:
    """ALiBi (Press et al. 2022): a penalty on the scores that grows linearly with the distance.

    Nothing is added to the embeddings; the float matrix ``B`` is added to the scaled scores (pass
    it as a floating ``attn_mask`` to :func:`scaled_dot_product_attention`). It depends only on
    the distance between positions, so shifting a whole sentence leaves the weights unchanged.
    This is the symmetric form; causal models combine it with a causal mask.

    Parameters
    ----------
    query_positions : array_like of int or float, shape (L,)
        Position of each query.
    key_positions : array_like, shape (S,), optional
        Position of each key; default ``query_positions`` (self-attention).
    slope : float
        How much one step of distance costs, > 0. Press et al. give each head its own slope.

    Returns
    -------
    ndarray, float64, shape (L, S)
        ``B[i, j] = -slope · |query_positions[i] - key_positions[j]|``.

    Examples
    --------
    >>> alibi_bias([0, 1, 2], slope=0.5)
    array([[ 0. , -0.5, -1. ],
           [-0.5,  0. , -0.5],
           [-1. , -0.5,  0. ]])
    """
    pq = _positions(query_positions, "query_positions")
    pk = pq if key_positions is None else _positions(key_positions, "key_positions")
    slope = finite_number(slope, "slope", above=0)
    # + 0.0 turns the -0.0 of the diagonal into 0.0, which prints better
    return -slope * np.abs(pq[:, None] - pk[None, :]) + 0.0      # (L, S)


def _positions(p, name: str) -> np.ndarray:
    arr = np.asarray(p)
    if arr.ndim != 1 or arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be a 1-D array of numbers, shape (n,); got shape "
                         f"{arr.shape}, dtype {arr.dtype}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite")
    return arr.astype(np.float64)
