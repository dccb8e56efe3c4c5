"""Grade a class's returned notebooks with nbgrader and the re-check, and print a table by student.

Usage: python instructor/grade.py SUBMITTED [--out build/grade] [--csv FILE]
                                  [--student NAME ...] [--notebook NN ...] [--no-feedback]

SUBMITTED holds one folder per student, named by the student's id, each holding the notebooks that
student returned, under their own names (``alice/01_library_analogy.ipynb``). nbgrader's own
layout, ``alice/01-zh/01_library_analogy.ipynb``, works too. The language of each returned notebook
is recognised from its text, so no one has to sort the files; with the notebook's number it names
the nbgrader assignment, ``NN-lang`` (one assignment per notebook and language, instructor/term.py).

Everything underneath is nbgrader, with the settings of ``nbgrader_config.py``, in a course
directory (``--out``, default ``build/grade/``) that is kept from one run to the next:

1. ``generate_assignment`` from the instructor notebook (once per assignment, its source copied to
   ``<out>/source/NN-lang/``), which records every locked cell and its checksum in the gradebook;
2. ``autograde`` for each student: locked cells that were changed are put back from the gradebook,
   deleted check cells are added back, then the notebook runs and every check cell that raises
   scores 0. A kernel that fails to start is retried twice, then reported with its cause;
3. the re-check (``instructor/recheck.py``): the student's definitions, each run in a worker process,
   against checks run in a grader process. **Its score is the grade**; the table marks with ``!`` a
   notebook whose in-notebook score differs, and with ``?`` one flagged for review;
4. ``generate_feedback``: one HTML page per notebook in ``<out>/feedback/<student>/<assignment>/``.

The in-notebook scores and what nbgrader restored come from the gradebook (nbgrader's Python API)
and the returned files, not from nbgrader's log. The table marks with ``*`` a notebook in which
nbgrader restored a locked cell; the notes under it say which. A student who handed in a notebook
in both languages has it counted once, the better score (the notes give both). The CSV
(``<out>/grades.csv`` unless ``--csv``) has one row per student, assignment and notebook: the grade,
the in-notebook score, the status, the flags, ``counted`` (``yes`` on the language that counts),
and one ``total`` row per student. Beside it, ``<out>/grades-canvas.csv`` and
``<out>/grades-moodle.csv``: one row per student, one column per notebook and the total, in the
layouts Canvas's and Moodle's grade imports read; with feedback, ``<out>/feedback-zip/<student>.zip``.

Statuses: ``graded``, ``missing`` (not returned), ``unreadable`` (not a readable notebook: its
student's other notebooks are graded all the same), ``unknown name`` (a file named like no notebook
of the course), ``error`` (nbgrader could not grade it; the cause is printed). A graded notebook's
status also names each check whose answer did not come back as a result in the re-check:
``nb03-ex1 timed out``, ``exceeded memory``, ``exited`` or ``returned something else``; the notes
say more, and with feedback ``<notebook>.grade.html`` beside nbgrader's page gives every check's
points, status and message.

``--student`` and ``--notebook`` regrade only those (``--notebook 03``, ``--notebook "03 06"``;
``make grade NB=03``); every other row of the earlier CSV stays as it was. Without them, every
student in SUBMITTED is graded.

Exit status: 0 when every returned notebook was graded, with no flag and no difference between the
re-check and the notebook; 1 when something needs the instructor (an unreadable or unknown file, a
folder without a course notebook, nbgrader failed, a flag, a difference); the table and the CSV are
still written; 2 when the input is unusable (no such folder, or no student folder in it). The status
of a run that graded is also written to ``<out>/exit-status``: GNU make exits with 2 whenever a
recipe fails, whatever the recipe's own status.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import sys
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import term  # noqa: E402  (beside this file)

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "nbgrader_config.py"
LANGS = ("zh", "en")
NOTEBOOK_DIR = ROOT / "notebooks"


class UnusableInput(Exception):
    """The folder given cannot be graded at all."""


@dataclass
class Submission:
    """One student's returned notebook of one assignment (``NN-lang``)."""

    student: str
    lang: str
    number: str = ""
    files: dict[str, Path] = field(default_factory=dict)      # notebook name -> returned file
    notes: list[str] = field(default_factory=list)
    restored: set[str] = field(default_factory=set)           # notebook names
    error: str | None = None
    rechecks: dict = field(default_factory=dict)              # notebook name -> recheck.Recheck

    @property
    def assignment(self) -> str:
        """The nbgrader assignment, ``NN-lang`` (just the language when no number is known)."""
        return term.assignment_id(self.number, self.lang) if self.number else self.lang


