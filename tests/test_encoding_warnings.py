"""Every text file the project reads or writes names its encoding (PEP 597), and the tests enforce it.

Started with ``PYTHONWARNDEFAULTENCODING=1`` (make test) or ``-X warn_default_encoding``, Python
warns (``EncodingWarning``) where a file, a pipe or ``Path.read_text`` is opened in text mode
without ``encoding=``: the locale's encoding would be used, cp1252 or cp936 on some machines, and a
file of the course (UTF-8, Chinese text in many) would be misread. The ``filterwarnings`` of
pyproject.toml make that warning an error where the code that opened the file is the project's own,
and ignore it in third-party code; a warning names the module it comes from, so the rule is a
pattern of module names. These tests check that the rule is in force under the flag, that it fails
a project module that opens a text file without an encoding, and that its pattern covers every
module of the project that a test process imports and no third-party or standard module.

The warning comes only from code that runs in a test process; a script's code that only a slow test
or a maintainer runs (a program a test starts, a benchmark, the classroom trial) is read instead:
:func:`test_every_text_file_of_the_project_names_its_encoding` finds the calls that would warn.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import pkgutil
import re
import sys
import warnings
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

import attention_course
from notebook_tools import ROOT, TOOL_DIRS

FLAG = bool(sys.flags.warn_default_encoding)
needs_flag = pytest.mark.skipif(not FLAG, reason=(
    "Python was started without PYTHONWARNDEFAULTENCODING=1 or -X warn_default_encoding (make test "
    "sets the variable): it emits no EncodingWarning, so there is no rule to see at work"))


def rule(config) -> re.Pattern:
    """The module pattern of the ``error::EncodingWarning`` entry of the ini's filterwarnings."""
    entries = [e for e in config.getini("filterwarnings") if e.startswith("error::EncodingWarning:")]
    assert len(entries) == 1, f"one error::EncodingWarning entry with a module pattern expected: {entries}"
    return re.compile(entries[0].split(":")[3])


# ------------------------------------------------------------------------------ the rule at work
@needs_flag
def test_the_error_is_in_force_for_the_library():
    errors = [f for f in warnings.filters if f[0] == "error" and f[2] is EncodingWarning]
    assert any(f[3] is not None and f[3].match("attention_course.softmax") for f in errors), errors


PROBE = '''
import io
from pathlib import Path


def with_open(path):
    with open(path) as f:
        return f.read()


def with_read_text(path):
    return Path(path).read_text()


def with_write_text(path):
    Path(path).write_text("x")


def with_text_wrapper(path):
    return io.TextIOWrapper(io.BytesIO(b"x")).read()
'''
WAYS = ["with_open", "with_read_text", "with_write_text", "with_text_wrapper"]


def load_probe(folder: Path, name: str):
    """A module named ``name`` (not put in ``sys.modules``) whose functions open a text file
    without an encoding."""
    path = folder / "encoding_probe.py"
    path.write_text(PROBE, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_flag
@pytest.mark.parametrize("name", ["attention_course._encoding_probe", "attention_course.checks.probe",
                                  "test_encoding_probe", "grade", "bench_run_probe"])
@pytest.mark.parametrize("way", WAYS)
def test_a_project_module_that_names_no_encoding_fails(tmp_path, name, way):
    module = load_probe(tmp_path, name)
    data = tmp_path / "data.txt"
    data.write_text("x", encoding="utf-8")
    with pytest.raises(EncodingWarning):
        getattr(module, way)(data)


@needs_flag
@pytest.mark.parametrize("name", ["matplotlib._encoding_probe", "nbgrader", "terminado.probe", "json"])
def test_third_party_and_standard_modules_are_not_ours_to_fix(tmp_path, name):
    module = load_probe(tmp_path, name)
    data = tmp_path / "data.txt"
    data.write_text("x", encoding="utf-8")
    for way in WAYS:
        getattr(module, way)(data)


# ------------------------------------------------------------------------------ what the rule names
@functools.cache
def loaded_names() -> frozenset[str]:
    """The names under which the tests load the project's scripts: the first argument of every
    ``spec_from_file_location`` in tests/, and, where that is a parameter of a helper (load_tool),
    what the calls of that helper pass. A placeholder of an f-string stands for a word."""
    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in (ROOT / "tests").rglob("*.py")}

    def literal(node) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else "word" for v in node.values)
        return None

    names, helpers = set(), {}                      # helper name -> index of its name parameter
    for tree in trees.values():
        for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)] + [tree]:
            params = [a.arg for a in func.args.args] if isinstance(func, ast.FunctionDef) else []
            for call in ast.walk(func):
                if (isinstance(call, ast.Call) and call.args
                        and getattr(call.func, "attr", None) == "spec_from_file_location"):
                    first = call.args[0]
                    if literal(first) is not None:
                        names.add(literal(first))
                    elif isinstance(first, ast.Name) and first.id in params:
                        helpers[func.name] = params.index(first.id)
    for tree in trees.values():
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in helpers:
                index = helpers[call.func.id]
                if len(call.args) > index and literal(call.args[index]) is not None:
                    names.add(literal(call.args[index]))
    return frozenset(names)


