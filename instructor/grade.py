"""Grade a class's returned notebooks with nbgrader and the re-check, and print a table by student.

Usage: python instructor/grade.py SUBMITTED [--out build/grade] [--csv FILE]
                                  [--student NAME ...] [--notebook NN ...] [--no-feedback]

SUBMITTED holds one folder per student, named by the student's id, each holding the notebooks that
student returned, under their own names (``alice/01_library_analogy.ipynb``). nbgrader's own layout,
``alice/zh/01_library_analogy.ipynb``, works too. The language of each returned notebook (the
assignment ``zh`` or ``en``) is recognised from its text, so no one has to sort the files.

Everything underneath is nbgrader, with the settings of ``nbgrader_config.py``, in a course
directory (``--out``, default ``build/grade/``) that is kept from one run to the next:

1. ``generate_assignment`` from the instructor notebooks (once per assignment), which records every
   locked cell and its checksum in the gradebook;
2. ``autograde`` for each student: locked cells that were changed are put back from the gradebook,
   deleted check cells are added back, then the notebook runs and every check cell that raises
   scores 0. A kernel that fails to start is retried twice, then reported with its cause;
3. the re-check (``instructor/recheck.py``): the student's definitions, in a fresh interpreter,
   against checks loaded before them. **Its score is the grade**; the table marks with ``!`` a
   notebook whose in-notebook score differs, and with ``?`` one flagged for review;
4. ``generate_feedback``: one HTML page per notebook in ``<out>/feedback/<student>/<assignment>/``.

The in-notebook scores and what nbgrader restored come from the gradebook (nbgrader's Python API)
and the returned files, not from nbgrader's log. The table marks with ``*`` a notebook in which
nbgrader restored a locked cell; the notes under it say which. The CSV (``<out>/grades.csv``
unless ``--csv``) has one row per student and notebook: the grade, the in-notebook score, the
status, the flags.

Statuses: ``graded``, ``missing`` (not returned), ``unreadable`` (not a readable notebook: its
student's other notebooks are graded all the same), ``unknown name`` (a file named like no notebook
of the course), ``error`` (nbgrader could not grade it; the cause is printed).

``--student`` and ``--notebook`` regrade only those (``--notebook 03``); every other row of the
earlier CSV stays as it was. Without them, every student in SUBMITTED is graded.

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
import json
import os
import re
import shutil
import sys
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
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
    rechecks: dict = field(default_factory=dict)              # notebook name -> recheck.Recheck


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
            guess = path.parent.name if path.parent.name in LANGS else ""
            if not any(path.name in course[lang] for lang in LANGS):
                remarks.append(f"{rel}: not a course notebook (names are {', '.join(sorted(course['en']))}),"
                                " not graded")
                problems.append(dict(student=folder.name, assignment=guess, notebook=path.stem, score=None,
                                     max_score=None, status="unknown name"))
                continue
            lang = language_of(path)
            if lang is None or path.name not in course[lang]:
                remarks.append(f"{rel}: unreadable, or not a notebook of the zh or en course, not graded")
                problems.append(dict(student=folder.name, assignment=guess, notebook=path.stem, score=None,
                                     max_score=None, status="unreadable"))
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
            problems.append(dict(student=folder.name, assignment="", notebook="", score=None, max_score=None,
                                 status="no course notebook"))
    if not submissions:
        raise UnusableInput(f"SUBMITTED={submitted}: no student folder holds a course notebook.\n  "
                            + "\n  ".join(remarks))
    return sorted(submissions.values(), key=lambda s: (s.student, s.lang)), remarks, problems


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
    for source in gb.find_notebook(name, sub.lang).source_cells:
        if not source.locked:
            continue
        cell = present.get(source.name)
        if cell is None:
            if any(g.name == source.name for g in gb.find_notebook(name, sub.lang).grade_cells):
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
                result = api.autograde(sub.lang, sub.student)
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
    everything else are read back from the earlier ``out/grades.csv``. Returns one row per student
    and notebook (``student, assignment, notebook, score, max_score, status, notebook_score,
    flags``), the submissions with their notes, and the warnings about the input.
    """
    from nbgrader.api import Gradebook

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import recheck as rechecking  # beside this file

    submissions, remarks, problems = collect(submitted)
    if students:
        unknown = sorted(set(students) - {s.student for s in submissions} - {p["student"] for p in problems})
        if unknown:
            raise UnusableInput(f"--student {', '.join(unknown)}: no such student folder in {submitted}")
        submissions = [s for s in submissions if s.student in students]
        problems = [p for p in problems if p["student"] in students]
    only = None
    if notebooks:
        course = course_notebooks()
        only = sorted(n.removesuffix(".ipynb") for lang in LANGS for n in course[lang]
                      if any(n.startswith(f"{k}_") or n == f"{k}.ipynb" or n.removesuffix(".ipynb") == k
                             for k in notebooks))
        if not only:
            raise UnusableInput(f"--notebook {', '.join(notebooks)}: no such notebook in the course")
        problems = [p for p in problems if p["notebook"] in only]
    if out.exists() and any(out.iterdir()) and not (out / "gradebook.db").exists():
        raise UnusableInput(f"--out {out} holds files that are not from an earlier make grade;"
                            " choose another folder.")
    out.mkdir(parents=True, exist_ok=True)
    api = nbgrader_api(out)
    # autograde runs a notebook in autograded/<student>/<lang>/, two levels down as in notebooks/<lang>/
    # of the repository: with figures/ beside the students, the notebooks' ../../figures/ links hold.
    figures = out / "autograded" / "figures"
    if (ROOT / "figures").is_dir() and not figures.exists() and not any(s.student == "figures"
                                                                          for s in submissions):
        figures.parent.mkdir(exist_ok=True)
        figures.symlink_to(ROOT / "figures", target_is_directory=True)
    with Gradebook(api.coursedir.db_url) as gb:
        existing = {a.name for a in gb.assignments}
    for lang in sorted({s.lang for s in submissions} - existing):
        result = api.generate_assignment(lang)
        if not result["success"]:
            raise RuntimeError(f"nbgrader generate_assignment {lang} failed:\n{result.get('log', '')}"
                               f"\n{result.get('error', '')}")
    for sub in submissions:
        if only is not None:
            sub.files = {n: p for n, p in sub.files.items() if n.removesuffix(".ipynb") in only}
            if not sub.files:
                continue
        dest = out / "submitted" / sub.student / sub.lang
        if only is None and dest.exists():
            shutil.rmtree(dest)                     # a regrade starts from what the student returns now
        dest.mkdir(parents=True, exist_ok=True)
        for name, path in sub.files.items():
            shutil.copy2(path, dest / name)
        result = autograde(api, sub, [n.removesuffix(".ipynb") for n in sub.files] if only else None)
        if not result["success"]:
            sub.error = cause(result)
            continue
        if feedback:
            api.generate_feedback(sub.lang, sub.student)
    # the re-check of every returned notebook, two at a time (each in its own interpreter)
    jobs = [(sub, name) for sub in submissions if not sub.error for name in sub.files]
    with ThreadPoolExecutor(2) as pool:
        done = pool.map(lambda job: rechecking.recheck(out / "submitted" / job[0].student / job[0].lang
                                                       / job[1], job[0].lang), jobs)
        for (sub, name), result in zip(jobs, done, strict=True):
            sub.rechecks[name] = result

    rows = []
    with Gradebook(api.coursedir.db_url) as gb:
        for sub in submissions:
            if only is not None and not sub.files and not sub.error:
                continue
            notebooks_of = [nb.name for nb in gb.find_assignment(sub.lang).notebooks]
            for name in sorted(notebooks_of):
                if only is not None and name not in only:
                    continue
                row = dict(student=sub.student, assignment=sub.lang, notebook=name, score=None,
                           max_score=None, status="error", notebook_score=None, flags="")
                if not sub.error:
                    nb = gb.find_submission_notebook(name, sub.lang, sub.student)
                    row["max_score"], row["notebook_score"] = nb.max_score, nb.score
                    file = name + ".ipynb"
                    if file not in sub.files:
                        row.update(score=0.0, status="missing")
                    else:
                        restored = restored_cells(gb, sub, name, sub.files[file])
                        sub.notes += [f"{file}: {n}" for n in restored]
                        r = sub.rechecks[file]
                        row["status"] = "graded" + (", locked cells restored" if restored else "")
                        row["flags"] = r.flag_text()
                        sub.notes += [f"{file}: flagged for review, {f['pattern']}: {f['code']}"
                                      for f in r.flags]
                        sub.notes += [f"{file}: {n}" for n in r.notes]
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
        # an unreadable file with a course notebook's name takes the place of that notebook's row
        same = [r for r in rows if r["student"] == problem["student"] and r["notebook"] == problem["notebook"]
                and r["status"] == "missing"]
        if same and problem["status"] == "unreadable":
            same[0].update(status="unreadable", score=0.0)
        else:
            rows.append(problem)
    if only is not None or students:
        rows = merged_with_earlier(rows, out / "grades.csv")
    return with_totals(rows), submissions, remarks


