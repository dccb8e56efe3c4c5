"""Every course notebook follows the same shape: stored executed, clean, with checked exercises."""

import re

import pytest

from notebook_tools import LANGS, load, nbgrader_meta, notebook_names, source, tags

CASES = [(lang, name) for name in notebook_names() for lang in LANGS]
ALLOWED_TAGS = {"nbval-ignore-output", "nbval-skip", "raises-exception"}


@pytest.fixture(params=CASES, ids=[f"{lang}/{name}" for lang, name in CASES])
def nb(request):
    lang, name = request.param
    return load(lang, name)


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def test_opens_with_markdown_and_imports_the_library(nb):
    assert nb["cells"][0]["cell_type"] == "markdown"
    assert any("attention_course" in source(c) for c in code_cells(nb)), "must import the library"


def test_stored_executed_top_to_bottom_without_errors_or_stderr(nb):
    counts = [c.get("execution_count") for c in code_cells(nb)]
    assert counts == list(range(1, len(counts) + 1)), f"execution counts {counts}"
    for c in code_cells(nb):
        for out in c.get("outputs", []):
            assert out["output_type"] != "error", f"stored error in:\n{source(c)}"
            assert not (out["output_type"] == "stream" and out.get("name") == "stderr"), (
                f"stderr in stored output of:\n{source(c)}\n{''.join(out.get('text', ''))}"
            )
    assert "widgets" not in nb.get("metadata", {}), "widget state must be stripped"


def test_only_known_tags(nb):
    for c in nb["cells"]:
        assert set(tags(c)) <= ALLOWED_TAGS, f"unknown tags {tags(c)}"


def test_widget_cells_ignore_output_and_other_cells_compare(nb):
    for c in code_cells(nb):
        shows_widget = any(
            "application/vnd.jupyter.widget-view+json" in o.get("data", {})
            or "VBox(children=" in "".join(o.get("data", {}).get("text/plain", ""))
            for o in c.get("outputs", [])
        )
        if shows_widget:
            assert "nbval-ignore-output" in tags(c), f"widget cell not tagged:\n{source(c)}"


def test_at_least_three_exercises_with_solution_and_locked_check(nb):
    solutions = [c for c in code_cells(nb) if nbgrader_meta(c).get("solution")]
    grades = [c for c in code_cells(nb) if nbgrader_meta(c).get("grade")]
    assert len(solutions) >= 3, f"only {len(solutions)} exercises"
    assert len(grades) >= len(solutions)
    ids = [nbgrader_meta(c)["grade_id"] for c in solutions + grades]
    assert len(ids) == len(set(ids)), f"duplicate grade_id in {ids}"
    for c in solutions:
        src = source(c)
        assert "### BEGIN SOLUTION" in src and "### END SOLUTION" in src, src
        assert re.search(r"^def \w+\(", src, re.M), "an exercise defines a function the check calls"
        meta = nbgrader_meta(c)
        assert meta.get("grade") is False and meta.get("locked") is False
    for c in grades:
        meta = nbgrader_meta(c)
        assert meta.get("locked") is True and meta.get("points", 0) > 0 and not meta.get("solution")
        assert re.search(r"\bcheck_\w+\(", source(c)), f"check cell calls no check:\n{source(c)}"
    # Each check cell follows its solution cell, before the next exercise.
    order = [("S" if nbgrader_meta(c).get("solution") else "G") for c in code_cells(nb)
             if nbgrader_meta(c).get("solution") or nbgrader_meta(c).get("grade")]
    assert order[0] == "S" and "SS" not in "".join(order), f"exercise order {order}"

