"""Input checks shared by the public functions, and the small helpers several modules share.

Every public function validates at its boundary, so a learner who passes the wrong thing reads a
message that names the argument, what it got and what it needs, instead of a NumPy traceback from
deep inside a matrix product.
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager

import numpy as np

FLOAT_DTYPES = (np.float16, np.float32, np.float64)

_trust = threading.local()


def finite_assumed() -> bool:
    """Whether this thread is inside :func:`assume_finite` (or :func:`assume_valid`)."""
    return getattr(_trust, "finite", False)


def checking() -> bool:
    """Whether the functions that ask check their arguments: False inside :func:`assume_valid`."""
    return not getattr(_trust, "valid", False)


@contextmanager
def assume_finite():
    """Within this block (on this thread), skip the NaN/inf scans of :func:`as_float_array` and softmax.

    For loops that call the checked functions thousands of times on arrays they made themselves,
    such as :func:`attention_course.tiny_model.train`: their inputs were checked once at the
    boundary, and a scan per call would cost a quarter of a training step. Types, dtypes and
    shapes are still checked.
    """
    before = finite_assumed()
    _trust.finite = True
    try:
        yield
    finally:
        _trust.finite = before


@contextmanager
def assume_valid():
    """Within this block (on this thread), functions that ask :func:`checking` skip their checks.

    More than :func:`assume_finite`: types, dtypes and shapes are not checked either. For a loop
    whose arrays were checked once, on its first step, and are its own, such as the training
    loop of :func:`attention_course.tiny_model.train`; the functions compute the same numbers
    either way. Public as :func:`attention_course.backprop.unchecked`.
    """
    before = (getattr(_trust, "valid", False), finite_assumed())
    _trust.valid = _trust.finite = True
    try:
        yield
    finally:
        _trust.valid, _trust.finite = before


def as_float_array(x, name: str, *, min_ndim: int = 1, allow_nonfinite: bool = False) -> np.ndarray:
    """Return ``x`` as a floating ndarray, or raise a message that names ``name``.

    Integer, boolean and complex inputs are refused: silently turning token ids into floats hides
    a bug more often than it helps. NaN and inf are refused unless ``allow_nonfinite``.
    """
    if isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:  # ragged lists and the like
            raise TypeError(f"{name} must be an array of floats; could not convert it ({exc})") from None
    if arr.dtype.type not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must have a floating dtype (float16, float32 or float64); got dtype {arr.dtype}"
            + (" - convert with .astype(np.float32)" if arr.dtype.kind in "iub" else "")
        )
    if arr.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} axes; got shape {arr.shape}"
        )
    if not allow_nonfinite and arr.size and not finite_assumed() and not np.isfinite(arr).all():
        bad = "NaN" if np.isnan(arr).any() else "inf"
        raise ValueError(f"{name} contains {bad}; attention needs finite inputs")
    return arr


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """float16 is computed in float32 (as CPU kernels do) and cast back at the end."""
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(dtype)


def check_same_dtype(**arrays: np.ndarray) -> np.dtype:
    dtypes = {name: a.dtype for name, a in arrays.items()}
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{n}={d}" for n, d in dtypes.items())
        raise TypeError(f"inputs must share one dtype; got {listed}")
    return next(iter(dtypes.values()))


def broadcast_batch(name_shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    """Broadcast the leading (batch) axes, naming the arrays when they do not fit."""
    try:
        return np.broadcast_shapes(*name_shapes.values())
    except ValueError:
        listed = ", ".join(f"{n} {s}" for n, s in name_shapes.items())
        raise ValueError(f"leading (batch) axes do not broadcast: {listed}") from None


def check_mask(mask, name: str, target_shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Validate a boolean or floating mask that must broadcast to ``target_shape``.

    A boolean mask is returned as is (True = takes part); a floating one is cast to ``dtype``.
    """
    arr = np.asarray(mask)
    if arr.dtype != np.bool_ and arr.dtype.type not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be boolean (True = takes part) or floating (added to the scores); "
            f"got dtype {arr.dtype}"
        )
    try:
        np.broadcast_shapes(arr.shape, target_shape)
        if np.broadcast_shapes(arr.shape, target_shape) != tuple(target_shape):
            raise ValueError
    except ValueError:
        raise ValueError(
            f"{name} has shape {arr.shape}; it must broadcast to {tuple(target_shape)} "
            "(..., L queries, S keys)"
        ) from None
    if arr.dtype == np.bool_:
        return arr
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise ValueError(f"{name} may hold -inf (blocked) and finite values, not NaN or +inf")
    return arr.astype(dtype, copy=False)


def positive_int(value, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int; got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive; got {name}={value}")
    return int(value)


def nonnegative_int(value, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int; got {type(value).__name__} {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0; got {name}={value}")
    return int(value)


def finite_number(value, name: str, *, above: float | None = None) -> float:
    """``value`` as a float, refused unless a real number (not a bool), finite, and ``> above``."""
    bound = "" if above is None else f" > {above:g}"
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating))
            or not np.isfinite(value) or (above is not None and not value > above)):
        raise ValueError(f"{name} must be a finite number{bound}; got {name}={value!r}")
    return float(value)


def resolve_scale(scale, E: int) -> float:
    """``1/sqrt(E)`` for ``None``, else ``scale`` as a float, refused unless finite and a number."""
    if scale is None:
        return 1.0 / math.sqrt(E)
    if isinstance(scale, (bool, np.bool_)) or not np.isscalar(scale) or not np.isfinite(scale):
        raise ValueError(f"scale must be a finite number or None; got {scale!r}")
    return float(scale)


def linear(x, weight, bias):
    """x @ weightᵀ + bias, the convention of torch.nn.Linear (weight is (out, in))."""
    y = x @ weight.T
    return y if bias is None else y + bias


def combine_masks(attn_mask, key_padding_mask, batch, H, L, S, cdtype):
    """One mask of shape broadcastable to batch + (H, L, S), or None."""
    target = batch + (H, L, S)
    mask = None if attn_mask is None else check_mask(attn_mask, "attn_mask", target, cdtype)
    if key_padding_mask is not None:
        kpm = np.asarray(key_padding_mask)
        if kpm.shape[-1:] != (S,) or kpm.ndim - 1 > len(batch):
            raise ValueError(
                f"key_padding_mask has shape {kpm.shape}; it must be (..., S) = "
                f"{batch + (S,)} (one flag per key of each sequence)"
            )
        kpm = check_mask(kpm[..., None, None, :], "key_padding_mask", target, cdtype)
        if mask is None:
            mask = kpm
        elif mask.dtype == np.bool_ and kpm.dtype == np.bool_:
            mask = mask & kpm
        else:
            # Two very negative finite masks (finfo.min each) may add up to -inf: blocked
            # either way, and torch's sum gives the same -inf.
            with np.errstate(over="ignore"):
                mask = as_additive(mask, cdtype) + as_additive(kpm, cdtype)
    return mask


def as_additive(mask, cdtype):
    """A boolean mask as 0 / -inf added to the scores; a floating one as it is."""
    if mask.dtype == np.bool_:
        return np.where(mask, cdtype.type(0), cdtype.type(-np.inf))
    return mask
