"""No module of ``attention_course`` reaches a private name of another of its modules.

A private name is one with a leading underscore that is not a dunder (``_rotate_pairs``,
``__cache``; not ``__version__``). It is its module's own business: a module that needs it from
elsewhere gets it under a public name, documented where it is defined, and, when it could answer
an exercise, listed in ``checks/forbidden.py``. Every module of the package is read, subpackages
included, and two ways of reaching across are refused, each reported with its file, line and name:

- ``from X import _name`` where X is a module of the package, relative or absolute;
- ``module._name`` (and ``getattr(module, "_name")``) on a name bound to a module of the package
  by an import, e.g. ``positional._rotary_tables(...)`` or ``_validate._check(...)``.

Private *modules* (``_validate.py`` and any added later) are package-internal units: importing
the module itself (``from . import _validate``) or a public name from it (``from ._validate import
positive_int``) is allowed anywhere in the package. The underscore of a module says that it is not
for learners; the underscore of a name inside a module says that it is not for other modules.
Binding a public name to a private alias (``from .language import label as _label``) is allowed too.
A module may use its own private names through any name bound to it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from notebook_tools import ROOT

PACKAGE = ROOT / "src" / "attention_course"
TOP = "attention_course"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path) -> str:
    """``attention_course.checks.nb01`` for ``src/attention_course/checks/nb01.py``; a package's
    ``__init__.py`` is the package itself."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULE_FILES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
MODULES = frozenset(module_name(p) for p in MODULE_FILES)


