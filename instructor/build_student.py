"""Build the learners' hand-out: one self-contained folder per language.

The notebooks in notebooks/ are the instructor version (solutions filled in, executed). nbgrader's
``generate_assignment`` of each assignment ``NN-lang`` (one notebook each, instructor/term.py;
settings: nbgrader_config.py) turns them into the student version: every solution between
``### BEGIN SOLUTION`` and ``### END SOLUTION`` becomes ``raise NotImplementedError()``, hidden
tests go, check cells are locked and outputs are cleared.

``build/student/<lang>/`` then holds everything a learner needs and nothing else::

    README.md            two commands (make lab, make test), the route without make, how to hand in
    README.zh-CN.md      the same in Chinese (both READMEs link to each other)
    LICENSE              the code's licence (MIT)
    LICENSE-CONTENT      the licence of the notebooks' text and the figures (CC BY-SA 4.0)
    Makefile             from handout/Makefile
    check_install.py     what make test runs (from handout/check_install.py)
    check_python.py      the interpreter check make lab, make test and the route without make run
                         before .venv exists (maintainer/check_python.py, as it is)
    requirements.txt     the learner's requirements, the library as the wheel below
    wheels/attention_course-<version>+src.<hash>-py3-none-any.whl   the whole library, from src/
    notebooks/<lang>/    the student notebooks

The notebooks read no file beside them (notebook 06's stored bench is package data of the
library), so they run wherever a learner puts them. The instructor notebooks and their solutions
do not ship.

The wheel's version is pyproject.toml's with a local segment, ``+src.<hash>``, computed from the
files of src/: a hand-out built after any change to the library carries another version, so that
``pip install -r requirements.txt`` of the new hand-out replaces the old library.

Usage: python instructor/build_student.py [--out build/student] [--lang zh --lang en] [--notebook 03 ...]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
LANGS = ("zh", "en")
TEMPLATES = ROOT / "handout"
# The same two README names as the repository's, both in every hand-out.
READMES = ("README.md", "README.zh-CN.md")
LICENSES = ("LICENSE", "LICENSE-CONTENT")
# One interpreter check for the repository's Makefile and the hand-out's: the same bounds in both.
CHECK_PYTHON = ROOT / "maintainer" / "check_python.py"
SKIP = shutil.ignore_patterns("*.egg-info", "__pycache__", "*.pyc")


def nbgrader_env() -> dict:
    """The environment nbgrader needs: it runs `alembic` as a program, from this Python's bin/."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def release(lang: str, course: Path, notebooks: list[str] | None = None) -> Path:
    """The student version of the notebooks of one language: nbgrader's ``generate_assignment
    --no-db`` of the assignments ``NN-<lang>`` (one per notebook), with course root ``course``.

    Returns a folder holding the student notebooks, ``course/student/<lang>/``. ``notebooks``
    (numbers such as ``"03"`` or names without .ipynb) limits it to those notebooks.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import term  # beside this file

    numbers = None if not notebooks else [n[:2] for n in notebooks]
    course.mkdir(parents=True, exist_ok=True)
    if (course / "source").exists():
        shutil.rmtree(course / "source")          # only what is asked for now: the glob takes all
    ids = term.prepare_source(course, numbers, (lang,))
    args = [str(Path(sys.executable).with_name("nbgrader")), "generate_assignment", f"*-{lang}", "--no-db",
            "--force", f"--CourseDirectory.root={course}", "--log-level=WARN"]
    # From the repository's root, so nbgrader reads nbgrader_config.py.
    subprocess.run(args, check=True, cwd=ROOT, env=nbgrader_env())
    out = course / "student" / lang
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for assignment in ids:
        for nb in (course / "release" / assignment).glob("*.ipynb"):
            shutil.copy2(nb, out / nb.name)
    return out


def source_hash(src: Path = ROOT / "src") -> str:
    """Eight hex digits of a hash over the library's files (their paths and bytes), caches left out."""
    digest = hashlib.sha256()
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = path.relative_to(src)
        if "__pycache__" in rel.parts or path.suffix == ".pyc" or any(
                part.endswith(".egg-info") for part in rel.parts):
            continue
        digest.update(rel.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:8]


