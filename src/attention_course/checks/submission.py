"""What the re-check reads of a notebook: the course's checks, the learner's cells, the code it keeps.

Shared by the instructor's re-check (``instructor/recheck.py``, ``make grade``) and the learner's
progress (:mod:`attention_course.workbook.progress`): both hand :func:`~.isolated.grade` the same
job, built here from a course notebook (which checks, with which answer names) and a learner's
notebook (the code cells the learner wrote, of which only definitions, imports and constants are
kept: :func:`kept_statement`).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

from .loops import PARSING

__all__ = ["CALL", "IMPORT_CELL", "CourseNotebook", "course_notebook_of", "kept_code", "kept_statement",
           "parse_cell", "read_notebook", "student_cells"]

#: A check cell: ``nb03_checks.check_attention(my_attention)``.
CALL = re.compile(r"^(nb\d\d)_checks\.(check_\w+)\((\w+)\)\s*$")
#: The line that makes a cell the notebook's import cell.
IMPORT_CELL = re.compile(r"from attention_course\.checks import nb\d\d as nb\d\d_checks")


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def read_notebook(path: Path) -> dict:
    """The notebook as JSON; ``ValueError`` when it is not a readable notebook."""
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not a readable notebook ({type(exc).__name__}: {exc})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("not a notebook: no list of cells")
    return nb


@dataclass
class CourseNotebook:
    """What the re-check takes from the course's own copy of a notebook."""

    name: str
    lang: str
    import_cell: str
    checks: list[dict]          # grade_id, module, function, answer, points
    sources: set[str]           # every code cell's source, to leave the course's own cells out

    @property
    def max_score(self) -> float:
        return sum(c["points"] for c in self.checks)


def course_notebook_of(nb: dict, lang: str, name: str) -> CourseNotebook:
    """What the re-check needs of the course's own notebook ``nb`` (read as JSON)."""
    code = [c for c in nb["cells"] if c.get("cell_type") == "code"]
    import_cell = next((_source(c) for c in code if IMPORT_CELL.search(_source(c))), "")
    checks = []
    for cell in code:
        meta = _meta(cell)
        match = CALL.match(_source(cell).strip())
        if meta.get("grade") and match:
            module, function, answer = match.groups()
            checks.append(dict(grade_id=meta.get("grade_id", function), module=module, function=function,
                               answer=answer, points=float(meta.get("points", 0))))
    return CourseNotebook(name, lang, import_cell, checks, {_source(c).strip() for c in code})


def student_cells(nb: dict, course: CourseNotebook) -> list[tuple[int, str]]:
    """``(cell index, source)`` of every code cell the student wrote: not locked, not the course's."""
    out = []
    for i, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") != "code":
            continue
        meta, src = _meta(cell), _source(cell)
        if meta.get("locked") or meta.get("grade"):
            continue
        if src.strip() in course.sources and not meta.get("solution"):
            continue
        out.append((i, src))
    return out


def _is_constant(node) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_constant(node.operand)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_is_constant(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return (all(k is not None and _is_constant(k) for k in node.keys)
                and all(map(_is_constant, node.values)))
    return False


def kept_statement(node: ast.stmt) -> bool:
    """Whether a top-level statement is of the kinds correct answers use."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        return (value is not None and all(isinstance(t, ast.Name) for t in targets)
                and (_is_constant(value) or isinstance(value, ast.Lambda)))
    return False


def parse_cell(src: str) -> ast.Module | None:
    """A code cell's syntax tree, or None when it is not Python (IPython magics and shell lines,
    ``%time`` or ``!pip``, are left out first)."""
    # IPython magics and shell lines (%time, !pip) are not Python: leave those lines out
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in src.splitlines()]
    try:
        with PARSING:            # one parse at a time in this process (see its comment)
            return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def kept_code(cells: list[tuple[int, str]]) -> tuple[list[str], list[str]]:
    """The statements the re-check runs (as source) and a note for each cell that does not parse."""
    kept, notes = [], []
    for index, src in cells:
        tree = parse_cell(src)
        if tree is None:
            notes.append(f"cell {index} is not valid Python; nothing of it is re-checked")
            continue
        kept += [ast.unparse(node) for node in tree.body if kept_statement(node)]
    return kept, notes
