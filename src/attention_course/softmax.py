"""Softmax: turn a row of scores into a budget of weights that sums to 1."""

from __future__ import annotations

import numpy as np

from ._validate import as_float_array, finite_assumed


def softmax(x, axis: int = -1, *, temperature: float = 1.0) -> np.ndarray:
    """Numerically stable softmax along ``axis``.

    The row maximum is subtracted before ``exp``: that changes nothing mathematically (softmax
    does not change when a constant is added to a row) but keeps ``exp`` from overflowing, so
    logits of +-1e4 are exact.

    Parameters
    ----------
    x : array_like, float16/32/64, shape (..., n)
        Scores (logits). ``-inf`` means "blocked": it gets weight exactly 0.
    axis : int
        The axis that is normalised (default: the last one, one row per query).
    temperature : float
        Scores are divided by it first; below 1 sharpens the weights, above 1 flattens them.

    Returns
    -------
    ndarray, same shape and dtype as ``x``
        Non-negative weights that sum to 1 along ``axis``. A row that is entirely ``-inf``
        (nothing allowed) gives all zeros rather than NaN.

    Raises
    ------
    TypeError
        If ``x`` is not floating.
    ValueError
        If ``x`` holds NaN or +inf, or ``temperature`` is not a positive finite number.

    Examples
    --------
    >>> softmax(np.array([0.5, 0.3, 1.2, 3.0])).round(3)
    array([0.062, 0.051, 0.126, 0.761])
    >>> softmax(np.array([[1e4, 0.0], [-np.inf, -np.inf]]))
    array([[1., 0.],
           [0., 0.]])
    """
    x = as_float_array(x, "x", allow_nonfinite=True)
    _check_scores(x)
    if not (np.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a positive finite number; got {temperature!r}")
    if x.size == 0:
        return x.copy()
    work = x.astype(np.float32) if x.dtype == np.float16 else x
    if temperature != 1.0:
        work = work / work.dtype.type(temperature)
    return _softmax_rows(work, axis).astype(x.dtype, copy=False)


def _check_scores(x: np.ndarray) -> None:
    if x.size and not finite_assumed():
        _refuse_nan_and_inf(np.max(x))


def _refuse_nan_and_inf(top) -> None:
    # np.max passes NaN on, so one maximum answers both questions, with no table of booleans
    if np.isnan(top) or top == np.inf:
        raise ValueError("x contains NaN or +inf; only -inf (blocked) is allowed")


def _softmax_scores(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`softmax` of float32/float64 ``scores`` that the caller made and gives up: the
    weights are written over them, and the check is made on the row maxima the softmax needs
    anyway. The same numbers as :func:`softmax`, with no other (..., L, S) array."""
    if scores.size == 0:
        return scores
    return _softmax_rows(scores, axis, inplace=True, check=True)


def _softmax_rows(work: np.ndarray, axis: int = -1, *, open_rows: bool = False,
                  inplace: bool = False, check: bool = False) -> np.ndarray:
    """The arithmetic of :func:`softmax` alone, for float32/float64 arrays already checked.

    :func:`softmax` checks its input and calls this; a training loop that made the scores itself
    calls it directly (see :mod:`attention_course.backprop`), so both give the same numbers.
    ``open_rows=True`` promises that every row has a finite maximum (finite scores and at least
    one key allowed, as under a causal mask): then the two guards for all -inf rows change
    nothing and are left out, and the result is the same bit for bit. ``inplace=True`` writes
    the weights over ``work``; ``check=True`` refuses NaN and +inf as :func:`softmax` does.
    """
    row_max = np.max(work, axis=axis, keepdims=True)
    if check and not finite_assumed():
        _refuse_nan_and_inf(np.max(row_max))
    if not open_rows:
        # An all -inf row has max -inf; shifting by 0 instead keeps exp(-inf) = 0 and avoids
        # inf - inf.
        row_max = np.where(np.isfinite(row_max), row_max, 0)
    e = np.subtract(work, row_max, out=work if inplace else None)
    np.exp(e, out=e)
    total = e.sum(axis=axis, keepdims=True)
    if open_rows:
        e /= total
        return e
    has_weight = total > 0
    if has_weight.all():
        e /= total
    else:
        np.divide(e, total, out=e, where=has_weight)
        np.copyto(e, 0, where=~has_weight)                     # a row that sees nothing: zeros
    return e
