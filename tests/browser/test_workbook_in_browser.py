"""The learner's workbook in JupyterLab, as a learner meets it: Run All on an untouched notebook,
then one exercise done with the help of its hidden solution.

The workbook is built (``attention_course.workbook.sync``, what ``make lab`` runs) from the course's
English notebook 01 into the lab's root. In the browser:

1. Run > Run All Cells finishes without an error output; the exercise's check says it is not
   answered yet.
2. The solution is in the Markdown cell after the check, collapsed: its code is not on the screen
   until the learner clicks "Solution (try first)".
3. The learner types that code into the stub, runs it (Shift+Enter) and then the check below it
   (Shift+Enter): the check passes.
"""

from __future__ import annotations

import re
import shutil

import pytest
from labdriver import error_outputs, notebooks_dir, open_notebook, run_all_cells, wait_for_run, wait_idle

from attention_course.workbook import sync

NAME = "01_library_analogy.ipynb"
EXERCISE = "stable_softmax"
CHECK_CALL = "check_stable_softmax(stable_softmax)"


def code_cell(page, *texts: str):
    """The code cell whose input holds every one of ``texts`` (exactly one)."""
    cells = page.locator(".jp-CodeCell")
    for text in texts:
        cells = cells.filter(has=page.locator(".jp-InputArea", has_text=text))
    assert cells.count() == 1, f"{cells.count()} code cells hold {texts!r}"
    return cells.first


@pytest.mark.browser
def test_workbook_runs_untouched_then_a_revealed_solution_passes_its_check(page, lab, lab_root, tmp_path):
    source = tmp_path / "notebooks"
    (source / "en").mkdir(parents=True)
    shutil.copy(notebooks_dir() / "en" / NAME, source / "en" / NAME)
    report = sync(lab_root / "workbook", source, ("en",))
    assert report.made == [f"en/{NAME}"], report.lines()
    rel = f"workbook/en/{NAME}"

    open_notebook(page, lab, rel)
    run_all_cells(page)
    assert wait_for_run(page) == "done"
    assert error_outputs(page) == []
    check = code_cell(page, CHECK_CALL)
    assert "not answered yet" in check.locator(".jp-OutputArea").inner_text()

    help_cell = page.locator(".jp-MarkdownCell", has=page.locator("summary", has_text="Solution (try first)"))
    help_cell = help_cell.filter(has_text=f"def {EXERCISE}(")   # the text of closed blocks counts
    assert help_cell.count() == 1
    assert "Hint 1" in help_cell.text_content()
    details = help_cell.locator("details", has=page.locator("summary", has_text="Solution (try first)"))
    solution_code = details.locator("pre")
    help_cell.scroll_into_view_if_needed()
    assert not details.evaluate("d => d.open")
    assert not solution_code.is_visible()
    details.locator("summary").click()
    solution_code.wait_for(state="visible")
    solution = solution_code.inner_text()
    assert solution.startswith(f"def {EXERCISE}(") and "SOLUTION" not in solution, solution

    stub = code_cell(page, f"def {EXERCISE}(", "NotImplementedError")
    stub.locator(".cm-content").click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.insert_text(solution)
    page.keyboard.press("Shift+Enter")   # runs the answer, selects the check below it
    page.keyboard.press("Shift+Enter")   # runs the check
    wait_idle(page)
    output = check.locator(".jp-OutputArea")
    output.filter(has_text="✓").wait_for(timeout=30_000)
    assert re.search(r"✓ stable softmax: all \d+ cases pass", output.inner_text()), output.inner_text()
    assert error_outputs(page) == []
