"""Scaled dot-product attention, with the semantics of PyTorch's
``torch.nn.functional.scaled_dot_product_attention``.

One mask convention holds in the whole library: in a boolean mask **True means the position
takes part**; a floating mask is **added** to the scores (``-inf`` blocks).
"""

from __future__ import annotations

import numpy as np

from ._validate import (
    as_float_array,
    broadcast_batch,
    check_mask,
    check_same_dtype,
    compute_dtype,
    nonnegative_int,
    resolve_scale,
)
from .softmax import softmax_rows


def causal_mask(L: int, S: int | None = None) -> np.ndarray:
    """Boolean causal mask: query ``i`` may look at keys ``0..i`` (top-left aligned).

    Parameters
    ----------
    L : int
        Number of queries.
    S : int, optional
        Number of keys (default ``L``). When ``L != S`` the triangle stays aligned to the top-left
        corner, as in PyTorch's ``is_causal``.

    Returns
    -------
    ndarray of bool, shape (L, S)
        ``True`` where the query may attend to the key.

    Examples
    --------
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> causal_mask(2, 4).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0]])
    """
    L = nonnegative_int(L, "L")
    S = L if S is None else nonnegative_int(S, "S")
    return np.tri(L, S, dtype=bool)


def padding_mask(lengths, S: int) -> np.ndarray:
    """Boolean key-padding mask from the true length of each sequence in a batch.

    Parameters
    ----------
    lengths : array_like of int, shape (B,)
        How many keys of each sequence are real; the rest are padding.
    S : int
        Padded length (number of keys).

    Returns
    -------
    ndarray of bool, shape (B, 1, S)
        ``True`` for real keys. The middle axis of size 1 lets it broadcast over the queries of
        a score matrix of shape (B, L, S).

    Examples
    --------
    >>> padding_mask([2, 3], 3).astype(int)
    array([[[1, 1, 0]],
    <BLANKLINE>
           [[1, 1, 1]]])
    """
    S = nonnegative_int(S, "S")
    arr = np.asarray(lengths)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise TypeError(
            f"lengths must be a 1-D array of ints (one per sequence); got dtype {arr.dtype}, "
            f"shape {arr.shape}"
        )
    if arr.size and (arr.min() < 0 or arr.max() > S):
        raise ValueError(f"lengths must lie in [0, S={S}]; got {arr.tolist()}")
    return (np.arange(S) < arr[:, None])[:, None, :]


def _check_qkv(q, k, v, check_finite=True):
    q = as_float_array(q, "q", min_ndim=2, allow_nonfinite=not check_finite)
    k = as_float_array(k, "k", min_ndim=2, allow_nonfinite=not check_finite)
    v = as_float_array(v, "v", min_ndim=2, allow_nonfinite=not check_finite)
    dtype = check_same_dtype(q=q, k=k, v=v)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share the last axis E (query/key width); got q {q.shape} "
            f"(E={q.shape[-1]}) and k {k.shape} (E={k.shape[-1]})"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions S; got k {k.shape} "
            f"(S={k.shape[-2]}) and v {v.shape} (S={v.shape[-2]})"
        )
    if q.shape[-1] == 0:
        raise ValueError(f"q and k need a last axis E >= 1; got q {q.shape}")
    batch = broadcast_batch({"q": q.shape[:-2], "k": k.shape[:-2], "v": v.shape[:-2]})
    return q, k, v, dtype, batch


def check_finite(**arrays) -> None:
    """Raise the message of the input checks for the first of ``arrays`` holding NaN or inf."""
    for name, a in arrays.items():
        as_float_array(a, name, min_ndim=0)


