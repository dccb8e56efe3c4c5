"""One workbook notebook from one source notebook: exercises as stubs, hints and the solution on request.

What changes from ``notebooks/<lang>/NN_*.ipynb`` (everything else, outputs included, stays, so a
learner sees the figures before running anything):

- the first code cell also calls ``checks.set_workbook()``: a check of an exercise not answered yet
  says so and the notebook goes on (:func:`attention_course.checks.set_workbook`);
- each solution cell becomes its stub (:func:`.stubs.stub_source`), without outputs, and its check
  cell loses its stored output (it was the solution's);
- after each check cell, one Markdown cell: the exercise's hints, then its solution, each in a
  collapsed ``<details>`` block. A solution is never a code cell: "Run All" never runs it and never
  overwrites the learner's function.
"""

from __future__ import annotations

import copy
import json
from importlib import resources

from .stubs import BEGIN, END, exercise_id, is_solution, stub_source

__all__ = ["HELP_SUFFIX", "WORKBOOK_LINE", "help_cell", "hints", "with_hints", "workbook_notebook"]

#: Appended to the first code cell of a workbook notebook.
WORKBOOK_LINE = "checks.set_workbook()  # 工作簿 · workbook: an exercise not done lets the notebook go on"
#: The id of an exercise's help cell: its check cell's id and this.
HELP_SUFFIX = "-help"

_WORDS = {"en": {"hint": "Hint {n}", "solution": "Solution (try first)"},
          "zh": {"hint": "提示 {n}", "solution": "参考答案（先自己试）"}}


def hints() -> dict:
    """``{exercise id: {"zh": [...], "en": [...]}}`` from the package (``data/hints.json``); ``{}``
    where there is none yet."""
    path = resources.files("attention_course").joinpath("data/hints.json")
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def help_cell(exercise: str, solution: str | None, lang: str, cell_id: str, all_hints: dict) -> dict:
    """The Markdown cell after an exercise's check: its hints, then its solution (``None``: no
    solution, as in the hand-out), each collapsed."""
    words = _WORDS[lang]
    blocks = []
    for n, hint in enumerate(all_hints.get(exercise, {}).get(lang, []), start=1):
        blocks.append(f"<details><summary>{words['hint'].format(n=n)}</summary>\n\n{hint}\n\n</details>")
    if solution is not None:
        code = solution.rstrip()
        blocks.append(f"<details><summary>{words['solution']}</summary>\n\n```python\n{code}\n```\n\n"
                      "</details>")
    return {"cell_type": "markdown", "id": cell_id, "metadata": {"workbook": {"help": exercise}},
            "source": _lines("\n\n".join(blocks))}


def _is_check(cell: dict) -> bool:
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("grade"))


def with_hints(source: dict, lang: str, all_hints: dict | None = None) -> dict:
    """``source`` as it is, solutions included, with each exercise's hints (no solution) in a
    Markdown cell after its check: the source of the instructor's hand-out, which nbgrader strips."""
    all_hints = hints() if all_hints is None else all_hints
    nb = copy.deepcopy(source)
    cells, pending = [], None
    for cell in nb["cells"]:
        cells.append(cell)
        if is_solution(cell):
            pending = exercise_id(cell)
        elif pending and cell["cell_type"] == "code" and _is_check(cell):
            if all_hints.get(pending, {}).get(lang):
                cells.append(help_cell(pending, None, lang, cell.get("id", pending) + "-hints", all_hints))
            pending = None
    nb["cells"] = cells
    return nb


def workbook_notebook(source: dict, lang: str, all_hints: dict | None = None) -> dict:
    """The workbook version of the notebook ``source`` (a dict as read from its JSON)."""
    if lang not in _WORDS:
        raise ValueError(f"lang must be 'zh' or 'en'; got {lang!r}")
    all_hints = hints() if all_hints is None else all_hints
    nb = copy.deepcopy(source)
    cells, first_code = [], True
    pending = None                                       # (exercise, solution) awaiting its check
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and first_code:
            first_code = False
            text = "".join(cell["source"]).rstrip("\n")
            cell["source"] = _lines(text + "\n" + WORKBOOK_LINE)
        if is_solution(cell):
            full = "".join(cell["source"])
            pending = (exercise_id(cell), "\n".join(line for line in full.split("\n")
                                                   if line.strip() not in (BEGIN, END)))
            cell["source"] = _lines(stub_source(cell))
            cell["outputs"], cell["execution_count"] = [], None
            cell["metadata"]["workbook"] = {"exercise": pending[0]}
            cells.append(cell)
            continue
        if pending and cell["cell_type"] == "code" and _is_check(cell):
            cell["outputs"], cell["execution_count"] = [], None
            cells.append(cell)
            cells.append(help_cell(*pending, lang, cell.get("id", pending[0]) + HELP_SUFFIX, all_hints))
            pending = None
            continue
        cells.append(cell)
    nb["cells"] = cells
    return nb
