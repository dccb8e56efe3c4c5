"""Whether an answer equals the expected one, and if not, why: the grader's side of a check.

Tolerances follow the dtype (:func:`tolerance_for`, :func:`input_precision`), a floating result
less precise than its inputs fails (:func:`precision_reason`), and :func:`compare` says in the
notebook's language where and by how much an answer differs. Only values come in: nothing here
calls the learner's function or watches its calls (that is :mod:`.watcher`), so the comparison can
run where the answers are graded while the learner's code runs elsewhere.
"""

from __future__ import annotations

import numpy as np

from .language import get_language, say

__all__ = [
    "compare", "compare_within", "default_tolerance", "describe", "input_precision", "precision_reason",
    "same_value", "tolerance_for",
]


# ---------------------------------------------------------------------------------------------
# Tolerances
# ---------------------------------------------------------------------------------------------

# (rtol, atol) per floating precision. atol is relative to the size of the expected values (it is
# multiplied by max(1, max |expected|)), so results near zero that come from cancelling large terms
# are judged on the scale of those terms. float32: a correct answer computed in float32 is off by a
# few 1e-7 relative (softmax of scores of size x: about x * 1.2e-7), far below 1e-4; a classic
# mistake is off by far more. float64: 1e-9 leaves room for another order of the same sums and
# still catches an answer that is off by 1e-6.
_TOLERANCES = {2: (1e-2, 1e-3), 4: (1e-4, 1e-5), 8: (1e-9, 1e-12)}


def _real_bytes(x) -> int | None:
    """Bytes per real number of a floating or complex array or NumPy scalar (at most 8), else None."""
    kind, size = x.dtype.kind, x.dtype.itemsize
    return min(size, 8) if kind == "f" else min(size // 2, 8) if kind == "c" else None


def _float_sizes(x, out: list, depth: int = 0) -> None:
    if depth > 4:
        return
    if isinstance(x, (np.ndarray, np.generic)):
        if _real_bytes(x) is not None:
            out.append(_real_bytes(x))
    elif isinstance(x, float):
        out.append(8)
    elif isinstance(x, (list, tuple)):
        for item in x[:1000]:
            _float_sizes(item, out, depth + 1)
    elif isinstance(x, dict):
        for item in list(x.values())[:1000]:
            _float_sizes(item, out, depth + 1)


def tolerance_for(*arrays) -> tuple[float, float]:
    """``(rtol, atol)`` for the least precise floating dtype among ``arrays``.

    Arrays, NumPy scalars, Python floats (float64), and lists, tuples or dicts of them count;
    integers and booleans do not. float16, float32 and float64 each have their own pair; with no
    floating value at all, the float64 pair. ``atol`` is meant relative to the size of the
    expected values (:func:`compare` multiplies it by ``max(1, max |expected|)``).
    """
    sizes: list[int] = []
    for a in arrays:
        _float_sizes(a, sizes)
    return _TOLERANCES[min(sizes, default=8) if min(sizes, default=8) in _TOLERANCES else 8]


def input_precision(*inputs) -> int | None:
    """Bytes per real number of ``np.result_type`` of the floating array inputs, or ``None``.

    Arrays and NumPy scalars count by their dtype (complex by its real part), lists and tuples of
    numbers as float64 (what ``np.asarray`` makes of Python floats); Python scalars do not count
    (NumPy treats them as weak), nor do integer and boolean arrays.
    """
    sizes: list[int] = []

    def walk(x, depth=0):
        if depth > 4:
            return
        if isinstance(x, (np.ndarray, np.generic)):
            if _real_bytes(x) is not None:
                sizes.append(_real_bytes(x))
        elif isinstance(x, list):
            if any(isinstance(v, (float, list, tuple)) for v in x[:1000]):
                sizes.append(8)
        elif isinstance(x, tuple):
            for item in x[:1000]:
                walk(item, depth + 1)
        elif isinstance(x, dict):
            for item in list(x.values())[:1000]:
                walk(item, depth + 1)

    for a in inputs:
        walk(a)
    return max(sizes) if sizes else None


def default_tolerance(got, *inputs) -> tuple[float, float]:
    """``(rtol, atol)`` of a check that names none: that of :func:`input_precision` of the
    ``inputs``, so float32 inputs are judged as float32; with no floating input at all (counts,
    sizes), :func:`tolerance_for` of the result ``got``."""
    needed = input_precision(*inputs)
    return _TOLERANCES[needed] if needed in _TOLERANCES else tolerance_for(got)


def precision_reason(got, *inputs, lang: str | None = None) -> str | None:
    """The reason when a floating array in ``got`` is less precise than the inputs, else ``None``.

    The one dtype rule of every check: the result must be at least as precise as
    :func:`input_precision` of the inputs (float64 in, float32 out fails; float32 in, float64 out
    passes).
    """
    lang = get_language(lang)
    needed = input_precision(*inputs)
    sizes: list[int] = []
    _float_sizes(got, sizes)
    if needed is None or not sizes or min(sizes) >= needed:
        return None
    names = {2: "float16", 4: "float32", 8: "float64"}
    return say("precision", lang, got=names.get(min(sizes), "float"), expected=names.get(needed, "float64"))


# ---------------------------------------------------------------------------------------------
# Describing values and comparing them
# ---------------------------------------------------------------------------------------------

def _fmt(v, digits: int = 4) -> str:
    """One value: True/False for booleans, NaN for NaN, ``digits`` significant digits for floats.

    Beyond four digits (needed to tell two close values apart) trailing zeros are kept, so that
    0.161100 and 0.161099 both show six digits.
    """
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (np.integer, int)):
        return str(int(v))
    if isinstance(v, (np.floating, float)):
        v = float(v)
        if np.isnan(v):
            return "NaN"
        if np.isinf(v):
            return "inf" if v > 0 else "-inf"
        text = f"{v:#.{digits}g}" if digits > 4 else f"{v:.{digits}g}"
        return text + ".0" if text.lstrip("-").isdigit() else text
    return repr(v)


