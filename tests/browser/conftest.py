"""Fixtures of the browser test: one JupyterLab server and one headless Chromium per session.

The browser tests run only when asked for with ``-m browser`` (``make test-browser``): a plain
``pytest`` or ``make test`` deselects them, since they need Chromium and take minutes.

Without /usr/bin/chromium (or without the ``playwright`` package) they skip with a message on a
learner's machine, and fail when the environment variable ``CI`` is set.

``BROWSER_TEST_NOTEBOOKS=DIR`` runs them on ``DIR/zh/*.ipynb`` and ``DIR/en/*.ipynb`` instead of
the course's notebooks (handy while writing a new notebook).
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import nbformat
import pytest
from labdriver import (
    CHROMIUM,
    CHROMIUM_ARGS,
    FIGURES,
    VIEWPORT,
    LabServer,
    NotebookRun,
    in_ci,
    notebooks_dir,
)


def skip_or_fail(reason: str):
    if in_ci():
        pytest.fail(f"browser test cannot run: {reason} (CI is set: this fails, not skips)",
                    pytrace=False)
    pytest.skip(f"browser test skipped: {reason}")


# -- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def chromium() -> Path:
    hint = ("install it with `sudo bash .ci/browser_setup.sh` (Debian's chromium and "
            "fonts-wqy-microhei), then `make test-browser`")
    if not CHROMIUM.exists():
        skip_or_fail(f"no Chromium at {CHROMIUM}; {hint}")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        skip_or_fail("the playwright package is missing "
                     "(it is in the dependency group dev: `make test-browser` installs it)")
    return CHROMIUM


@pytest.fixture(scope="session")
def work_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("browser")


@pytest.fixture(scope="session")
def lab_root(work_dir) -> Path:
    """A copy of the notebooks folder, laid out as in the repository (with ``figures/`` beside
    it, which notebooks read from and link to), outputs cleared: the stored notebooks stay
    untouched, and Run All Cells shows only what it produced itself.

    The server's root is this ``notebooks`` copy, as with ``make lab``.
    """
    repo = work_dir / "repo"
    root = repo / "notebooks"
    shutil.copytree(notebooks_dir(), root,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    if FIGURES.is_dir():
        shutil.copytree(FIGURES, repo / "figures")
    for path in root.rglob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = []
                cell.execution_count = None
        nbformat.write(nb, path)
    return root


@pytest.fixture(scope="session")
def lab(chromium, lab_root, work_dir):
    server = LabServer(lab_root, work_dir / "jupyter")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser_context(chromium, work_dir):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(work_dir / "chromium-profile"),  # a fresh user-data dir
            executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS,
            viewport=VIEWPORT, locale="en-US", timezone_id="UTC")
        context.set_default_timeout(30_000)
        yield context
        context.close()


@pytest.fixture
def page(browser_context, lab):
    page = browser_context.new_page()
    yield page
    page.close()
    lab.shutdown_sessions()


# -- what the runs did, printed at the end ---------------------------------------------------
# make test-browser runs two pytest-xdist workers, each with its own JupyterLab and Chromium; a
# worker hands its runs to the controller, which prints them all in the notebooks' order.
RUNS: list = []


@pytest.fixture
def record_run():
    return RUNS.append


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["browser_runs"] = [dataclasses.asdict(run) for run in RUNS]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    RUNS.extend(NotebookRun(**run) for run in getattr(node, "workeroutput", {}).get("browser_runs", []))


def run_order(run) -> tuple:
    lang = run.path.split("/", 1)[0]
    return ({"zh": 0, "en": 1}.get(lang, 2), run.path)


def pytest_terminal_summary(terminalreporter):
    if not RUNS:
        return
    tr = terminalreporter
    tr.section("browser test: time per notebook and the controls moved")
    for run in sorted(RUNS, key=run_order):
        parts = ", ".join(f"{k} {v:.1f}" for k, v in run.seconds.items())
        tr.write_line(f"{run.path}: {run.total:.1f} s ({parts}); "
                      f"{run.widgets} widget(s), {len(run.moved)} control(s) moved")
        for line in run.moved:
            tr.write_line(f"    {line}")
        for line in run.tolerated:
            tr.write_line(f"    tolerated: {line}")
        for line in run.problems:
            tr.write_line(f"    {'caught, planted on purpose:' if run.planted else 'PROBLEM'} "
                          f"{line}")
    tr.write_line(f"total in notebooks: {sum(r.total for r in RUNS):.1f} s "
                  f"for {len(RUNS)} notebook run(s)")
