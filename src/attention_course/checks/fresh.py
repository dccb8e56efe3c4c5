"""Fresh copies of the check modules, so that the cells above a check cell cannot alter it (best effort).

A notebook's check cell, ``nbNN_checks.check_x(answer)``, gets its check from a copy of the
installed file loaded at that call (:func:`fresh_on_call`, :func:`fresh_copy`), together with fresh
copies of the machinery every check uses and of the registry of forbidden functions.
"""

from __future__ import annotations

import functools
import os
import sys
import types

from . import language
from .language import CheckFailed, get_language
from .watcher import AnswerElsewhere

__all__ = ["fresh_copy", "fresh_on_call"]


_CHECKS_DIR = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = __name__.rpartition(".")[0]                      # attention_course.checks
#: The modules a check needs, loaded afresh with it: the machinery and the registry, each after
#: the ones it imports, so that its imports find their fresh copies. A module added to the machinery
#: goes here too (``tests/test_fresh_checks.py`` fails otherwise).
_SHARED = ("language", "comparison", "plain", "watcher", "loops", "cases", "forbidden")
_MISSING = object()

_CODE: dict = {}          # path -> (mtime_ns, size, code object compiled from that file)


def _load_file(name: str):
    """A new module object for ``attention_course.checks.<name>``, executed from its file.

    The file is compiled again whenever it changed on disk; its code object is kept otherwise
    (compiling the machinery takes longer than running a check).
    """
    import importlib.util

    path = os.path.join(_CHECKS_DIR, name.rpartition(".")[2] + ".py")
    stat = os.stat(path)
    cached = _CODE.get(path)
    if cached is None or cached[:2] != (stat.st_mtime_ns, stat.st_size):
        with open(path, "rb") as f:
            cached = (stat.st_mtime_ns, stat.st_size, compile(f.read(), path, "exec", dont_inherit=True))
        _CODE[path] = cached
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    exec(cached[2], module.__dict__)
    return module


def fresh_copy(module_name: str) -> types.ModuleType:
    """A fresh copy of a check module, loaded from the installed file with fresh copies of the
    check machinery (``language``, ``comparison``, ``plain``, ``watcher``, ``loops``, ``cases``) and of the
    registry (``forbidden``).

    Nothing an earlier cell did to the imported modules' attributes reaches it: a ``check_*``
    replaced with ``setattr``, a patched ``check_function`` or a shortened list of forbidden
    functions. The copy keeps the session's language and raises the one :class:`CheckFailed`.
    This is best effort: code running in the same process can always reach further (the library
    functions a check compares with, NumPy, the interpreter itself). The guarantee is the
    instructor's re-check, which runs each answer in a worker process of its own and compares in the
    grader (``instructor/recheck.py``, :mod:`.isolated`).
    """
    package = sys.modules[_PACKAGE]
    saved_modules = {leaf: sys.modules.get(f"{_PACKAGE}.{leaf}") for leaf in _SHARED}
    saved_attrs = {leaf: package.__dict__.get(leaf, _MISSING) for leaf in _SHARED}
    try:
        for leaf in _SHARED:
            fresh = _load_file(f"{_PACKAGE}.{leaf}")
            if leaf == "language":
                fresh.CheckFailed = CheckFailed              # one exception class for everyone
                fresh.set_language(get_language())
            elif leaf == "watcher":
                fresh.AnswerElsewhere = AnswerElsewhere      # one class for answers run elsewhere
            sys.modules[f"{_PACKAGE}.{leaf}"] = fresh        # what `from .cases import` finds
            package.__dict__[leaf] = fresh                   # what `from . import forbidden` finds
        return _load_file(module_name)
    finally:
        for leaf in _SHARED:
            if saved_modules[leaf] is None:
                sys.modules.pop(f"{_PACKAGE}.{leaf}", None)
            else:
                sys.modules[f"{_PACKAGE}.{leaf}"] = saved_modules[leaf]
            if saved_attrs[leaf] is _MISSING:
                package.__dict__.pop(leaf, None)
            else:
                package.__dict__[leaf] = saved_attrs[leaf]


class _FreshChecks(types.ModuleType):
    """A check module whose ``check_*`` functions come from :func:`fresh_copy` at each access."""

    def __getattribute__(self, name):
        if name.startswith("check_") and not name.startswith("check__"):
            own = types.ModuleType.__getattribute__(self, "__name__")
            return _shown_plainly(getattr(fresh_copy(own), name))
        return types.ModuleType.__getattribute__(self, name)


def _shown_plainly(check):
    """``check``, whose unanswered stub's ``NotImplementedError`` IPython shows without the frames
    of the check machinery (and the paths of the machine running it)."""
    if not callable(check):
        return check

    @functools.wraps(check)
    def call(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except NotImplementedError as exc:
            if language.in_workbook():
                print(language.say("not_answered", language.get_language(kwargs.get("lang"))))
                return None
            text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            exc._render_traceback_ = lambda: [text]
            raise
    return call


def fresh_on_call(module_name: str) -> None:
    """Make ``nbNN_checks.check_x`` (the name a notebook's import cell binds) resolve to a fresh
    copy of the check at every call (:func:`fresh_copy`). Every check module ends with
    ``fresh_on_call(__name__)``; a fresh copy itself (not in ``sys.modules``) is left alone."""
    module = sys.modules.get(module_name)
    if module is not None and sys._getframe(1).f_globals is module.__dict__:
        module.__class__ = _FreshChecks
