"""The language of the check messages, their texts, and how a check fails (:class:`CheckFailed`).

A check speaks the notebook's language, ``"zh"`` or ``"en"``: the session's (:func:`set_language`)
or the one its ``lang`` argument names. Every text a check can show is here in both languages
(:func:`say`), and :func:`fail` frames every failure the same way: the exercise, the input, the
reason, the hint.
"""

from __future__ import annotations

__all__ = ["CheckFailed", "answered", "fail", "get_language", "in_workbook", "label", "pick", "say",
           "set_language", "set_workbook"]


_LANGUAGES = ("zh", "en")
_language = "en"
_workbook = False


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


def set_workbook(on: bool = True) -> None:
    """In the learner's workbook (its first cell calls this), a check of an exercise not answered
    yet says so and lets the notebook go on; everywhere else (the source notebooks, the hand-out,
    nbgrader) the stub's ``NotImplementedError`` stops it, so an unanswered stub never passes."""
    global _workbook
    _workbook = bool(on)


def in_workbook() -> bool:
    """Whether :func:`set_workbook` is on for this session."""
    return _workbook


def answered(fn) -> bool:
    """Whether ``fn`` is an answer, not the workbook's stub (which raises ``NotImplementedError``):
    a cell that uses an exercise's function can use the library's while it is not answered yet."""
    import inspect

    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        return True
    return "raise NotImplementedError" not in source


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


def pick(text, lang: str) -> str:
    """``text`` in ``lang``: a ``{"zh": ..., "en": ...}`` dict's entry, anything else as a string."""
    return str(text[lang]) if isinstance(text, dict) else str(text)


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
    "changed": {"en": "your function changed its input {which}; an answer returns new arrays and "
                      "leaves its inputs as they were (work on a copy: x = x.copy())",
                "zh": "你的函数改动了输入 {which}；答案要返回新的数组，输入保持原样"
                      "（要改就先复制一份：x = x.copy()）"},
    "timed out": {"en": "did not return within {seconds:g} s, and was stopped",
                  "zh": "{seconds:g} 秒内没有返回，已被停止"},
    "exceeded memory": {"en": "used more memory than the {limit} allowed, and was stopped",
                        "zh": "用的内存超过了允许的 {limit}，已被停止"},
    "exited": {"en": "ended the process that ran it ({how}) instead of returning",
               "zh": "没有返回，而是结束了运行它的进程（{how}）"},
    "returned something else": {"en": "returned something that cannot be compared: {what}",
                                "zh": "返回的东西没法比较：{what}"},
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
    "not_answered": {"en": "… not answered yet: write your function in the cell above, run it, then run "
                           "this check again (the notebook goes on without it)",
                     "zh": "… 还没有作答：在上面的单元格里写好函数并运行，再运行这个检查"
                           "（没有它，笔记本也会接着往下跑）"},
    "correct": {"en": "✓ {name}: correct", "zh": "✓ {name}：正确"},
    "your_answer": {"en": "your answer", "zh": "你的答案"},
}


def say(key: str, lang: str, **values) -> str:
    """The check message ``key`` in ``lang``, its ``{placeholders}`` filled with ``values``."""
    return _TEXT[key][lang].format(**values)


def _message(name, label, reason: str, hint, lang: str) -> str:
    reason = reason.rstrip("。.")
    if lang == "zh":
        where = f"。输入：{pick(label, lang)}。结果：" if label is not None else "："
        text = f"{pick(name, lang)} 未通过{where}{reason}。"
        if hint:
            text += f"\n提示：{pick(hint, lang)}"
    else:
        where = f" on input: {pick(label, lang)}. Result: " if label is not None else ": "
        text = f"{pick(name, lang)} failed{where}{reason}."
        if hint:
            text += f"\nHint: {pick(hint, lang)}"
    return text


def fail(name, label, reason, *, hint=None, lang: str | None = None):
    """Raise :class:`CheckFailed` with the usual frame: exercise, input (``label``), reason, hint.

    ``name``, ``label``, ``reason`` and ``hint`` are strings or ``{"zh": ..., "en": ...}`` dicts;
    ``label`` may be ``None`` when the failure concerns no particular input.
    """
    lang = get_language(lang)
    raise CheckFailed(_message(name, label, pick(reason, lang), hint, lang)) from None
