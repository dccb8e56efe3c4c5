"""What every exercise check shares: cases, comparison, bilingual messages, forbidden calls, loops.

A check runs the learner's function on several inputs (:class:`Case`), compares each result with
the library's (:func:`compare`, tolerances that follow the dtype, :func:`tolerance_for`) and either
prints one line or raises :class:`CheckFailed` in the notebook's language. While the learner's
function runs, :func:`watch_calls` watches which functions it calls, so an exercise can forbid the
library function it asks the learner to rebuild whatever name it is bound to.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dis
import functools
import inspect
import itertools
import os
import sys
import sysconfig
import textwrap
import threading
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "Case", "CheckFailed", "assert_no_loops", "check_function", "check_value", "compare", "describe",
    "fail", "fresh_copy", "fresh_on_call", "get_language", "input_precision", "label", "matching_hint",
    "peak_memory",
    "precision_reason", "run_learner", "set_language", "tolerance_for", "watch_calls",
]

_LANGUAGES = ("zh", "en")
_language = "en"


class CheckFailed(AssertionError):
    """The learner's answer is wrong; the message says on which input and why.

    In a notebook, IPython shows only this message (``_render_traceback_``): the frames of the
    check machinery, with the paths of the machine that ran it, tell the learner nothing and would
    end up in nbgrader's feedback pages.
    """

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def set_language(lang: str) -> None:
    """Language of the check messages for the rest of the session: ``"zh"`` or ``"en"``."""
    global _language
    _language = _valid(lang)


def get_language(lang: str | None = None) -> str:
    """``lang`` if given (validated), else the session's language set with :func:`set_language`."""
    return _language if lang is None else _valid(lang)


def _valid(lang) -> str:
    if lang not in _LANGUAGES:
        raise ValueError(f"lang must be one of {_LANGUAGES}; got {lang!r}")
    return lang


def label(zh: str, en: str) -> dict:
    """A text in both languages, ``{"zh": zh, "en": en}``: a case's label, a name, a hint, a reason."""
    return {"zh": zh, "en": en}


def _pick(text, lang: str) -> str:
    return str(text[lang]) if isinstance(text, dict) else str(text)


@dataclass
class Case:
    """One input to try. ``label`` is a dict ``{"zh": ..., "en": ...}`` or a plain string."""

    label: Any
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


_TEXT = {
    "array": {"en": "array of shape {shape}, dtype {dtype}", "zh": "形状 {shape}、dtype {dtype} 的数组"},
    "values_preview": {"en": "{head}: {values}", "zh": "{head}：{values}"},
    "tuple": {"en": "expected a tuple of {n} items, got {got}",
              "zh": "应返回含 {n} 项的元组，实际得到 {got}"},
    "item": {"en": "item {i}: {reason}", "zh": "第 {i} 项：{reason}"},
    "list": {"en": "expected a list of {n} items, got {got}", "zh": "应返回含 {n} 项的列表，实际得到 {got}"},
    "keys": {"en": "expected a dict with the keys {expected}, got {got}",
             "zh": "应返回键为 {expected} 的字典，实际得到 {got}"},
    "key": {"en": "key {name}: {reason}", "zh": "键 {name}：{reason}"},
    "none": {"en": "your function returned None (is the return statement missing?)",
             "zh": "函数返回了 None（是不是漏了 return？）"},
    "not_array": {"en": "expected an array, got {got}", "zh": "应返回数组，实际得到 {got}"},
    "shape": {"en": "shape {got}, expected {expected}", "zh": "形状是 {got}，应为 {expected}"},
    "dtype": {"en": "dtype {got}, expected {expected}", "zh": "dtype 是 {got}，应为 {expected}"},
    "values": {"en": "got {got}, expected {expected}", "zh": "得到 {got}，应为 {expected}"},
    "differ": {"en": "{n} of {size} values differ; the largest difference is at index {index}: "
                     "got {got}, expected {expected} (your array: shape {shape}, dtype {dtype})",
               "zh": "{size} 个值中有 {n} 个不对；差得最多的位置是 {index}：得到 {got}，应为 {expected}"
                     "（你的数组：形状 {shape}，dtype {dtype}）"},
    "tolerance": {"en": " (tolerance: |got - expected| ≤ {atol:.1e} + {rtol:.1e}·|expected|)",
                  "zh": "（容差：|得到 - 应为| ≤ {atol:.1e} + {rtol:.1e}·|应为|）"},
    "precision": {"en": "dtype {got}, less precise than the inputs ({expected}): the result must be at "
                        "least as precise as the inputs",
                  "zh": "dtype 是 {got}，比输入（{expected}）的精度低：结果至少要和输入一样精确"},
    "changed": {"en": "your function changed its input {which}; this exercise asks you to leave the "
                      "inputs as they were (work on new arrays)",
                "zh": "你的函数改动了输入 {which}；这个练习要求输入保持原样（请在新数组上计算）"},
    "nan": {"en": "the result contains NaN ({n} of {size} values), first at index {index} where "
                  "{expected} was expected (your array: shape {shape}, dtype {dtype})",
            "zh": "结果里有 NaN（{size} 个值中有 {n} 个），第一个在位置 {index}，那里应为 {expected}"
                  "（你的数组：形状 {shape}，dtype {dtype}）"},
    "nan_number": {"en": "the result is NaN, expected {expected}", "zh": "结果是 NaN，应为 {expected}"},
    "around": {"en": "; around it, got {got}, expected {expected}",
               "zh": "；附近的值：得到 {got}，应为 {expected}"},
    "not_number": {"en": "expected a number, got {got}", "zh": "应返回一个数，实际得到 {got}"},
    "raised": {"en": "raised {name}: {error}", "zh": "抛出了 {name}：{error}"},
    "not_callable": {"en": "{name}: expected a function, got {got}",
                     "zh": "{name}：需要传入一个函数，收到的是 {got}"},
    "forbidden": {"en": "your function calls {what}, which this exercise asks you not to use; "
                        "build the result from simpler operations",
                  "zh": "你的函数调用了 {what}，这个练习要求不用它，请用更基本的运算写出来"},
    "forbidden_is": {"en": "you passed {what} itself, which this exercise asks you not to use; "
                           "write your own function",
                     "zh": "你传入的就是 {what} 本身，这个练习要求不用它，请自己写一个函数"},
    "loop": {"en": "{where} uses {what} (line {line} of its source); this exercise asks for "
                   "array operations without loops",
             "zh": "{where}用了{what}（源码第 {line} 行），这个练习要求只用数组运算、不写循环"},
    "no_source": {"en": "could not read the source of your function, so it cannot be checked for loops; "
                        "define it with def (or lambda) in a notebook cell and run that cell",
                  "zh": "读不到你的函数的源码，没法检查里面有没有循环；"
                        "请在笔记本的单元格里用 def（或 lambda）定义它，并运行那个单元格"},
    "your_function": {"en": "your function", "zh": "你的函数"},
    "helper": {"en": "your helper {helper}", "zh": "你的辅助函数 {helper} "},
    "ok": {"en": "✓ {name}: all {n} cases pass", "zh": "✓ {name}：{n} 个测试用例全部通过"},
    "correct": {"en": "✓ {name}: correct", "zh": "✓ {name}：正确"},
    "your_answer": {"en": "your answer", "zh": "你的答案"},
}

