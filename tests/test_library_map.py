"""The library's map is kept true: the package docstring and CONTRIBUTING.md name every module.

A module is a ``.py`` file or a subpackage directly under ``src/attention_course/`` (private ones
too: a maintainer needs to know where the shared validation lives). A new module fails these
tests until it has its line in both maps.
"""

import re

import pytest

import attention_course
from notebook_tools import ROOT

PACKAGE = ROOT / "src" / "attention_course"
MODULES = sorted({p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
                 | {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()})


def test_the_modules_are_found():
    assert {"attention", "multihead", "checks", "widgets"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_the_package_docstring_maps_every_module(module):
    doc = attention_course.__doc__
    assert re.search(rf":mod:`\.{module}`", doc), (
        f"attention_course.{module} is missing from the map in src/attention_course/__init__.py: "
        f"add a line '- :mod:`.{module}` - what it is for (notebook)'")


@pytest.mark.parametrize("module", MODULES)
def test_contributing_maps_every_module(module):
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert re.search(rf"`{module}(\.py|/)?`", text), (
        f"attention_course.{module} is missing from the layout in CONTRIBUTING.md")


def test_the_maps_name_no_module_that_is_gone():
    named = set(re.findall(r":mod:`\.(\w+)`", attention_course.__doc__))
    assert named <= set(MODULES), f"the package docstring names modules that are gone: {named - set(MODULES)}"
