"""The interpreter check (maintainer/check_python.py) that make setup, make lab, make test and the
hand-out run before a venv exists: its bounds are pyproject.toml's, it runs on the old Pythons it
turns away, and make stops on one of them before anything is created. Also: the set-up hints of
the hand-out give a form for Windows wherever they give a POSIX one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from notebook_tools import ROOT, load_tool

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself depends on tomli below 3.11
    import tomli as tomllib

SCRIPT = ROOT / "maintainer" / "check_python.py"
check = load_tool("check_python")
REQUIRES = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]


def always(_name):
    return True


def test_the_bounds_are_requires_python():
    major, minor, below_major, below_minor = map(int, re.fullmatch(r">=(\d+)\.(\d+),<(\d+)\.(\d+)",
                                                                   REQUIRES).groups())
    assert check.OLDEST == (major, minor)
    assert check.NEWEST == (below_major, below_minor - 1)
    assert check.supported() == ["3.10", "3.11", "3.12", "3.13"]


def dotted(version) -> str:
    return ".".join(map(str, version))


@pytest.mark.parametrize("version", [(3, 10, 0), (3, 11, 7), (3, 12, 1), (3, 13, 9)], ids=dotted)
def test_a_supported_python_passes(version):
    assert check.problems(version, "/x/python", has_module=always) == []
    assert check.problems(version, "/x/python", venv=".venv", has_module=always) == []


@pytest.mark.parametrize("version", [(2, 7, 18), (3, 6, 15), (3, 9, 18), (3, 14, 0), (4, 0, 0)], ids=dotted)
def test_another_python_is_told_which_will_do_and_how_to_pick_one(version):
    text = "\n".join(check.problems(version, "/x/python", has_module=always))
    here = dotted(version)
    assert f"This is Python {here} (/x/python)" in text and f"这是 Python {here}" in text
    assert "3.10, 3.11, 3.12, 3.13" in text and "3.10、3.11、3.12、3.13" in text
    for way in ("make lab PYTHON=python3.13", "py -3.13 -m venv .venv", "pyenv install 3.13",
                'PYTHON="$(pyenv prefix 3.13)/bin/python"', "Nothing was created"):
        assert way in text, way


def test_a_venv_made_by_another_python_is_to_be_deleted_in_every_shell():
    text = "\n".join(check.problems((3, 9, 18), "/x/.venv/bin/python", venv=".venv", has_module=always))
    assert "Nothing was created" not in text
    for command in ("rm -rf .venv", "rmdir /s /q .venv", "Remove-Item -Recurse -Force .venv",
                    "make lab PYTHON=python3.13"):
        assert command in text, command


def test_a_python_without_ensurepip_is_sent_to_python3_venv():
    text = "\n".join(check.problems((3, 11, 2), "/usr/bin/python3",
                                    has_module=lambda name: name != "ensurepip"))
    assert "sudo apt install python3-venv" in text and "sudo apt install python3.11-venv" in text
    venv_without_pip = "\n".join(check.problems((3, 11, 2), "/x/.venv/bin/python", venv=".venv",
                                                has_module=lambda name: name != "pip"))
    assert "has no pip" in venv_without_pip and "rmdir /s /q .venv" in venv_without_pip


@pytest.mark.parametrize("makefile, script", [("Makefile", "maintainer/check_python.py"),
                                              ("handout/Makefile", "check_python.py")])
def test_make_checks_the_python_before_it_makes_the_venv(makefile, script):
    text = (ROOT / makefile).read_text(encoding="utf-8")
    rule = re.search(r"^\$\(PY\):\n((?:\t.*\n)+)", text, re.M).group(1).splitlines()
    assert rule == [f"\t@$(PYTHON) {script}", "\t$(PYTHON) -m venv $(VENV)"], rule
    # and with the venv's own Python before anything is installed into a venv made earlier
    stamp = re.search(r"^\$\((?:LEARNER_STAMP|STAMP)\):.*\n\t(.*)\n", text, re.M).group(1)
    assert stamp == f"@$(PY) {script} --venv $(VENV)"


# Where the hand-out tells a learner what to run: its own files, and the build script that writes it.
HANDOUT_FILES = sorted(p for p in (ROOT / "handout").iterdir() if p.is_file()) + [
    ROOT / "instructor" / "build_student.py", SCRIPT]


@pytest.mark.parametrize("path", HANDOUT_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_posix_only_hint_of_the_handout_has_its_windows_form(path):
    text = path.read_text(encoding="utf-8")
    removals = text.count("rm -rf ")
    assert text.count("rmdir /s /q ") == removals and text.count("Remove-Item -Recurse -Force ") == removals
    assert "bin/activate" not in text and "Scripts\\activate" not in text, "nothing to activate"
    for posix in re.findall(r"`(\.venv/bin/python [^`]*)`", text):
        windows = posix.replace(".venv/bin/python", ".venv\\Scripts\\python", 1)
        assert f"`{windows}`" in text or f"\n{windows}\n" in text, f"{path.name}: {posix} without {windows}"


# ------------------------------------------------------------------------- with real interpreters
OLD = ("2.7", "3.6", "3.7", "3.8", "3.9")


def interpreter(version: str) -> str:
    """A Python of ``version`` ("3.9"), installed by pyenv or on PATH; the test skips without one."""
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    for candidate in [*sorted(pyenv.glob(f"{version}.*/bin/python")), shutil.which(f"python{version}")]:
        if candidate is None:
            continue
        # pyenv's shims are on PATH even when they do not run a version
        probe = subprocess.run([str(candidate), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True, encoding="utf-8", timeout=60)
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return str(candidate)
    pytest.skip(f"no Python {version} found (pyenv's versions/{version}.*, or python{version} on PATH)")


@pytest.mark.slow   # runs make and an old interpreter
@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_setup_stops_on_python_3_9_before_anything_is_created(tmp_path):
    python = interpreter("3.9")
    venv = tmp_path / "try-venv"
    start = time.perf_counter()
    run = subprocess.run(["make", "setup", f"PYTHON={python}", f"VENV={venv}"], cwd=ROOT,
                         capture_output=True, text=True, encoding="utf-8", timeout=120)
    seconds = time.perf_counter() - start
    assert run.returncode != 0, run.stdout + run.stderr
    assert "the course needs Python 3.10-3.13 (3.10, 3.11, 3.12, 3.13)" in run.stderr, run.stderr
    assert "make lab PYTHON=python3.13" in run.stderr and "py -3.13" in run.stderr
    assert "requires a different Python" not in run.stdout + run.stderr
    assert not venv.exists() and list(tmp_path.iterdir()) == [], "no venv, nothing else"
    assert seconds < 30, f"{seconds:.1f} s"


@pytest.mark.slow   # runs old interpreters
@pytest.mark.parametrize("version", OLD)
def test_the_check_runs_on_old_pythons(version):
    run = subprocess.run([interpreter(version), str(SCRIPT)], capture_output=True, text=True, timeout=60,
                         encoding="utf-8", errors="replace")
    assert run.returncode == 1, run.stderr
    assert f"This is Python {version}." in run.stderr and "3.10, 3.11, 3.12, 3.13" in run.stderr
    assert "Traceback" not in run.stderr and "SyntaxError" not in run.stderr, run.stderr


@pytest.mark.slow   # runs this interpreter anew
def test_this_python_passes_the_check():
    for args in ([], ["--venv", sys.prefix]):
        run = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                             encoding="utf-8", timeout=60)
        assert (run.returncode, run.stdout, run.stderr) == (0, "", ""), args
