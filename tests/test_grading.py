"""Grading on nbgrader, end to end: make grade with three students, the re-check, regrading.

One notebook is enough to prove the scores (the fastest to run: the fewest code cells); the
code under test handles any number of notebooks and exercises.
"""

import csv
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from notebook_tools import ROOT, load_tool, nbgrader_meta, notebook_names

pytestmark = pytest.mark.skipif(importlib.util.find_spec("nbgrader") is None,
                                reason="nbgrader is an instructor tool (dependency group instructor)")
pytestmark = [pytestmark, pytest.mark.integration]   # not in the unit tier (tests/conftest.py)

LANG = "en"
GRADE = ROOT / "instructor" / "grade.py"


def fastest_notebook() -> str:
    """The notebook with the fewest code cells: the quickest for nbgrader to run."""
    def n_code(name):
        nb = nbformat.read(ROOT / "notebooks" / LANG / name, as_version=4)
        return sum(c.cell_type == "code" for c in nb.cells)
    return min(notebook_names(), key=n_code)


NAME = fastest_notebook()
STEM = NAME.removesuffix(".ipynb")


def exercises(nb):
    """[(solution cell, [its check cells])] in order."""
    out = []
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta.get("solution"):
            out.append((cell, []))
        elif meta.get("grade") and out:
            out[-1][1].append(cell)
    return out


def points(cells) -> float:
    return sum(float(nbgrader_meta(c)["points"]) for c in cells)


def indent(code: str) -> str:
    return "\n".join("    " + line for line in code.splitlines())


def tampered_copy(blank, instructor):
    """A learner who answers exercise 1 and tampers with every check cell.

    Exercise 1: the correct answer, its check wrapped in try/except. Exercise 2: no answer, check
    replaced by ``pass``. Exercise 3: no answer, check cell deleted. Further exercises: no answer,
    check wrapped in try/except. Graded as if untouched, it earns exercise 1's points only.
    """
    nb = nbformat.from_dict(blank)
    solved = exercises(instructor)
    ex = exercises(nb)
    assert len(ex) >= 3
    ex[0][0].source = solved[0][0].source
    for i, (_, checks) in enumerate(ex):
        for check in checks:
            if i == 1:
                check.source = "pass"
            elif i == 2:
                nb.cells.remove(check)
            else:
                check.source = "try:\n" + indent(check.source) + "\nexcept Exception:\n    pass"
    return nb, points(solved[0][1])


@pytest.fixture(scope="module")
def blank_and_instructor(tmp_path_factory):
    course = tmp_path_factory.mktemp("release")
    release = load_tool("build_student").release(LANG, course, [STEM])
    blank = nbformat.read(release / NAME, as_version=4)
    instructor = nbformat.read(ROOT / "notebooks" / LANG / NAME, as_version=4)
    return blank, instructor


@pytest.fixture(scope="module")
def graded(blank_and_instructor, tmp_path_factory):
    """make grade on three students: blank, correct (the instructor's notebook), tampered; and a
    fourth folder with no notebook in it."""
    blank, instructor = blank_and_instructor
    submitted = tmp_path_factory.mktemp("returned")
    for student in ("blank", "correct", "tampered", "nobody"):
        (submitted / student).mkdir()
    (submitted / "nobody" / "notes.txt").write_text("a folder with no notebook in it\n", encoding="utf-8")
    nbformat.write(blank, submitted / "blank" / NAME)
    shutil.copy(ROOT / "notebooks" / LANG / NAME, submitted / "correct" / NAME)
    tampered, expected = tampered_copy(blank, instructor)
    nbformat.write(tampered, submitted / "tampered" / NAME)
    out = tmp_path_factory.mktemp("grade")
    csv_path = out / "grades.csv"
    run = subprocess.run([sys.executable, str(GRADE), str(submitted), "--out", str(out / "course"),
                          "--csv", str(csv_path)], capture_output=True, text=True, encoding="utf-8",
                         timeout=600)
    with csv_path.open(encoding="utf-8") as f:
        rows = {(r["student"], r["notebook"]): r for r in csv.DictReader(f)}
    return run, rows, expected, points(c for _, checks in exercises(instructor) for c in checks), out


