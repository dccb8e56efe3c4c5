"""The student build: solutions gone, outputs cleared, and every check fails on the stub."""

import importlib.util

import nbformat
import pytest

from notebook_tools import LANGS, ROOT, nbgrader_meta, notebook_names

pytestmark = pytest.mark.skipif(importlib.util.find_spec("nbgrader") is None,
                                reason="nbgrader is an instructor tool (requirements-dev.txt)")

NAMES = notebook_names()
CASES = [(lang, name) for name in NAMES for lang in LANGS]


def load_tool(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / ".ci" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def student_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("build") / "student"
    written = load_tool("build_student").build(out)
    assert len(written) == len(CASES)
    return out


@pytest.mark.parametrize("lang, name", CASES)
def test_student_copy_has_no_solutions_and_no_outputs(student_dir, lang, name):
    nb = nbformat.read(student_dir / lang / name, as_version=4)
    text = nbformat.writes(nb)
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    solutions = [c for c in nb.cells if nbgrader_meta(c).get("solution")]
    assert solutions and all("raise NotImplementedError()" in c.source for c in solutions)
    for c in nb.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None
        if nbgrader_meta(c).get("grade"):
            assert c.metadata.get("editable") is False      # locked for the learner


@pytest.mark.parametrize("lang, name", CASES)
def test_executed_student_copy_fails_only_on_the_stubs(student_dir, lang, name):
    nb, results = load_tool("grade").run_checks(student_dir / lang / name)
    # The grader scores the untouched student copy 0: every check fails on its stub.
    assert results and all(error is not None for _, _, error in results), results
    errors = []
    for i, c in enumerate(nb.cells):
        for out in c.get("outputs", []):
            if out.output_type == "error":
                errors.append((i, out.ename))
    grade_cells = [i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade")]
    n_exercises = sum(1 for c in nb.cells if nbgrader_meta(c).get("solution"))
    assert [e for _, e in errors] == ["NotImplementedError"] * n_exercises, errors
    assert {i for i, _ in errors} <= set(grade_cells), "only check cells may fail"
    failing = {i for i, _ in errors}
    # every check cell that follows a stub fails
    for i in grade_cells:
        assert i in failing, f"check cell {i} passed on the stub"

