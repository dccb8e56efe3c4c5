"""attention_course.workbook: stubs as the hand-out's, no solution in a code cell, hints and solution on
request, and a sync that never loses the learner's work (each case of the issue, on a copy)."""

from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path

import pytest

from attention_course import workbook
from attention_course.workbook import build, stubs
from attention_course.workbook.__main__ import main
from notebook_tools import notebook_names

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def source(lang: str, name: str) -> dict:
    return json.loads((NOTEBOOKS / lang / name).read_text(encoding="utf-8"))


def text(cell: dict) -> str:
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def solution_lines(nb: dict) -> set[str]:
    """Every line of every solution that says something (not a bare return, bracket or comment)."""
    lines = set()
    for cell in nb["cells"]:
        if stubs.is_solution(cell):
            for line in stubs.solution_code(cell).split("\n"):
                line = line.strip()
                if len(line) > 12 and not line.startswith("#"):
                    lines.add(line)
    return lines


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("name", notebook_names())
def test_no_code_cell_of_the_workbook_holds_a_solution_line(lang, name):
    src = source(lang, name)
    nb = workbook.workbook_notebook(src, lang)
    code = "\n".join(text(c) for c in nb["cells"] if c["cell_type"] == "code")
    # a line the source also has outside its solutions (rng = ...) is not the solution's
    elsewhere = "\n".join(text(c) for c in src["cells"]
                          if c["cell_type"] == "code" and not stubs.is_solution(c))
    leaked = [line for line in solution_lines(src) if line in code and line not in elsewhere]
    assert not leaked, leaked[:3]
    exercises = [stubs.exercise_id(c) for c in src["cells"] if stubs.is_solution(c)]
    helps = [c for c in nb["cells"] if c.get("metadata", {}).get("workbook", {}).get("help")]
    assert [c["metadata"]["workbook"]["help"] for c in helps] == exercises and len(exercises) >= 3
    first_hint, solution = {"en": ("Hint 1", "Solution"), "zh": ("提示 1", "参考答案")}[lang]
    for cell in helps:                      # hints first, then the solution, collapsed, in Markdown only
        body = text(cell)
        assert cell["cell_type"] == "markdown" and "<details>" in body and "```python" in body
        assert -1 < body.find(f"<summary>{first_hint}") < body.find(f"<summary>{solution}"), body[:80]
    assert build.WORKBOOK_LINE in text(next(c for c in nb["cells"] if c["cell_type"] == "code"))
    # the teaching cells keep their outputs; a stub and its check have none
    kept = [c for c in nb["cells"] if c["cell_type"] == "code" and c.get("outputs")]
    assert kept and all(not stubs.is_solution(c) for c in kept)
    assert len({c["id"] for c in nb["cells"]}) == len(nb["cells"])