def imported_from(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    """The absolute name of the module a ``from ... import`` reads, in module ``here``."""
    if not node.level:
        return node.module or ""
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def find_violations(source: str, here: str, is_package: bool, modules=MODULES) -> list[tuple[int, str]]:
    """``(line, what)`` for every private name of another package module that ``source`` reaches.

    ``here`` is the module's own dotted name, ``modules`` the dotted names of every module of the
    package. Names are followed per file, not per scope: a local variable that shadows an imported
    module's name is taken for the module.
    """
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    bound: dict[str, str] = {}          # name in this file -> the package module it is bound to

    def in_package(name: str) -> bool:
        return name == TOP or name.startswith(TOP + ".")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not in_package(alias.name):
                    continue
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:                   # import attention_course.positional binds attention_course
                    bound[alias.name.split(".")[0]] = TOP
        elif isinstance(node, ast.ImportFrom):
            source_module = imported_from(node, here, is_package)
            if not in_package(source_module):
                continue
            for alias in node.names:
                full = f"{source_module}.{alias.name}"
                if full in modules:
                    bound[alias.asname or alias.name] = full
                elif is_private(alias.name) and source_module != here:
                    found.append((node.lineno, f"imports the private name {alias.name} from {source_module}"))

    def module_of(expr) -> str | None:
        """The package module an expression such as ``bp`` or ``attention_course.positional`` names."""
        if isinstance(expr, ast.Name):
            return bound.get(expr.id)
        if isinstance(expr, ast.Attribute):
            owner = module_of(expr.value)
            if owner is not None and f"{owner}.{expr.attr}" in modules:
                return f"{owner}.{expr.attr}"
        return None

    def reach(line: int, owner: str | None, name: str) -> None:
        if owner is None or owner == here or not is_private(name) or f"{owner}.{name}" in modules:
            return
        found.append((line, f"uses the private name {name} of {owner}"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            reach(node.lineno, module_of(node.value), node.attr)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str)):
            reach(node.lineno, module_of(node.args[0]), node.args[1].value)
    return sorted(found)


def test_every_module_is_read_subpackages_included():
    names = {module_name(p) for p in MODULE_FILES}
    assert {TOP, f"{TOP}.positional", f"{TOP}._validate", f"{TOP}.checks", f"{TOP}.checks.language",
            f"{TOP}.checks.nb01", f"{TOP}.widgets.renderer", f"{TOP}.fast.kernel"} <= names


@pytest.mark.parametrize("path", MODULE_FILES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_module_reaches_a_private_name_of_another(path):
    here = module_name(path)
    found = find_violations(path.read_text(encoding="utf-8"), here, path.name == "__init__.py")
    where = path.relative_to(ROOT)
    assert not found, "a private name of another module, give it a public name where it is defined:\n" + \
        "\n".join(f"{where}:{line}: {what}" for line, what in found)


# ------------------------------------------------------------------------------ the scan itself
FAKE = frozenset({TOP, f"{TOP}.positional", f"{TOP}.pretrained", f"{TOP}._validate", f"{TOP}.checks",
                  f"{TOP}.checks.language", f"{TOP}.checks.nb01"})


@pytest.mark.parametrize(("source", "here", "expected"), [
    ("from .positional import _rotary_tables, apply_rotary", "pretrained", ["_rotary_tables"]),
    ("from attention_course.positional import _rotary_tables", "pretrained", ["_rotary_tables"]),
    ("from ..positional import _rotate_pairs as rotate", "checks.nb01", ["_rotate_pairs"]),
    ("from .language import _language", "checks.nb01", ["_language"]),
    ("from ._validate import __x", "pretrained", ["__x"]),
    ("from . import positional\npositional._rotary_tables(1)", "pretrained", ["_rotary_tables"]),
    ("from . import positional as pos\nf = pos._rotate_pairs", "pretrained", ["_rotate_pairs"]),
    ("from . import _validate\n_validate._check(1)", "pretrained", ["_check"]),
    ("from .. import _validate\ndef f():\n    return _validate._check", "checks.nb01", ["_check"]),
    ("import attention_course.positional as p\np._rotary_tables", "pretrained", ["_rotary_tables"]),
    ("import attention_course.positional\nattention_course.positional._rotary_tables", "pretrained",
     ["_rotary_tables"]),
    ("import attention_course\nattention_course.checks.language._language", "pretrained", ["_language"]),
    ("from . import positional\ngetattr(positional, '_rotary_tables')", "pretrained", ["_rotary_tables"]),
    ("from .checks import language\nlanguage.get_language, language._language", "pretrained", ["_language"]),
    # allowed: a private module as a unit, public names, dunders, own names, other packages
    ("from . import _validate\nfrom ._validate import positive_int", "pretrained", []),
    ("from .checks import language\nfrom .checks.language import get_language", "pretrained", []),
    ("from .language import label as _label", "checks.nb01", []),
    ("from . import positional\npositional.__name__, positional.apply_rotary", "pretrained", []),
    ("import attention_course\nattention_course._validate", "pretrained", []),
    ("from .pretrained import _rope\nfrom . import pretrained\npretrained._rope", "pretrained", []),
    ("from numpy import _core\nimport os\nos._exit", "pretrained", []),
    ("from importlib.metadata import version as _version", "", []),
    ("self._fused = 1\nx._rope", "pretrained", []),
])
def test_the_scan_finds_what_it_should(source, here, expected):
    module = f"{TOP}.{here}" if here else TOP
    found = find_violations(source, module, is_package=module in (TOP, f"{TOP}.checks"), modules=FAKE)
    assert [what.split()[4] for _, what in found] == expected, found


def test_a_relative_import_is_read_from_the_right_package():
    def node(level, name):
        return ast.ImportFrom(module=name, names=[], level=level)

    assert imported_from(node(1, "positional"), f"{TOP}.pretrained", False) == f"{TOP}.positional"
    assert imported_from(node(2, "positional"), f"{TOP}.checks.nb01", False) == f"{TOP}.positional"
    assert imported_from(node(1, "language"), f"{TOP}.checks", True) == f"{TOP}.checks.language"
    assert imported_from(node(1, None), f"{TOP}.checks.nb01", False) == f"{TOP}.checks"
