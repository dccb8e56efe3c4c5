"""A check cell obtains its check from a fresh copy of the installed file (best effort).

An answer cell that replaces ``nbNN_checks.check_x``, patches the machinery every check uses, or
empties the registry of forbidden functions does not change what the next check cell finds.
"""

import importlib
from pathlib import Path

import pytest

import attention_course
from attention_course import checks, softmax
from attention_course.checks import CheckFailed, cases, comparison, forbidden, language, watcher
from attention_course.checks import fresh as fresh_checks
from attention_course.checks import nb01 as nb01_checks
from attention_course.checks import nb02 as nb02_checks

MODULES = sorted(p.stem for p in (Path(cases.__file__).parent).glob("nb*.py"))
#: The modules every check uses: each must be loaded afresh with the check.
SHARED = ("language", "comparison", "plain", "watcher", "loops", "cases", "forbidden")


def never(*args, **kwargs):
    return None


@pytest.mark.parametrize("name", MODULES)
def test_every_check_module_hands_out_fresh_checks(name):
    module = importlib.import_module(f"attention_course.checks.{name}")
    assert isinstance(module, fresh_checks._FreshChecks), (
        f"checks/{name}.py must end with fresh_on_call(__name__)")
    names = [n for n in vars(module) if n.startswith("check_")]
    assert names
    for n in names:
        fresh = getattr(module, n)
        assert fresh is not vars(module)[n] and fresh.__wrapped__ is not vars(module)[n]
        assert fresh.__doc__ == vars(module)[n].__doc__


@pytest.mark.parametrize("name", MODULES)
def test_every_check_module_lists_exactly_its_checks_in_all(name):
    module = importlib.import_module(f"attention_course.checks.{name}")
    checks_defined = sorted(n for n, obj in vars(module).items()
                            if n.startswith("check_") and getattr(obj, "__module__", None) == module.__name__)
    assert sorted(module.__all__) == checks_defined, (
        f"checks/{name}.py: __all__ must list its checks, {checks_defined}")


def test_setattr_on_the_check_module_does_not_reach_the_check(monkeypatch, capsys):
    for name in [n for n in vars(nb02_checks) if n.startswith("check_")]:
        monkeypatch.setattr(attention_course.checks.nb02, name, lambda *a, **k: print("passed"))
    with pytest.raises(CheckFailed, match="returned None"):
        nb02_checks.check_cross_attention_weights(never)
    assert "passed" not in capsys.readouterr().out


def test_a_patched_machinery_or_registry_does_not_reach_the_check(monkeypatch):
    monkeypatch.setattr(cases, "check_function", lambda *a, **k: print("passed"))
    monkeypatch.setattr(checks, "check_function", lambda *a, **k: print("passed"))
    monkeypatch.setitem(forbidden.CATEGORIES, "softmax", ())
    monkeypatch.setattr(forbidden, "of", lambda *names: ())
    with pytest.raises(CheckFailed, match="softmax"):
        nb01_checks.check_stable_softmax(lambda x: softmax(x))


def test_every_module_of_the_machinery_is_loaded_afresh(monkeypatch):
    files = {p.stem for p in Path(cases.__file__).parent.glob("*.py")}
    # fresh makes the copies; isolated runs the grade of record (one registry of what a worker makes);
    # submission reads notebooks for a re-check, and no check imports it
    machinery = files - set(MODULES) - {"__init__", "fresh", "isolated", "submission"}
    assert set(fresh_checks._SHARED) == machinery == set(SHARED), "a module every check uses is not reloaded"
    # an unwatched call, a silent failure and a lenient comparison, each in its own module
    monkeypatch.setattr(watcher, "run_learner", lambda fn, *a, name, label, forbidden=(), hint=None,
                        lang=None, **k: fn(*a, **k))
    monkeypatch.setattr(language, "fail", lambda *a, **k: None)
    monkeypatch.setattr(comparison, "compare_within", lambda *a, **k: None)
    with pytest.raises(CheckFailed, match="softmax"):
        nb01_checks.check_stable_softmax(lambda x: softmax(x))
    with pytest.raises(CheckFailed, match="returned None"):
        nb01_checks.check_stable_softmax(never)


def test_the_fresh_check_keeps_the_language_and_raises_the_one_exception_class():
    checks.set_language("zh")
    with pytest.raises(CheckFailed) as info:
        nb01_checks.check_stable_softmax(never)
    assert "未通过" in str(info.value)
    assert type(info.value) is CheckFailed


def test_the_fresh_copy_is_not_installed_and_restores_what_it_swapped():
    import sys

    before = {leaf: (checks.__dict__.get(leaf), sys.modules[f"attention_course.checks.{leaf}"])
              for leaf in SHARED}
    copy = fresh_checks.fresh_copy("attention_course.checks.nb01")
    assert copy is not nb01_checks and copy.check_function is not cases.check_function
    assert {leaf: (checks.__dict__.get(leaf), sys.modules[f"attention_course.checks.{leaf}"])
            for leaf in SHARED} == before
    assert sys.modules["attention_course.checks.cases"] is cases


def test_ipython_shows_only_the_message_of_a_failed_check():
    with pytest.raises(CheckFailed) as info:
        nb01_checks.check_stable_softmax(never)
    shown = info.value._render_traceback_()
    assert shown == [f"CheckFailed: {info.value}"]
    assert ".py" not in "".join(shown) and "/" not in shown[0].split(":")[0]


def test_an_unanswered_stub_shows_its_error_without_the_machinery():
    def stub(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(NotImplementedError) as info:
        nb01_checks.check_stable_softmax(stub)
    assert info.value._render_traceback_() == ["NotImplementedError"]