def course_notebooks() -> dict[str, set[str]]:
    """The notebook file names of each assignment: {lang: {name}}."""
    return {lang: {path.name for path in (NOTEBOOK_DIR / lang).glob("*.ipynb")} for lang in LANGS}


def collect(submitted: Path) -> tuple[list[Submission], list[str], list[dict]]:
    """Read SUBMITTED/<student>/ into submissions; return them, the warnings met on the way, and a
    row for each file that cannot be graded (status ``unreadable`` or ``unknown name``)."""
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
    remarks, problems = [], []
    for folder in students:
        found = 0
        for path in sorted(folder.rglob("*.ipynb")):
            if ".ipynb_checkpoints" in path.parts:
                continue
            rel = path.relative_to(submitted)
            parent = path.parent.name
            guess = parent if parent in LANGS or re.fullmatch(r"\d\d-(zh|en)", parent) else ""
            if not any(path.name in course[lang] for lang in LANGS):
                remarks.append(f"{rel}: not a course notebook (names are {', '.join(sorted(course['en']))}),"
                                " not graded")
                problems.append(dict(student=folder.name, assignment=guess, notebook=path.stem, score=None,
                                     max_score=None, status="unknown name"))
                continue
            lang = term.language_of(path)
            if lang is None or path.name not in course[lang]:
                remarks.append(f"{rel}: unreadable, or not a notebook of the zh or en course, not graded")
                problems.append(dict(student=folder.name, assignment=guess, notebook=path.stem, score=None,
                                     max_score=None, status="unreadable"))
                continue
            number = path.name[:2]
            sub = submissions.setdefault((folder.name, term.assignment_id(number, lang)),
                                         Submission(folder.name, lang, number))
            if path.name in sub.files:
                remarks.append(f"{rel}: a second {lang} copy of {path.name}, ignored"
                                f" (graded: {sub.files[path.name].relative_to(submitted)})")
                continue
            sub.files[path.name] = path
            found += 1
        if not found:
            remarks.append(f"{folder.name}/: no course notebook in it, student not graded")
            problems.append(dict(student=folder.name, assignment="", notebook="", score=None, max_score=None,
                                 status="no course notebook"))
    if not submissions:
        raise UnusableInput(f"SUBMITTED={submitted}: no student folder holds a course notebook.\n  "
                            + "\n  ".join(remarks))
    return sorted(submissions.values(), key=lambda s: (s.student, s.assignment)), remarks, problems


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


#: What nbgrader's autograde says when a kernel did not start (worth another try).
KERNEL_START = re.compile(r"ZMQError|Address already in use|Kernel died before|Kernel didn't respond|"
                          r"Kernel not responding|RuntimeError: Kernel|TimeoutError: Kernel", re.I)
ATTEMPTS = 3