@pytest.mark.slow
def test_the_stubs_are_the_hand_outs():
    pytest.importorskip("nbgrader")   # the instructor's group: not in test-pythons' venvs
    import nbformat
    from nbgrader.preprocessors import ClearSolutions
    from traitlets.config import Config

    config = Config()
    config.ClearSolutions.code_stub = {"python": stubs.STUB}
    clear = ClearSolutions(config=config)
    n = 0
    for lang in ("zh", "en"):
        for name in notebook_names():
            for cell in source(lang, name)["cells"]:
                if stubs.is_solution(cell):
                    theirs = nbformat.from_dict(json.loads(json.dumps(cell)))
                    theirs["source"] = text(theirs)
                    clear._replace_solution_region(theirs, "python")
                    assert stubs.stub_source(cell) == theirs["source"], (name, stubs.exercise_id(cell))
                    n += 1
    assert n >= 60
    config_text = (ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
    assert repr(stubs.STUB).strip("'") in config_text.replace('"', "'")


def test_a_solution_without_its_end_marker_is_refused():
    with pytest.raises(ValueError, match="END SOLUTION"):
        stubs.stub_source("def f():\n    ### BEGIN SOLUTION\n    return 1\n")


# --- the sync ------------------------------------------------------------------------------------

@pytest.fixture
def course(tmp_path):
    """A small course (two notebooks of one language) and its workbook, made once."""
    src = tmp_path / "notebooks" / "en"
    src.mkdir(parents=True)
    for name in ("01_library_analogy.ipynb", "03_scaled_dot_product.ipynb"):
        shutil.copy(NOTEBOOKS / "en" / name, src / name)
    wb = tmp_path / "workbook"
    report = workbook.sync(wb, tmp_path / "notebooks", ("en",))
    assert sorted(report.made) == ["en/01_library_analogy.ipynb", "en/03_scaled_dot_product.ipynb"]
    return tmp_path, wb


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def write(path: Path, nb: dict) -> None:
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")


def answer_cell(nb: dict, exercise: str) -> dict:
    return next(c for c in nb["cells"]
                if c.get("metadata", {}).get("workbook", {}).get("exercise") == exercise)


def set_answer(path: Path, exercise: str, code: str) -> None:
    """Write ``code`` into the answer cell of ``exercise`` of the workbook notebook ``path``."""
    nb = read(path)
    answer_cell(nb, exercise)["source"] = code
    write(path, nb)


def change_upstream(root: Path, name: str = "03_scaled_dot_product.ipynb") -> None:
    path = root / "notebooks" / "en" / name
    nb = read(path)
    nb["cells"][0]["source"] = text(nb["cells"][0]) + "\n\nA sentence added upstream."
    write(path, nb)


def test_an_edited_answer_survives_a_rebuild_and_an_upstream_change(course):
    root, wb = course
    target = wb / "en" / "03_scaled_dot_product.ipynb"
    set_answer(target, "nb03-ex1", "def my_attention(q, k, v, mask=None):\n    return 'mine'\n")
    before = target.read_bytes()
    assert workbook.sync(wb, root / "notebooks", ("en",)).unchanged    # same source: untouched
    assert target.read_bytes() == before
    change_upstream(root)
    report = workbook.sync(wb, root / "notebooks", ("en",))
    assert report.updated == ["en/03_scaled_dot_product.ipynb"] and not report.kept_copies
    new = read(target)
    assert "return 'mine'" in text(answer_cell(new, "nb03-ex1"))
    assert "A sentence added upstream." in text(new["cells"][0])


def test_an_added_cell_keeps_the_old_notebook_beside_the_new(course, capsys):
    root, wb = course
    target = wb / "en" / "03_scaled_dot_product.ipynb"
    nb = read(target)
    nb["cells"].insert(3, {"cell_type": "markdown", "id": "mine-1", "metadata": {}, "source": "my note"})
    answer_cell(nb, "nb03-ex2")["source"] = "def continuation_mask(L, S):\n    return 'mine'\n"
    write(target, nb)
    change_upstream(root)
    day = datetime.date(2026, 12, 2)
    report = workbook.sync(wb, root / "notebooks", ("en",), today=day)
    kept = wb / "en" / "03_scaled_dot_product.2026-12-02.ipynb"
    assert report.kept_copies == ["en/03_scaled_dot_product.2026-12-02.ipynb"]
    assert any(c.get("id") == "mine-1" for c in read(kept)["cells"])
    assert "return 'mine'" in text(answer_cell(read(target), "nb03-ex2"))
    assert any("kept as en/03_scaled_dot_product.2026-12-02.ipynb" in line for line in report.lines())
    # a second change the same day does not write over the first copy
    nb = read(target)
    nb["cells"].insert(3, {"cell_type": "markdown", "id": "mine-2", "metadata": {}, "source": "again"})
    write(target, nb)
    change_upstream(root)
    report = workbook.sync(wb, root / "notebooks", ("en",), today=day)
    assert report.kept_copies == ["en/03_scaled_dot_product.2026-12-02-2.ipynb"]
    assert any(c.get("id") == "mine-1" for c in read(kept)["cells"])


def test_an_edited_teaching_cell_is_kept_too(course):
    root, wb = course
    target = wb / "en" / "03_scaled_dot_product.ipynb"
    nb = read(target)
    nb["cells"][5]["source"] = text(nb["cells"][5]) + "\n# my own line"
    write(target, nb)
    change_upstream(root)
    report = workbook.sync(wb, root / "notebooks", ("en",))
    assert len(report.kept_copies) == 1


def test_outputs_and_runs_are_not_edits(course):
    root, wb = course
    target = wb / "en" / "03_scaled_dot_product.ipynb"
    nb = read(target)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], 7        # as after Run All
            cell["source"] = text(cell).split("\n")                  # and another way of storing it
            cell["source"] = [line + "\n" for line in cell["source"][:-1]] + cell["source"][-1:]
    write(target, nb)
    change_upstream(root)
    assert not workbook.sync(wb, root / "notebooks", ("en",)).kept_copies


def test_new_hints_update_the_workbook_and_keep_the_answers(course, monkeypatch):
    import importlib

    syncing = importlib.import_module("attention_course.workbook.sync")    # the module, not its function
    root, wb = course
    target = wb / "en" / "03_scaled_dot_product.ipynb"
    set_answer(target, "nb03-ex3", "def packed_mask(lengths, causal):\n    return 'mine'\n")
    more = {**build.hints(), "nb03-ex3": {"en": ["A new hint about `lengths`."], "zh": ["新提示。"]}}
    monkeypatch.setattr(syncing, "hints", lambda: more)
    report = workbook.sync(wb, root / "notebooks", ("en",))
    assert report.updated == ["en/03_scaled_dot_product.ipynb"] and not report.kept_copies
    new = read(target)
    assert "return 'mine'" in text(answer_cell(new, "nb03-ex3"))
    assert any("A new hint about" in text(c) for c in new["cells"])


