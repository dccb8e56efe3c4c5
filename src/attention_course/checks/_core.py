"""What every exercise check shares: cases, comparison, bilingual messages."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

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


def _describe(x, limit: int = 6) -> str:
    if isinstance(x, np.ndarray):
        flat = np.round(x.ravel()[:limit].astype(float), 4).tolist() if x.dtype.kind in "fiub" else []
        more = " ..." if x.size > limit else ""
        return f"array of shape {x.shape}, dtype {x.dtype}: {flat}{more}"
    return repr(x)


def _compare(got, expected, rtol, atol, check_dtype) -> str | None:
    """None when equal enough, else a short reason in English (numbers speak both languages)."""
    if isinstance(expected, tuple):
        if not isinstance(got, tuple) or len(got) != len(expected):
            return f"expected a tuple of {len(expected)} items, got {_describe(got)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            reason = _compare(g, e, rtol, atol, check_dtype)
            if reason:
                return f"item {i}: {reason}"
        return None
    if isinstance(expected, np.ndarray):
        if not isinstance(got, np.ndarray):
            try:
                got = np.asarray(got)
            except Exception:
                return f"expected an array, got {type(got).__name__}"
        if got.shape != expected.shape:
            return f"shape {got.shape}, expected {expected.shape}"
        if check_dtype and got.dtype != expected.dtype:
            return f"dtype {got.dtype}, expected {expected.dtype}"
        if expected.dtype == np.bool_ or got.dtype == np.bool_:
            if got.dtype != expected.dtype or not np.array_equal(got, expected):
                return f"got {_describe(got)}, expected {_describe(expected)}"
            return None
        g, e = got.astype(np.float64), expected.astype(np.float64)
        if np.isnan(g).any() and not np.isnan(e).any():
            return f"the result contains NaN: {_describe(got)}"
        if not np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True):
            worst = np.unravel_index(np.nanargmax(np.abs(g - e)), e.shape) if e.size else ()
            return (f"got {_describe(got)}, expected {_describe(expected)}; largest difference at "
                    f"index {tuple(int(i) for i in worst)}")
        return None
    if isinstance(expected, (int, float, np.number)) and not isinstance(expected, bool):
        try:
            ok = np.isclose(float(got), float(expected), rtol=rtol, atol=atol)
        except (TypeError, ValueError):
            return f"expected a number, got {_describe(got)}"
        return None if ok else f"got {got!r}, expected {expected!r}"
    return None if got == expected else f"got {got!r}, expected {expected!r}"


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
            {"zh": f"{_pick(name, lang)}:需要传入一个函数,收到的是 {type(learner).__name__}",
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
            _fail(name, case, lang, hint, f"raised {type(exc).__name__}: {exc}")
        reason = _compare(got, expected, rtol, atol, check_dtype)
        if reason:
            _fail(name, case, lang, hint, reason)
    print({"zh": f"✓ {_pick(name, lang)}:{len(cases)} 个测试用例全部通过",
           "en": f"✓ {_pick(name, lang)}: all {len(cases)} cases pass"}[lang])


def check_value(got, expected, *, name, hint=None, lang: str | None = None,
                rtol: float = 1e-9, atol: float = 0.0) -> None:
    """Compare one answer (a number, a shape, an array) with the expected one."""
    lang = get_language(lang)
    reason = _compare(got, expected, rtol, atol, False)
    if reason:
        _fail(name, Case({"zh": "你的答案", "en": "your answer"}), lang, hint, reason)
    print({"zh": f"✓ {_pick(name, lang)}:正确", "en": f"✓ {_pick(name, lang)}: correct"}[lang])


def _fail(name, case: Case, lang: str, hint, reason: str):
    label = _pick(case.label, lang)
    if lang == "zh":
        text = f"{_pick(name, lang)} 未通过。输入:{label}。结果:{reason}。"
        if hint:
            text += f"\n提示:{_pick(hint, lang)}"
    else:
        text = f"{_pick(name, lang)} failed on input: {label}. Result: {reason}."
        if hint:
            text += f"\nHint: {_pick(hint, lang)}"
    raise CheckFailed(text) from None