def cause(result: dict) -> str:
    """The most telling line of a failed nbgrader call: the last ``SomethingError: ...`` line."""
    text = "\n".join(str(result.get(k) or "") for k in ("error", "log"))
    errors = [line.strip() for line in text.splitlines()
              if re.search(r"\b\w*(Error|Exception)\b:", line) and "see the above traceback" not in line]
    if errors:
        return errors[-1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "unknown error"


def restored_cells(gb, sub: Submission, name: str, path: Path) -> list[str]:
    """The locked cells of a returned notebook that autograde put back, from the gradebook's record
    of each locked cell (its checksum) and the returned file itself."""
    import nbformat
    from nbgrader.utils import compute_checksum

    nb = nbformat.read(path, as_version=4)
    present = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade_id"):
            present[meta["grade_id"]] = cell
    notes = []
    for source in gb.find_notebook(name, sub.assignment).source_cells:
        if not source.locked:
            continue
        cell = present.get(source.name)
        if cell is None:
            if any(g.name == source.name for g in gb.find_notebook(name, sub.assignment).grade_cells):
                notes.append(f"{source.name}: deleted; nbgrader added it back")
        elif compute_checksum(cell) != source.checksum:
            notes.append(f"{source.name}: checksum changed (locked cell edited); nbgrader restored it")
    return notes


def autograde(api, sub: Submission, notebooks: list[str] | None) -> dict:
    """nbgrader's autograde of one submission, again when a kernel did not start."""
    previous = api.coursedir.notebook_id
    result: dict = {}
    try:
        for name in notebooks or ["*"]:
            api.coursedir.notebook_id = name
            for attempt in range(ATTEMPTS):
                result = api.autograde(sub.assignment, sub.student)
                if result["success"] or not KERNEL_START.search(f"{result.get('error')}{result.get('log')}"):
                    break
                sub.notes.append(f"a kernel did not start ({cause(result)}); try {attempt + 2} of {ATTEMPTS}"
                                 if attempt + 1 < ATTEMPTS else f"a kernel did not start ({cause(result)})")
            if not result["success"]:
                return result
    finally:
        api.coursedir.notebook_id = previous
    return result


def grade(submitted: Path, out: Path, feedback: bool = True, students: list[str] | None = None,
          notebooks: list[str] | None = None) -> tuple[list[dict], list[Submission], list[str]]:
    """Grade the students in ``submitted`` with nbgrader and the re-check, in the course directory ``out``.

    ``students`` and ``notebooks`` (numbers such as ``"03"``) limit what is graded; the rows of
    everything else are read back from the earlier ``out/grades.csv``. Returns one row per student,
    assignment and notebook (``student, assignment, notebook, score, max_score, status,
    notebook_score, flags``) and a total per student, the submissions with their notes, and the
    warnings about the input.
    """
    import recheck as rechecking  # beside this file
    from nbgrader.api import Gradebook

    submissions, remarks, problems = collect(submitted)
    if students:
        unknown = sorted(set(students) - {s.student for s in submissions} - {p["student"] for p in problems})
        if unknown:
            raise UnusableInput(f"--student {', '.join(unknown)}: no such student folder in {submitted}")
        submissions = [s for s in submissions if s.student in students]
        problems = [p for p in problems if p["student"] in students]
    numbers = term.course_numbers(NOTEBOOK_DIR)
    only = None
    if notebooks:
        words = " ".join(notebooks).replace(",", " ").split()
        picked = sorted({w[:2] if w[:2].isdigit() else w.zfill(2) for w in words} & set(numbers))
        if not picked or len(picked) < len({w[:2] for w in words}):
            raise UnusableInput(f"--notebook {' '.join(notebooks)}: no such notebook in the course"
                                f" (numbers are {' '.join(numbers)})")
        only = numbers = picked
        submissions = [s for s in submissions if s.number in only]
        problems = [p for p in problems if p["notebook"][:2] in only]
    if out.exists() and any(out.iterdir()) and not (out / "gradebook.db").exists():
        raise UnusableInput(f"--out {out} holds files that are not from an earlier make grade;"
                            " choose another folder.")
    out.mkdir(parents=True, exist_ok=True)
    api = nbgrader_api(out)
    with Gradebook(api.coursedir.db_url) as gb:
        existing = {a.name for a in gb.assignments}
    for assignment in sorted({s.assignment for s in submissions} - existing):
        number, lang = term.parse_assignment(assignment)
        term.prepare_source(out, [number], (lang,), NOTEBOOK_DIR)
        result = api.generate_assignment(assignment)
        if not result["success"]:
            raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{result.get('log', '')}"
                               f"\n{result.get('error', '')}")
    for sub in submissions:
        dest = out / "submitted" / sub.student / sub.assignment
        if dest.exists():
            shutil.rmtree(dest)                     # a regrade starts from what the student returns now
        dest.mkdir(parents=True, exist_ok=True)
        for name, path in sub.files.items():
            shutil.copy2(path, dest / name)
        result = autograde(api, sub, None)
        if not result["success"]:
            sub.error = cause(result)
            continue
        if feedback:
            api.generate_feedback(sub.assignment, sub.student)
    # the re-check of every returned notebook, two at a time (each in its own interpreter)
    jobs = [(sub, name) for sub in submissions if not sub.error for name in sub.files]
    with ThreadPoolExecutor(2) as pool:
        done = pool.map(lambda job: rechecking.recheck(out / "submitted" / job[0].student / job[0].assignment
                                                       / job[1], job[0].lang), jobs)
        for (sub, name), result in zip(jobs, done, strict=True):
            sub.rechecks[name] = result
            if feedback:
                write_grade_page(out / "feedback" / sub.student / sub.assignment, result)

    rows = []
    with Gradebook(api.coursedir.db_url) as gb:
        for sub in submissions:
            for name in sorted(nb.name for nb in gb.find_assignment(sub.assignment).notebooks):
                row = dict(student=sub.student, assignment=sub.assignment, notebook=name, score=None,
                           max_score=None, status="error", notebook_score=None, flags="")
                if not sub.error:
                    nb = gb.find_submission_notebook(name, sub.assignment, sub.student)
                    row["max_score"], row["notebook_score"] = nb.max_score, nb.score
                    file = name + ".ipynb"
                    restored = restored_cells(gb, sub, name, sub.files[file])
                    sub.notes += [f"{file}: {n}" for n in restored]
                    r = sub.rechecks[file]
                    row["status"] = "graded" + (", locked cells restored" if restored else "")
                    row["flags"] = r.flag_text()
                    sub.notes += [f"{file}: flagged for review, {f['pattern']}: {f['code']}" for f in r.flags]
                    sub.notes += [f"{file}: {n}" for n in r.notes]
                    if r.status_text():
                        row["status"] += f", {r.status_text()}"
                        sub.notes += [f"{file}: {k} {c['status']}: {c['message'][:200]}"
                                      for k, c in r.checks.items() if c.get("status") in rechecking.STOPPED]
                    if r.score is None:
                        row["status"] += f", re-check failed ({r.error})"
                    else:
                        row["score"] = r.score
                        if abs(r.score - nb.score) > 1e-9:
                            row["status"] += ", re-check differs"
                            sub.notes.append(f"{file}: {nb.score:g} in the notebook, {r.score:g} in the "
                                             "re-check (the grade): " + "; ".join(
                                                 f"{k}: {v['message'][:160]}" for k, v in r.checks.items()
                                                 if not v["passed"]))
                rows.append(row)
    for problem in problems:
        problem.setdefault("notebook_score", None)
        problem.setdefault("flags", "")
        # an unreadable file with a course notebook's name stands for that notebook
        if problem["status"] == "unreadable" and problem["notebook"][:2] in numbers:
            number, guess = problem["notebook"][:2], problem["assignment"][-2:]
            lang = guess if guess in LANGS else "en"
            problem.update(score=0.0, max_score=points_of(number, lang),
                           assignment=term.assignment_id(number, lang))
        rows.append(problem)
    graded = {s.student for s in submissions} | {p["student"] for p in problems
                                                 if p["status"] == "unreadable"}
    rows += missing_rows(rows, numbers, graded)
    if only is not None or students:
        rows = merged_with_earlier(rows, out / "grades.csv")
    return with_totals(rows), submissions, remarks