def prepare_attention_inputs(q, k, v, attn_mask, is_causal, scale, *, check_finite=True):
    """Validate the inputs of any attention variant; shared by the direct and chunked paths.

    Returns ``(q, k, v, mask, scale, dtype, batch)`` where ``mask`` is None, a boolean mask or a
    floating mask already cast to the compute dtype, broadcastable to ``batch + (L, S)``. The
    causal triangle is not built here: each path makes it in the size it needs.

    ``check_finite=False`` leaves out the NaN/inf check of q, k and v, for a caller that gets
    the same answer from reductions it computes anyway (and then calls :func:`check_finite`).
    """
    q, k, v, dtype, batch = _check_qkv(q, k, v, check_finite)
    L, S = q.shape[-2], k.shape[-2]
    if not isinstance(is_causal, (bool, np.bool_)):
        raise TypeError(f"is_causal must be True or False; got {is_causal!r}")
    if is_causal and attn_mask is not None:
        raise ValueError(
            "attn_mask and is_causal=True cannot be combined (as in PyTorch); fold the causal "
            "triangle into attn_mask with causal_mask(L, S) & attn_mask instead"
        )
    cdtype = compute_dtype(dtype)
    mask = None
    if attn_mask is not None:
        mask = check_mask(attn_mask, "attn_mask", batch + (L, S), cdtype)
    return q, k, v, mask, resolve_scale(scale, q.shape[-1]), dtype, batch


def scaled_dot_product_attention(
    q, k, v, attn_mask=None, is_causal: bool = False, scale: float | None = None,
    return_weights: bool = False,
):
    """softmax(q kᵀ · scale + mask) v, the textbook formula, one matrix product at a time.

    The short version to read: :func:`attention_course.minimal.scaled_dot_product_attention`.

    Parameters
    ----------
    q : ndarray, shape (..., L, E)
        Queries: L positions that ask.
    k : ndarray, shape (..., S, E)
        Keys: S positions that answer; same width E as the queries.
    v : ndarray, shape (..., S, Ev)
        Values: what each of the S positions hands over. Ev may differ from E.
        Leading axes (batch, heads) of q, k and v broadcast against each other.
    attn_mask : ndarray of bool or float, broadcastable to (..., L, S), optional
        Boolean: ``True`` means the key takes part for that query. Floating: added to the scaled
        scores (use ``-inf`` to block).
    is_causal : bool
        Apply ``causal_mask(L, S)`` (top-left aligned). Cannot be combined with ``attn_mask``.
    scale : float, optional
        Multiplies the scores; default ``1 / sqrt(E)``.
    return_weights : bool
        Also return the attention weights.

    Returns
    -------
    out : ndarray, shape (..., L, Ev), same dtype as q
        Each query's weighted blend of the values. A query that may see no key at all (a fully
        masked row, or S = 0) gets a row of zeros, never NaN.
    weights : ndarray, shape (..., L, S), only if ``return_weights``
        Rows sum to 1 (0 for fully masked rows).

    Raises
    ------
    TypeError
        Non-floating inputs, mixed dtypes, a mask that is neither bool nor float.
    ValueError
        Wrong rank; E, S or batch axes that do not match; a mask of the wrong shape; a mask
        together with ``is_causal``; NaN or inf in q, k or v.

    Notes
    -----
    float16 inputs are computed in float32 and cast back; float32 stays float32 throughout
    (the scale is applied as a float32 number, so nothing is silently upcast to float64).
    L = 0 gives an empty output; E = 0 is an error.

    Examples
    --------
    >>> q = np.array([[1.0, 0.0]]); k = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> v = np.array([[10.0], [20.0]])
    >>> out, w = scaled_dot_product_attention(q, k, v, return_weights=True)
    >>> w.round(3), out.round(3)
    (array([[0.67, 0.33]]), array([[13.302]]))
    """
    q, k, v, mask, scale, dtype, _ = prepare_attention_inputs(
        q, k, v, attn_mask, is_causal, scale
    )
    cdtype = compute_dtype(dtype)
    if is_causal:
        mask = causal_mask(q.shape[-2], k.shape[-2])
    q, k, v = (a.astype(cdtype, copy=False) for a in (q, k, v))
    out, weights = attend_prepared(q, k, v, mask, scale)
    out = out.astype(dtype, copy=False)                               # (..., L, Ev)
    if return_weights:
        return out, weights.astype(dtype, copy=False)
    return out


