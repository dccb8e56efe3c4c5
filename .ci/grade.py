"""Grade completed student notebooks by running them: a check cell that raises scores 0.

Usage: python .ci/grade.py path/to/submission [more paths ...]
       (a path is a notebook or a folder of notebooks)

For each notebook it prints every check cell's grade_id, points and result, then the total.
It runs the notebooks in a fresh kernel each and never modifies them. For a class with a gradebook,
use nbgrader's own `nbgrader autograde` instead (see the README).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient, output_widget

# See .ci/execute_notebooks.py: avoids an occasional stall on cells with Output widgets.
output_widget.OutputWidget.sync_state = lambda self: None


def run_checks(path: Path):
    """Execute a notebook (errors allowed) and read each check cell's outcome.

    Returns the executed notebook and a list of ``(grade_id, points, error)`` where ``error`` is
    None for a passing check, else ``(ename, first line of the message)``.
    """
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    results = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("grade"):
            continue
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        error = None
        if errors:
            error = (errors[0].ename, (errors[0].evalue.splitlines() or [""])[0][:100])
        results.append((meta["grade_id"], float(meta.get("points", 0)), error))
    return nb, results


def grade(path: Path) -> tuple[float, float]:
    _, results = run_checks(path)
    earned = possible = 0.0
    for grade_id, points, error in results:
        possible += points
        if error:
            print(f"  {grade_id:<24} 0/{points:g}  {error[0]}: {error[1]}")
        else:
            earned += points
            print(f"  {grade_id:<24} {points:g}/{points:g}")
    return earned, possible


def main(args: list[str]) -> int:
    if not args:
        print(__doc__)
        return 2
    paths = []
    for a in args:
        p = Path(a)
        paths += sorted(p.glob("*.ipynb")) if p.is_dir() else [p]
    total = [0.0, 0.0]
    for p in paths:
        print(p)
        e, t = grade(p)
        total[0] += e
        total[1] += t
        print(f"  = {e:g}/{t:g}")
    print(f"total {total[0]:g}/{total[1]:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
