"""What every exercise check shares: cases, comparison, bilingual messages."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_LANGUAGES = ("zh", "en")
_language = "en"


class CheckFailed(AssertionError):
    """The learner's answer is wrong; the message says on which input and why."""


def set_language(lang: str) -> None:
    """Language of the check messages for the rest of the session: ``"zh"`` or ``"en"``."""
    global _language
    if lang not in _LANGUAGES:
        raise ValueError(f"lang must be one of {_LANGUAGES}; got {lang!r}")
    _language = lang


def get_language(lang: str | None = None) -> str:
    if lang is None:
        return _language
    if lang not in _LANGUAGES:
        raise ValueError(f"lang must be one of {_LANGUAGES}; got {lang!r}")
    return lang


def _pick(text, lang: str) -> str:
    return text[lang] if isinstance(text, dict) else str(text)


@dataclass
class Case:
    """One input to try. ``label`` is a dict ``{"zh": ..., "en": ...}`` or a plain string."""

    label: Any
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


_REASONS = {
    "array": {"en": "array of shape {shape}, dtype {dtype}: {values}",
              "zh": "形状 {shape}、dtype {dtype} 的数组：{values}"},
    "tuple": {"en": "expected a tuple of {n} items, got {got}",
              "zh": "应返回含 {n} 项的元组，实际得到 {got}"},
    "item": {"en": "item {i}: {reason}", "zh": "第 {i} 项：{reason}"},
    "not_array": {"en": "expected an array, got {got}", "zh": "应返回数组，实际得到 {got}"},
    "shape": {"en": "shape {got}, expected {expected}", "zh": "形状是 {got}，应为 {expected}"},
    "dtype": {"en": "dtype {got}, expected {expected}", "zh": "dtype 是 {got}，应为 {expected}"},
    "values": {"en": "got {got}, expected {expected}", "zh": "得到 {got}，应为 {expected}"},
    "nan": {"en": "the result contains NaN: {got}", "zh": "结果里有 NaN：{got}"},
    "worst": {"en": "; largest difference at index {index}", "zh": "；差得最多的位置是 {index}"},
    "not_number": {"en": "expected a number, got {got}", "zh": "应返回一个数，实际得到 {got}"},
    "raised": {"en": "raised {name}: {error}", "zh": "抛出了 {name}：{error}"},
}


def _say(key: str, lang: str, **values) -> str:
    return _REASONS[key][lang].format(**values)


def _describe(x, lang: str, limit: int = 6) -> str:
    if isinstance(x, np.ndarray):
        flat = np.round(x.ravel()[:limit].astype(float), 4).tolist() if x.dtype.kind in "fiub" else []
        more = " ..." if x.size > limit else ""
        return _say("array", lang, shape=x.shape, dtype=x.dtype, values=f"{flat}{more}")
    return repr(x)


