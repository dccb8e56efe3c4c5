"""The exercise version of a solution cell: one stripping, for the learner's workbook and beside
the instructor's hand-out (``nbgrader_config.py``'s ``ClearSolutions.code_stub`` is the same stub,
and a test checks that nbgrader's stripping gives the same cells).

A solution cell of ``notebooks/`` is a code cell whose metadata says ``nbgrader.solution`` and whose
code holds its answer between ``### BEGIN SOLUTION`` and ``### END SOLUTION``; the lines outside
(the function's signature, its shape comment) stay.
"""

from __future__ import annotations

__all__ = ["BEGIN", "END", "STUB", "exercise_id", "is_solution", "solution_code", "stub_source"]

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
#: What replaces a solution, in both languages (nbgrader_config.py's code_stub says the same).
STUB = "# 在这里写你的代码 · YOUR CODE HERE\nraise NotImplementedError()"


def is_solution(cell: dict) -> bool:
    """A code cell holding an exercise's solution."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("solution")) and not meta.get("grade")


def exercise_id(cell: dict) -> str:
    """``nb03-ex1`` for the solution cell ``nb03-ex1-solution`` (its nbgrader grade_id)."""
    grade_id = cell["metadata"]["nbgrader"]["grade_id"]
    return grade_id.removesuffix("-solution")


def _source(cell_or_text) -> str:
    if isinstance(cell_or_text, str):
        return cell_or_text
    src = cell_or_text.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def solution_code(cell_or_text) -> str:
    r"""The lines between the markers, as written (indentation kept).

    >>> solution_code("def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION")
    '    return 2 * x'
    """
    inside, out = False, []
    for line in _source(cell_or_text).split("\n"):
        if line.strip() == BEGIN:
            inside = True
        elif line.strip() == END:
            inside = False
        elif inside:
            out.append(line)
    return "\n".join(out)


def stub_source(cell_or_text) -> str:
    r"""The cell's code with each solution replaced by :data:`STUB`, at the solution's indentation.

    >>> print(stub_source("def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"))
    def f(x):
        # 在这里写你的代码 · YOUR CODE HERE
        raise NotImplementedError()
    """
    out, inside = [], False
    for line in _source(cell_or_text).split("\n"):
        if line.strip() == BEGIN:
            inside = True
            indent = line[:len(line) - len(line.lstrip())]
            out.extend(indent + stub_line for stub_line in STUB.split("\n"))
        elif line.strip() == END:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"a solution starts with {BEGIN!r} and has no {END!r}")
    return "\n".join(out)
