"""The term's layout and exports without nbgrader running: assignment ids, source folders, zh and
en merged (the better counts), the Canvas and Moodle files, the feedback zips, the late policy."""

import csv
import json
import zipfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from attention_course.workbook import stubs
from notebook_tools import ROOT, load_tool

term = load_tool("term")


def test_an_assignment_id_is_number_dash_language_and_parses_back():
    assert term.assignment_id("06", "en") == "06-en"
    assert term.parse_assignment("06-en") == ("06", "en")
    for bad in ("06", "6-en", "06-fr", "06_en", "en", ""):
        with pytest.raises(ValueError, match="assignment: expected an id NN-lang"):
            term.parse_assignment(bad)
    with pytest.raises(ValueError, match="lang: expected one of zh, en, got 'fr'"):
        term.assignment_id("06", "fr")
    with pytest.raises(ValueError, match="number: expected two digits"):
        term.assignment_id("6", "en")


def test_every_course_notebook_gets_one_source_folder_per_language(tmp_path):
    ids = term.prepare_source(tmp_path)
    numbers = term.course_numbers()
    assert len(numbers) == 9 and ids == [f"{n}-{lang}" for n in numbers for lang in ("zh", "en")]
    for i in ids:
        number, lang = term.parse_assignment(i)
        found = list((tmp_path / "source" / i).iterdir())
        assert [p.name for p in found] == [term.notebook_of(number, lang).name]
        # the course's notebook as it is, with each exercise's hints (never its solution) after its check
        made = json.loads(found[0].read_text(encoding="utf-8"))
        course = json.loads((ROOT / "notebooks" / lang / found[0].name).read_text(encoding="utf-8"))
        hints = [c for c in made["cells"] if c.get("metadata", {}).get("workbook", {}).get("help")]
        assert [c for c in made["cells"] if c not in hints] == course["cells"]
        assert len(hints) == sum(stubs.is_solution(c) for c in course["cells"]) >= 3
        assert all("```" not in "".join(c["source"]) for c in hints)


def test_nb_takes_one_or_several_numbers_and_refuses_others(tmp_path):
    assert term.selected("03") == ["03"] and term.selected("6 03") == ["03", "06"]
    assert term.selected(["3", "03"]) == ["03"] and term.selected(None) == term.course_numbers()
    with pytest.raises(ValueError, match="NB: no notebook '42' in the course"):
        term.selected("03 42")
    assert term.prepare_source(tmp_path, "03", ("en",)) == ["03-en"]
    assert sorted(p.name for p in (tmp_path / "source").iterdir()) == ["03-en"]


def row(student, assignment, score, max_score=4.0, status="graded"):
    return dict(student=student, assignment=assignment, notebook=f"{assignment[:2]}_x", score=score,
                max_score=max_score, status=status)


ROWS = [row("alice", "01-zh", 2.0), row("alice", "01-en", 4.0), row("alice", "03-en", 3.0, 5.0),
        row("bob", "01-zh", 1.0), row("bob", "03-zh", None, 5.0, "error"),
        dict(student="bob", assignment="", notebook="total", score=1.0, max_score=9.0, status="graded")]


def test_zh_and_en_of_one_notebook_count_once_the_better():
    best = term.best(ROWS)
    assert best["alice"]["01"]["assignment"] == "01-en" and best["bob"]["01"]["assignment"] == "01-zh"
    numbers, table = term.wide(ROWS)
    assert numbers == ["01", "03"]
    assert table == [{"student": "alice", "01": 4.0, "03": 3.0, "total": 7.0},
                     {"student": "bob", "01": 1.0, "03": 0.0, "total": 1.0}]
    counted = [r["assignment"] for r in term.long_rows(ROWS) if r["counted"]]
    assert counted == ["01-en", "03-en", "01-zh", "03-zh"]


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["01", "02"]),
                          st.sampled_from(["zh", "en"]), st.integers(0, 4)), max_size=12))
def test_the_total_is_the_sum_of_each_notebooks_best(entries):
    rows = [row(s, f"{n}-{lang}", float(p)) for s, n, lang, p in entries]
    _, table = term.wide(rows)
    for r in table:
        mine = [e for e in entries if e[0] == r["student"]]
        assert r["total"] == sum(max([p for s, n, _, p in mine if n == k], default=0) for k in ("01", "02"))


def read(path):
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


