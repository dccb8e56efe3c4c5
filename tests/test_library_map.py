"""The library's map is kept true: the package docstring and CONTRIBUTING.md name every module.

A module is a ``.py`` file or a subpackage directly under ``src/attention_course/`` (private ones
too: a maintainer needs to know where the shared validation lives). A new module fails these
tests until it has its line in both maps.
"""

import importlib.util
import re

import pytest

import attention_course
from notebook_tools import ROOT

PACKAGE = ROOT / "src" / "attention_course"
APPENDIX = "## Appendix: what the library has"

spec = importlib.util.spec_from_file_location("library_table", ROOT / "maintainer" / "library_table.py")
library_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(library_table)

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
    # the layout above the appendix, whose generated table names the teaching modules anyway
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8").split(APPENDIX)[0]
    assert re.search(rf"`{module}(\.py|/)?`", text), (
        f"attention_course.{module} is missing from the layout in CONTRIBUTING.md")


def test_the_maps_name_no_module_that_is_gone():
    named = set(re.findall(r":mod:`\.(\w+)`", attention_course.__doc__))
    assert named <= set(MODULES), f"the package docstring names modules that are gone: {named - set(MODULES)}"


def test_contributing_holds_the_generated_table_of_what_the_library_has():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert APPENDIX in text
    assert library_table.stored(text) == library_table.table(), (
        "CONTRIBUTING.md's table of what the library has is out of date: run make library-table")


def test_the_table_names_each_function_with_its_arguments_and_leaves_out_the_machinery():
    table = library_table.table()
    assert "| `sliding_window_mask(L, window, S=None, causal=False)` | Boolean mask" in table
    assert "`GroupedQueryAttention.parameter_shapes(embed_dim, num_heads, num_kv_heads, bias=True)`" in table
    assert "`MultiHeadAttention.num_parameters` (property)" in table
    assert "0x" not in table                        # no default printed as a memory address
    for machinery in library_table.MACHINERY:
        assert f"### `{machinery}`" not in table
    assert "_softmax_scores(" not in table          # a private function is not listed


def test_every_public_function_method_and_property_says_what_it_does():
    silent = [what for module in library_table.teaching_modules()
              for what, text in library_table.rows(module) if not text.strip()]
    assert not silent, f"give these a docstring (its first sentence goes in CONTRIBUTING's table): {silent}"


def test_a_dataclass_without_a_docstring_counts_as_silent():
    from dataclasses import dataclass

    @dataclass
    class Point:
        x: int

    assert library_table.summary(Point) == ""


def test_a_new_public_function_changes_the_table(monkeypatch):
    from attention_course import attention

    def windowed_sum(x, window=2):
        """Sum each run of ``window`` neighbours: an example."""
    windowed_sum.__module__ = attention.__name__
    before = library_table.table()
    monkeypatch.setattr(attention, "windowed_sum", windowed_sum, raising=False)
    after = library_table.table()
    assert after != before
    assert "| `windowed_sum(x, window=2)` | Sum each run of `window` neighbours: an example. |" in after


def test_write_puts_the_table_between_the_markers_once(tmp_path):
    page = tmp_path / "CONTRIBUTING.md"
    page.write_text(f"# Contributing\n\n{library_table.BEGIN}\nstale\n{library_table.END}\nafter\n",
                    encoding="utf-8")
    assert library_table.write(page) is True
    assert library_table.write(page) is False
    text = page.read_text(encoding="utf-8")
    assert library_table.stored(text) == library_table.table()
    assert text.startswith("# Contributing\n") and text.endswith(f"{library_table.END}\nafter\n")
    assert "stale" not in text
    with pytest.raises(ValueError, match="no library table"):
        library_table.stored("# Contributing\n")


@pytest.mark.parametrize("module", sorted(p.stem for p in (PACKAGE / "checks").glob("*.py")
                                          if p.stem != "__init__" and not re.fullmatch(r"nb\d\d", p.stem)))
def test_contributing_names_every_module_of_the_check_machinery(module):
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8").split(APPENDIX)[0]
    assert re.search(rf"`(checks/)?{module}\.py`", text), (
        f"checks/{module}.py is missing from CONTRIBUTING.md's table of the machinery")

