"""The two checks every notebook uses: the loop over cases and the check of one answer.

:func:`check_function` runs the learner's function on each :class:`Case` (watched,
:mod:`.watcher`), compares with the library's result (:mod:`.comparison`) and either prints one
line or fails naming the input; :func:`check_value` does the same for one answer. When an answer is
wrong, the hint of the known mistake it reproduces replaces the general one (``mistakes``,
:func:`matching_hint`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .comparison import compare, compare_within, default_tolerance, precision_reason
from .language import CheckFailed, fail, get_language, pick, say
from .loops import assert_no_loops
from .watcher import run_learner

__all__ = ["Case", "check_function", "check_value", "matching_hint"]


@dataclass
class Case:
    """One input to try. ``label`` is a dict ``{"zh": ..., "en": ...}`` or a plain string."""

    label: Any
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


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


def check_function(learner: Callable, reference: Callable, cases, *, name, hint=None,
                   lang: str | None = None, rtol: float | None = None, atol: float | None = None,
                   check_dtype: bool = False, forbidden=(), no_loops: bool = False,
                   mistakes: Callable | None = None, dtype_hint=None,
                   tolerance: Callable | None = None) -> None:
    """Compare ``learner(*case.args, **case.kwargs)`` with ``reference(...)`` on every case.

    The one loop over cases that every check uses: the learner's function gets copies of each
    case's arguments and is watched for ``forbidden`` functions (:func:`run_learner`, which also
    fails a call that changed its inputs), the result is compared (:func:`compare`'s rules) and the
    first case that differs raises, naming the input.

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

    Raises
    ------
    CheckFailed
        On the first case that differs or raises. ``NotImplementedError`` from an unfinished
        stub is not caught: it stays the exercise's own error.
    """
    lang = get_language(lang)
    if not callable(learner):
        raise CheckFailed(say("not_callable", lang, name=pick(name, lang), got=type(learner).__name__))
    cases = list(cases)
    loops_checked = False
    for case in cases:
        expected = reference(*case.args, **case.kwargs)
        got = run_learner(learner, *case.args, name=name, label=case.label, forbidden=forbidden,
                          hint=hint, lang=lang, **case.kwargs)
        if no_loops and not loops_checked:
            # after the first call, so that an unfinished stub raises its NotImplementedError first
            assert_no_loops(learner, name=name, lang=lang)
            loops_checked = True
        reason = precision_reason(got, case.args, case.kwargs, lang=lang)
        if reason is None and tolerance is not None:
            c_rtol, c_atol = tolerance(case, got, expected)
            reason = compare_within(got, expected, c_rtol, c_atol, False, check_dtype, lang)
        elif reason is None:
            d_rtol, d_atol = default_tolerance(got, case.args, case.kwargs)
            reason = compare_within(got, expected, d_rtol if rtol is None else rtol,
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
    print(say("ok", lang, name=pick(name, lang), n=len(cases)))


def check_value(got, expected, *, name, hint=None, lang: str | None = None,
                rtol: float | None = None, atol: float | None = None) -> None:
    """Compare one answer (a number, a shape, an array) with the expected one (:func:`compare`)."""
    lang = get_language(lang)
    reason = compare(got, expected, rtol=rtol, atol=atol, lang=lang)
    if reason:
        fail(name, say("your_answer", lang), reason, hint=hint, lang=lang)
    print(say("correct", lang, name=pick(name, lang)))


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
