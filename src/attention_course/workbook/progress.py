"""The learner's progress: every exercise of the workbook, re-checked out of process.

Each workbook notebook goes through the same re-check as an instructor's grade
(:func:`attention_course.checks.isolated.grade`: the checks here, the learner's answers in a worker
process of their own), not through the outputs stored in the notebook, which may be old or edited.
An exercise is *passed*, *failed*, *not tried* (its stub is still there), or stopped (timed out,
...); a notebook that does not parse says so. ``python -m attention_course.workbook --progress``
(make progress) prints the table.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ..checks import isolated
from ..checks.submission import course_notebook_of, kept_code, read_notebook, student_cells

__all__ = ["NOT_PARSING", "NOT_TRIED", "notebook_progress", "progress", "table"]

NOT_TRIED, NOT_PARSING = "not tried", "does not parse"
_WORDS = {"zh": {"passed": "通过", "failed": "未通过", NOT_TRIED: "还没做", NOT_PARSING: "无法读取",
                 "head": "笔记本 · 练习", "sum": "{p} / {n} 道练习通过"},
          "en": {"passed": "passed", "failed": "failed", NOT_TRIED: NOT_TRIED, NOT_PARSING: NOT_PARSING,
                 "head": "notebook · exercise", "sum": "{p} of {n} exercises passed"}}


def notebook_progress(path: Path, source: Path, lang: str) -> dict:
    """``{exercise id: status}`` of one workbook notebook, re-checked against its source notebook;
    ``{"": "does not parse"}`` when it cannot be read."""
    course = course_notebook_of(read_notebook(source), lang, source.name)
    try:
        nb = read_notebook(path)
    except ValueError:
        return {"": NOT_PARSING}
    code, _ = kept_code(student_cells(nb, course))
    homes = tempfile.mkdtemp(prefix="progress-")
    try:
        job = dict(folder=str(path.parent.resolve()), lang=lang, import_cell=course.import_cell, code=code,
                   checks=[{k: c[k] for k in ("grade_id", "module", "function", "answer", "points")}
                           for c in course.checks], homes=homes)
        results = isolated.grade(job)
    finally:
        shutil.rmtree(homes, ignore_errors=True)
    out = {}
    for grade_id, entry in results["checks"].items():
        status = entry["status"]
        out[grade_id.removesuffix("-check")] = NOT_TRIED if status == "not answered" else status
    return out


def progress(workbook: Path, source: Path, lang: str) -> dict:
    """``{notebook name: {exercise id: status}}`` of one language's workbook."""
    out = {}
    for src in sorted((Path(source) / lang).glob("*.ipynb")):
        path = Path(workbook) / lang / src.name
        out[src.name] = notebook_progress(path, src, lang) if path.exists() else {"": "missing"}
    return out


def table(result: dict, lang: str) -> list[str]:
    """The lines to print: one per exercise (or per notebook that cannot be read), and a total."""
    words = _WORDS[lang]
    lines = [words["head"]]
    passed = total = 0
    width = max((len(name) for name in result), default=0) - len(".ipynb")
    for name, exercises in result.items():
        for exercise, status in exercises.items():
            shown = words.get(status, status)
            lines.append(f"  {name.removesuffix('.ipynb'):<{width}}  {exercise or '-':<9} {shown}")
            total += bool(exercise)
            passed += status == "passed"
    lines.append(words["sum"].format(p=passed, n=total))
    return lines
