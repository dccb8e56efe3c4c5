"""Grade a class's returned notebooks with nbgrader, and print a table by student and notebook.

Usage: python instructor/grade.py SUBMITTED [--out build/grade] [--csv FILE]

SUBMITTED holds one folder per student, named by the student's id, each holding the notebooks that
student returned, under their own names (``alice/01_library_analogy.ipynb``). nbgrader's own layout,
``alice/zh/01_library_analogy.ipynb``, works too. The language of each returned notebook (the
assignment ``zh`` or ``en``) is recognised from its text, so no one has to sort the files.

Everything underneath is nbgrader, with the settings of ``nbgrader_config.py``, in a fresh course
directory (``--out``, default ``build/grade/``):

1. ``generate_assignment`` from the instructor notebooks, which records every locked cell and its
   checksum in a new gradebook;
2. ``autograde`` for each student: locked cells that were changed are put back from the gradebook
   and reported ("checksum changed"), deleted check cells are added back, then the notebook runs and
   every check cell that raises scores 0;
3. ``generate_feedback``: one HTML page per notebook in ``<out>/feedback/<student>/<assignment>/``.

The scores are read from that gradebook. The table marks with ``*`` a notebook in which nbgrader
restored a locked cell; the notes under it say which. The CSV (``<out>/grades.csv`` unless
``--csv``) has one row per student and notebook. For a gradebook that lasts the whole term, use
nbgrader's commands directly (see the README's section for instructors).

Exit status: 0 when every student was graded; 1 when a student folder held no course notebook or
nbgrader failed on a submission (the table and the CSV are still written); 2 when the input is
unusable (no such folder, or no student folder in it).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import sys
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "nbgrader_config.py"
LANGS = ("zh", "en")
NOTEBOOK_DIR = ROOT / "notebooks"


class UnusableInput(Exception):
    """The folder given cannot be graded at all."""


@dataclass
class Submission:
    """One student's returned notebooks of one assignment (language)."""

    student: str
    lang: str
    files: dict[str, Path] = field(default_factory=dict)      # notebook name -> returned file
    notes: list[str] = field(default_factory=list)
    restored: set[str] = field(default_factory=set)           # notebook names
    error: str | None = None


def markdown_cells(path: Path) -> list[str]:
    """The text of a notebook's Markdown cells (read as plain JSON: quicker than validating)."""
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in cells if c.get("cell_type") == "markdown"]


def course_notebooks() -> dict[str, set[str]]:
    """The notebook file names of each assignment: {lang: {name}}."""
    return {lang: {path.name for path in (NOTEBOOK_DIR / lang).glob("*.ipynb")} for lang in LANGS}


CJK = re.compile(r"[\u4e00-\u9fff]")
LATIN = re.compile(r"[A-Za-z]")


def language_of(path: Path) -> str | None:
    """The assignment a returned notebook belongs to, from the script of its Markdown text.

    The text, not a comparison with today's notebooks: a copy handed out before the notebooks were
    last edited is still recognised.
    """
    try:
        text = "\n".join(markdown_cells(path))
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        return None  # not a notebook at all: reported by the caller
    cjk, latin = len(CJK.findall(text)), len(LATIN.findall(text))
    if cjk + latin < 100:
        return None
    return "zh" if cjk > 0.2 * latin else "en"