def merged_with_earlier(rows: list[dict], earlier: Path) -> list[dict]:
    """These rows, and every row of the earlier CSV about another student or notebook."""
    if not earlier.exists():
        return rows
    new = {(r["student"], r["assignment"], r["notebook"]) for r in rows}
    kept = []
    with earlier.open(encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["notebook"] == "total" or (r["student"], r["assignment"], r["notebook"]) in new:
                continue
            for key in ("score", "max_score", "notebook_score"):
                r[key] = float(r[key]) if r.get(key) not in (None, "") else None
            kept.append(r)
    return kept + rows


def with_totals(rows: list[dict]) -> list[dict]:
    """The rows without totals, and one total row per student and assignment graded."""
    rows = [r for r in rows if r["notebook"] != "total"]
    out = sorted(rows, key=lambda r: (r["student"], r["assignment"], r["notebook"]))
    groups: dict = defaultdict(list)
    for r in rows:
        if r["notebook"] and r["assignment"] and r["status"] != "unknown name":
            groups[(r["student"], r["assignment"])].append(r)
    for (student, lang), members in sorted(groups.items()):
        if any(r["status"] == "error" for r in members):
            continue
        out.append(dict(student=student, assignment=lang, notebook="total",
                        score=sum(r["score"] or 0 for r in members),
                        max_score=sum(r["max_score"] or 0 for r in members), status="graded",
                        notebook_score=sum(r["notebook_score"] or 0 for r in members),
                        flags="; ".join(sorted({f for r in members for f in (r.get("flags") or "").split("; ")
                                                if f}))))
    return out


def fmt(score, max_score) -> str:
    return "error" if score is None else f"{score:g}/{max_score:g}"


SHOWN_AS = {"missing": "—", "unreadable": "unreadable", "unknown name": "unknown name"}


def table(rows: list[dict]) -> str:
    """Students down, notebooks across (by their number), the assignment total last.

    ``*``: nbgrader restored a locked cell; ``!``: the re-check (the grade) differs from the score
    in the notebook; ``?``: flagged for review.
    """
    rows = [r for r in rows if r["notebook"] and r["status"] != "unknown name"]
    notebooks = sorted({r["notebook"] for r in rows} - {"total"})
    heads = [n.split("_")[0] for n in notebooks] + ["total"]
    cells = defaultdict(dict)
    for r in rows:
        text = SHOWN_AS.get(r["status"]) or fmt(r["score"], r["max_score"])
        if "restored" in r["status"]:
            text += "*"
        if "differs" in r["status"]:
            text += "!"
        if r.get("flags") and r["notebook"] != "total":
            text += "?"
        key = (r["student"], r["assignment"] or "?")
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


FIELDS = ["student", "assignment", "notebook", "score", "max_score", "status", "notebook_score", "flags"]


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
                        help="grade only this notebook, by number (03) or name (repeatable)")
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
    unknown = [r for r in rows if r["status"] == "unknown name"]
    notes = [(s, n) for s in submissions for n in s.notes]
    if any(s.error for s in submissions) or notes or unknown:
        print()
    for s, note in notes:
        print(f"* {s.student} ({s.lang}) {note}")
    for r in unknown:
        print(f"{r['student']}: {r['notebook']}.ipynb: unknown name, not graded")
    for s in submissions:
        if s.error:
            print(f"{s.student} ({s.lang}): nbgrader could not grade this submission: {s.error}")
    csv_path = Path(args.csv).resolve() if args.csv else out / "grades.csv"
    write_csv(rows, csv_path)
    if csv_path != out / "grades.csv":
        write_csv(rows, out / "grades.csv")          # what the next --student run merges with
    print(f"\ngrades: {csv_path}")
    if not args.no_feedback:
        print(f"feedback: {out / 'feedback'}/<student>/<assignment>/")
    status = 1 if needs_attention(rows, submissions) else 0
    # make turns any failing recipe into its own exit status 2; the file keeps grade.py's for scripts
    (out / "exit-status").write_text(f"{status}\n", encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
