"""A check cell obtains its check from a fresh copy of the installed file (best effort).

An answer cell that replaces ``nbNN_checks.check_x``, patches the machinery every check uses, or
empties the registry of forbidden functions does not change what the next check cell finds.
"""

import importlib
from pathlib import Path

import pytest

import attention_course
from attention_course import checks, softmax
from attention_course.checks import CheckFailed, _core, forbidden
from attention_course.checks import nb01 as nb01_checks
from attention_course.checks import nb02 as nb02_checks

MODULES = sorted(p.stem for p in (Path(_core.__file__).parent).glob("nb*.py"))


def never(*args, **kwargs):
    return None


@pytest.mark.parametrize("name", MODULES)
def test_every_check_module_hands_out_fresh_checks(name):
    module = importlib.import_module(f"attention_course.checks.{name}")
    assert isinstance(module, _core._FreshChecks), (
        f"checks/{name}.py must end with fresh_on_call(__name__)")
    names = [n for n in vars(module) if n.startswith("check_")]
    assert names
    for n in names:
        fresh = getattr(module, n)
        assert fresh is not vars(module)[n] and fresh.__wrapped__ is not vars(module)[n]
        assert fresh.__doc__ == vars(module)[n].__doc__


def test_setattr_on_the_check_module_does_not_reach_the_check(monkeypatch, capsys):
    for name in [n for n in vars(nb02_checks) if n.startswith("check_")]:
        monkeypatch.setattr(attention_course.checks.nb02, name, lambda *a, **k: print("passed"))
    with pytest.raises(CheckFailed, match="returned None"):
        nb02_checks.check_cross_attention_weights(never)
    assert "passed" not in capsys.readouterr().out


def test_a_patched_machinery_or_registry_does_not_reach_the_check(monkeypatch):
    monkeypatch.setattr(_core, "check_function", lambda *a, **k: print("passed"))
    monkeypatch.setattr(checks, "check_function", lambda *a, **k: print("passed"))
    monkeypatch.setitem(forbidden.CATEGORIES, "softmax", ())
    monkeypatch.setattr(forbidden, "of", lambda *names: ())
    with pytest.raises(CheckFailed, match="softmax"):
        nb01_checks.check_stable_softmax(lambda x: softmax(x))


def test_the_fresh_check_keeps_the_language_and_raises_the_one_exception_class():
    checks.set_language("zh")
    with pytest.raises(CheckFailed) as info:
        nb01_checks.check_stable_softmax(never)
    assert "未通过" in str(info.value)
    assert type(info.value) is CheckFailed


def test_the_fresh_copy_is_not_installed_and_restores_what_it_swapped():
    before = (checks.__dict__["_core"], checks.__dict__.get("forbidden"))
    copy = _core.fresh_copy("attention_course.checks.nb01")
    assert copy is not nb01_checks and copy.check_function is not _core.check_function
    assert (checks.__dict__["_core"], checks.__dict__.get("forbidden")) == before
    import sys
    assert sys.modules["attention_course.checks._core"] is _core


def test_ipython_shows_only_the_message_of_a_failed_check():
    with pytest.raises(CheckFailed) as info:
        nb01_checks.check_stable_softmax(never)
    shown = info.value._render_traceback_()
    assert shown == [f"CheckFailed: {info.value}"]
    assert "_core.py" not in "".join(shown) and "/" not in shown[0].split(":")[0]


def test_an_unanswered_stub_shows_its_error_without_the_machinery():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedError) as info:
        nb01_checks.check_stable_softmax(stub)
    assert info.value._render_traceback_() == ["NotImplementedError"]