def project_module_names() -> set[str]:
    library = {attention_course.__name__} | {
        m.name for m in pkgutil.walk_packages(attention_course.__path__, attention_course.__name__ + ".")}
    tests = {p.stem for p in (ROOT / "tests").rglob("*.py")}
    tools = {p.stem for d in TOOL_DIRS for p in (ROOT / d).glob("*.py")}
    return library | tests | tools | loaded_names()


def test_the_scripts_loaded_by_the_tests_are_found():
    names = loaded_names()
    assert {"grade", "build_student", "make_backprop_reference"} <= names, names
    assert any(n.startswith("bench_") for n in names), names


def test_the_rule_covers_every_module_of_the_project(request):
    pattern = rule(request.config)
    missing = sorted(n for n in project_module_names() if not pattern.match(n))
    assert not missing, (
        f"modules of the project that the EncodingWarning rule of pyproject.toml does not cover: {missing}; "
        "add their names (or a pattern for them) to its module field")


def test_the_rule_leaves_third_party_and_standard_modules_alone(request):
    pattern = rule(request.config)
    others = {name for name, dists in packages_distributions().items() if "attention_course" not in dists}
    others |= set(sys.stdlib_module_names)
    caught = sorted(n for n in others if pattern.match(n))
    assert not caught, f"the EncodingWarning rule of pyproject.toml would fail code of {caught}"


# ------------------------------------------------------------------------------ read, not run
PROJECT_DIRS = ("src", "tests", "benchmarks", "instructor", "maintainer", "classroom", "handout", ".ci")
SUBPROCESS = {"run", "Popen", "check_output", "check_call", "call"}
TEMPFILES = {"NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile"}


def _keyword(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


def _text_mode(mode) -> bool:
    """Whether a mode argument (None: the default "r") opens a file as text; unknown counts as not."""
    if mode is None:
        return True
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and "b" not in mode.value


def _is_path(node) -> bool:
    """``Path(...)``, ``a / b`` or a name ending in "path": what ``.open()`` is pathlib's on."""
    if isinstance(node, ast.Call):
        return getattr(node.func, "id", getattr(node.func, "attr", None)) in ("Path", "PurePath")
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, ast.Div)
    name = getattr(node, "id", getattr(node, "attr", ""))
    return name.lower().endswith("path")