def local_version(pyproject: str, src: Path = ROOT / "src") -> str:
    """pyproject.toml's text with ``version = "X"`` turned into ``version = "X+src.<hash>"``."""
    new, n = re.subn(r'^version = "([^"+]+)"', lambda m: f'version = "{m.group(1)}+src.{source_hash(src)}"',
                     pyproject, count=1, flags=re.M)
    if n != 1:
        raise RuntimeError('pyproject.toml has no line version = "..."')
    return new


def build_wheel(dest: Path) -> Path:
    """The library as a wheel, built from a clean copy of src/ (no egg-info, no caches), its version
    carrying the hash of src/ (see :func:`local_version`) and both licence files."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "attention_course"
        tree.mkdir()
        for name in ("README.md", *LICENSES):
            shutil.copy2(ROOT / name, tree / name)
        (tree / "pyproject.toml").write_text(
            local_version((ROOT / "pyproject.toml").read_text(encoding="utf-8")), encoding="utf-8")
        shutil.copytree(ROOT / "src", tree / "src", ignore=SKIP)
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--no-build-isolation", "--wheel-dir", str(dest), str(tree)],
                       check=True)
    wheels = sorted(dest.glob("attention_course-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one wheel in {dest}, found {wheels}")
    return wheels[0]


def learner_requirements(wheel: str) -> str:
    """The repository's requirements.txt, with the library taken from the wheel instead of `-e .`."""
    lines = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    while lines and lines[0].startswith("#"):     # the repository's heading speaks of the repository
        lines.pop(0)
    lines = ["# What make lab and make test install into .venv/ (Python 3.10-3.13)."] + [
        line for line in lines if not line.strip().startswith("-e")]
    lines += ["# The course's library, attention_course.", wheel]
    return "\n".join(lines) + "\n"


def title(path: Path) -> str:
    """A notebook's title: the first line of its first Markdown cell, without the '#'."""
    nb = nbformat.read(path, as_version=4)
    first = next((c.source for c in nb.cells if c.cell_type == "markdown"), path.stem)
    return first.splitlines()[0].lstrip("# ").strip() if first else path.stem


def fill(template: str, lang: str, notebooks: list[Path]) -> str:
    listing = "\n".join(f"  - [{title(p)}](notebooks/{lang}/{p.name})" for p in notebooks)
    return template.replace("@LANG@", lang).replace("@NOTEBOOKS@", listing)


def build(out: Path, langs=LANGS, numbers: list[str] | None = None) -> dict[str, Path]:
    """Write ``out/<lang>/`` for every language; return the hand-out folder of each.

    ``numbers`` (``["03", "06"]``; None: all) limits the notebooks of the hand-out.
    """
    out = out.resolve()
    written = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        wheel = build_wheel(tmp / "wheels")
        for lang in langs:
            students = release(lang, tmp / "course", numbers)
            target = out / lang
            if target.exists():
                shutil.rmtree(target)
            notebooks_dir = target / "notebooks" / lang
            notebooks_dir.mkdir(parents=True)
            for nb in sorted(students.glob("*.ipynb")):
                shutil.copy2(nb, notebooks_dir / nb.name)
            (target / "wheels").mkdir()
            shutil.copy2(wheel, target / "wheels" / wheel.name)
            (target / "requirements.txt").write_text(learner_requirements(f"wheels/{wheel.name}"),
                                                     encoding="utf-8")
            notebooks = sorted(notebooks_dir.glob("*.ipynb"))
            for name in ("Makefile", "check_install.py", *READMES):
                text = (TEMPLATES / name).read_text(encoding="utf-8")
                (target / name).write_text(fill(text, lang, notebooks), encoding="utf-8")
            for name in LICENSES:
                shutil.copy2(ROOT / name, target / name)
            shutil.copy2(CHECK_PYTHON, target / CHECK_PYTHON.name)
            written[lang] = target
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "student"),
                        help="folder that receives one hand-out per language (default build/student)")
    parser.add_argument("--lang", action="append", choices=LANGS,
                        help="only this language (repeatable; default: all)")
    parser.add_argument("--notebook", action="append", default=[],
                        help="only these notebooks, by number: 03, or '03 06' (repeatable; default: all)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import term

    try:
        numbers = term.selected(" ".join(args.notebook)) if args.notebook else None
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    written = build(Path(args.out), tuple(args.lang or LANGS), numbers)
    for lang, folder in written.items():
        n = len(list((folder / "notebooks" / lang).glob("*.ipynb")))
        print(f"{folder}: {n} student notebooks, the library wheel; give learners this folder"
              " (they run make lab, make test)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
