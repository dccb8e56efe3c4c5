"""The parts of instructor/grade.py that need no nbgrader: causes, retries, totals, merging, marks."""

from pathlib import Path

from notebook_tools import load_tool

grade = load_tool("grade")


def test_the_cause_is_the_real_error_line_not_the_pointer_to_it():
    result = {"error": "Traceback ...\n"
                       "zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5555')\n"
                       "nbgrader.preprocessors.execute.UnresponsiveKernelError: "
                       "Please see the above traceback"}
    assert grade.cause(result).startswith("zmq.error.ZMQError: Address already in use")
    assert grade.cause({"error": "", "log": "something odd\n"}) == "something odd"
    assert grade.cause({}) == "unknown error"


class FlakyAPI:
    """autograde fails to start a kernel ``failures`` times, then succeeds."""

    def __init__(self, failures, error="zmq.error.ZMQError: Address already in use"):
        self.failures, self.error, self.calls = failures, error, []

        class Dir:
            notebook_id = "*"
        self.coursedir = Dir()

    def autograde(self, lang, student):
        self.calls.append(self.coursedir.notebook_id)
        if len(self.calls) <= self.failures:
            return {"success": False, "error": self.error, "log": ""}
        return {"success": True, "log": ""}


def test_a_kernel_that_fails_to_start_is_tried_again():
    sub = grade.Submission("alice", "en")
    api = FlakyAPI(2)
    assert grade.autograde(api, sub, None)["success"]
    assert len(api.calls) == 3 and api.coursedir.notebook_id == "*"
    assert sum("a kernel did not start" in n for n in sub.notes) == 2


def test_after_three_failed_starts_the_cause_is_reported():
    sub = grade.Submission("alice", "en")
    result = grade.autograde(FlakyAPI(5), sub, None)
    assert not result["success"] and "Address already in use" in grade.cause(result)


def test_another_failure_is_not_retried_and_one_notebook_is_graded_alone():
    sub = grade.Submission("alice", "en")
    api = FlakyAPI(1, error="ValueError: bad notebook")
    assert not grade.autograde(api, sub, ["03_scaled_dot_product"])["success"]
    assert api.calls == ["03_scaled_dot_product"] and api.coursedir.notebook_id == "*"


def row(student, notebook, score, status="graded", flags="", lang="en", max_score=4.0):
    assignment = f"{notebook[:2]}-{lang}" if lang else ""
    return dict(student=student, assignment=assignment, notebook=notebook, score=score, max_score=max_score,
                status=status, notebook_score=score, flags=flags)


def test_totals_count_unreadable_as_zero_and_skip_unknown_names_and_errors():
    rows = grade.with_totals([row("a", "01", 4.0), row("a", "03", 0.0, "unreadable"),
                              row("a", "notes", None, "unknown name", lang=""),
                              row("b", "01", None, "error")])
    totals = {r["student"]: r for r in rows if r["notebook"] == "total"}
    assert set(totals) == {"a"} and totals["a"]["score"] == 4.0 and totals["a"]["max_score"] == 8.0


def test_a_notebook_handed_in_in_both_languages_counts_once_the_better():
    rows = grade.with_totals([row("a", "01_x", 1.0, lang="zh"), row("a", "01_x", 3.0),
                              row("a", "03_y", 2.0, lang="zh")])
    total = next(r for r in rows if r["notebook"] == "total")
    assert total["score"] == 5.0 and total["max_score"] == 8.0
    assert [(r["assignment"], r["counted"]) for r in rows if r["notebook"] != "total"] == [
        ("01-en", "yes"), ("01-zh", ""), ("03-zh", "yes")]
    text = grade.table(rows)
    line = next(x for x in text.splitlines() if x.startswith("a "))
    assert line.split() == ["a", "zh+en", "3/4", "2/4", "5/8"]
    assert grade.both_languages(rows) == [
        "a 01: handed in twice (01-en 3/4, 01-zh 1/4); the better, 01-en, counts"]


def test_a_regrade_keeps_the_earlier_rows_of_everyone_else(tmp_path):
    earlier = [row("a", "01", 4.0), row("b", "01", 1.0, "graded, re-check differs", "thread or process")]
    grade.write_csv(grade.with_totals(earlier), tmp_path / "grades.csv")
    merged = grade.with_totals(grade.merged_with_earlier([row("b", "01", 3.0)], tmp_path / "grades.csv"))
    by = {(r["student"], r["notebook"]): r for r in merged}
    assert len(merged) == 4
    assert by[("a", "01")]["score"] == 4.0 and by[("b", "01")]["score"] == 3.0
    assert by[("b", "total")]["score"] == 3.0 and by[("a", "total")]["score"] == 4.0


def test_the_table_marks_restored_different_and_flagged_notebooks():
    text = grade.table(grade.with_totals([
        row("a", "01_x", 1.0, "graded, locked cells restored"),
        row("b", "01_x", 0.0, "graded, re-check differs", "course module attribute"),
        row("c", "01_x", 0.0, "unreadable")]))
    lines = {line.split()[0]: line for line in text.splitlines()[2:]}
    assert "1/4*" in lines["a"] and "0/4!?" in lines["b"] and "unreadable" in lines["c"]


def test_attention_is_needed_for_every_status_but_graded_and_missing():
    assert not grade.needs_attention([row("a", "01", 4.0), row("a", "03", 0.0, "missing")], [])
    for status in ("unreadable", "unknown name", "error", "no course notebook", "graded, re-check differs"):
        assert grade.needs_attention([row("a", "01", 0.0, status)], [])
    assert grade.needs_attention([row("a", "01", 4.0, flags="builtins")], [])
    assert Path(grade.__file__).name == "grade.py"