def test_a_deleted_notebook_is_made_again_and_the_others_stay(course):
    root, wb = course
    other = wb / "en" / "01_library_analogy.ipynb"
    set_answer(other, "nb01-ex1", "# mine\n")
    before = other.read_bytes()
    (wb / "en" / "03_scaled_dot_product.ipynb").unlink()
    report = workbook.sync(wb, root / "notebooks", ("en",))
    assert report.made == ["en/03_scaled_dot_product.ipynb"]
    assert other.read_bytes() == before


def test_a_notebook_that_does_not_parse_is_left_alone_and_reported(course, capsys, monkeypatch):
    root, wb = course
    target = wb / "en" / "03_scaled_dot_product.ipynb"
    target.write_text('{"cells": [', encoding="utf-8")
    change_upstream(root)
    report = workbook.sync(wb, root / "notebooks", ("en",))
    assert report.not_parsing == ["en/03_scaled_dot_product.ipynb"]
    assert target.read_text(encoding="utf-8") == '{"cells": ['
    monkeypatch.chdir(root)
    assert main(["--lang", "en"]) == 1
    assert "does not parse" in capsys.readouterr().out


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="lang must be 'zh' or 'en'"):
        workbook.workbook_notebook(source("en", "01_library_analogy.ipynb"), "fr")
    with pytest.raises(FileNotFoundError, match="no notebooks in"):
        workbook.sync(tmp_path / "wb", tmp_path / "nowhere", ("en",))


# --- Run All on an untouched workbook ------------------------------------------------------------

@pytest.mark.slow
def test_run_all_on_every_untouched_workbook_notebook(tmp_path):
    """Every notebook of both languages runs to its end with every exercise unanswered: each check
    says so, and the cells that use an answer use the library's function and say so."""
    from concurrent.futures import ThreadPoolExecutor

    import nbformat
    from nbclient import NotebookClient

    report = workbook.sync(tmp_path / "workbook", NOTEBOOKS)
    assert len(report.made) == 18

    def run(rel: str) -> tuple[str, str]:
        path = tmp_path / "workbook" / rel
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        out = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
        return rel, out

    with ThreadPoolExecutor(2) as pool:
        outputs = dict(pool.map(run, sorted(report.made)))
    for rel, out in outputs.items():
        lang = rel.split("/")[0]
        n_exercises = sum(stubs.is_solution(c) for c in source(lang, rel.split("/")[1])["cells"])
        said = out.count("not answered yet") if lang == "en" else out.count("还没有作答")
        assert said >= n_exercises, (rel, said, n_exercises)


def test_a_stubs_check_says_not_answered_only_in_the_workbook(capsys):
    from attention_course import checks
    from attention_course.checks import nb03

    namespace: dict = {}
    exec(stubs.stub_source("def my_attention(q, k, v, mask=None):\n    ### BEGIN SOLUTION\n    return q\n"
                           "    ### END SOLUTION"), namespace)
    stub = namespace["my_attention"]
    try:
        with pytest.raises(NotImplementedError):      # the source notebooks, the hand-out, nbgrader
            nb03.check_attention(stub)
        checks.set_workbook()
        assert nb03.check_attention(stub, lang="zh") is None
        assert "还没有作答" in capsys.readouterr().out
    finally:
        checks.set_workbook(False)
    with pytest.raises(NotImplementedError):
        nb03.check_attention(stub)


def test_answered_tells_a_stub_from_an_answer(tmp_path, monkeypatch):
    from attention_course import checks

    (tmp_path / "answers_mod.py").write_text(
        stubs.stub_source("def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION")
        + "\n\n\ndef g(x):\n    return 2 * x\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import answers_mod

    assert not checks.answered(answers_mod.f) and checks.answered(answers_mod.g)


# --- progress ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_progress_on_a_mixed_workbook(course):
    from attention_course.workbook.progress import progress, table

    root, wb = course
    target = wb / "en" / "03_scaled_dot_product.ipynb"
    nb = read(target)
    solved = next(c for c in source("en", "03_scaled_dot_product.ipynb")["cells"]
                  if stubs.is_solution(c) and stubs.exercise_id(c) == "nb03-ex1")
    answer_cell(nb, "nb03-ex1")["source"] = text(solved)                    # answered
    answer_cell(nb, "nb03-ex2")["source"] = ("import numpy as np\n\ndef continuation_mask(L, S):\n"
                                             "    return np.ones((L, S), dtype=bool)\n")       # wrong
    write(target, nb)                                                       # ex3, ex4: the stubs
    (wb / "en" / "01_library_analogy.ipynb").write_text("{", encoding="utf-8")
    result = progress(wb, root / "notebooks", "en")
    assert result == {"01_library_analogy.ipynb": {"": "does not parse"},
                      "03_scaled_dot_product.ipynb": {"nb03-ex1": "passed", "nb03-ex2": "failed",
                                                      "nb03-ex3": "not tried", "nb03-ex4": "not tried"}}
    lines = table(result, "zh")
    assert lines[-1] == "1 / 4 道练习通过" and any("无法读取" in line for line in lines)