GRADE_PAGE = {
    "en": dict(lang="en", title="grade", grade="Grade (the re-check, which runs each answer in a process of "
               "its own)", failed="could not be re-checked", caption="Checks",
               heads=("check", "points", "what happened", "message")),
    "zh": dict(lang="zh-CN", title="成绩", grade="成绩（复核：每个答案在单独的进程里运行）",
               failed="没能复核", caption="各项检查", heads=("检查", "分数", "结果", "说明")),
}


def write_grade_page(folder: Path, result) -> Path:
    """``<notebook>.grade.html`` beside nbgrader's feedback page, in the notebook's language: the
    grade of record (the re-check), check by check, with what became of each answer (passed,
    failed, timed out, exceeded memory, exited, returned something else ...) and the message."""
    from html import escape

    words = GRADE_PAGE.get(result.lang, GRADE_PAGE["en"])
    folder.mkdir(parents=True, exist_ok=True)
    rows = "".join(
        f'<tr><th scope="row">{escape(k)}</th>'
        f'<td>{c["points"] if c["passed"] else 0:g} / {c["points"]:g}</td>'
        f'<td>{escape(c.get("status", ""))}</td><td><pre>{escape(c["message"])}</pre></td></tr>'
        for k, c in result.checks.items())
    score = (f'{words["failed"]}: {escape(result.error or "")}' if result.score is None
             else f"{result.score:g} / {result.max_score:g}")
    heads = "".join(f'<th scope="col">{h}</th>' for h in words["heads"])
    page = (f'<!DOCTYPE html>\n<html lang="{words["lang"]}"><head><meta charset="utf-8">'
            f'<title>{escape(result.name)}: {words["title"]}</title></head><body>'
            f'<h1>{escape(result.name)}</h1><p>{words["grade"]}: {score}</p>'
            f'<table><caption>{words["caption"]}</caption><thead><tr>{heads}</tr></thead>'
            f"<tbody>{rows}</tbody></table></body></html>\n")
    target = folder / f"{result.name}.grade.html"
    target.write_text(page, encoding="utf-8")
    return target