def collect(submitted: Path) -> tuple[list[Submission], list[str]]:
    """Read SUBMITTED/<student>/ into submissions; return them and the warnings met on the way."""
    if not submitted.is_dir():
        raise UnusableInput(f"SUBMITTED={submitted} is not a folder.")
    students = sorted(p for p in submitted.iterdir()
                      if p.is_dir() and not p.name.startswith((".", "_")))
    if not students:
        loose = sorted(p.name for p in submitted.glob("*.ipynb"))
        hint = (f" It holds notebooks directly ({', '.join(loose[:3])}...): put each student's"
                f" notebooks in a folder named after the student, {submitted}/<student>/<notebook>.ipynb."
                if loose else f" Expected {submitted}/<student>/<notebook>.ipynb, one folder per student.")
        raise UnusableInput(f"SUBMITTED={submitted} has no student folders.{hint}")
    course = course_notebooks()
    submissions: dict[tuple[str, str], Submission] = {}
    remarks = []
    for folder in students:
        found = 0
        for path in sorted(folder.rglob("*.ipynb")):
            if ".ipynb_checkpoints" in path.parts:
                continue
            rel = path.relative_to(submitted)
            if not any(path.name in course[lang] for lang in LANGS):
                remarks.append(f"{rel}: not a course notebook (names are {', '.join(sorted(course['en']))}),"
                                " ignored")
                continue
            lang = language_of(path)
            if lang is None or path.name not in course[lang]:
                remarks.append(f"{rel}: unreadable, or not a notebook of the zh or en course, ignored")
                continue
            sub = submissions.setdefault((folder.name, lang), Submission(folder.name, lang))
            if path.name in sub.files:
                remarks.append(f"{rel}: a second {lang} copy of {path.name}, ignored"
                                f" (graded: {sub.files[path.name].relative_to(submitted)})")
                continue
            sub.files[path.name] = path
            found += 1
        if not found:
            remarks.append(f"{folder.name}/: no course notebook in it, student not graded")
    if not submissions:
        raise UnusableInput(f"SUBMITTED={submitted}: no student folder holds a course notebook.\n  "
                            + "\n  ".join(remarks))
    return sorted(submissions.values(), key=lambda s: (s.student, s.lang)), remarks


def nbgrader_api(course_dir: Path):
    """nbgrader's Python API with the course's settings, writing into ``course_dir``."""
    from nbgrader.apps import NbGraderAPI
    from sqlalchemy.exc import SAWarning
    from traitlets.config.loader import PyFileConfigLoader

    # nbgrader's own session bookkeeping warns on every submission, and a check cell it adds back has
    # no cell id: nothing for the instructor to do about either
    warnings.filterwarnings("ignore", category=SAWarning)
    warnings.filterwarnings("ignore", message="Cell is missing an id field")

    # nbgrader runs `alembic` (its database migrations) as a program: it must be on PATH.
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    config = PyFileConfigLoader(CONFIG.name, path=str(CONFIG.parent)).load_config()
    config.CourseDirectory.root = str(course_dir)
    return NbGraderAPI(config=config)


CHANGED = re.compile(r"Attribute '(\w+)' for cell (\S+) has changed")
MISSING = re.compile(r"Missing grade cell (\S+) encountered")
CONVERTING = re.compile(r"Converting notebook (\S+\.ipynb)")


def read_log(sub: Submission, log: str) -> None:
    """Note what nbgrader restored, from the warnings autograde logged, by notebook."""
    notebook = None
    for line in log.splitlines():
        if m := CONVERTING.search(line):
            notebook = Path(m.group(1)).name
        elif m := CHANGED.search(line):
            what = f"{m.group(1)} changed"
            if m.group(1) == "checksum":
                what = "checksum changed (locked cell edited)"
            sub.notes.append(f"{notebook}: {m.group(2)}: {what}; nbgrader restored it")
            sub.restored.add(notebook)
        elif m := MISSING.search(line):
            sub.notes.append(f"{notebook}: {m.group(1)}: deleted; nbgrader added it back")
            sub.restored.add(notebook)


