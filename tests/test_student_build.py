"""The hand-out (make student): what each language's folder holds, and what it must not.

Running the hand-out as a learner would (its own venv, make test) is tests/test_handout.py.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from notebook_tools import LANGS, ROOT, load_tool, nbgrader_meta

pytestmark = pytest.mark.skipif(importlib.util.find_spec("nbgrader") is None,
                                reason="nbgrader is an instructor tool (dependency group instructor)")
pytestmark = [pytestmark, pytest.mark.integration]   # not in the unit tier (tests/conftest.py)



def names(lang: str) -> list[str]:
    return sorted(p.name for p in (ROOT / "notebooks" / lang).glob("*.ipynb"))


CASES = [(lang, name) for lang in LANGS for name in names(lang)]
TEXT_SUFFIXES = {".ipynb", ".md", ".txt", ".py", ""}


@pytest.fixture(scope="module")
def handout(tmp_path_factory):
    out = tmp_path_factory.mktemp("build") / "student"
    written = load_tool("build_student").build(out)
    assert set(written) == set(LANGS)
    return out


def text_files(folder: Path):
    return [p for p in folder.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES]


@pytest.mark.parametrize("lang", LANGS)
def test_each_language_is_one_self_contained_folder(handout, lang):
    folder = handout / lang
    top = {p.name for p in folder.iterdir()}
    assert top == {"README.md", "README.zh-CN.md", "LICENSE", "LICENSE-CONTENT", "Makefile",
                   "check_install.py", "check_python.py", "requirements.txt", "wheels", "notebooks"}
    assert (folder / "check_python.py").read_bytes() == (ROOT / "maintainer" / "check_python.py").read_bytes()
    assert [p.name for p in (folder / "notebooks").iterdir()] == [lang]
    assert sorted(p.name for p in (folder / "notebooks" / lang).iterdir()) == names(lang)
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "make lab" in readme and "make test" in readme and "@" not in readme.replace("@@", "")
    for name in names(lang):
        assert f"notebooks/{lang}/{name}" in readme
    makefile = (folder / "Makefile").read_text(encoding="utf-8")
    assert f"--ServerApp.root_dir=notebooks/{lang}" in makefile and "@LANG@" not in makefile


@pytest.mark.parametrize("lang", LANGS)
def test_the_library_ships_whole_as_a_wheel_the_requirements_install(handout, lang):
    folder = handout / lang
    wheels = list((folder / "wheels").glob("attention_course-*-py3-none-any.whl"))
    assert len(wheels) == 1
    shipped = set(zipfile.ZipFile(wheels[0]).namelist())
    package = ROOT / "src" / "attention_course"
    modules = {str(p.relative_to(package.parent)) for p in package.rglob("*.py")
               if "__pycache__" not in p.parts}
    assert modules and modules <= shipped
    requirements = (folder / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert f"wheels/{wheels[0].name}" in requirements
    assert not any(line.startswith("-e") for line in requirements), "nothing from the repository"
    repo = [line for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
            if line and not line.startswith(("#", "-e"))]
    assert set(repo) <= set(requirements)


# relative paths in Markdown links, <img src=...> and string literals
LINK = re.compile(r"""(?:\]\(|src=["']|["'])((?:\.\./|\./)*[\w./-]+"""
                  r"""\.(?:png|jpg|jpeg|gif|svg|md|csv|json|npz|ipynb))""")


@pytest.mark.parametrize("lang", LANGS)
def test_every_relative_link_of_the_notebooks_resolves_inside_the_handout(handout, lang):
    folder = (handout / lang).resolve()
    checked = 0
    for path in (folder / "notebooks" / lang).glob("*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            # f-strings that name the language, as in f"../../figures/x_{LANG}.png", read as that language
            source = re.sub(r"\{(?:LANG|lang)\}", lang, cell.source)
            for link in LINK.findall(source):
                if "://" in link or link.startswith("/"):
                    continue
                target = (path.parent / link).resolve()
                assert target.is_relative_to(folder), f"{path.name}: {link} leaves the hand-out"
                assert target.exists(), f"{path.name}: {link} does not exist in the hand-out"
                checked += 1
    assert checked > 0


@pytest.mark.parametrize("lang, name", CASES)
def test_student_notebook_has_no_solutions_and_no_outputs(handout, lang, name):
    nb = nbformat.read(handout / lang / "notebooks" / lang / name, as_version=4)
    text = nbformat.writes(nb)
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    solutions = [c for c in nb.cells if nbgrader_meta(c).get("solution")]
    assert solutions and all("raise NotImplementedError()" in c.source for c in solutions)
    # each exercise's hints after its check, as in the workbook; never a solution
    hints = [c for c in nb.cells if c.metadata.get("workbook", {}).get("help")]
    assert len(hints) == len(solutions) and all("```" not in c.source for c in hints)
    for c in nb.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None
        if nbgrader_meta(c).get("grade"):
            assert c.metadata.get("editable") is False      # locked for the learner


def solution_regions(nb) -> tuple[list[str], str]:
    """The lines between BEGIN/END SOLUTION in a notebook, and all its text outside them."""
    inside, outside = [], []
    for cell in nb.cells:
        if cell.cell_type != "code":
            outside.append(cell.source)
            continue
        keep = True
        for line in cell.source.splitlines():
            if "### BEGIN SOLUTION" in line:
                keep = False
            elif "### END SOLUTION" in line:
                keep = True
            elif keep:
                outside.append(line)
            else:
                inside.append(line.strip())
    return inside, "\n".join(outside)


@pytest.mark.parametrize("lang", LANGS)
def test_no_solution_text_and_no_instructor_notebook_in_the_handout(handout, lang):
    files = text_files(handout / lang)
    texts = {p: p.read_text(encoding="utf-8") for p in files}
    instructor = {p.read_bytes() for p in (ROOT / "notebooks" / lang).glob("*.ipynb")}
    for p in files:
        assert p.read_bytes() not in instructor, f"{p} is an instructor notebook"
        assert "### BEGIN SOLUTION" not in texts[p] and "### END SOLUTION" not in texts[p]
    # Every line of an answer long enough to be telling, unless a notebook shows it in the open.
    inside, outside = [], []
    for name in names(lang):
        answers, shown = solution_regions(nbformat.read(ROOT / "notebooks" / lang / name, as_version=4))
        inside += answers
        outside.append(shown)
    shown = "\n".join(outside)
    telling = {line for line in inside if len(line) >= 16 and not line.startswith("#") and line not in shown}
    assert telling
    leaks = []
    for p, text in texts.items():
        if p.suffix == ".ipynb":
            text = "\n".join(c.source for c in nbformat.reads(text, as_version=4).cells)
        leaks += [(p.name, line) for line in telling if line in text]
    assert not leaks, leaks


def dry_run(folder: Path, target: str, uid: int, tmp_path: Path) -> str:
    """`make -n target` with `id -u` answering ``uid``."""
    shim = tmp_path / f"bin{uid}"
    shim.mkdir(exist_ok=True)
    (shim / "id").write_text(f"#!/bin/sh\necho {uid}\n", encoding="utf-8")
    (shim / "id").chmod(0o755)
    env = dict(os.environ, PATH=f"{shim}{os.pathsep}{os.environ['PATH']}")
    run = subprocess.run(["make", "-n", target], cwd=folder, env=env, capture_output=True, text=True,
                         encoding="utf-8")
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.mark.parametrize("where", ["repository", "handout"])
def test_make_lab_allows_root_only_for_root_and_keeps_the_token(handout, tmp_path, where):
    folder = ROOT if where == "repository" else handout / "en"
    as_root = [line for line in dry_run(folder, "lab", 0, tmp_path).splitlines() if "jupyter lab" in line]
    as_user = [line for line in dry_run(folder, "lab", 1000, tmp_path).splitlines() if "jupyter lab" in line]
    assert len(as_root) == 1 and len(as_user) == 1
    assert "--allow-root" in as_root[0] and "--allow-root" not in as_user[0]
    for line in as_root + as_user:
        assert "token" not in line.lower() and "password" not in line.lower()


def test_building_the_library_prints_no_deprecation_warning(tmp_path):
    """The wheel (and pip install -e .) build from pyproject.toml without setuptools deprecations."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "LICENSE-CONTENT"):
        (tree / name).write_bytes((ROOT / name).read_bytes())
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                          "--disable-pip-version-check", "--wheel-dir", str(tmp_path / "wheels"), str(tree)],
                         capture_output=True, text=True, encoding="utf-8", timeout=300)
    assert run.returncode == 0, run.stderr
    assert list((tmp_path / "wheels").glob("attention_course-*.whl"))
    assert "Deprecat" not in run.stdout + run.stderr, run.stdout + run.stderr