def points_of(number: str, lang: str = "en") -> float:
    """The points of a course notebook (the sum of its check cells' points)."""
    import recheck as rechecking

    return rechecking.course_notebook(lang, term.notebook_of(number, lang, NOTEBOOK_DIR).name).max_score


def missing_rows(rows: list[dict], numbers: list[str], students: set[str]) -> list[dict]:
    """A ``missing`` row (score 0) for each notebook a student handed in in neither language.

    It is filed under the language the student handed in most (en on a tie)."""
    seen: dict = defaultdict(set)
    langs: dict = defaultdict(list)
    for r in rows:
        if r.get("notebook") and r["notebook"][:2].isdigit() and r["status"] != "unknown name":
            seen[r["student"]].add(r["notebook"][:2])
            if "-" in (r["assignment"] or ""):
                langs[r["student"]].append(r["assignment"].split("-")[1])
    out = []
    for student in sorted(students):
        lang = "zh" if langs[student].count("zh") > langs[student].count("en") else "en"
        for number in numbers:
            if number in seen[student]:
                continue
            name = term.notebook_of(number, lang, NOTEBOOK_DIR).stem
            out.append(dict(student=student, assignment=term.assignment_id(number, lang), notebook=name,
                            score=0.0, max_score=points_of(number, lang), status="missing",
                            notebook_score=None, flags=""))
    return out