def grade(submitted: Path, out: Path,
          feedback: bool = True) -> tuple[list[dict], list[Submission], list[str]]:
    """Grade every student in ``submitted`` with nbgrader in the course directory ``out``.

    Returns one row per student and notebook (``student, assignment, notebook, score, max_score,
    status``), the submissions with nbgrader's notes, and the warnings about the input.
    """
    from nbgrader.api import Gradebook

    submissions, remarks = collect(submitted)
    if out.exists() and any(out.iterdir()):
        if not (out / "gradebook.db").exists():
            raise UnusableInput(f"--out {out} holds files that are not from an earlier make grade;"
                                " it would be emptied: choose another folder.")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    api = nbgrader_api(out)
    # autograde runs a notebook in autograded/<student>/<lang>/, two levels down as in notebooks/<lang>/
    # of the repository: with figures/ beside the students, the notebooks' ../../figures/ links hold.
    if (ROOT / "figures").is_dir() and not any(s.student == "figures" for s in submissions):
        (out / "autograded").mkdir()
        (out / "autograded" / "figures").symlink_to(ROOT / "figures", target_is_directory=True)
    for lang in sorted({s.lang for s in submissions}):
        result = api.generate_assignment(lang)
        if not result["success"]:
            raise RuntimeError(f"nbgrader generate_assignment {lang} failed:\n{result.get('log', '')}"
                               f"\n{result.get('error', '')}")
    for sub in submissions:
        dest = out / "submitted" / sub.student / sub.lang
        dest.mkdir(parents=True)
        for name, path in sub.files.items():
            shutil.copy2(path, dest / name)
        result = api.autograde(sub.lang, sub.student)
        read_log(sub, result.get("log", ""))
        if not result["success"]:
            sub.error = (result.get("error") or result.get("log") or "").strip().splitlines()[-1:]
            sub.error = sub.error[0] if sub.error else "unknown error"
            continue
        if feedback:
            api.generate_feedback(sub.lang, sub.student)

    rows = []
    with Gradebook(api.coursedir.db_url) as gb:
        for sub in submissions:
            notebooks = [nb.name for nb in gb.find_assignment(sub.lang).notebooks]
            for name in sorted(notebooks):
                if sub.error:
                    score, max_score, status = None, None, "error"
                else:
                    nb = gb.find_submission_notebook(name, sub.lang, sub.student)
                    score, max_score = nb.score, nb.max_score
                    status = "graded" if name + ".ipynb" in sub.files else "missing"
                    if name + ".ipynb" in sub.restored:
                        status += ", locked cells restored"
                rows.append(dict(student=sub.student, assignment=sub.lang, notebook=name,
                                 score=score, max_score=max_score, status=status))
            if not sub.error:
                total = gb.find_submission(sub.lang, sub.student)
                rows.append(dict(student=sub.student, assignment=sub.lang, notebook="total",
                                 score=total.score, max_score=total.max_score, status="graded"))
    return rows, submissions, remarks


def fmt(score, max_score) -> str:
    return "error" if score is None else f"{score:g}/{max_score:g}"


def table(rows: list[dict]) -> str:
    """Students down, notebooks across (by their number), the assignment total last."""
    notebooks = sorted({r["notebook"] for r in rows} - {"total"})
    heads = [n.split("_")[0] for n in notebooks] + ["total"]
    cells = defaultdict(dict)
    for r in rows:
        text = fmt(r["score"], r["max_score"])
        if r["status"] == "missing":
            text = "—"
        elif "restored" in r["status"]:
            text += "*"
        key = (r["student"], r["assignment"])
        cells[key]["total" if r["notebook"] == "total" else r["notebook"].split("_")[0]] = text
    lines = [["student", "lang", *heads]]
    for (student, lang), c in sorted(cells.items()):
        lines.append([student, lang, *[c.get(h, "error" if h == "total" else "") for h in heads]])
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = ["  ".join(v.ljust(w) if i < 2 else v.rjust(w)
                      for i, (v, w) in enumerate(zip(line, widths, strict=True)))
            for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)


def write_csv(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["student", "assignment", "notebook", "score",
                                               "max_score", "status"])
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description="Grade returned notebooks with nbgrader (generate_assignment, autograde, "
                    "generate_feedback) and print a table by student and notebook.")
    parser.add_argument("submitted", nargs="?", help="folder with one subfolder per student")
    parser.add_argument("--out", default=str(ROOT / "build" / "grade"),
                        help="course directory nbgrader writes into, emptied first (default build/grade)")
    parser.add_argument("--csv", help="where to write the grades (default OUT/grades.csv)")
    parser.add_argument("--no-feedback", action="store_true", help="skip generate_feedback")
    args = parser.parse_args(argv)
    if not args.submitted:
        parser.print_usage(sys.stderr)
        print("error: say which folder to grade: make grade SUBMITTED=folder, with one subfolder per"
              " student holding that student's notebooks", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    try:
        rows, submissions, remarks = grade(Path(args.submitted), out, feedback=not args.no_feedback)
    except UnusableInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for remark in remarks:
        print(f"warning: {remark}", file=sys.stderr)
    print(table(rows))
    notes = [(s, n) for s in submissions for n in s.notes]
    if any(s.error for s in submissions) or notes:
        print()
    for s, note in notes:
        print(f"* {s.student} ({s.lang}) {note}")
    for s in submissions:
        if s.error:
            print(f"{s.student} ({s.lang}): nbgrader could not grade this submission: {s.error}")
    csv_path = Path(args.csv).resolve() if args.csv else out / "grades.csv"
    write_csv(rows, csv_path)
    print(f"\ngrades: {csv_path}")
    if not args.no_feedback:
        print(f"feedback: {out / 'feedback'}/<student>/<assignment>/")
    failed = any(s.error for s in submissions) or any("not graded" in r for r in remarks)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
