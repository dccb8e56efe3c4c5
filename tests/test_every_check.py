"""What every exercise check does, read off the notebooks' own check cells.

Each check cell of every notebook calls ``nbNN_checks.check_x(answer)``; for each such pair this
file proves: the notebook's solution passes in the notebook's language, with one line of output;
the student copy's stub stops with its NotImplementedError; something that is not a function is
refused with a message; a wrong answer is reported in Chinese for the Chinese notebook. What each
check catches is tested beside its notebook, in tests/test_nbNN.py.
"""

import importlib
import re

import pytest

from attention_course.checks import CheckFailed
from notebook_tools import LANGS, failure, load, load_solutions, nbgrader_meta, notebook_names, source, stub

CALL = re.compile(r"^(nb\d\d)_checks\.(check_\w+)\((\w+)\)\s*$")


def check_calls(lang: str, name: str) -> list[tuple[str, str, str]]:
    """(module, check function, answer name) of every check cell, in order."""
    calls = []
    for cell in load(lang, name)["cells"]:
        if cell["cell_type"] == "code" and nbgrader_meta(cell).get("grade"):
            match = CALL.match(source(cell).strip())
            assert match, f"{lang}/{name}: check cell is not one call of a check:\n{source(cell)}"
            calls.append(match.groups())
    return calls


CASES = [(lang, name, *call) for name in notebook_names() for lang in LANGS
         for call in check_calls(lang, name)]
IDS = [f"{lang}/{name[:2]}-{answer}" for lang, name, _, _, answer in CASES]


def check_of(module: str, function: str):
    return getattr(importlib.import_module(f"attention_course.checks.{module}"), function)


@pytest.mark.parametrize("name", notebook_names())
def test_both_languages_check_the_same_answers_with_the_same_checks(name):
    assert check_calls("zh", name) == check_calls("en", name)
    assert set(load_solutions(name, "zh")) == set(load_solutions(name, "en"))


@pytest.mark.parametrize(("lang", "name", "module", "function", "answer"), CASES, ids=IDS)
def test_the_notebook_solution_passes_in_one_line(lang, name, module, function, answer, capsys):
    solution = load_solutions(name, lang)[answer]
    check_of(module, function)(solution, lang=lang)
    out = capsys.readouterr().out
    assert out.startswith("✓") and out.count("\n") == 1, out


@pytest.mark.parametrize(("lang", "name", "module", "function", "answer"), CASES, ids=IDS)
def test_the_stub_stops_with_its_own_error(lang, name, module, function, answer):
    with pytest.raises(NotImplementedError):
        check_of(module, function)(stub, lang=lang)


@pytest.mark.parametrize(("lang", "name", "module", "function", "answer"), CASES, ids=IDS)
def test_something_that_is_not_a_function_is_refused(lang, name, module, function, answer):
    with pytest.raises(CheckFailed):
        check_of(module, function)(42, lang=lang)


@pytest.mark.parametrize(("lang", "name", "module", "function", "answer"), CASES, ids=IDS)
def test_a_wrong_answer_is_reported_in_the_notebooks_language(lang, name, module, function, answer):
    msg = failure(check_of(module, function), lambda *args, **kwargs: None, lang=lang)
    if lang == "zh":
        assert "未通过" in msg, msg
    else:
        assert "failed" in msg, msg


@pytest.mark.parametrize(("lang", "name", "module", "function", "answer"), CASES, ids=IDS)
def test_an_answer_that_changes_its_input_fails_naming_the_rule(lang, name, module, function, answer):
    """The right result, but an input array (or list) changed in place: every check that hands the
    answer something changeable fails it, naming the input and the rule."""
    import copy

    import numpy as np

    solution = load_solutions(name, lang)[answer]
    changed = []

    def answer_that_changes(*args, **kwargs):
        result = solution(*copy.deepcopy(args), **copy.deepcopy(kwargs))
        for a in (*args, *kwargs.values()):
            if isinstance(a, np.ndarray) and a.size and a.flags.writeable:
                a.flat[0] = not a.flat[0] if a.dtype == bool else a.flat[0] + 1
            elif isinstance(a, list):
                a.append(a[-1] if a else 0)
            else:
                continue
            changed.append(True)
            break
        return result

    try:
        check_of(module, function)(answer_that_changes, lang=lang)
    except CheckFailed as exc:
        if not changed:            # nothing changeable; this wrapper's own loop broke a loop rule
            assert "loop" in str(exc) or "循环" in str(exc), str(exc)
            pytest.skip("no input of this check can be changed in place")
        rule = "答案要返回新的数组，输入保持原样" if lang == "zh" else "leaves its inputs as they were"
        assert rule in str(exc), str(exc)
    else:
        assert not changed, "an answer that changed its input passed"
        pytest.skip("no input of this check can be changed in place")
