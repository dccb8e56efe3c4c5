"""Every module of the library runs the examples of its docstrings, and they show what it returns.

The modules are found by walking the package (subpackages included), so a new module's examples
run without this file being edited.
"""

from __future__ import annotations

import doctest
import importlib
import io
import pkgutil

import numpy as np
import pytest

import attention_course

# NumPy's own defaults (numpy.set_printoptions), given in full: an example prints an array as a fresh
# interpreter does, whatever a test that ran before in the same process set.
PRINT_OPTIONS = dict(edgeitems=3, threshold=1000, floatmode="maxprec", precision=8, suppress=False,
                     linewidth=75, nanstr="nan", infstr="inf", sign="-", formatter=None, legacy=False)

# A long array may wrap at another column than the one its example was written with.
OPTION_FLAGS = doctest.NORMALIZE_WHITESPACE

# Modules whose examples start a process or run a notebook, which the unit tier does not
# (conftest.py): module name -> why. Their examples are skipped here, not in their docstrings.
NEEDS_A_PROCESS: dict[str, str] = {}

# Modules whose examples load the real model of notebook 09 (several seconds each time): there
# load() gives the model that the test process loads once (conftest.py's course_model). The
# examples' forward passes still run; load() itself is tested in test_pretrained.py.
LOAD_THE_MODEL = {"attention_course.pretrained", "attention_course.widgets.nb09"}

_FINDER = doctest.DocTestFinder()


def _doctests(name: str) -> list[doctest.DocTest]:
    """The docstring tests of module ``name`` that hold examples, each with its own copy of the
    module's namespace and ``np``."""
    module = importlib.import_module(name)
    return [t for t in _FINDER.find(module, extraglobs={"np": np}) if t.examples]


def _cannot_import(name: str):
    # walk_packages would otherwise pass over a subpackage that fails to import, and its modules
    raise ImportError(f"{name} cannot be imported")


def _module_names() -> list[str]:
    package = attention_course
    walk = pkgutil.walk_packages(package.__path__, package.__name__ + ".", onerror=_cannot_import)
    return [package.__name__] + [info.name for info in walk]


MODULES = [name for name in _module_names() if _doctests(name)]


def test_the_walk_reaches_the_modules_and_the_subpackages():
    assert {"attention_course.backprop", "attention_course.gradcheck", "attention_course.optim",
            "attention_course.positional"} <= set(MODULES)
    assert any(name.startswith("attention_course.widgets.") for name in MODULES)
    assert set(NEEDS_A_PROCESS) <= set(MODULES), "a skipped module has no examples (or is gone)"
    assert LOAD_THE_MODEL <= set(MODULES), "a module listed as loading the model has no examples"


@pytest.mark.parametrize("name", MODULES)
def test_examples(name, request, monkeypatch):
    if name in NEEDS_A_PROCESS:
        pytest.skip(NEEDS_A_PROCESS[name])
    if name in LOAD_THE_MODEL:
        from attention_course import pretrained

        model = request.getfixturevalue("course_model")
        monkeypatch.setattr(pretrained, "load", lambda path=None: model)
    runner = doctest.DocTestRunner(optionflags=OPTION_FLAGS)
    report = io.StringIO()
    with np.printoptions(**PRINT_OPTIONS):
        for test in _doctests(name):
            runner.run(test, out=report.write)
    assert runner.tries > 0, f"{name}: every example is skipped"
    if runner.failures:
        pytest.fail(f"{runner.failures} of {runner.tries} examples of {name} failed:\n"
                    f"{report.getvalue()}", pytrace=False)