def _distinct_digits(a, b) -> int:
    """Fewest significant digits (at least 4) that print ``a`` and ``b`` differently."""
    for digits in range(4, 18):
        if _fmt(a, digits) != _fmt(b, digits):
            return digits
    return 17


def _fmt_list(values, digits: int) -> str:
    return "[" + ", ".join(_fmt(v, digits) for v in values) + "]"


def describe(x, lang: str | None = None) -> str:
    """A short description of an answer: arrays by shape, dtype and (if small) their values."""
    lang = get_language(lang)
    if isinstance(x, np.ndarray):
        head = say("array", lang, shape=x.shape, dtype=x.dtype)
        if 0 < x.size <= 8:
            return say("values_preview", lang, head=head, values=_fmt_list(x.ravel(), 4))
        return head
    if x is None:
        return "None"
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _as_index(idx) -> str:
    return "(" + ", ".join(str(int(i)) for i in idx) + ("," if len(idx) == 1 else "") + ")"


def _around(got: np.ndarray, expected: np.ndarray, index: tuple, digits: int, lang: str) -> str:
    """The values next to the worst one along the last axis, got and expected side by side."""
    if got.ndim == 0 or got.shape[-1] <= 1:
        return ""
    j = index[-1]
    lo = max(0, min(j - 3, got.shape[-1] - 7))
    hi = min(got.shape[-1], lo + 7)
    row = tuple(index[:-1])
    g, e = got[row][lo:hi], expected[row][lo:hi]
    dots_l, dots_r = ("..., " if lo > 0 else ""), (", ..." if hi < got.shape[-1] else "")
    wrap = lambda values: "[" + dots_l + _fmt_list(values, digits)[1:-1] + dots_r + "]"  # noqa: E731
    return say("around", lang, got=wrap(g), expected=wrap(e))


def _compare_arrays(got: np.ndarray, expected: np.ndarray, rtol, atol, scaled: bool, lang: str):
    shape, dtype = got.shape, got.dtype
    if expected.dtype == np.bool_ or got.dtype == np.bool_:
        if got.dtype != expected.dtype:
            return say("dtype", lang, got=got.dtype, expected=expected.dtype)
        bad = got != expected
        if not bad.any():
            return None
        index = np.unravel_index(int(np.argmax(bad)), shape)
        return (say("differ", lang, n=int(bad.sum()), size=got.size, index=_as_index(index),
                     got=_fmt(got[index]), expected=_fmt(expected[index]), shape=shape, dtype=dtype)
                + _around(got, expected, index, 4, lang))
    try:
        g, e = got.astype(np.float64), expected.astype(np.float64)
    except (TypeError, ValueError):
        return say("not_array", lang, got=f"dtype {got.dtype}")
    if got.size == 0:
        return None
    nan = np.isnan(g) & ~np.isnan(e)
    if nan.any():
        index = np.unravel_index(int(np.argmax(nan)), shape)
        return say("nan", lang, n=int(nan.sum()), size=g.size, index=_as_index(index),
                    expected=_fmt(e[index]), shape=shape, dtype=dtype)
    if scaled:
        finite = np.abs(e[np.isfinite(e)])
        atol = atol * max(1.0, float(finite.max()) if finite.size else 1.0)
    with np.errstate(all="ignore"):
        bad = ~np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        if not bad.any():
            return None
        diff = np.abs(g - e)
    diff = np.where(np.isnan(diff), np.inf, diff)
    diff = np.where(bad, diff, -1.0)
    index = np.unravel_index(int(np.argmax(diff)), shape)
    digits = _distinct_digits(got[index], expected[index])
    return (say("differ", lang, n=int(bad.sum()), size=g.size, index=_as_index(index),
                 got=_fmt(got[index], digits), expected=_fmt(expected[index], digits),
                 shape=shape, dtype=dtype)
            + _around(got, expected, index, digits, lang) + say("tolerance", lang, rtol=rtol, atol=atol))


