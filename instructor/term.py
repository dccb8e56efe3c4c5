"""The term's layout: one nbgrader assignment per notebook and language, and the LMS exports.

An assignment id is ``NN-lang`` (``01-zh``, ``01-en``, ..., ``09-en``): one notebook, one due date,
one submission. nbgrader finds an assignment's notebooks in ``<course>/source/<assignment>/``;
:func:`prepare_source` copies ``notebooks/<lang>/NN_*.ipynb`` there, since nbgrader cannot map
``06-en`` onto ``notebooks/en/06_quadratic_cost.ipynb`` itself.

A student's zh and en work on the same notebook counts once, the better of the two: :func:`best`
merges the rows, and the exports (:func:`canvas_rows`, :func:`moodle_rows`) give one row per student,
one column per notebook and a total.

Usage (from the repository's root)::

    python instructor/term.py source [--course course] [NN ...]      # course/source/NN-lang/
    python instructor/term.py extend ASSIGNMENT STUDENT --days N      # an extension in the gradebook
    python instructor/term.py export [--course course] [--out DIR]    # the LMS files, from the gradebook
    python instructor/term.py feedback [--course course] [--out DIR]  # one zip of HTML per student

Nothing here imports nbgrader at module level: the pure functions are tested without it.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import sys
import zipfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
LANGS = ("zh", "en")

#: The format of an assignment id.
ASSIGNMENT = "{number}-{lang}"
_ID = re.compile(r"^(\d{2})-(zh|en)$")


def assignment_id(number: str, lang: str) -> str:
    """``("06", "en") -> "06-en"``; a clear ValueError for anything else."""
    number = str(number)
    if not re.fullmatch(r"\d{2}", number):
        raise ValueError(f"number: expected two digits such as '06', got {number!r}")
    if lang not in LANGS:
        raise ValueError(f"lang: expected one of {', '.join(LANGS)}, got {lang!r}")
    return ASSIGNMENT.format(number=number, lang=lang)


def parse_assignment(assignment: str) -> tuple[str, str]:
    """``"06-en" -> ("06", "en")``; a clear ValueError for anything else."""
    m = _ID.match(str(assignment))
    if not m:
        raise ValueError(f"assignment: expected an id NN-lang such as '06-en' (lang zh or en), "
                         f"got {assignment!r}")
    return m.group(1), m.group(2)


def course_numbers(notebook_dir: Path = NOTEBOOK_DIR) -> list[str]:
    """The numbers of the course's notebooks, ``["01", ..., "09"]``."""
    return sorted({p.name[:2] for lang in LANGS for p in (notebook_dir / lang).glob("[0-9][0-9]_*.ipynb")})


def notebook_of(number: str, lang: str, notebook_dir: Path = NOTEBOOK_DIR) -> Path:
    """The instructor notebook ``notebooks/<lang>/<NN>_*.ipynb``."""
    found = sorted((notebook_dir / lang).glob(f"{number}_*.ipynb"))
    if len(found) != 1:
        raise ValueError(f"number: no single notebook {number}_*.ipynb in {notebook_dir / lang} "
                         f"(found {[p.name for p in found]})")
    return found[0]


def selected(numbers=None, notebook_dir: Path = NOTEBOOK_DIR) -> list[str]:
    """The notebook numbers asked for (``"03 06"``, ``["3", "06"]``, None: all), checked."""
    every = course_numbers(notebook_dir)
    if numbers is None or numbers == "" or numbers == []:
        return every
    if isinstance(numbers, str):
        numbers = numbers.replace(",", " ").split()
    out = []
    for n in numbers:
        n = str(n).strip()
        if n.isdigit() and len(n) <= 2:
            n = n.zfill(2)
        if n not in every:
            raise ValueError(f"NB: no notebook {n!r} in the course (numbers are {' '.join(every)})")
        if n not in out:
            out.append(n)
    return sorted(out)