def test_the_canvas_file_has_its_import_columns_and_points_possible(tmp_path):
    roster = {"alice": {"name": "Alice Liu", "canvas_id": "1001", "section": "A"}}
    paths = term.write_exports([r for r in ROWS if r["notebook"] != "total"], tmp_path, roster)
    assert [p.name for p in paths] == ["grades-canvas.csv", "grades-moodle.csv", "grades.csv"]
    canvas = read(tmp_path / "grades-canvas.csv")
    assert canvas[0] == ["Student", "ID", "SIS User ID", "Section", term.column("01"), term.column("03"),
                         "Final Points"]     # Canvas's read-only total: no assignment on import
    assert canvas[0][4] == "01 library analogy"
    assert canvas[1] == ["Points Possible", "", "", "", "4", "5", "(read only)"]
    assert canvas[2] == ["Alice Liu", "1001", "alice", "A", "4", "3", "7"]
    assert canvas[3] == ["bob", "", "bob", "", "1", "0", "1"]


def test_the_moodle_file_is_a_username_then_one_column_per_notebook(tmp_path):
    term.write_exports([r for r in ROWS if r["notebook"] != "total"], tmp_path)
    moodle = read(tmp_path / "grades-moodle.csv")
    assert moodle == [["username", "01 library analogy", "03 scaled dot product", "Total"],
                      ["alice", "4", "3", "7"], ["bob", "1", "0", "1"]]
    long = read(tmp_path / "grades.csv")
    assert long[0] == term.LONG_FIELDS and len(long) == 1 + 5
    assert [r[1] for r in long[1:] if r[-1] == "yes"] == ["01-en", "03-en", "01-zh", "03-zh"]


def test_each_student_gets_one_zip_of_their_feedback_pages(tmp_path):
    for student, assignment in (("alice", "01-en"), ("alice", "03-zh"), ("bob", "01-zh")):
        page = tmp_path / "feedback" / student / assignment / f"{assignment[:2]}_x.html"
        page.parent.mkdir(parents=True)
        page.write_text(f"<html>{student} {assignment}</html>", encoding="utf-8")
    (tmp_path / "feedback" / "carol").mkdir()                # nothing to send: no zip
    zips = term.feedback_zips(tmp_path / "feedback", tmp_path / "zips")
    assert [z.name for z in zips] == ["alice.zip", "bob.zip"]
    with zipfile.ZipFile(zips[0]) as z:
        assert sorted(z.namelist()) == ["01-en/01_x.html", "03-zh/03_x.html"]
        assert z.read("03-zh/03_x.html").decode() == "<html>alice 03-zh</html>"


def penalty_plugin():
    """The late-submission plugin exactly as nbgrader_config.py defines and configures it."""
    pytest.importorskip("nbgrader")
    from traitlets.config import Config

    c = Config()
    code = (ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
    exec(compile(code, "nbgrader_config.py", "exec"), {"get_config": lambda: c, "__file__": str(ROOT / "x")})
    return c.AssignLatePenalties.plugin_class()


DAY = 86400


def test_each_started_day_late_costs_a_tenth_of_the_score_at_most_half():
    pytest.importorskip("nbgrader")   # the instructor's group: not in test-pythons' venvs
    from nbgrader.plugins import LateSubmissionPlugin

    plugin = penalty_plugin()
    assert isinstance(plugin, LateSubmissionPlugin)
    pen = plugin.late_submission_penalty
    assert pen("a", 4.0, 0) == 0 and pen("a", 4.0, -5) == 0 and pen("a", 0.0, 3 * DAY) == 0
    assert pen("a", 4.0, 60) == pytest.approx(0.4)           # one minute late is one started day
    assert pen("a", 4.0, DAY) == pytest.approx(0.4)
    assert pen("a", 4.0, DAY + 1) == pytest.approx(0.8)
    assert pen("a", 4.0, 4.5 * DAY) == pytest.approx(2.0)
    assert pen("a", 4.0, 60 * DAY) == pytest.approx(2.0)     # capped: half the score stays


def test_the_course_settings_keep_the_exchange_and_the_course_id():
    pytest.importorskip("nbgrader")
    from traitlets.config import Config

    c = Config()
    code = (ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
    exec(compile(code, "nbgrader_config.py", "exec"), {"get_config": lambda: c,
                                                       "__file__": str(ROOT / "nbgrader_config.py")})
    assert c.CourseDirectory.course_id == "attention_course"
    assert c.Exchange.root == "/srv/nbgrader/exchange"
    assert c.CourseDirectory.root == str(ROOT / "course")
    assert "source_directory" not in c.CourseDirectory      # nbgrader's default: <root>/source/NN-lang/