def unnamed_encoding(call: ast.Call) -> str | None:
    """What a call opens as text without ``encoding=``, or None."""
    if _keyword(call, "encoding") is not None or any(k.arg is None for k in call.keywords):
        return None
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    owner = getattr(func.value, "id", None) if isinstance(func, ast.Attribute) else None
    if name == "open" and (isinstance(func, ast.Name) or owner == "io"):
        mode = _keyword(call, "mode") or (call.args[1] if len(call.args) > 1 else None)
        return "open()" if _text_mode(mode) else None
    if name == "open" and isinstance(func, ast.Attribute) and _is_path(func.value):
        mode = _keyword(call, "mode") or (call.args[0] if call.args else None)
        return "Path.open()" if _text_mode(mode) and len(call.args) < 3 else None
    if name == "read_text" and not call.args:
        return "read_text()"
    if name == "write_text" and len(call.args) < 2:
        return "write_text()"
    if name in SUBPROCESS and (owner == "subprocess" or isinstance(func, ast.Name)):
        text = _keyword(call, "text") or _keyword(call, "universal_newlines") or _keyword(call, "errors")
        flag = text is not None and not (isinstance(text, ast.Constant) and text.value in (False, None))
        return f"subprocess.{name}(text=True)" if flag else None
    if name == "TextIOWrapper" and len(call.args) < 2:
        return "TextIOWrapper()"
    if name == "fdopen":
        mode = _keyword(call, "mode") or (call.args[1] if len(call.args) > 1 else None)
        return "os.fdopen()" if _text_mode(mode) else None
    if name in TEMPFILES:
        mode = _keyword(call, "mode") or (call.args[0] if call.args else None)
        return f"{name}()" if mode is not None and _text_mode(mode) else None
    return None


def project_sources() -> list[Path]:
    files = [p for d in PROJECT_DIRS for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(files + list(ROOT.glob("*.py")))


@pytest.mark.parametrize(("source", "found"), [
    ("open(p)", "open()"), ("open(p, 'w')", "open()"), ("io.open(p, mode='a')", "open()"),
    ("Path(p).open()", "Path.open()"), ("(d / 'x').open('w')", "Path.open()"),
    ("log_path.open()", "Path.open()"),
    ("p.read_text()", "read_text()"), ("p.read_text(errors='replace')", "read_text()"),
    ("p.write_text('x')", "write_text()"),
    ("subprocess.run(['ls'], text=True)", "subprocess.run(text=True)"),
    ("subprocess.Popen(['ls'], universal_newlines=True)", "subprocess.Popen(text=True)"),
    ("run(['ls'], capture_output=True, text=True)", "subprocess.run(text=True)"),
    ("io.TextIOWrapper(raw)", "TextIOWrapper()"), ("os.fdopen(fd, 'w')", "os.fdopen()"),
    ("tempfile.NamedTemporaryFile('w')", "NamedTemporaryFile()"),
    # named, binary, or not a file of text
    ("open(p, encoding='utf-8')", None), ("open(p, 'rb')", None), ("open(p, mode)", None),
    ("p.read_text(encoding='utf-8')", None), ("p.read_text('utf-8')", None),
    ("p.write_text('x', 'utf-8')", None),
    ("subprocess.run(['ls'], text=True, encoding='utf-8')", None), ("subprocess.run(['ls'])", None),
    ("subprocess.run(['ls'], text=False)", None), ("Image.open(p)", None), ("zf.open('a.txt', 'r')", None),
    ("webbrowser.open(url)", None), ("os.open(p, os.O_RDONLY)", None),
    ("tempfile.NamedTemporaryFile()", None),
    ("open(p, **kwargs)", None), ("io.TextIOWrapper(raw, 'utf-8')", None),
])
def test_the_read_finds_what_it_should(source, found):
    call = ast.parse(source).body[0].value
    assert unnamed_encoding(call) == found


def test_every_text_file_of_the_project_names_its_encoding():
    sources = project_sources()
    assert {ROOT / "instructor" / "grade.py", ROOT / "tests" / "conftest.py",
            ROOT / "src" / "attention_course" / "pretrained.py"} <= set(sources)
    found = [f"{path.relative_to(ROOT)}:{node.lineno}: {what}"
             for path in sources
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Call) and (what := unnamed_encoding(node))]
    assert not found, ("text opened without encoding= (the locale's encoding would be used; the "
                       "project's files are UTF-8):\n" + "\n".join(found))