def merged_with_earlier(rows: list[dict], earlier: Path) -> list[dict]:
    """These rows, and every row of the earlier CSV about another student or notebook."""
    if not earlier.exists():
        return rows
    new = {(r["student"], r["notebook"][:2]) for r in rows}
    kept = []
    with earlier.open(encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["notebook"] == "total" or (r["student"], r["notebook"][:2]) in new:
                continue
            for key in ("score", "max_score", "notebook_score"):
                r[key] = float(r[key]) if r.get(key) not in (None, "") else None
            kept.append(r)
    return kept + rows


def with_totals(rows: list[dict]) -> list[dict]:
    """The rows without totals (``counted`` marks the better of zh and en), then one total row per
    student: the sum over notebooks of the better language's score."""
    rows = [r for r in rows if r["notebook"] != "total"]
    out = sorted(term.long_rows(rows), key=lambda r: (r["student"], r["notebook"], r["assignment"]))
    groups: dict = defaultdict(list)
    for r in out:
        if r["notebook"] and r["status"] != "unknown name" and r["student"]:
            groups[r["student"]].append(r)
    for student, members in sorted(groups.items()):
        if any(r["status"] == "error" for r in members):
            continue
        counted = [r for r in members if r["counted"]]
        out.append(dict(student=student, assignment="", notebook="total",
                        score=sum(r.get("score") or 0 for r in counted),
                        max_score=sum(r.get("max_score") or 0 for r in counted), status="graded",
                        notebook_score=sum(r.get("notebook_score") or 0 for r in counted),
                        flags="; ".join(sorted({f for r in members for f in (r.get("flags") or "").split("; ")
                                                if f})), counted=""))
    return out


def fmt(score, max_score) -> str:
    return "error" if score is None else f"{score:g}/{max_score:g}"


SHOWN_AS = {"missing": "—", "unreadable": "unreadable", "unknown name": "unknown name"}


def cell_text(r: dict) -> str:
    text = SHOWN_AS.get(r["status"]) or fmt(r["score"], r["max_score"])
    if "restored" in r["status"]:
        text += "*"
    if "differs" in r["status"]:
        text += "!"
    if r.get("flags") and r["notebook"] != "total":
        text += "?"
    return text


def table(rows: list[dict]) -> str:
    """Students down, notebooks across (by their number), the total last; ``lang`` says which
    languages the student handed in. A notebook handed in in both languages shows the better.

    ``*``: nbgrader restored a locked cell; ``!``: the re-check (the grade) differs from the score
    in the notebook; ``?``: flagged for review.
    """
    rows = [r for r in rows if r["notebook"] and r["status"] != "unknown name"]
    heads = sorted({r["notebook"][:2] for r in rows} - {"to"}) + ["total"]
    cells: dict = defaultdict(dict)
    langs: dict = defaultdict(set)
    for r in rows:
        student = r["student"]
        if r["notebook"] == "total":
            cells[student]["total"] = cell_text(r)
            continue
        if "-" in (r.get("assignment") or "") and r["status"] != "missing":
            langs[student].add(r["assignment"].split("-")[1])
        number = r["notebook"][:2]
        if r.get("counted") or number not in cells[student]:
            cells[student][number] = cell_text(r)
    lines = [["student", "lang", *heads]]
    for student, c in sorted(cells.items()):
        lang = "+".join(x for x in LANGS if x in langs[student]) or "-"
        lines.append([student, lang, *[c.get(h, "error" if h == "total" else "") for h in heads]])
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = ["  ".join(v.ljust(w) if i < 2 else v.rjust(w)
                      for i, (v, w) in enumerate(zip(line, widths, strict=True)))
            for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)


def both_languages(rows: list[dict]) -> list[str]:
    """A note for each notebook a student handed in in both languages: both scores, which counts."""
    by: dict = defaultdict(list)
    for r in rows:
        if r["notebook"] != "total" and "-" in (r.get("assignment") or "") and r["status"] != "missing":
            by[(r["student"], r["notebook"][:2])].append(r)
    notes = []
    for (student, number), members in sorted(by.items()):
        if len(members) > 1:
            both = ", ".join(f"{r['assignment']} {fmt(r['score'], r['max_score'])}" for r in members)
            kept = next((r["assignment"] for r in members if r.get("counted")), members[0]["assignment"])
            notes.append(f"{student} {number}: handed in twice ({both}); the better, {kept}, counts")
    return notes


FIELDS = ["student", "assignment", "notebook", "score", "max_score", "status", "notebook_score", "flags",
          "counted"]


def write_csv(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(r for r in rows if r["notebook"])


def needs_attention(rows: list[dict], submissions: list[Submission]) -> bool:
    """Whether the exit status is 1: anything the instructor should look at."""
    return (any(s.error for s in submissions)
            or any(r["status"] in ("error", "unreadable", "unknown name", "no course notebook")
                   or "differs" in r["status"] or "re-check failed" in r["status"] or r.get("flags")
                   for r in rows))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description="Grade returned notebooks with nbgrader (generate_assignment, autograde, "
                    "generate_feedback) and the re-check, and print a table by student and notebook.")
    parser.add_argument("submitted", nargs="?", help="folder with one subfolder per student")
    parser.add_argument("--out", default=str(ROOT / "build" / "grade"),
                        help="course directory nbgrader writes into, kept between runs (default build/grade)")
    parser.add_argument("--csv", help="where to write the grades (default OUT/grades.csv)")
    parser.add_argument("--student", action="append", help="grade only this student (repeatable)")
    parser.add_argument("--notebook", action="append",
                        help="grade only these notebooks, by number: 03, or '03 06' (repeatable)")
    parser.add_argument("--no-feedback", action="store_true", help="skip generate_feedback")
    args = parser.parse_args(argv)
    if not args.submitted:
        parser.print_usage(sys.stderr)
        print("error: say which folder to grade: make grade SUBMITTED=folder, with one subfolder per"
              " student holding that student's notebooks", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    try:
        rows, submissions, remarks = grade(Path(args.submitted), out, feedback=not args.no_feedback,
                                           students=args.student, notebooks=args.notebook)
    except UnusableInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for remark in remarks:
        print(f"warning: {remark}", file=sys.stderr)
    print(table(rows))
    twice = both_languages(rows)
    if twice:
        print()
    for note in twice:
        print(f"+ {note}")
    unknown = [r for r in rows if r["status"] == "unknown name"]
    notes = [(s, n) for s in submissions for n in s.notes]
    if any(s.error for s in submissions) or notes or unknown:
        print()
    for s, note in notes:
        print(f"* {s.student} ({s.assignment}) {note}")
    for r in unknown:
        print(f"{r['student']}: {r['notebook']}.ipynb: unknown name, not graded")
    for s in submissions:
        if s.error:
            print(f"{s.student} ({s.assignment}): nbgrader could not grade this submission: {s.error}")
    csv_path = Path(args.csv).resolve() if args.csv else out / "grades.csv"
    write_csv(rows, csv_path)
    if csv_path != out / "grades.csv":
        write_csv(rows, out / "grades.csv")          # what the next --student run merges with
    exports = term.write_exports([r for r in rows if r["notebook"] != "total"], out, fields=FIELDS,
                                 long_name=None)
    print(f"\ngrades: {csv_path} (one row per student and notebook); for an LMS: "
          + ", ".join(str(p) for p in exports))
    if not args.no_feedback:
        zips = term.feedback_zips(out / "feedback", out / "feedback-zip")
        print(f"feedback: {out / 'feedback'}/<student>/<assignment>/, one zip per student in"
              f" {out / 'feedback-zip'}/ ({len(zips)})")
    status = 1 if needs_attention(rows, submissions) else 0
    # make turns any failing recipe into its own exit status 2; the file keeps grade.py's for scripts
    (out / "exit-status").write_text(f"{status}\n", encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
