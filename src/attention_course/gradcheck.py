"""Gradient checking: compare a hand-written backward with central finite differences.

A backward pass can be wrong in ways that still give arrays of the right shape (a missing
transpose, a forgotten scale). The numerical gradient needs no calculus at all, only the forward:
nudge one entry up and down by ``eps`` and see how the loss moves. In float64 the two agree to
about 1e-8 or better when the backward is right, and differ by far more when it is not.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["check_gradient", "numerical_gradient", "relative_error"]


def numerical_gradient(f: Callable[[], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central-difference gradient ``(f(x + eps·e_i) - f(x - eps·e_i)) / (2·eps)`` for every entry i.

    Parameters
    ----------
    f : callable, no arguments, returning a float
        The scalar loss; it must read ``x`` (the array is changed in place, one entry at a time,
        and restored exactly afterwards).
    x : ndarray of float64, any shape
        The array to differentiate with respect to. float64 is required: in float32 a nudge of
        1e-6 is lost in rounding (float32 resolves only about 1e-7 relative).
    eps : float
        The nudge. The error of central differences is about eps² (truncation) plus
        1e-16 · |f| / eps (rounding); 1e-6 balances them for losses of order 1.

    Returns
    -------
    ndarray of float64, shape of ``x``

    Examples
    --------
    >>> x = np.array([1.0, 2.0, 3.0])
    >>> g = numerical_gradient(lambda: float((x ** 2).sum()), x)
    >>> bool(np.allclose(g, 2 * x)), x          # x is unchanged afterwards
    (True, array([1., 2., 3.]))
    """
    if not callable(f):
        raise TypeError(f"f must be a function of no arguments returning a float; got {type(f).__name__}")
    if not isinstance(x, np.ndarray) or x.dtype != np.float64:
        got = f"dtype {x.dtype}" if isinstance(x, np.ndarray) else type(x).__name__
        raise TypeError(
            f"x must be a float64 ndarray that f reads (it is nudged in place); got {got}. "
            "Use x = x.astype(np.float64) and let f read that array"
        )
    if not x.flags.writeable:
        raise ValueError("x must be writeable: each entry is nudged in place and restored")
    if not (np.isscalar(eps) and np.isfinite(eps) and eps > 0):
        raise ValueError(f"eps must be a positive finite number; got {eps!r}")
    grad = np.zeros(x.shape, dtype=np.float64)
    for i in np.ndindex(x.shape):
        old = x[i]
        try:
            x[i] = old + eps
            up = float(f())
            x[i] = old - eps
            down = float(f())
        finally:
            x[i] = old                                   # restore exactly, even if f raised
        grad[i] = (up - down) / (2 * eps)
    return grad


def relative_error(a, b, floor: float = 1e-12) -> float:
    """Largest elementwise relative difference, ``max |a - b| / max(floor, |a| + |b|)``.

    Relative, because a gradient of size 1e3 that is off by 1e-6 is right while one of size 1e-6
    that is off by 1e-6 is wrong. The floor keeps two exact zeros from giving 0/0.

    Parameters
    ----------
    a, b : array_like, same shape
    floor : float
        Entries with ``|a| + |b|`` below it are compared absolutely (their error is divided by
        ``floor``). Finite differences in float64 resolve a gradient only to about 1e-10 of the
        loss, so a gradient that is zero in exact arithmetic (for example that of the key bias,
        which shifts every score of a row alike) comes out as rounding noise of 1e-16 on one
        side and 1e-12 on the other: raise the floor (say to 1e-5) when such entries occur.

    Returns
    -------
    float
        0.0 for identical arrays; close to 1 when they are unrelated.

    Examples
    --------
    >>> relative_error(np.array([1.0, 0.0]), np.array([1.0, 0.0]))
    0.0
    >>> relative_error(np.array([2.0]), np.array([-2.0]))
    1.0
    >>> tiny, zero = np.array([1e-16]), np.array([0.0])     # rounding noise against an exact 0
    >>> relative_error(tiny, zero), relative_error(tiny, zero, floor=1e-5)
    (0.0001, 1e-11)
    """
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    if a64.shape != b64.shape:
        raise ValueError(f"a and b must have the same shape; got a {a64.shape} and b {b64.shape}")
    if a64.size == 0:
        return 0.0
    if not (np.isscalar(floor) and np.isfinite(floor) and floor > 0):
        raise ValueError(f"floor must be a positive number; got floor={floor!r}")
    return float(np.max(np.abs(a64 - b64) / np.maximum(floor, np.abs(a64) + np.abs(b64))))


def check_gradient(forward_scalar: Callable[[], float], x: np.ndarray, analytic,
                   eps: float = 1e-6, floor: float = 1e-12) -> float:
    """Relative error between an analytic gradient and the numerical one.

    Parameters
    ----------
    forward_scalar : callable, no arguments, returning a float
        The loss, reading ``x``.
    x : ndarray of float64
        The input whose gradient is checked.
    analytic : ndarray, shape of ``x``
        The gradient from a backward pass.
    eps : float
        The nudge of :func:`numerical_gradient`.
    floor : float
        The floor of :func:`relative_error`.

    Returns
    -------
    float
        :func:`relative_error` of the two. Below about 1e-6: the backward is right. Above 1e-2:
        it is wrong.

    Examples
    --------
    >>> w = np.array([[1.0, 2.0], [3.0, 4.0]]); x = np.array([1.0, -1.0])
    >>> loss = lambda: float((w @ x).sum())
    >>> right = np.ones(2)[:, None] * x[None, :]            # d/dw of sum(w x)
    >>> check_gradient(loss, w, right) < 1e-6, check_gradient(loss, w, right.T) > 0.5
    (True, True)
    """
    analytic = np.asarray(analytic)
    if analytic.shape != np.shape(x):
        raise ValueError(f"analytic has shape {analytic.shape}; it must have the shape of x, {np.shape(x)}")
    return relative_error(analytic, numerical_gradient(forward_scalar, x, eps), floor=floor)