def _softmax_scores(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`~attention_course.softmax.softmax` of scores that attention made and gives up: the
    weights are written over them, and NaN and +inf are refused from the row maxima."""
    if scores.size == 0:
        return scores
    return softmax_rows(scores, axis, inplace=True, check=True)


def attend_prepared(q, k, v, mask, scale: float, normalise=_softmax_scores):
    """The arithmetic of :func:`scaled_dot_product_attention` on inputs it has checked.

    :func:`prepare_attention_inputs` (or code that made the inputs itself, such as the training
    loop of :mod:`attention_course.backprop`) gives what this takes; nothing is checked again.

    Parameters
    ----------
    q : ndarray, float32 or float64, shape (..., L, E)
        Queries.
    k : ndarray, shape (..., S, E)
        Keys, in the dtype of ``q``.
    v : ndarray, shape (..., S, Ev)
        Values, in the dtype of ``q``. Leading axes of q, k and v broadcast against each other.
    mask : ndarray of bool or of the dtype of ``q``, broadcastable to (..., L, S), or None
        Boolean: ``True`` means the key takes part; floating: added to the scaled scores.
    scale : float
        Multiplies the scores (``1 / sqrt(E)`` for scaled dot-product attention).
    normalise : callable
        ``normalise(scores, axis=-1) -> weights``, the row softmax, which may write over the
        (..., L, S) scores it is given. By default the checked softmax (NaN or +inf in the scores
        raise ``ValueError``); the backward pass gives
        :func:`~attention_course.softmax.softmax_rows` with the options it can promise.

    Returns
    -------
    out : ndarray, shape (..., L, Ev), dtype of ``q``
        Each query's weighted blend of the values; zeros for a query that sees no key.
    weights : ndarray, shape (..., L, S), dtype of ``q``
        Rows sum to 1 (0 for fully masked rows).

    Examples
    --------
    >>> q = np.array([[1.0, 0.0]]); k = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> v = np.array([[10.0], [20.0]])
    >>> out, w = attend_prepared(q, k, v, None, 1 / np.sqrt(2))
    >>> w.round(3), out.round(3)
    (array([[0.67, 0.33]]), array([[13.302]]))
    """
    scores = q @ np.swapaxes(k, -1, -2)                               # (..., L, S)
    # scores is a new array: scaled, masked and normalised where it lies, one pass each
    scores *= q.dtype.type(scale)
    if mask is not None:
        fits = np.broadcast_shapes(scores.shape, mask.shape) == scores.shape
        if mask.dtype == np.bool_:
            if fits:
                np.copyto(scores, -np.inf, where=~mask)
            else:                                  # the mask has batch axes that q, k lack
                scores = np.where(mask, scores, -np.inf)
        elif fits:
            scores += mask
        else:
            scores = scores + mask
    weights = normalise(scores, axis=-1)                              # (..., L, S)
    return weights @ v, weights


def sliding_window_mask(L: int, window: int, S: int | None = None, causal: bool = False):
    """Boolean mask in which query ``i`` sees only keys ``j`` with ``|i - j| <= window``.

    Parameters
    ----------
    L : int
        Number of queries.
    window : int
        r, how many neighbours on each side (0: only itself).
    S : int, optional
        Number of keys (default L).
    causal : bool
        Keep only the left side (``i - window <= j <= i``).

    Returns
    -------
    ndarray of bool, shape (L, S)
        At most ``2·window + 1`` True per row: the work per row is O(r), not O(S).

    Examples
    --------
    >>> sliding_window_mask(4, 1).astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 1, 0],
           [0, 1, 1, 1],
           [0, 0, 1, 1]])
    """
    L = nonnegative_int(L, "L")
    S = L if S is None else nonnegative_int(S, "S")
    r = nonnegative_int(window, "window")
    offset = np.arange(S)[None, :] - np.arange(L)[:, None]    # (L, S): j - i
    keep = np.abs(offset) <= r
    return keep & (offset <= 0) if causal else keep