def test_make_grade_scores_blank_correct_and_tampered(graded):
    run, rows, expected, full, _ = graded
    # status 1: the table is complete, but one student folder could not be graded
    assert run.returncode == 1, run.stdout + run.stderr
    assert "nobody/: no course notebook in it, student not graded" in run.stderr
    assert not any(student == "nobody" for student, _ in rows)
    assert full > 0 and 0 < expected < full
    score = {s: float(rows[(s, STEM)]["score"]) for s in ("blank", "correct", "tampered")}
    assert score == {"blank": 0.0, "correct": full, "tampered": expected}
    for s in score:
        assert float(rows[(s, STEM)]["max_score"]) == full
        assert rows[(s, STEM)]["status"].startswith("graded")
    assert rows[("tampered", STEM)]["status"] == "graded, locked cells restored"
    assert "restored" not in rows[("correct", STEM)]["status"]
    # notebooks not returned are listed, and score 0, as nbgrader's gradebook says
    others = [n.removesuffix(".ipynb") for n in notebook_names() if n != NAME]
    for other in others:
        assert rows[("correct", other)]["status"] == "missing"
        assert float(rows[("correct", other)]["score"]) == 0
    assert float(rows[("correct", "total")]["score"]) == full


def test_make_grade_prints_a_table_and_says_what_nbgrader_restored(graded):
    run, _, expected, full, out = graded
    lines = run.stdout.splitlines()
    number = STEM.split("_")[0]
    header = next(line for line in lines if line.startswith("student"))
    assert number in header.split() and "total" in header.split()
    row = {line.split()[0]: line.split() for line in lines[:6] if line.split()}
    assert f"{full:g}/{full:g}" in row["correct"] and f"0/{full:g}" in row["blank"]
    assert f"{expected:g}/{full:g}*" in row["tampered"]
    notes = [line for line in lines if line.startswith("* tampered")]
    assert any("checksum changed" in n for n in notes), run.stdout
    assert any("deleted; nbgrader added it back" in n for n in notes), run.stdout
    assert (out / "course" / "feedback" / "correct" / f"{STEM[:2]}-{LANG}" / f"{STEM}.html").exists()
    # make exits with 2 for any failing recipe: the file keeps grade.py's own status
    assert (out / "course" / "exit-status").read_text(encoding="utf-8") == "1\n"


