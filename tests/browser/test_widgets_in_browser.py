"""Every notebook, in both languages, in JupyterLab in headless Chromium, as a learner uses it.

For each notebook (a copy): open it, wait for its kernel, Run > Run All Cells, wait until the
kernel is idle with every cell run, then move every control of every widget (sliders by
keyboard, dropdowns, toggles, checkboxes) and check that the figure the widget shows changed
each time; then drag every slider fast with the mouse, back and forth, and check that the
picture it ends on is the one of its final value (the same bytes as after stepping one notch
away and back; no time is asserted). Then: no error or stderr output on the page, nothing in the
log console (where a traceback raised inside a widget callback lands), no browser console error.
A screenshot per passing notebook goes to build/screenshots/screenshot_<lang>_<NN>.png; make
screenshots copies them into figures/, where the READMEs show them.

The last test runs a deliberately broken widget through the same checks, so the checks are
known to catch what they are meant to catch.
"""

from __future__ import annotations

import re
import shutil

import nbformat
import pytest
from labdriver import (
    REPO,
    SCREENSHOTS,
    course_notebooks,
    exercise_notebook,
    in_ci,
    notebooks_dir,
    screenshot_name,
)

NOTEBOOKS = course_notebooks()


@pytest.mark.browser
@pytest.mark.parametrize("notebook", NOTEBOOKS or ["(none)"])
def test_notebook_widgets_work_in_browser(notebook, page, lab, work_dir, record_run):
    if not NOTEBOOKS:
        message = "no notebooks in notebooks/zh or notebooks/en"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    shot = work_dir / "screenshots" / screenshot_name(notebook)
    try:
        run = exercise_notebook(page, lab, notebook, screenshot=shot)
    except Exception as exc:  # a time-out or a vanished element: say where it stood
        stuck = shot.with_name("stuck_" + shot.name)
        page.screenshot(path=str(stuck))
        raise AssertionError(f"{notebook}: {type(exc).__name__}: {exc}\n(screenshot: {stuck})"
                             f"\nJupyterLab log, last lines:\n{lab.log_tail(15)}") from exc
    record_run(run)
    if run.problems:
        pytest.fail(f"{notebook} in the browser:\n  " + "\n  ".join(run.problems)
                    + f"\n(screenshot: {shot}; JupyterLab log: {lab.log_path})", pytrace=False)
    # Only a passing course notebook's screenshot is offered for the README (make screenshots).
    if notebooks_dir() == REPO / "notebooks":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, SCREENSHOTS / shot.name)


BROKEN = '''\
import ipywidgets as w
from matplotlib import pyplot as plt
from attention_course.widgets.renderer import Explorer


class RaisesInCompute(Explorer):
    def __init__(self):
        super().__init__({"n": w.IntSlider(value=3, min=1, max=8, description="n")})

    def compute(self, n):
        if n == 4:
            raise ValueError("compute broke at n=4")
        return {"n": n}

    def draw(self, data):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot(range(data["n"]))
        return fig


class InertAndRaisesInDraw(RaisesInCompute):
    def __init__(self):
        Explorer.__init__(self, {
            "inert": w.Checkbox(value=False, description="inert"),
            "style": w.Dropdown(options=["a", "b"], value="a", description="style")})

    def compute(self, inert, style):
        return {"n": 3, "style": style}      # the checkbox changes nothing that is drawn

    def draw(self, data):
        if data["style"] == "b":
            raise KeyError("draw broke at style b")
        return super().draw(data)


class ShowsAnOlderValue(Explorer):
    """Its picture lags two changes behind the slider: a fast drag ends on a stale picture."""
    figsize = (3, 2)

    def __init__(self):
        self.seen = [-2, -1]
        super().__init__({"k": w.IntSlider(value=0, min=0, max=40, description="k")})

    def compute(self, k):
        self.seen.append(k)
        return {"k": self.seen[-3]}

    def build(self, fig, data):
        ax = fig.subplots()
        (line,) = ax.plot([0, 1], [0, 0])
        ax.set_ylim(-3, 41)
        return {"line": line}

    def update(self, art, data):
        art["line"].set_ydata([data["k"], data["k"]])
        return [art["line"]]


first = RaisesInCompute()
display(first)
display(ShowsAnOlderValue())
second = InertAndRaisesInDraw()
second'''


@pytest.mark.browser
def test_checks_catch_a_broken_widget(page, lab, lab_root, record_run):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(BROKEN),
                nbformat.v4.new_code_cell('import sys; print("to stderr", file=sys.stderr)'),
                nbformat.v4.new_code_cell('from IPython.display import Javascript\n'
                                          'Javascript("console.error(\'from the page\')")')]
    (lab_root / "selftest").mkdir(exist_ok=True)
    nbformat.write(nb, lab_root / "selftest" / "broken.ipynb")

    run = exercise_notebook(page, lab, "selftest/broken.ipynb", screenshot=None,
                            change_timeout_ms=3_000)
    run.planted = True
    record_run(run)
    problems = "\n".join(run.problems)
    assert run.widgets == 3, problems
    assert "widget 1: slider 'n' ArrowRight (3 -> 4): the displayed output did not change" \
        in problems, problems
    assert "widget 3: checkbox 'inert' click: the displayed output did not change" \
        in problems, problems
    assert re.search(r"widget 2: slider 'k' dragged \(\d+ -> \d+\): the picture shown after "
                     r"the drag is not the one of the slider's final value", problems), problems
    assert not re.search(r"widget 2: slider 'k' ArrowRight.*did not change", problems), problems
    assert "ValueError: compute broke at n=4" in problems, problems
    assert "KeyError: 'draw broke at style b'" in problems, problems
    assert "error output on the page: to stderr" in problems, problems
    assert "browser console.error: from the page" in problems, problems