_LOOP_WORDS = {
    "for": {"en": "a for loop", "zh": " for 循环"},
    "while": {"en": "a while loop", "zh": " while 循环"},
    "comprehension": {"en": "a comprehension", "zh": "推导式"},
    "generator": {"en": "a generator expression", "zh": "生成器表达式"},
    "call": {"en": "{call}, a loop in disguise", "zh": " {call}（换了个样子的循环）"},
}


def _say(key: str, lang: str, **values) -> str:
    return _TEXT[key][lang].format(**values)


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


def _float_sizes(x, out: list, depth: int = 0) -> None:
    if depth > 4:
        return
    if isinstance(x, (np.ndarray, np.generic)):
        if x.dtype.kind == "f":
            out.append(min(x.dtype.itemsize, 8))
        elif x.dtype.kind == "c":
            out.append(min(x.dtype.itemsize // 2, 8))
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
            if x.dtype.kind == "f":
                sizes.append(min(x.dtype.itemsize, 8))
            elif x.dtype.kind == "c":
                sizes.append(min(x.dtype.itemsize // 2, 8))
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
    return _say("precision", lang, got=names.get(min(sizes), "float"), expected=names.get(needed, "float64"))


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
        head = _say("array", lang, shape=x.shape, dtype=x.dtype)
        if 0 < x.size <= 8:
            return _say("values_preview", lang, head=head, values=_fmt_list(x.ravel(), 4))
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
    return _say("around", lang, got=wrap(g), expected=wrap(e))


def _compare_arrays(got: np.ndarray, expected: np.ndarray, rtol, atol, scaled: bool, lang: str):
    shape, dtype = got.shape, got.dtype
    if expected.dtype == np.bool_ or got.dtype == np.bool_:
        if got.dtype != expected.dtype:
            return _say("dtype", lang, got=got.dtype, expected=expected.dtype)
        bad = got != expected
        if not bad.any():
            return None
        index = np.unravel_index(int(np.argmax(bad)), shape)
        return (_say("differ", lang, n=int(bad.sum()), size=got.size, index=_as_index(index),
                     got=_fmt(got[index]), expected=_fmt(expected[index]), shape=shape, dtype=dtype)
                + _around(got, expected, index, 4, lang))
    try:
        g, e = got.astype(np.float64), expected.astype(np.float64)
    except (TypeError, ValueError):
        return _say("not_array", lang, got=f"dtype {got.dtype}")
    if got.size == 0:
        return None
    nan = np.isnan(g) & ~np.isnan(e)
    if nan.any():
        index = np.unravel_index(int(np.argmax(nan)), shape)
        return _say("nan", lang, n=int(nan.sum()), size=g.size, index=_as_index(index),
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
    return (_say("differ", lang, n=int(bad.sum()), size=g.size, index=_as_index(index),
                 got=_fmt(got[index], digits), expected=_fmt(expected[index], digits),
                 shape=shape, dtype=dtype)
            + _around(got, expected, index, digits, lang) + _say("tolerance", lang, rtol=rtol, atol=atol))


def _is_integer(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _compare(got, expected, rtol, atol, scaled: bool, check_dtype: bool, lang: str) -> str | None:
    if got is None and expected is not None:
        return _say("none", lang)
    if isinstance(expected, tuple):
        if isinstance(got, list):            # a shape written as [4, 6] is still the shape
            got = tuple(got)
        if not isinstance(got, tuple) or len(got) != len(expected):
            return _say("tuple", lang, n=len(expected), got=describe(got, lang))
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            reason = _compare(g, e, rtol, atol, scaled, check_dtype, lang)
            if reason:
                return _say("item", lang, i=i, reason=reason)
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return _say("keys", lang, expected=sorted(map(str, expected)), got=describe(got, lang))
        for key in expected:
            reason = _compare(got[key], expected[key], rtol, atol, scaled, check_dtype, lang)
            if reason:
                return _say("key", lang, name=repr(key), reason=reason)
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
                return _say("list", lang, n=len(expected), got=describe(got, lang))
            for i, (g, e) in enumerate(zip(got, expected, strict=True)):
                reason = _compare(g, e, rtol, atol, scaled, check_dtype, lang)
                if reason:
                    return _say("item", lang, i=i, reason=reason)
            return None
    if isinstance(expected, np.ndarray):
        if not isinstance(got, np.ndarray):
            try:
                got = np.asarray(got)
            except (TypeError, ValueError):
                return _say("not_array", lang, got=type(got).__name__)
            if got.dtype == object:
                return _say("not_array", lang, got=describe(got.tolist(), lang))
        if got.shape != expected.shape:
            return _say("shape", lang, got=got.shape, expected=expected.shape)
        if check_dtype and got.dtype != expected.dtype:
            return _say("dtype", lang, got=got.dtype, expected=expected.dtype)
        return _compare_arrays(got, expected, rtol, atol, scaled, lang)
    if isinstance(expected, (bool, np.bool_)):
        ok = isinstance(got, (bool, np.bool_)) and bool(got) == bool(expected)
        return None if ok else _say("values", lang, got=describe(got, lang), expected=_fmt(expected))
    if _is_integer(expected) and _is_integer(got):
        return None if int(got) == int(expected) else _say("values", lang, got=_fmt(got),
                                                            expected=_fmt(expected))
    if isinstance(expected, (int, float, np.number)):
        try:
            g, e = float(got), float(expected)
        except (TypeError, ValueError):
            return _say("not_number", lang, got=describe(got, lang))
        if np.isnan(g) and not np.isnan(e):
            return _say("nan_number", lang, expected=_fmt(e))
        if scaled:
            atol = atol * max(1.0, abs(e) if np.isfinite(e) else 1.0)
        if np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True):
            return None
        digits = _distinct_digits(g, e)
        return (_say("values", lang, got=_fmt(got, digits), expected=_fmt(expected, digits))
                + _say("tolerance", lang, rtol=rtol, atol=atol))
    try:
        same = bool(got == expected)
    except (TypeError, ValueError):
        same = False
    return None if same else _say("values", lang, got=describe(got, lang), expected=describe(expected, lang))


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
    return _compare(got, expected, d_rtol if rtol is None else rtol, d_atol if atol is None else atol,
                    scaled and atol is None, check_dtype, lang)


# ---------------------------------------------------------------------------------------------
# Failing
# ---------------------------------------------------------------------------------------------

def _message(name, label, reason: str, hint, lang: str) -> str:
    reason = reason.rstrip("。.")
    if lang == "zh":
        where = f"。输入：{_pick(label, lang)}。结果：" if label is not None else "："
        text = f"{_pick(name, lang)} 未通过{where}{reason}。"
        if hint:
            text += f"\n提示：{_pick(hint, lang)}"
    else:
        where = f" on input: {_pick(label, lang)}. Result: " if label is not None else ": "
        text = f"{_pick(name, lang)} failed{where}{reason}."
        if hint:
            text += f"\nHint: {_pick(hint, lang)}"
    return text


def fail(name, label, reason, *, hint=None, lang: str | None = None):
    """Raise :class:`CheckFailed` with the usual frame: exercise, input (``label``), reason, hint.

    ``name``, ``label``, ``reason`` and ``hint`` are strings or ``{"zh": ..., "en": ...}`` dicts;
    ``label`` may be ``None`` when the failure concerns no particular input.
    """
    lang = get_language(lang)
    raise CheckFailed(_message(name, label, _pick(reason, lang), hint, lang)) from None


# ---------------------------------------------------------------------------------------------
# Forbidden calls
# ---------------------------------------------------------------------------------------------

def _unwrap_chain(obj, limit: int = 20) -> list:
    """``obj`` and everything it wraps: partial.func, __wrapped__, a bound method's function.

    Only attributes an object really holds are followed (its ``__dict__``), never computed ones:
    this runs on every call the profiler sees, and must neither be slow nor run learner code.
    """
    chain, seen = [], set()
    while obj is not None and id(obj) not in seen and len(chain) < limit:
        chain.append(obj)
        seen.add(id(obj))
        if isinstance(obj, functools.partial):
            obj = obj.func
        elif isinstance(obj, (types.MethodType, staticmethod, classmethod)):
            obj = obj.__func__
        else:
            try:
                namespace = object.__getattribute__(obj, "__dict__")
            except AttributeError:
                break
            obj = namespace.get("__wrapped__") if isinstance(namespace, dict) else None
    return chain


def _display(obj) -> str:
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    module = getattr(obj, "__module__", None) or ""
    if isinstance(obj, np.ufunc) or module.split(".")[0] == "numpy":
        prefix = module.replace("numpy", "np", 1) if module.startswith("numpy.linalg") else "np"
        return f"{prefix}.{getattr(obj, '__name__', name)}"
    return str(name)


class _Forbidden:
    """What to watch for: code objects of Python functions, identities of the other callables."""

    def __init__(self, forbidden: Iterable):
        self.codes: dict = {}      # code object -> shown name
        self.objects: dict = {}    # id(callable) -> (callable, shown name)
        self.silent: dict = {}     # the same, for callables whose calls make no profile event
        self.method_names: set = set()   # names of forbidden methods of C types (ndarray.argsort)
        for f in forbidden:
            if isinstance(f, (types.MethodDescriptorType, types.WrapperDescriptorType)):
                self.method_names.add(f.__name__)
            shown = _display(f)
            chain = _unwrap_chain(f)
            codes = []
            for obj in chain:
                self.objects[id(obj)] = (obj, shown)
                codes.append(getattr(obj, "__code__", None))
                if isinstance(obj, type):
                    codes += [getattr(obj.__dict__.get(attr), "__code__", None)
                              for attr in ("__init__", "__new__", "__call__", "forward")]
            codes = [c for c in codes if isinstance(c, types.CodeType)]
            self.codes.update((c, shown) for c in codes)
            if not codes:
                # a ufunc or a C function: only a reference in the learner's code can show it
                self.silent.update((id(obj), (obj, shown)) for obj in chain)

    def __bool__(self):
        return bool(self.objects)

    def which(self, obj, silent_only: bool = False) -> str | None:
        """The shown name if ``obj`` is, or wraps, a forbidden callable."""
        table = self.silent if silent_only else self.objects
        for o in _unwrap_chain(obj):
            hit = table.get(id(o))
            if hit is not None and hit[0] is o:
                return hit[1]
        return None


def _library_dirs() -> tuple[str, ...]:
    dirs = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}  # the attention_course package
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.abspath(path))
    dirs.add(os.path.dirname(os.path.dirname(os.path.abspath(np.__file__))))
    return tuple(d + os.sep for d in dirs)


# a fresh copy (fresh_copy) takes the directories from the module already loaded
_LIBRARY_DIRS = getattr(sys.modules.get(__name__), "_LIBRARY_DIRS", None) or _library_dirs()


@functools.lru_cache(maxsize=4096)
def _is_learner_code(filename: str) -> bool:
    """Code written by the learner (a notebook cell, a test, a script), not by a library."""
    if filename.startswith("<frozen"):
        return False
    return not os.path.abspath(filename).startswith(_LIBRARY_DIRS) if filename[:1] != "<" else True


# Opcodes that push a name's value, by where the name is looked up, on Python 3.10 to 3.13:
# 3.12 adds LOAD_FAST_CHECK (a local that may be unbound, e.g. bound in a loop or a branch),
# LOAD_FAST_AND_CLEAR (inlined comprehensions) and LOAD_FROM_DICT_OR_* (class bodies) and drops
# LOAD_METHOD and LOAD_CLASSDEREF; 3.13 fuses two loads into LOAD_FAST_LOAD_FAST and a store and a
# load into STORE_FAST_LOAD_FAST, whose argval is a pair of names.
_LOCAL_LOADS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_DEREF", "LOAD_CLASSDEREF",
                "LOAD_CLOSURE", "LOAD_FROM_DICT_OR_DEREF"}
_GLOBAL_LOADS = {"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"}
_LOADS = _LOCAL_LOADS | _GLOBAL_LOADS
_ATTRS = {"LOAD_ATTR", "LOAD_METHOD"}


def _loaded_names(ins) -> list[tuple[str, str]]:
    """``(kind, name)`` for each name the instruction pushes, kind ``"local"`` or ``"global"``."""
    if ins.opname in _LOADS and isinstance(ins.argval, str):
        return [("local" if ins.opname in _LOCAL_LOADS else "global", ins.argval)]
    if ins.opname == "LOAD_FAST_LOAD_FAST" and isinstance(ins.argval, tuple):
        return [("local", n) for n in ins.argval if isinstance(n, str)]
    if ins.opname == "STORE_FAST_LOAD_FAST" and isinstance(ins.argval, tuple) and len(ins.argval) == 2:
        return [("local", ins.argval[1])] if isinstance(ins.argval[1], str) else []
    return []


@functools.lru_cache(maxsize=4096)
def _name_chains(code: types.CodeType) -> tuple:
    """Dotted names the code loads, e.g. ``("global", ("np", "exp"))``, from its bytecode."""
    chains, current = [], None
    for ins in dis.get_instructions(code):
        loaded = _loaded_names(ins)
        if loaded:
            if current:
                chains.append((current[0], tuple(current[1])))
            # of two fused loads only the last can be followed by an attribute
            chains.extend((kind, (name,)) for kind, name in loaded[:-1])
            current = (loaded[-1][0], [loaded[-1][1]])
        elif ins.opname in _ATTRS and current is not None and isinstance(ins.argval, str):
            current[1].append(ins.argval)
        else:
            if current:
                chains.append((current[0], tuple(current[1])))
            current = None
    if current:
        chains.append((current[0], tuple(current[1])))
    return tuple(chains)


_MISSING = object()


def _resolve(frame, op: str, names: tuple):
    """The objects a chain of names reaches, following attributes of modules and classes only."""
    first = names[0]
    if op == "local":
        obj = frame.f_locals.get(first, _MISSING)
    else:
        obj = frame.f_globals.get(first, _MISSING)
        if obj is _MISSING:
            builtins = frame.f_builtins
            obj = builtins.get(first, _MISSING) if isinstance(builtins, dict) else _MISSING
    found = []
    if obj is _MISSING:
        return found
    found.append(obj)
    for attr in names[1:]:
        if not isinstance(obj, (types.ModuleType, type, np.ufunc)):
            break
        try:
            obj = inspect.getattr_static(obj, attr)
        except AttributeError:
            break
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        found.append(obj)
    return found


class _Watcher:
    """The profile function: the first forbidden function reached while it is installed."""

    def __init__(self, forbidden: _Forbidden):
        self.forbidden = forbidden
        self.hit: str | None = None
        self.done = False

    def __call__(self, frame, event, arg):
        if self.hit is not None or self.done:
            return
        if event == "call":
            code = frame.f_code
            shown = self.forbidden.codes.get(code)
            if shown is not None:
                self.hit = shown
            elif self.forbidden.silent and _is_learner_code(code.co_filename):
                # NumPy's ufuncs (np.exp, np.matmul ...) and C functions behind NumPy's dispatch
                # (np.dot ...) are called without a profile event, so the learner's own code is
                # searched for a reference to them, resolved to objects, whatever the name.
                self._scan(frame, code, ("local", "global"))
        elif event == "return" and self.forbidden.silent and _is_learner_code(frame.f_code.co_filename):
            # the locals bound while the function ran (at its call only the arguments were)
            self._scan(frame, frame.f_code, ("local",))
        elif event == "c_call":
            hit = self.forbidden.objects.get(id(arg))
            shown = hit[1] if hit is not None and hit[0] is arg else None
            if shown is None:
                owner = getattr(arg, "__self__", None)
                if isinstance(owner, np.ufunc):            # np.add.reduce when np.add is forbidden
                    shown = self.forbidden.which(owner)
                elif (owner is not None and not isinstance(owner, types.ModuleType)
                      and getattr(arg, "__name__", None) in self.forbidden.method_names):
                    # a method of a C type, e.g. x.argsort when np.ndarray.argsort is forbidden
                    method = inspect.getattr_static(type(owner), arg.__name__, None)
                    shown = self.forbidden.which(method) if method is not None else None
            if shown is not None:
                self.hit = shown


    def _scan(self, frame, code, kinds) -> None:
        for op, names in _name_chains(code):
            if op not in kinds:
                continue
            for obj in _resolve(frame, op, names):
                # a tuple, list or dict of functions counts with its items (for f in (np.exp,) ...)
                items = (obj.values() if isinstance(obj, dict) else obj
                         if isinstance(obj, (tuple, list, set, frozenset)) else ())
                for candidate in (obj, *itertools.islice(items, 64)):
                    shown = self.forbidden.which(candidate, silent_only=True)
                    if shown is not None:
                        self.hit = shown
                        return


@contextlib.contextmanager
def _watching(forbidden: _Forbidden):
    """Install the watcher on this thread, on threads started in the block and (Python 3.12+) on
    the threads already running; put the previous profilers back afterwards."""
    watcher = _Watcher(forbidden)
    if not forbidden:
        yield watcher
        return
    previous, previous_threads = sys.getprofile(), threading.getprofile()
    all_threads = getattr(threading, "setprofile_all_threads", None)     # Python 3.12+
    sys.setprofile(watcher)
    threading.setprofile(watcher)
    if all_threads is not None:
        all_threads(watcher)
    try:
        yield watcher
    finally:
        watcher.done = True              # a thread still running later finds a silent watcher
        if all_threads is not None:
            all_threads(previous_threads)
        threading.setprofile(previous_threads)
        sys.setprofile(previous)


@contextlib.contextmanager
def watch_calls(forbidden, *, name, lang: str | None = None):
    """Raise :class:`CheckFailed` if the code in the ``with`` block calls a forbidden function.

    ``forbidden`` is an iterable of callables: Python functions are recognised by their code
    object, C functions by identity, NumPy ufuncs and C-implemented NumPy functions by a
    reference to them in the learner's own code (notebook cells, not library modules), so the
    name they are bound to does not matter. The profiler that was installed before is put back,
    also when the block raises. ``NotImplementedError`` from the block passes through unchanged.
    """
    lang = get_language(lang)
    spec = _Forbidden(forbidden)
    raised = None
    with _watching(spec) as watcher:
        try:
            yield
        except NotImplementedError:
            raise
        except BaseException as exc:
            raised = exc
    if watcher.hit is not None:
        fail(name, None, _say("forbidden", lang, what=watcher.hit), lang=lang)
    if raised is not None:
        raise raised


@contextlib.contextmanager
def peak_memory():
    """The peak of memory allocated while the block runs, in bytes: ``with peak_memory() as m: ...``
    then ``m["peak"]``. NumPy's arrays count (they are traced by ``tracemalloc``)."""
    import tracemalloc

    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    measured: dict = {}
    try:
        yield measured
    finally:
        measured["peak"] = max(0, tracemalloc.get_traced_memory()[1] - base)
        if not was_tracing:
            tracemalloc.stop()


def run_learner(fn, *args, name, label, forbidden=(), hint=None, lang: str | None = None, **kwargs):
    """Call ``fn(*args, **kwargs)`` the way a check does and return its result.

    The call runs with NumPy warnings silenced (a wrong answer's overflow is reported by the
    comparison, not as a warning) and with ``forbidden`` functions watched (:func:`watch_calls`).
    ``NotImplementedError`` (the stub) is not caught; any other exception becomes
    :class:`CheckFailed` naming the input ``label``, as does ``fn`` being, or wrapping, a
    forbidden function.
    """
    lang = get_language(lang)
    if not callable(fn):
        raise CheckFailed(_say("not_callable", lang, name=_pick(name, lang), got=type(fn).__name__))
    spec = _Forbidden(forbidden)
    shown = spec.which(fn)
    if shown is not None:
        fail(name, label, _say("forbidden_is", lang, what=shown), hint=hint, lang=lang)
    error = None
    with _watching(spec) as watcher:
        try:
            with np.errstate(all="ignore"):
                result = fn(*args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as exc:
            error = exc
    if watcher.hit is not None:
        fail(name, label, _say("forbidden", lang, what=watcher.hit), hint=hint, lang=lang)
    if error is not None:
        fail(name, label, _say("raised", lang, name=type(error).__name__, error=error), hint=hint, lang=lang)
    return result


# ---------------------------------------------------------------------------------------------
# Loops
# ---------------------------------------------------------------------------------------------

_LOOP_CALLS = {"vectorize", "frompyfunc", "apply_along_axis", "apply_over_axes", "fromiter"}
_LOOP_BUILTINS = {"map", "filter"}


def _loop_in(tree: ast.AST):
    """``(kind, line, call)`` of the first loop in ``tree``, or ``None``."""
    nodes = sorted((n for n in ast.walk(tree) if hasattr(n, "lineno")),
                   key=lambda n: (n.lineno, n.col_offset))
    for node in nodes:
        if isinstance(node, (ast.For, ast.AsyncFor)):
            return "for", node.lineno, ""
        if isinstance(node, ast.While):
            return "while", node.lineno, ""
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp)):
            return "comprehension", node.lineno, ""
        if isinstance(node, ast.GeneratorExp):
            return "generator", node.lineno, ""
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _LOOP_BUILTINS | _LOOP_CALLS:
                return "call", node.lineno, func.id
            if isinstance(func, ast.Attribute) and func.attr in _LOOP_CALLS:
                return "call", node.lineno, ast.unparse(func)
            if (isinstance(func, ast.Attribute) and func.attr == "reduce"
                    and isinstance(func.value, ast.Name) and func.value.id == "functools"):
                return "call", node.lineno, "functools.reduce"
    return None


def _parse_piece(source: str) -> ast.AST | None:
    """Parse a piece of source that may be cut out of a longer statement (a lambda's line)."""
    source = textwrap.dedent(source)
    candidates = [source, source.strip()]
    stripped = source.strip()
    # a lambda inside a call or a list: drop a trailing ")", "," or "]" until it parses
    for cut in range(1, min(len(stripped), 40)):
        candidates.append(stripped[:-cut])
    for text in candidates:
        for attempt in (text, f"({text}\n)"):
            try:
                return ast.parse(attempt)
            except SyntaxError:
                continue
    # a lambda in the middle of a line: start at the word lambda
    start = stripped.find("lambda")
    if start > 0:
        return _parse_piece(stripped[start:])
    return None


def _function_tree(fn):
    """The AST node of ``fn``'s own definition, or ``None`` if its source cannot be read."""
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    tree = _parse_piece(source)
    if tree is None:
        return None
    code = fn.__code__
    if code.co_name == "<lambda>":
        lambdas = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
        for node in lambdas:
            try:
                compiled = compile(ast.Expression(node), "<lambda>", "eval")
            except (SyntaxError, ValueError):
                continue
            inner = next((c for c in compiled.co_consts if isinstance(c, types.CodeType)), None)
            if inner is not None and inner.co_code == code.co_code and inner.co_names == code.co_names:
                return node
        # several lambdas on one line that cannot be told apart: judge them all
        return ast.Module(body=[ast.Expr(n) for n in lambdas], type_ignores=[]) if lambdas else None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            return node
    return tree


def _learner_functions(fn, depth: int = 3, seen=None) -> list:
    """``fn`` and the learner-written functions it calls by a global name (helpers), recursively."""
    seen = set() if seen is None else seen
    fn = next((o for o in _unwrap_chain(fn) if isinstance(o, types.FunctionType)), fn)
    if not isinstance(fn, (types.FunctionType, type)):
        # an object with a __call__ written in Python: that method is the learner's function
        call = inspect.getattr_static(type(fn), "__call__", None)
        fn = call if isinstance(call, types.FunctionType) else fn
    if not isinstance(fn, types.FunctionType) or fn.__code__ in seen:
        return []
    seen.add(fn.__code__)
    found = [fn]
    if depth > 0:
        names: set = set()
        stack = [fn.__code__]
        while stack:
            code = stack.pop()
            names.update(code.co_names)
            stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        for n in sorted(names):
            helper = fn.__globals__.get(n)
            if (isinstance(helper, types.FunctionType)
                    and _is_learner_code(helper.__code__.co_filename)):
                found += _learner_functions(helper, depth - 1, seen)
    return found


def assert_no_loops(fn, *, name, lang: str | None = None) -> None:
    """Raise :class:`CheckFailed` if ``fn`` (or a helper of the learner's it calls) loops.

    Looks at the source (AST): ``for``, ``while``, comprehensions, generator expressions, and calls
    to ``np.vectorize``, ``map``, ``filter``, ``np.frompyfunc``, ``np.apply_along_axis``,
    ``np.apply_over_axes``, ``np.fromiter`` and ``functools.reduce``. If the source cannot be read
    the check fails and says so, rather than pass without looking.
    """
    lang = get_language(lang)
    functions = _learner_functions(fn)
    if not functions:
        if callable(fn) and not _is_python(fn):
            return            # a NumPy or C function has no Python loop of the learner's
        fail(name, None, _say("no_source", lang), lang=lang)
    for f in functions:
        tree = _function_tree(f)
        if tree is None:
            fail(name, None, _say("no_source", lang), lang=lang)
        found = _loop_in(tree)
        if found is not None:
            kind, line, call = found
            what = _LOOP_WORDS[kind][lang].format(call=call)
            where = (_TEXT["your_function"][lang] if f is functions[0]
                     else _say("helper", lang, helper=f.__name__))
            fail(name, None, _say("loop", lang, where=where, what=what, line=line), lang=lang)


def _is_python(fn) -> bool:
    return any(isinstance(o, types.FunctionType) for o in _unwrap_chain(fn))


# ---------------------------------------------------------------------------------------------
# The two checks every notebook uses
# ---------------------------------------------------------------------------------------------

def _same(got, wrong) -> bool:
    """Whether the learner's answer equals a known wrong answer (NaN where it has NaN)."""
    try:
        g, w = np.asarray(got), np.asarray(wrong)
        if g.shape != w.shape:
            return False
        if w.dtype == np.bool_ or g.dtype == np.bool_:
            return g.dtype == w.dtype and bool(np.array_equal(g, w))
        return bool(np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-4, atol=1e-6,
                                equal_nan=True))
    except (TypeError, ValueError):
        return False