def prepare_source(course_dir: Path, numbers=None, langs=LANGS,
                   notebook_dir: Path = NOTEBOOK_DIR) -> list[str]:
    """Copy ``notebooks/<lang>/<NN>_*.ipynb`` into ``course_dir/source/<NN-lang>/``; return the ids.

    Each source folder then holds exactly that one notebook (an older copy is replaced).
    """
    ids = []
    for number in selected(numbers, notebook_dir):
        for lang in langs:
            path = notebook_of(number, lang, notebook_dir)
            target = Path(course_dir) / "source" / assignment_id(number, lang)
            if target.exists():
                shutil.rmtree(target)
            target.mkdir(parents=True)
            # the notebook with each exercise's hints after its check (never its solution, which
            # nbgrader strips as ever): the hand-out shows the hints the workbook shows
            from attention_course.workbook import with_hints

            nb = with_hints(json.loads(path.read_text(encoding="utf-8")), lang)
            (target / path.name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
            ids.append(assignment_id(number, lang))
    return ids


# --- Merging zh and en, and the LMS layouts -------------------------------------------------------

def best(rows: list[dict]) -> dict[str, dict[str, dict]]:
    """``{student: {NN: row}}``: of a student's rows for one notebook (zh, en), the better score.

    A row has at least ``student``, ``assignment`` (``NN-lang``) and ``score`` (None: not graded,
    counted as 0) and ``max_score``. On a tie the row that comes first in ``rows`` stays.
    """
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        try:
            number, _ = parse_assignment(r["assignment"])
        except ValueError:
            continue                                    # totals, unknown names
        kept = out[r["student"]].get(number)
        if kept is None or (r["score"] or 0) > (kept["score"] or 0):
            out[r["student"]][number] = r
    return dict(out)


def _points(value) -> str:
    return "" if value is None else f"{float(value):g}"


def max_scores(rows: list[dict]) -> dict[str, float]:
    """The points of each notebook number (the larger of zh and en, which are equal in this course)."""
    out: dict[str, float] = {}
    for r in rows:
        try:
            number, _ = parse_assignment(r["assignment"])
        except ValueError:
            continue
        if r.get("max_score") is not None:
            out[number] = max(out.get(number, 0.0), float(r["max_score"]))
    return out


def wide(rows: list[dict], numbers: list[str] | None = None) -> tuple[list[str], list[dict]]:
    """One row per student: ``{"student", "NN": score, ..., "total"}``, zh and en merged (the better).

    A notebook the student did not hand in in either language scores 0. Returns the notebook
    numbers (the columns) and the rows, sorted by student.
    """
    merged = best(rows)
    numbers = numbers or sorted({n for per in merged.values() for n in per})
    out = []
    for student in sorted(merged):
        row = {"student": student}
        for n in numbers:
            r = merged[student].get(n)
            row[n] = float(r["score"] or 0) if r else 0.0
        row["total"] = sum(row[n] for n in numbers)
        out.append(row)
    return numbers, out


def column(number: str, titles: dict[str, str] | None = None) -> str:
    """A grade column's heading: ``"01 library analogy"`` (the English notebook's file name)."""
    if titles and number in titles:
        return titles[number]
    try:
        stem = notebook_of(number, "en").stem
    except ValueError:
        return number
    return stem.replace("_", " ")


def canvas_rows(rows: list[dict], roster: dict[str, dict] | None = None, titles=None,
                numbers: list[str] | None = None) -> list[list[str]]:
    """Canvas's gradebook-import layout: ``Student, ID, SIS User ID, Section``, one column per
    notebook, the second line ``Points Possible``. The total is ``Final Points``, the name of
    Canvas's own read-only column, which an import leaves alone (a column called ``Total`` would
    become an assignment of its own and count the points twice).

    ``roster`` maps a student id to ``{"name", "canvas_id", "section"}`` (all optional): Canvas
    matches a row by ``ID`` or ``SIS User ID``; here the student id is the SIS User ID.
    """
    numbers, table = wide(rows, numbers)
    maxima = max_scores(rows)
    roster = roster or {}
    heads = [column(n, titles) for n in numbers]
    out = [["Student", "ID", "SIS User ID", "Section", *heads, "Final Points"],
           ["Points Possible", "", "", "", *[_points(maxima.get(n)) for n in numbers], "(read only)"]]
    for r in table:
        who = roster.get(r["student"], {})
        out.append([who.get("name") or r["student"], who.get("canvas_id", ""), r["student"],
                    who.get("section", ""), *[_points(r[n]) for n in numbers], _points(r["total"])])
    return out


def moodle_rows(rows: list[dict], titles=None, numbers: list[str] | None = None) -> list[list[str]]:
    """A plain table Moodle's CSV grade import maps: ``username``, one column per notebook, ``Total``."""
    numbers, table = wide(rows, numbers)
    out = [["username", *[column(n, titles) for n in numbers], "Total"]]
    for r in table:
        out.append([r["student"], *[_points(r[n]) for n in numbers], _points(r["total"])])
    return out


LONG_FIELDS = ["student", "assignment", "notebook", "score", "max_score", "late_penalty", "status", "counted"]


def long_rows(rows: list[dict]) -> list[dict]:
    """Every row as it was, with ``counted`` = ``yes`` on the one of zh/en that counts."""
    merged = best(rows)
    counted = {id(r) for per in merged.values() for r in per.values()}
    return [dict(r, counted="yes" if id(r) in counted else "") for r in rows]


def write_table(rows: list[list[str]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    return path


#: The file names of the exports, in the folder given.
CANVAS, MOODLE, LONG = "grades-canvas.csv", "grades-moodle.csv", "grades.csv"


def write_exports(rows: list[dict], out: Path, roster=None, fields=LONG_FIELDS,
                  long_name: str | None = LONG) -> list[Path]:
    """Write the Canvas and Moodle files and (unless ``long_name`` is None) the long form into
    ``out``; return their paths."""
    out = Path(out)
    paths = [write_table(canvas_rows(rows, roster), out / CANVAS),
             write_table(moodle_rows(rows), out / MOODLE)]
    if long_name:
        with (out / long_name).open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(long_rows(rows))
        paths.append(out / long_name)
    return paths


def feedback_zips(feedback: Path, out: Path) -> list[Path]:
    """One zip per student of ``feedback/<student>/<assignment>/*.html``: ``out/<student>.zip``."""
    written = []
    out = Path(out)
    for folder in sorted(p for p in Path(feedback).iterdir() if p.is_dir()):
        pages = sorted(folder.rglob("*.html"))
        if not pages:
            continue
        out.mkdir(parents=True, exist_ok=True)
        target = out / f"{folder.name}.zip"
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
            for page in pages:
                z.write(page, page.relative_to(folder).as_posix())
        written.append(target)
    return written


# --- From nbgrader's gradebook ----------------------------------------------------------------------

def gradebook_rows(db: Path) -> list[dict]:
    """One row per student and assignment of the gradebook: the score after the late penalty.

    Assignments not handed in score 0 (``status`` ``missing``).
    """
    from nbgrader.api import Gradebook, MissingEntry

    rows = []
    with Gradebook(f"sqlite:///{Path(db).resolve()}") as gb:
        students = sorted(s.id for s in gb.students)
        for a in sorted(gb.assignments, key=lambda a: a.name):
            try:
                parse_assignment(a.name)
            except ValueError:
                continue
            notebook = ",".join(nb.name for nb in a.notebooks)
            for student in students:
                try:
                    sub = gb.find_submission(a.name, student)
                except MissingEntry:
                    rows.append(dict(student=student, assignment=a.name, notebook=notebook, score=0.0,
                                     max_score=a.max_score, late_penalty=0.0, status="missing"))
                    continue
                penalty = sub.late_submission_penalty or 0.0
                rows.append(dict(student=student, assignment=a.name, notebook=notebook,
                                 score=max(0.0, sub.score - penalty), max_score=sub.max_score,
                                 late_penalty=penalty, status="late" if penalty else "graded"))
    return rows


def roster_of(db: Path) -> dict[str, dict]:
    """``{id: {"name": "First Last", "canvas_id": lms_user_id}}`` from the gradebook's students
    (the roster that ``nbgrader db student import`` read)."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{Path(db).resolve()}") as gb:
        return {s.id: {"name": " ".join(x for x in (s.first_name, s.last_name) if x) or s.id,
                       "canvas_id": s.lms_user_id or ""}
                for s in gb.students}


def extend(db: Path, assignment: str, student: str, days: float = 0, hours: float = 0) -> None:
    """Give ``student`` an extension on ``assignment`` (replaces an earlier one; 0: none)."""
    from nbgrader.api import Gradebook

    parse_assignment(assignment)
    with Gradebook(f"sqlite:///{Path(db).resolve()}") as gb:
        gb.find_student(student)        # a clear MissingEntry for a student not on the roster
        gb.update_or_create_submission(assignment, student)
        gb.grant_extension(assignment, student, days=days, hours=hours)



def markdown_cells(path: Path) -> list[str]:
    """The text of a notebook's Markdown cells (read as plain JSON: quicker than validating)."""
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in cells if c.get("cell_type") == "markdown"]


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

def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="The term's nbgrader layout and exports.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("source", help="copy notebooks/<lang>/NN_*.ipynb into COURSE/source/NN-lang/")
    p.add_argument("numbers", nargs="*", help="notebook numbers (default: all)")
    p.add_argument("--course", default="course")
    p = sub.add_parser("extend", help="an extension for one student on one assignment")
    p.add_argument("assignment")
    p.add_argument("student")
    p.add_argument("--days", type=float, default=0)
    p.add_argument("--hours", type=float, default=0)
    p.add_argument("--course", default="course")
    p = sub.add_parser("export", help="the Canvas and Moodle files and the long form, from the gradebook")
    p.add_argument("--course", default="course")
    p.add_argument("--out", help="default COURSE/export")
    p = sub.add_parser("feedback", help="one zip of feedback pages per student")
    p.add_argument("--course", default="course")
    p.add_argument("--out", help="default COURSE/feedback-zip")
    args = parser.parse_args(argv)
    course = Path(args.course)
    try:
        if args.command == "source":
            for i in prepare_source(course, args.numbers or None):
                print(course / "source" / i)
        elif args.command == "extend":
            extend(course / "gradebook.db", args.assignment, args.student, args.days, args.hours)
            print(f"{args.student}: {args.assignment} extended by {args.days:g} days {args.hours:g} hours")
        elif args.command == "export":
            db = course / "gradebook.db"
            for path in write_exports(gradebook_rows(db), Path(args.out or course / "export"), roster_of(db)):
                print(path)
        elif args.command == "feedback":
            for path in feedback_zips(course / "feedback", Path(args.out or course / "feedback-zip")):
                print(path)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
