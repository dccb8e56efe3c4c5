"""Move the files nbgrader cannot grade out of ``submitted/``, before ``nbgrader autograde``.

Usage: python instructor/quarantine.py course/submitted [--to course/quarantine]

nbgrader's autograde grades a student's assignment as one piece: one notebook that is not
readable JSON stops it, and the student's correct other notebooks are lost with it. Run this
between ``nbgrader collect`` and ``nbgrader autograde``: every file in
``submitted/<student>/<assignment>/`` that is not a readable notebook, or whose name is not one of
the assignment's notebooks, moves to ``quarantine/<student>/<assignment>/`` (nothing is deleted),
and is listed with its status, ``unreadable`` or ``unknown name``. The student's other notebooks
then grade as usual.

Exit status: 0 when nothing had to move, 1 when something moved (look at it), 2 when the folder does
not exist.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recheck import LANGS, NOTEBOOK_DIR, read_notebook  # noqa: E402 - beside this file


def problems(submitted: Path) -> list[tuple[Path, str]]:
    """``(file, status)`` for every file under ``submitted/<student>/<assignment>/`` nbgrader cannot grade."""
    found = []
    for path in sorted(submitted.glob("*/*/*")):
        assignment = path.parent.name
        lang = assignment[-2:]
        if (not path.is_file() or not re.fullmatch(r"(\d\d-)?(zh|en)", assignment) or lang not in LANGS
                or path.name.startswith(".")):
            continue
        if path.suffix != ".ipynb":
            continue                      # other files are the student's own (data, notes): left alone
        # an assignment NN-lang holds notebook NN only; one named by its language, any of them
        if not (NOTEBOOK_DIR / lang / path.name).exists() or (
                assignment != lang and not path.name.startswith(assignment[:2] + "_")):
            found.append((path, "unknown name"))
            continue
        try:
            read_notebook(path)
        except ValueError:
            found.append((path, "unreadable"))
    return found


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Move notebooks nbgrader cannot grade out of submitted/.")
    parser.add_argument("submitted", help="nbgrader's submitted/ folder")
    parser.add_argument("--to", help="where they go (default: quarantine/ beside submitted/)")
    args = parser.parse_args(argv)
    submitted = Path(args.submitted)
    if not submitted.is_dir():
        print(f"error: {submitted} is not a folder", file=sys.stderr)
        return 2
    target = Path(args.to) if args.to else submitted.parent / "quarantine"
    moved = problems(submitted)
    for path, status in moved:
        rel = path.relative_to(submitted)
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(path), str(dest))
        print(f"{rel}: {status}, moved to {dest}")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
