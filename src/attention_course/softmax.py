"""Softmax: turn a row of scores into a budget of weights that sums to 1."""

from __future__ import annotations

import numpy as np

from ._validate import as_float_array, finite_assumed


def softmax(x, axis: int = -1, *, temperature: float = 1.0) -> np.ndarray:
    """Numerically stable softmax along ``axis``.

    The row maximum is subtracted before ``exp``: that changes nothing mathematically (softmax
    does not change when a constant is added to a row) but keeps ``exp`` from overflowing, so
    logits of +-1e4 are exact.

    The short version to read: :func:`attention_course.minimal.softmax`.

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
    return softmax_rows(work, axis).astype(x.dtype, copy=False)


def _check_scores(x: np.ndarray) -> None:
    if x.size and not finite_assumed():
        _refuse_nan_and_inf(np.max(x))


def _refuse_nan_and_inf(top) -> None:
    # np.max passes NaN on, so one maximum answers both questions, with no table of booleans
    if np.isnan(top) or top == np.inf:
        raise ValueError("x contains NaN or +inf; only -inf (blocked) is allowed")


def softmax_rows(work: np.ndarray, axis: int = -1, *, open_rows: bool = False,
                 inplace: bool = False, check: bool = False) -> np.ndarray:
    """The arithmetic of :func:`softmax` alone, on float32/float64 scores the caller made.

    :func:`softmax` checks and converts its input, then calls this. Code that made the scores
    itself calls it directly, so that both give the same numbers bit for bit:
    :func:`~attention_course.attention.attend_prepared` (with ``inplace`` and ``check``) and the
    training loop of :mod:`attention_course.backprop` (with ``open_rows`` and ``inplace``).
    Nothing else is checked or converted: no dtype, no temperature, no empty axis.

    Parameters
    ----------
    work : ndarray, float32 or float64, shape (..., n)
        Scores (logits), n >= 1 of them along ``axis``. ``-inf`` means "blocked".
    axis : int
        The axis that is normalised (default: the last one, one row per query).
    open_rows : bool
        A promise that every row has a finite maximum (finite scores and at least one of them
        allowed, as under a causal mask): the two guards for rows that are entirely ``-inf`` then
        change nothing and are left out. A row that breaks the promise gives NaN.
    inplace : bool
        Write the weights over ``work``, which the caller gives up, instead of into a new array.
    check : bool
        Refuse NaN and +inf as :func:`softmax` does, from the row maxima that the arithmetic needs
        anyway (skipped inside :func:`~attention_course._validate.assume_finite`).

    Returns
    -------
    ndarray, float32 or float64, shape (..., n)
        Non-negative weights that sum to 1 along ``axis``; all zeros on a row that is entirely
        ``-inf``. ``work`` itself when ``inplace``.

    Raises
    ------
    ValueError
        Only with ``check``: ``work`` holds NaN or +inf.

    Examples
    --------
    >>> softmax_rows(np.array([[0.0, np.log(3.0)], [-np.inf, -np.inf]]))
    array([[0.25, 0.75],
           [0.  , 0.  ]])
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