def _compare(got, expected, rtol, atol, check_dtype, lang: str = "en") -> str | None:
    """None when equal enough, else a short reason in the learner's language."""
    if isinstance(expected, tuple):
        if not isinstance(got, tuple) or len(got) != len(expected):
            return _say("tuple", lang, n=len(expected), got=_describe(got, lang))
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            reason = _compare(g, e, rtol, atol, check_dtype, lang)
            if reason:
                return _say("item", lang, i=i, reason=reason)
        return None
    if isinstance(expected, np.ndarray):
        if not isinstance(got, np.ndarray):
            try:
                got = np.asarray(got)
            except Exception:
                return _say("not_array", lang, got=type(got).__name__)
        if got.shape != expected.shape:
            return _say("shape", lang, got=got.shape, expected=expected.shape)
        if check_dtype and got.dtype != expected.dtype:
            return _say("dtype", lang, got=got.dtype, expected=expected.dtype)
        if expected.dtype == np.bool_ or got.dtype == np.bool_:
            if got.dtype != expected.dtype or not np.array_equal(got, expected):
                return _say("values", lang, got=_describe(got, lang),
                            expected=_describe(expected, lang))
            return None
        try:
            g, e = got.astype(np.float64), expected.astype(np.float64)
        except (TypeError, ValueError):
            return _say("not_array", lang, got=got.dtype)
        if np.isnan(g).any() and not np.isnan(e).any():
            return _say("nan", lang, got=_describe(got, lang))
        if not np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True):
            worst = np.unravel_index(np.nanargmax(np.abs(g - e)), e.shape) if e.size else ()
            return (_say("values", lang, got=_describe(got, lang), expected=_describe(expected, lang))
                    + _say("worst", lang, index=tuple(int(i) for i in worst)))
        return None
    if isinstance(expected, (int, float, np.number)) and not isinstance(expected, bool):
        try:
            ok = np.isclose(float(got), float(expected), rtol=rtol, atol=atol)
        except (TypeError, ValueError):
            return _say("not_number", lang, got=_describe(got, lang))
        return None if ok else _say("values", lang, got=repr(got), expected=repr(expected))
    return None if got == expected else _say("values", lang, got=repr(got), expected=repr(expected))


def check_function(learner: Callable, reference: Callable, cases, *, name, hint=None,
                   lang: str | None = None, rtol: float = 1e-5, atol: float = 1e-8,
                   check_dtype: bool = False) -> None:
    """Compare ``learner(*case.args, **case.kwargs)`` with ``reference(...)`` on every case.

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
    rtol, atol : float
        Tolerances for numeric results.
    check_dtype : bool
        Also require the same dtype.

    Raises
    ------
    CheckFailed
        On the first case that differs or raises. ``NotImplementedError`` from an unfinished
        stub is not caught: it stays the exercise's own error.
    """
    lang = get_language(lang)
    if not callable(learner):
        raise CheckFailed(
            {"zh": f"{_pick(name, lang)}：需要传入一个函数，收到的是 {type(learner).__name__}",
             "en": f"{_pick(name, lang)}: expected a function, got {type(learner).__name__}"}[lang]
        )
    cases = list(cases)
    for case in cases:
        expected = reference(*case.args, **case.kwargs)
        args = copy.deepcopy(case.args)
        kwargs = copy.deepcopy(case.kwargs)
        try:
            # A wrong answer may overflow; its NaN is reported below, not as a warning.
            with np.errstate(all="ignore"):
                got = learner(*args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as exc:
            _fail(name, case, lang, hint, _say("raised", lang, name=type(exc).__name__, error=exc))
        reason = _compare(got, expected, rtol, atol, check_dtype, lang)
        if reason:
            _fail(name, case, lang, hint, reason)
    print({"zh": f"✓ {_pick(name, lang)}：{len(cases)} 个测试用例全部通过",
           "en": f"✓ {_pick(name, lang)}: all {len(cases)} cases pass"}[lang])


def check_value(got, expected, *, name, hint=None, lang: str | None = None,
                rtol: float = 1e-9, atol: float = 0.0) -> None:
    """Compare one answer (a number, a shape, an array) with the expected one."""
    lang = get_language(lang)
    reason = _compare(got, expected, rtol, atol, False, lang)
    if reason:
        _fail(name, Case({"zh": "你的答案", "en": "your answer"}), lang, hint, reason)
    print({"zh": f"✓ {_pick(name, lang)}：正确", "en": f"✓ {_pick(name, lang)}: correct"}[lang])


def _fail(name, case: Case, lang: str, hint, reason: str):
    label = _pick(case.label, lang)
    if lang == "zh":
        text = f"{_pick(name, lang)} 未通过。输入：{label}。结果：{reason}。"
        if hint:
            text += f"\n提示：{_pick(hint, lang)}"
    else:
        text = f"{_pick(name, lang)} failed on input: {label}. Result: {reason}."
        if hint:
            text += f"\nHint: {_pick(hint, lang)}"
    raise CheckFailed(text) from None