def _diagnose(got, expected, variants, default):
    """The hint of the first known mistake whose answer on this input equals ``got``.

    A mistake that gives the right answer on this input (an inverted mask when there is no mask)
    says nothing about the learner's answer and is skipped.
    """
    for make, hint in variants:
        try:
            with np.errstate(all="ignore"):
                wrong = make()
        except Exception:          # a mistake that cannot even run on this input
            continue
        if not _same(wrong, expected) and _same(got, wrong):
            return hint
    return default


def _only_dtype_differs(got, expected) -> bool:
    try:
        return compare(np.asarray(got).astype(expected.dtype), expected) is None
    except (TypeError, ValueError, AttributeError):
        return False


def _same_value(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype == b.dtype and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same_value, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    try:
        return bool(a == b) or (a != a and b != b)
    except Exception:
        return True                       # objects that cannot be compared are not judged


def _changed_argument(learner, case, args, kwargs) -> str | None:
    """The name of the first argument the call changed (compared with the case's own copy)."""
    try:
        names = list(inspect.signature(learner).parameters)
    except (TypeError, ValueError):
        names = []
    for i, (before, after) in enumerate(zip(case.args, args, strict=True)):
        if not _same_value(before, after):
            return names[i] if i < len(names) else f"#{i}"
    for key in case.kwargs:
        if not _same_value(case.kwargs[key], kwargs[key]):
            return key
    return None


def check_function(learner: Callable, reference: Callable, cases, *, name, hint=None,
                   lang: str | None = None, rtol: float | None = None, atol: float | None = None,
                   check_dtype: bool = False, forbidden=(), no_loops: bool = False,
                   mistakes: Callable | None = None, dtype_hint=None,
                   tolerance: Callable | None = None, inputs_unchanged: bool = False) -> None:
    """Compare ``learner(*case.args, **case.kwargs)`` with ``reference(...)`` on every case.

    The one loop over cases that every check uses: each case's arguments are deep-copied before
    the learner's function sees them, the call is watched for ``forbidden`` functions
    (:func:`run_learner`), the result is compared (:func:`compare`'s rules) and the first case that
    differs raises, naming the input.

    Parameters
    ----------
    learner, reference : callable
    cases : iterable of Case
    name : str or dict
        What the exercise is called in messages.
    hint : str or dict, optional
        Added to every failure message.
    lang : {"zh", "en"}, optional
        Default: the language set with :func:`set_language`.
    rtol, atol : float, optional
        Tolerances for numeric results. Default: those of :func:`input_precision` of the case's
        inputs, so float32 inputs are judged as float32 and float64 ones tightly (with no floating
        input at all, those of the result's dtype). Whatever the
        tolerance, a floating result less precise than the inputs fails (:func:`precision_reason`).
    check_dtype : bool
        Also require the same dtype.
    forbidden : iterable of callables
        Functions the learner's function must not be or call (:func:`watch_calls`); compose them
        from :func:`attention_course.checks.forbidden.of`.
    no_loops : bool
        Require a function without loops (:func:`assert_no_loops`).
    mistakes : callable, optional
        ``mistakes(*case.args, **case.kwargs) -> [(make, hint), ...]``: the usual wrong answers on
        that input (``make()`` computes one). On a failing case, the hint of the first mistake
        the learner's answer equals replaces ``hint``.
    dtype_hint : str or dict, optional
        The hint when the values are right and only the dtype differs (with ``check_dtype``).
    tolerance : callable, optional
        ``tolerance(case, got, expected) -> (rtol, atol)`` for each case, ``atol`` absolute (not
        scaled), in place of ``rtol``/``atol``: for answers whose error grows with the input.
    inputs_unchanged : bool
        Fail when the learner's function changed an argument (for an exercise whose text says
        "do not change the inputs"); the arguments are compared with a copy after the call.

    Raises
    ------
    CheckFailed
        On the first case that differs or raises. ``NotImplementedError`` from an unfinished
        stub is not caught: it stays the exercise's own error.
    """
    lang = get_language(lang)
    if not callable(learner):
        raise CheckFailed(_say("not_callable", lang, name=_pick(name, lang), got=type(learner).__name__))
    cases = list(cases)
    loops_checked = False
    for case in cases:
        expected = reference(*case.args, **case.kwargs)
        args = copy.deepcopy(case.args)
        kwargs = copy.deepcopy(case.kwargs)
        got = run_learner(learner, *args, name=name, label=case.label, forbidden=forbidden, hint=hint,
                          lang=lang, **kwargs)
        if inputs_unchanged:
            which = _changed_argument(learner, case, args, kwargs)
            if which is not None:
                fail(name, case.label, _say("changed", lang, which=which), hint=hint, lang=lang)
        if no_loops and not loops_checked:
            # after the first call, so that an unfinished stub raises its NotImplementedError first
            assert_no_loops(learner, name=name, lang=lang)
            loops_checked = True
        reason = precision_reason(got, case.args, case.kwargs, lang=lang)
        if reason is None and tolerance is not None:
            c_rtol, c_atol = tolerance(case, got, expected)
            reason = _compare(got, expected, c_rtol, c_atol, False, check_dtype, lang)
        elif reason is None:
            # float inputs decide; without any (counts, sizes), the result's own dtype does
            needed = input_precision(case.args, case.kwargs)
            d_rtol, d_atol = _TOLERANCES[needed] if needed in _TOLERANCES else tolerance_for(got)
            reason = _compare(got, expected, d_rtol if rtol is None else rtol,
                              d_atol if atol is None else atol, atol is None, check_dtype, lang)
        if reason:
            found = hint
            if dtype_hint is not None and _only_dtype_differs(got, expected):
                found = dtype_hint
            elif mistakes is not None:
                found = _diagnose(got, expected, mistakes(*case.args, **case.kwargs), hint)
            fail(name, case.label, reason, hint=found, lang=lang)
    if no_loops and not loops_checked:
        assert_no_loops(learner, name=name, lang=lang)
    print(_say("ok", lang, name=_pick(name, lang), n=len(cases)))


def check_value(got, expected, *, name, hint=None, lang: str | None = None,
                rtol: float | None = None, atol: float | None = None) -> None:
    """Compare one answer (a number, a shape, an array) with the expected one (:func:`compare`)."""
    lang = get_language(lang)
    reason = compare(got, expected, rtol=rtol, atol=atol, lang=lang)
    if reason:
        fail(name, _TEXT["your_answer"], reason, hint=hint, lang=lang)
    print(_say("correct", lang, name=_pick(name, lang)))


# ---------------------------------------------------------------------------------------------
# Checks that the cells above them have not altered (best effort)
# ---------------------------------------------------------------------------------------------

_CHECKS_DIR = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = __name__.rpartition(".")[0]                      # attention_course.checks
#: The modules a check needs, loaded afresh with it: the machinery and the registry.
_SHARED = ("_core", "forbidden")


_CODE: dict = {}          # path -> (mtime_ns, size, code object compiled from that file)


def _load_file(name: str):
    """A new module object for ``attention_course.checks.<name>``, executed from its file.

    The file is compiled again whenever it changed on disk; its code object is kept otherwise
    (compiling ``_core`` takes longer than running a check).
    """
    import importlib.util

    path = os.path.join(_CHECKS_DIR, name.rpartition(".")[2] + ".py")
    stat = os.stat(path)
    cached = _CODE.get(path)
    if cached is None or cached[:2] != (stat.st_mtime_ns, stat.st_size):
        with open(path, "rb") as f:
            cached = (stat.st_mtime_ns, stat.st_size, compile(f.read(), path, "exec", dont_inherit=True))
        _CODE[path] = cached
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    exec(cached[2], module.__dict__)
    return module


def fresh_copy(module_name: str) -> types.ModuleType:
    """A fresh copy of a check module, loaded from the installed file with fresh copies of the
    check machinery (``_core``) and of the registry (``forbidden``).

    Nothing an earlier cell did to the imported modules' attributes reaches it: a ``check_*``
    replaced with ``setattr``, a patched ``check_function`` or a shortened list of forbidden
    functions. The copy keeps the session's language and raises the one :class:`CheckFailed`.
    This is best effort: code running in the same process can always reach further (the library
    functions a check compares with, NumPy, the interpreter itself). The guarantee is the
    instructor's re-check in a fresh interpreter (``instructor/recheck.py``).
    """
    package = sys.modules[_PACKAGE]
    saved_modules = {leaf: sys.modules.get(f"{_PACKAGE}.{leaf}") for leaf in _SHARED}
    saved_attrs = {leaf: package.__dict__.get(leaf, _MISSING) for leaf in _SHARED}
    try:
        for leaf in _SHARED:
            fresh = _load_file(f"{_PACKAGE}.{leaf}")
            if leaf == "_core":
                fresh.CheckFailed = CheckFailed              # one exception class for everyone
                fresh._language = _language
            sys.modules[f"{_PACKAGE}.{leaf}"] = fresh        # what `from ._core import` finds
            package.__dict__[leaf] = fresh                   # what `from . import forbidden` finds
        return _load_file(module_name)
    finally:
        for leaf in _SHARED:
            if saved_modules[leaf] is None:
                sys.modules.pop(f"{_PACKAGE}.{leaf}", None)
            else:
                sys.modules[f"{_PACKAGE}.{leaf}"] = saved_modules[leaf]
            if saved_attrs[leaf] is _MISSING:
                package.__dict__.pop(leaf, None)
            else:
                package.__dict__[leaf] = saved_attrs[leaf]


class _FreshChecks(types.ModuleType):
    """A check module whose ``check_*`` functions come from :func:`fresh_copy` at each access."""

    def __getattribute__(self, name):
        if name.startswith("check_") and not name.startswith("check__"):
            own = types.ModuleType.__getattribute__(self, "__name__")
            return _shown_plainly(getattr(fresh_copy(own), name))
        return types.ModuleType.__getattribute__(self, name)


def _shown_plainly(check):
    """``check``, whose unanswered stub's ``NotImplementedError`` IPython shows without the frames
    of the check machinery (and the paths of the machine running it)."""
    if not callable(check):
        return check

    @functools.wraps(check)
    def call(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except NotImplementedError as exc:
            text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            exc._render_traceback_ = lambda: [text]
            raise
    return call



def matching_hint(learner, args, variants, default, forbidden=(), *, rtol: float = 1e-6,
                  atol: float = 1e-9):
    """The hint of the first known mistake that ``learner(*args)`` reproduces, else ``default``.

    ``variants`` is a list of ``(wrong, hint)``: ``wrong`` is what that mistake returns for
    ``args`` (an array, a number, or a tuple of them), compared to ``rtol`` / ``atol``. A learner
    that raises anything but ``NotImplementedError`` gets ``default``.
    """
    def close(got, wrong) -> bool:
        try:
            if isinstance(wrong, tuple):
                return (isinstance(got, (tuple, list)) and len(got) == len(wrong)
                        and all(close(g, w) for g, w in zip(got, wrong, strict=True)))
            g, w = np.asarray(got, dtype=np.float64), np.asarray(wrong, dtype=np.float64)
            return g.shape == w.shape and bool(np.allclose(g, w, rtol=rtol, atol=atol))
        except Exception:
            return False

    if not callable(learner):
        return default
    try:
        with np.errstate(all="ignore"):
            got = run_learner(learner, *args, name="", label="", forbidden=forbidden)
    except NotImplementedError:
        raise
    except Exception:
        return default
    for wrong, hint in variants:
        if close(got, wrong):
            return hint
    return default


def fresh_on_call(module_name: str) -> None:
    """Make ``nbNN_checks.check_x`` (the name a notebook's import cell binds) resolve to a fresh
    copy of the check at every call (:func:`fresh_copy`). Every check module ends with
    ``fresh_on_call(__name__)``; a fresh copy itself (not in ``sys.modules``) is left alone."""
    module = sys.modules.get(module_name)
    if module is not None and sys._getframe(1).f_globals is module.__dict__:
        module.__class__ = _FreshChecks
