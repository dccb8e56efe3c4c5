"""The instructor guide's whole term, command for command: two weeks, three students.

The guide's shell blocks (docs/instructors.md) run as they are written, in a course folder of their
own with its own exchange: the roster, two due dates, each week's release, collect and
``collect --update``, autograde with the late penalty, the re-check, feedback, an extension and a
``--force`` regrade, the exports. The students fetch, submit and fetch their feedback through
nbgrader's exchange, in this process; the test plays the clock by choosing the time each submission
records (the guide's due dates are in September 2026):

- alice hands in both weeks on time, correct;
- bob hands in week 1 two days late (20 % off), week 2 two days late too, then gets three days'
  extension and a regrade (nothing off);
- carol hands in a blank 01 on time, then a correct one before the due date (the resubmission
  counts), and no 02 at all.
"""

import csv
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from notebook_tools import ROOT, nbgrader_meta

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("nbgrader") is None,
                                 reason="nbgrader is an instructor tool (dependency group instructor)"),
              pytest.mark.integration]

WEEKS = {"01-en": "2026-09-14", "02-en": "2026-09-21"}     # the guide's due dates, 23:59 UTC
NOTEBOOK = {"01-en": "01_library_analogy", "02-en": "02_qkv_projections"}


def page(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def route(name: str) -> list[list[str]]:
    """The shell blocks of the term route in one page, as lists of commands (comments dropped)."""
    blocks = re.findall(r"```bash\n(.*?)```", page(name), re.S)
    out = []
    for block in blocks:
        commands = [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines()]
        commands = [c for c in commands if c and not c.startswith("#")]
        if any("nbgrader " in c or "term.py" in c for c in commands):
            out.append(commands)
    return out


STEPS = ("nbgrader db student import", "nbgrader db assignment add", "nbgrader generate_assignment",
         "nbgrader release_assignment", "nbgrader collect ", "nbgrader collect --update",
         "nbgrader autograde", "instructor/recheck.py", "nbgrader generate_feedback",
         "nbgrader release_feedback", "instructor/term.py extend", "--force", "nbgrader export",
         "instructor/term.py export", "instructor/term.py feedback")


def test_the_guide_gives_the_same_term_in_both_languages():
    en, zh = route("instructors.md"), route("instructors.zh-CN.md")
    assert len(en) == 6, "setup, each week, after the due date, extension, regrade, export"
    assert [[re.sub(r"\bzh\b", "en", c) for c in block] for block in zh] == en
    text = "\n".join(c for block in en for c in block)
    for step in STEPS:
        assert step in text, step
    assert en[1][0] == "A=01-en" and '--duedate="2026-09-14 23:59:00 UTC"' in en[0][-2]


def nb_of(assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "notebooks" / "en" / f"{NOTEBOOK[assignment]}.ipynb", as_version=4)


def full_points(assignment: str) -> float:
    return sum(float(nbgrader_meta(c).get("points", 0)) for c in nb_of(assignment).cells
               if nbgrader_meta(c).get("grade"))


class Class:
    """A course folder with the guide's settings, its own exchange, and three students' homes."""

    def __init__(self, root: Path):
        self.root = root
        self.course = root / "course"
        self.exchange = root / "exchange"
        self.exchange.mkdir()
        config = (ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
        (root / "nbgrader_config.py").write_text(
            config + f"\n# this test's own exchange\nc.Exchange.root = {str(self.exchange)!r}\n",
            encoding="utf-8")
        os.symlink(ROOT / "instructor", root / "instructor")
        # the route says `source .venv/bin/activate`: here that puts this interpreter's nbgrader on PATH
        (root / ".venv" / "bin").mkdir(parents=True)
        (root / ".venv" / "bin" / "activate").write_text(
            f'export PATH="{Path(sys.executable).parent}:$PATH"\n', encoding="utf-8")
        (root / "roster.csv").write_text("id,first_name,last_name,email,lms_user_id\n"
                                         "alice,Alice,Liu,alice@example.org,1001\n"
                                         "bob,Bo,Wang,bob@example.org,1002\n"
                                         "carol,Carol,Chen,carol@example.org,1003\n", encoding="utf-8")
        self.log = []

    def run(self, commands: list[str], assignment: str | None = None) -> None:
        # every block runs in the shell the guide's first command prepared (source .venv/bin/activate)
        script = "set -euo pipefail\nsource .venv/bin/activate\n"
        script += (f"A={assignment}\n" if assignment else "") + "\n".join(commands)
        env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        run = subprocess.run(["bash", "-c", script], cwd=self.root, capture_output=True, text=True,
                             encoding="utf-8", timeout=300, env=env)
        self.log.append(run.stdout + run.stderr)
        assert run.returncode == 0, f"{commands}\n{run.stdout}\n{run.stderr}"

    def exchange_app(self, kind, student: str, assignment: str, when: str | None = None):
        from nbgrader.auth import Authenticator
        from nbgrader.coursedir import CourseDirectory
        from nbgrader.exchange import default as exchange
        from traitlets.config import Config

        home = self.root / "home" / student
        home.mkdir(parents=True, exist_ok=True)
        c = Config()
        c.CourseDirectory.course_id = "attention_course"
        c.CourseDirectory.student_id = student
        c.CourseDirectory.assignment_id = assignment
        c.Exchange.root = str(self.exchange)
        c.Exchange.cache = str(self.root / "cache" / student)
        c.Exchange.assignment_dir = str(home)
        coursedir = CourseDirectory(config=c)
        app = getattr(exchange, kind)(coursedir=coursedir, authenticator=Authenticator(config=c), config=c)
        if when:
            # the student hands in at this time: the exchange records it as submit would
            app.set_timestamp = lambda: setattr(app, "timestamp", f"{when}:00.000000 UTC")
        app.start()
        return home / assignment

    def fetch(self, student: str, assignment: str) -> Path:
        return self.exchange_app("ExchangeFetchAssignment", student, assignment)

    def submit(self, student: str, assignment: str, when: str, answered: bool) -> None:
        folder = self.root / "home" / student / assignment
        name = f"{NOTEBOOK[assignment]}.ipynb"
        if answered:       # the instructor's notebook stands for a correct answer
            shutil.copy(ROOT / "notebooks" / "en" / name, folder / name)
        else:
            shutil.copy(self.course / "release" / assignment / name, folder / name)
        self.exchange_app("ExchangeSubmit", student, assignment, when)

    def feedback(self, student: str, assignment: str) -> str:
        folder = self.exchange_app("ExchangeFetchFeedback", student, assignment)
        pages = sorted((folder / "feedback").rglob("*.html"))
        return pages[-1].read_text(encoding="utf-8") if pages else ""


def score_of(html: str) -> tuple[float, float]:
    m = re.search(r"\(Score: ([\d.]+) / ([\d.]+)\)</h4>", html)
    return float(m.group(1)), float(m.group(2))


def penalty_in(html: str) -> float:
    m = re.search(r"Late submission penalty \(Score: -([\d.]+)\)", html)
    return float(m.group(1)) if m else 0.0


def read(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    """The guide's term, run once; returns the class and what each student saw along the way."""
    setup, week, after, extension, regrade, export = route("instructors.md")
    k = Class(tmp_path_factory.mktemp("term"))
    seen = {}
    k.run(setup)
    for assignment, due in WEEKS.items():
        k.run(week[1:], assignment)                    # week[0] is A=01-en: the week's own id instead
        for student in ("alice", "bob", "carol"):
            assert (k.fetch(student, assignment) / f"{NOTEBOOK[assignment]}.ipynb").exists()
        day = int(due[-2:])
        k.submit("alice", assignment, f"{due} 20:00", answered=True)
        k.submit("bob", assignment, f"{due[:-2]}{day + 2:02d} 10:00", answered=True)   # 2 started days
        if assignment == "01-en":
            k.submit("carol", assignment, f"{due} 09:00", answered=False)
        collect, rest = after[:1], after[1:]
        assert collect == ['nbgrader collect "$A"'] and rest[0] == 'nbgrader collect --update "$A"'
        k.run(collect, assignment)
        if assignment == "01-en":
            seen["carol collected first"] = (k.course / "submitted" / "carol" / assignment).exists()
            k.submit("carol", assignment, f"{due} 22:30", answered=True)      # handed in again, in time
        k.run(rest, assignment)
        for student in ("alice", "bob", "carol"):
            seen[(student, assignment)] = k.feedback(student, assignment)
    seen["bob 02 before the extension"] = seen[("bob", "02-en")]
    k.run(extension)
    k.run(regrade)
    seen[("bob", "02-en")] = k.feedback("bob", "02-en")
    k.run(export)
    return k, seen


def test_each_student_sees_their_score_and_late_penalty_in_the_feedback(term):
    _, seen = term
    full1, full2 = full_points("01-en"), full_points("02-en")
    assert full1 > 0 and full2 > 0
    assert score_of(seen[("alice", "01-en")]) == (full1, full1) and penalty_in(seen[("alice", "01-en")]) == 0
    assert score_of(seen[("alice", "02-en")]) == (full2, full2)
    # bob, two started days late: 20 % of his score off
    assert score_of(seen[("bob", "01-en")]) == (pytest.approx(0.8 * full1), full1)   # shown after the penalty
    assert penalty_in(seen[("bob", "01-en")]) == pytest.approx(0.2 * full1)
    assert penalty_in(seen["bob 02 before the extension"]) == pytest.approx(0.2 * full2)
    # carol's resubmission, not her blank first copy, was graded
    assert seen["carol collected first"]
    assert score_of(seen[("carol", "01-en")]) == (full1, full1)
    assert seen[("carol", "02-en")] == ""                   # nothing handed in, no feedback


def test_the_extension_and_the_forced_regrade_take_the_penalty_off(term):
    _, seen = term
    full2 = full_points("02-en")
    assert score_of(seen[("bob", "02-en")]) == (full2, full2)
    assert penalty_in(seen[("bob", "02-en")]) == 0


def test_the_exports_have_one_row_per_student_and_one_column_per_notebook(term):
    k, _ = term
    full1, full2 = full_points("01-en"), full_points("02-en")
    late = full1 - 0.2 * full1
    canvas = read(k.course / "export" / "grades-canvas.csv")
    assert canvas[0] == ["Student", "ID", "SIS User ID", "Section", "01 library analogy",
                         "02 qkv projections", "Final Points"]
    assert canvas[1][:4] == ["Points Possible", "", "", ""] and canvas[1][-1] == "(read only)"
    assert [float(x) for x in canvas[1][4:-1]] == [full1, full2]
    rows = {r[2]: r for r in canvas[2:]}
    assert set(rows) == {"alice", "bob", "carol"}
    assert rows["alice"][:2] == ["Alice Liu", "1001"] and rows["bob"][1] == "1002"
    values = {s: [float(x) for x in r[4:]] for s, r in rows.items()}
    assert values == {"alice": [full1, full2, full1 + full2], "bob": [pytest.approx(late), full2,
                                                                     pytest.approx(late + full2)],
                      "carol": [full1, 0.0, full1]}
    moodle = read(k.course / "export" / "grades-moodle.csv")
    assert moodle[0] == ["username", "01 library analogy", "02 qkv projections", "Total"]
    assert {r[0]: [float(x) for x in r[1:]] for r in moodle[1:]} == values
    with (k.course / "export" / "grades.csv").open(encoding="utf-8") as f:
        long = {(r["student"], r["assignment"]): r for r in csv.DictReader(f)}
    assert long[("bob", "01-en")]["status"] == "late"
    assert float(long[("bob", "01-en")]["late_penalty"]) == pytest.approx(0.2 * full1)
    assert long[("carol", "02-en")]["status"] == "missing"
    # nbgrader's own export: one row per student and assignment, the penalty subtracted there too
    with (k.course / "nbgrader-grades.csv").open(encoding="utf-8") as f:
        own = {(r["student_id"], r["assignment"]): r for r in csv.DictReader(f)}
    assert float(own[("bob", "01-en")]["score"]) == pytest.approx(late)
    assert float(own[("alice", "02-en")]["score"]) == full2


def test_each_student_gets_one_zip_of_feedback(term):
    import zipfile

    k, _ = term
    zips = sorted(p.name for p in (k.course / "feedback-zip").glob("*.zip"))
    assert zips == ["alice.zip", "bob.zip", "carol.zip"]
    with zipfile.ZipFile(k.course / "feedback-zip" / "carol.zip") as z:
        assert z.namelist() == ["01-en/01_library_analogy.html"]


def test_the_recheck_agrees_with_the_gradebook_for_every_submission(term):
    """recheck.py exits 1 on a difference or a flag, which would have stopped the route: here its
    lines also show each week's submissions, and the same score twice (re-check, notebook)."""
    k, _ = term
    lines = [line.split() for text in k.log for line in text.splitlines()
             if re.match(r"(alice|bob|carol)  \d\d-en  ", line)]
    found = {(f[0], f[1]): f for f in lines}
    assert set(found) == {("alice", "01-en"), ("bob", "01-en"), ("carol", "01-en"),
                          ("alice", "02-en"), ("bob", "02-en")}
    for f in found.values():
        assert f[3] == f[5] and float(f[3]) == float(f[4]), f    # re-check, max_score, notebook score