def _is_integer(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def compare_within(got, expected, rtol, atol, scaled: bool, check_dtype: bool, lang: str) -> str | None:
    """:func:`compare` with every choice made: these ``rtol`` and ``atol`` (``atol`` multiplied by
    ``max(1, max |expected|)`` when ``scaled``), ``check_dtype``, and ``lang``, ``"zh"`` or ``"en"``.

    For a check that decides its tolerances itself (:func:`~attention_course.checks.cases.check_function`).
    """
    if got is None and expected is not None:
        return say("none", lang)
    if isinstance(expected, tuple):
        if isinstance(got, list):            # a shape written as [4, 6] is still the shape
            got = tuple(got)
        if not isinstance(got, tuple) or len(got) != len(expected):
            return say("tuple", lang, n=len(expected), got=describe(got, lang))
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            reason = compare_within(g, e, rtol, atol, scaled, check_dtype, lang)
            if reason:
                return say("item", lang, i=i, reason=reason)
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return say("keys", lang, expected=sorted(map(str, expected)), got=describe(got, lang))
        for key in expected:
            reason = compare_within(got[key], expected[key], rtol, atol, scaled, check_dtype, lang)
            if reason:
                return say("key", lang, name=repr(key), reason=reason)
        return None
    if isinstance(expected, list):
        try:
            array = np.asarray(expected)
        except (TypeError, ValueError):
            array = None
        if array is not None and array.dtype.kind in "biuf":
            expected = array
        else:                                 # a list of arrays of different shapes: item by item
            if not isinstance(got, (list, tuple)) or len(got) != len(expected):
                return say("list", lang, n=len(expected), got=describe(got, lang))
            for i, (g, e) in enumerate(zip(got, expected, strict=True)):
                reason = compare_within(g, e, rtol, atol, scaled, check_dtype, lang)
                if reason:
                    return say("item", lang, i=i, reason=reason)
            return None
    if isinstance(expected, np.ndarray):
        if not isinstance(got, np.ndarray):
            try:
                got = np.asarray(got)
            except (TypeError, ValueError):
                return say("not_array", lang, got=type(got).__name__)
            if got.dtype == object:
                return say("not_array", lang, got=describe(got.tolist(), lang))
        if got.shape != expected.shape:
            return say("shape", lang, got=got.shape, expected=expected.shape)
        if check_dtype and got.dtype != expected.dtype:
            return say("dtype", lang, got=got.dtype, expected=expected.dtype)
        return _compare_arrays(got, expected, rtol, atol, scaled, lang)
    if isinstance(expected, (bool, np.bool_)):
        ok = isinstance(got, (bool, np.bool_)) and bool(got) == bool(expected)
        return None if ok else say("values", lang, got=describe(got, lang), expected=_fmt(expected))
    if _is_integer(expected) and _is_integer(got):
        return None if int(got) == int(expected) else say("values", lang, got=_fmt(got),
                                                            expected=_fmt(expected))
    if isinstance(expected, (int, float, np.number)):
        try:
            g, e = float(got), float(expected)
        except (TypeError, ValueError):
            return say("not_number", lang, got=describe(got, lang))
        if np.isnan(g) and not np.isnan(e):
            return say("nan_number", lang, expected=_fmt(e))
        if scaled:
            atol = atol * max(1.0, abs(e) if np.isfinite(e) else 1.0)
        if np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True):
            return None
        digits = _distinct_digits(g, e)
        return (say("values", lang, got=_fmt(got, digits), expected=_fmt(expected, digits))
                + say("tolerance", lang, rtol=rtol, atol=atol))
    try:
        same = bool(got == expected)
    except (TypeError, ValueError):
        same = False
    return None if same else say("values", lang, got=describe(got, lang), expected=describe(expected, lang))


def same_value(a, b) -> bool:
    """Whether ``b`` is ``a`` unchanged: arrays of the same shape, dtype and bits (NaN where NaN),
    containers of the same type holding the same values, equal other objects.

    >>> x = np.array([1.0, np.nan])
    >>> same_value((x, [1, 2]), (x.copy(), [1, 2])), same_value(x, x.astype(np.float32))
    (True, False)
    """
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same_value, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    try:
        return bool(a == b) or (a != a and b != b)
    except Exception:
        return True                       # objects that cannot be compared are not judged


def compare(got, expected, *, rtol: float | None = None, atol: float | None = None,
            check_dtype: bool = False, lang: str | None = None) -> str | None:
    """``None`` when ``got`` equals ``expected`` closely enough, else the reason in ``lang``.

    Arrays (``got`` may be a list), numbers, booleans, tuples of these (item by item) and other
    objects (by ``==``). With ``rtol``/``atol`` left ``None``, :func:`tolerance_for` of ``got`` and
    ``expected`` decides, ``atol`` scaled by ``max(1, max |expected|)``; numbers given are used as
    they are. For arrays that differ the reason gives how many values differ, the worst index
    with both values there, the values around it, and the shape and dtype of ``got``.
    """
    lang = get_language(lang)
    scaled = rtol is None or atol is None
    d_rtol, d_atol = tolerance_for(got, expected)
    return compare_within(got, expected, d_rtol if rtol is None else rtol, d_atol if atol is None else atol,
                          scaled and atol is None, check_dtype, lang)