def write_nb(path: Path, nb) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("layout, message", [
    ("missing", "is not a folder"),
    ("empty", "has no student folders"),
    ("loose", "holds notebooks directly"),
    ("foreign", "no student folder holds a course notebook"),
])
def test_make_grade_refuses_unusable_input(tmp_path, capsys, layout, message):
    submitted = tmp_path / "returned"
    if layout != "missing":
        submitted.mkdir()
    if layout == "loose":
        shutil.copy(ROOT / "notebooks" / LANG / NAME, submitted / NAME)
    if layout == "foreign":
        write_nb(submitted / "alice" / "homework.ipynb", nbformat.v4.new_notebook())
    assert load_tool("grade").main([str(submitted), "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_make_grade_never_empties_a_folder_it_did_not_make(tmp_path, capsys):
    submitted = tmp_path / "returned"
    (submitted / "alice").mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / LANG / NAME, submitted / "alice" / NAME)
    out = tmp_path / "precious"
    out.mkdir()
    (out / "thesis.txt").write_text("keep me\n", encoding="utf-8")
    assert load_tool("grade").main([str(submitted), "--out", str(out)]) == 2
    assert "choose another folder" in capsys.readouterr().err
    assert (out / "thesis.txt").read_text(encoding="utf-8") == "keep me\n"


def test_make_grade_without_a_folder_says_how_to_call_it(capsys):
    assert load_tool("grade").main([]) == 2
    assert "SUBMITTED=" in capsys.readouterr().err


@pytest.mark.parametrize("name", notebook_names())
def test_a_notebook_is_assigned_to_its_language(tmp_path, name):
    term = load_tool("term")
    for lang in ("zh", "en"):
        if (ROOT / "notebooks" / lang / name).exists():
            assert term.language_of(ROOT / "notebooks" / lang / name) == lang
    write_nb(tmp_path / name, nbformat.v4.new_notebook())
    assert term.language_of(tmp_path / name) is None


# The instructor guide's term route, command for command: tests/test_term_route.py.


# --- The re-check, statuses that lose nothing, regrading one student --------------------------

def second_fastest_notebook() -> str:
    def n_code(name):
        nb = nbformat.read(ROOT / "notebooks" / LANG / name, as_version=4)
        return sum(c.cell_type == "code" for c in nb.cells)
    return sorted((n for n in notebook_names() if n != NAME), key=n_code)[0]


def cheating_copy(instructor):
    """Every answer ``return None``; the first answer cell first frees the check module from its
    fresh-copy guard, then replaces every check with one that prints "passed"."""
    nb = nbformat.from_dict(json.loads(json.dumps(instructor)))
    for i, (cell, _) in enumerate(exercises(nb)):
        name = cell.source.split("def ")[1].split("(")[0]
        cell.source = f"def {name}(*args, **kwargs):\n    return None\n"
        if i == 0:
            module = f"nb{STEM[:2]}_checks"
            cell.source = (f"import types\n{module}.__class__ = types.ModuleType\n"
                           f"for _n in dir({module}):\n    if _n.startswith('check_'):\n"
                           f"        setattr({module}, _n, lambda *a, **k: print('passed'))\n" + cell.source)
    return nb


@pytest.fixture(scope="module")
def regraded(blank_and_instructor, tmp_path_factory):
    """make grade on a cheat and a student with one unreadable notebook, one with an unknown name
    and one correct notebook; then the cheat alone regraded after a new hand-in."""
    _, instructor = blank_and_instructor
    other = second_fastest_notebook()
    submitted = tmp_path_factory.mktemp("returned2")
    write_nb(submitted / "cheat" / NAME, cheating_copy(instructor))
    (submitted / "broken").mkdir()
    (submitted / "broken" / NAME).write_text('{"cells": [', encoding="utf-8")
    write_nb(submitted / "broken" / "my_notes.ipynb", nbformat.v4.new_notebook())
    shutil.copy(ROOT / "notebooks" / LANG / other, submitted / "broken" / other)
    out = tmp_path_factory.mktemp("grade2") / "course"
    first = subprocess.run([sys.executable, str(GRADE), str(submitted), "--out", str(out), "--no-feedback"],
                           capture_output=True, text=True, encoding="utf-8", timeout=900)
    rows1 = read_rows(out / "grades.csv")
    shutil.copy(ROOT / "notebooks" / LANG / NAME, submitted / "cheat" / NAME)      # handed in again
    second = subprocess.run([sys.executable, str(GRADE), str(submitted), "--out", str(out), "--no-feedback",
                             "--student", "cheat"], capture_output=True, text=True, encoding="utf-8",
                            timeout=900)
    return first, rows1, second, read_rows(out / "grades.csv"), other


def read_rows(path):
    with path.open(encoding="utf-8") as f:
        return {(r["student"], r["notebook"]): r for r in csv.DictReader(f)}


@pytest.mark.integration
@pytest.mark.slow
def test_the_recheck_is_the_grade_and_a_cheat_is_flagged(regraded):
    first, rows, _, _, _ = regraded
    cheat = rows[("cheat", STEM)]
    assert float(cheat["score"]) == 0 < float(cheat["notebook_score"]), cheat
    # setattr(m, n, ...) with n from dir(m): tampering, and a name not written out
    assert "re-check differs" in cheat["status"]
    assert cheat["flags"] == "course module attribute; dynamic import or name"
    assert first.returncode == 1
    line = next(line for line in first.stdout.splitlines() if line.startswith("cheat"))
    assert "!?" in line
    assert any("flagged for review, course module attribute" in line for line in first.stdout.splitlines())


@pytest.mark.integration
@pytest.mark.slow
def test_an_unreadable_or_unknown_file_is_a_status_and_the_other_notebooks_are_graded(regraded):
    first, rows, _, _, other = regraded
    assert rows[("broken", STEM)]["status"] == "unreadable"
    assert rows[("broken", "my_notes")]["status"] == "unknown name"
    kept = rows[("broken", other.removesuffix(".ipynb"))]
    assert kept["status"] == "graded" and float(kept["score"]) == float(kept["max_score"]) > 0
    assert "unknown name" in first.stdout and "unreadable" in first.stdout


@pytest.mark.integration
@pytest.mark.slow
def test_regrading_one_student_leaves_the_others_as_they_were(regraded):
    _, before, second, after, _ = regraded
    assert second.returncode == 1                   # the broken student's files still need attention
    assert float(after[("cheat", STEM)]["score"]) == float(after[("cheat", STEM)]["max_score"]) > 0
    assert after[("cheat", STEM)]["flags"] == ""
    for key, row in before.items():
        if key[0] != "cheat":
            assert after[key] == row, key


def test_feedback_pages_show_no_machinery_and_no_paths_of_the_grader(graded):
    _, _, _, _, out = graded
    for student in ("blank", "tampered"):
        page = (out / "course" / "feedback" / student / f"{STEM[:2]}-{LANG}" / f"{STEM}.html").read_text(
            encoding="utf-8")
        assert "NotImplementedError" in page
        machinery = ("language", "comparison", "watcher", "loops", "cases", "fresh")
        assert "checks/nb" not in page and not any(f"checks/{m}.py" in page for m in machinery)
        assert str(out) not in page and str(ROOT) not in page


@pytest.mark.integration
@pytest.mark.slow
def test_the_grading_benchmark_runs_a_small_class(tmp_path):
    """CI's small case of benchmarks/grading.py: 3 students × 1 notebook, re-check included."""
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "grading.py"), "--students", "3",
                          "--notebooks", "1", "--keep", str(tmp_path / "bench")],
                         capture_output=True, text=True, encoding="utf-8", timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "make grade, re-check included:" in run.stdout and "the re-check alone" in run.stdout
    rows = read_rows(tmp_path / "bench" / "course" / "grades.csv")
    first = sorted(n.removesuffix(".ipynb") for n in notebook_names())[0]
    assert float(rows[("correct", first)]["score"]) == float(rows[("correct", first)]["max_score"]) > 0
    assert float(rows[("blank", first)]["score"]) == 0
    assert float(rows[("wrapped", first)]["score"]) == 0
    assert rows[("wrapped", first)]["status"] == "graded, locked cells restored"


@pytest.mark.integration
def test_the_recheck_over_nbgraders_submitted_folder_agrees_with_the_gradebook(graded, tmp_path):
    """The term route: recheck.py over submitted/, compared with the gradebook autograde filled."""
    _, rows, _, _, out = graded
    course = out / "course"
    csv_path = tmp_path / "recheck.csv"
    status = load_tool("recheck").main([str(course / "submitted"), "--gradebook",
                                        str(course / "gradebook.db"), "--csv", str(csv_path)])
    assert status == 0
    with csv_path.open(encoding="utf-8") as f:
        found = {(r["student"], r["notebook"]): r for r in csv.DictReader(f)}
    assert set(found) == {(s, STEM) for s in ("blank", "correct", "tampered")}
    for key, r in found.items():
        assert r["differs"] == "" and r["flags"] == ""
        assert float(r["recheck"]) == float(r["notebook_score"]) == float(rows[key]["score"])
