"""The registry of forbidden library functions: complete, composed by the checks, and enforced."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys

import numpy as np
import pytest

import attention_course
from attention_course import grouped_query_attention
from attention_course.checks import CheckFailed, forbidden, nb01, nb02
from attention_course.multihead import MultiHeadAttention

# Every public module, in subpackages too (fast.kernel, workers.pool), as "fast.kernel"; the
# exercise checks and the widgets answer no exercise.
LIBRARY_MODULES = sorted(
    m.name.removeprefix("attention_course.")
    for m in pkgutil.walk_packages(attention_course.__path__, "attention_course.")
    if not any(part.startswith("_") for part in m.name.split("."))
    and m.name.split(".")[1] not in ("checks", "widgets"))


def public_callables():
    """``("module.name", object)`` for every public function or class a library module defines."""
    for module_name in LIBRARY_MODULES:
        module = importlib.import_module(f"attention_course.{module_name}")
        for name, obj in vars(module).items():
            if (not name.startswith("_") and callable(obj)
                    and getattr(obj, "__module__", None) == module.__name__):
                yield f"{module_name}.{name}", obj


def in_some_category(obj) -> bool:
    members = [f for group in forbidden.CATEGORIES.values() for f in group]
    if any(obj is f for f in members):
        return True
    # a class is covered when one of its methods is (Adam.step, parameter_shapes)
    return inspect.isclass(obj) and any(
        getattr(f, "__qualname__", "").startswith(obj.__qualname__ + ".") and f.__module__ == obj.__module__
        for f in members if inspect.isfunction(f))


@pytest.mark.parametrize(("name", "obj"), list(public_callables()),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_every_public_function_is_in_a_category_or_allowed_everywhere(name, obj):
    assert in_some_category(obj) or name in forbidden.ALLOWED_EVERYWHERE, (
        f"{name} is in no category of checks/forbidden.py and not in ALLOWED_EVERYWHERE: an exercise "
        "that forbids its kind would let a learner call it")


def test_the_subpackages_are_read():
    assert {"fast.kernel", "fast.thread_pool", "workers.pool", "softmax"} <= set(LIBRARY_MODULES)


def test_allowed_everywhere_names_real_functions_and_none_that_a_category_holds():
    for entry in forbidden.ALLOWED_EVERYWHERE:
        module_name, name = entry.rsplit(".", 1)
        obj = getattr(importlib.import_module(f"attention_course.{module_name}"), name)
        assert not any(obj is f for group in forbidden.CATEGORIES.values() for f in group), entry


def test_of_composes_categories_each_function_once():
    both = forbidden.of("softmax", "attention")
    assert len(both) == len({id(f) for f in both})
    assert set(map(id, forbidden.of("grouped"))) <= set(map(id, forbidden.of("grouped", "layers")))
    assert grouped_query_attention in forbidden.of("attention")
    assert MultiHeadAttention in forbidden.of("attention")


def test_an_unknown_category_names_the_known_ones():
    with pytest.raises(KeyError, match="softmax"):
        forbidden.of("sofmax")


def test_outside_softmax_joins_only_when_loaded(monkeypatch):
    class FakeSpecial:
        @staticmethod
        def softmax(x, axis=None):
            return x

    monkeypatch.delitem(sys.modules, "scipy.special", raising=False)
    assert FakeSpecial.softmax not in forbidden.of("softmax")
    monkeypatch.setitem(sys.modules, "scipy.special", FakeSpecial)
    assert FakeSpecial.softmax in forbidden.of("softmax")


def test_the_checks_import_no_private_name_of_another_check_module():
    import ast
    from pathlib import Path

    for path in sorted(Path(nb01.__file__).parent.glob("nb*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nb"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path.name} imports {private} from {node.module}"


# --- nb01 and nb02 now forbid every attention function, grouped and layers included ---------------

def test_nb01_lookup_refuses_grouped_query_attention():
    def lookup(queries, keys, values):
        q, k, v = (np.asarray(a, dtype=float)[None] for a in (queries, keys, values))
        return grouped_query_attention(q * 1e6, k, v)[0]            # a softmax at a huge inverse temperature

    with pytest.raises(CheckFailed, match="grouped_query_attention"):
        nb01.check_zero_temperature_lookup(lookup)


def test_nb02_cross_attention_refuses_grouped_query_attention():
    def weights(X_query, X_source, W_Q, W_K):
        q, k = (X_query @ W_Q)[None], (X_source @ W_K)[None]
        return grouped_query_attention(q, k, k, return_weights=True)[1][0]

    with pytest.raises(CheckFailed, match="grouped_query_attention"):
        nb02.check_cross_attention_weights(weights)


def test_nb02_cross_attention_refuses_the_multi_head_layer():
    def weights(X_query, X_source, W_Q, W_K):
        d = W_Q.shape[1]
        layer = MultiHeadAttention(d, 1, bias=False, seed=0)      # its weights are not ours: the
        return layer(X_query @ W_Q, X_source @ W_K)[1]             # call is refused before comparing

    with pytest.raises(CheckFailed, match="MultiHeadAttention"):
        nb02.check_cross_attention_weights(weights)
