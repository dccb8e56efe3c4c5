"""The call watcher reads bytecode, whose opcodes change from one Python version to the next.

A forbidden NumPy ufunc is called from C without a profile event, so the watcher finds it by
reading the names the learner's code loads and resolving them in its frame (when it is called, and
again when it returns, with the locals it bound). These answers load the ufunc in the ways each
supported version compiles differently: a local that may be unbound (3.12's LOAD_FAST_CHECK), two
locals loaded together (3.13's LOAD_FAST_LOAD_FAST, whose argval is a pair of names), a name
stored and loaded again at once (3.13's STORE_FAST_LOAD_FAST), a free variable of a closure, and
an inlined comprehension's own variable (3.12's LOAD_FAST_AND_CLEAR). Each must be caught on every
version; CI runs this file on 3.10 to 3.13.
"""

import dis

import numpy as np
import pytest

from attention_course.checks import CheckFailed, watch_calls
from attention_course.checks.watcher import _name_chains


# The ufunc is fetched by a string, so no line of the answer names ``np.exp``: only the local it
# is bound to leads to it, and that local is bound when the function returns.
def maybe_unbound(x):
    for _ in range(1):
        f = getattr(np, "exp")                       # noqa: B009 - bound in a loop: may be unbound after it
    return np.array(list(map(f, x)))                 # 3.12+: LOAD_FAST_CHECK f


def two_locals_together(x):
    f = getattr(np, "exp")                           # noqa: B009
    return np.array(list(map(f, x)))                 # 3.13: LOAD_FAST_LOAD_FAST (f, x)


def stored_and_loaded(x):
    g = getattr(np, "exp")                           # noqa: B009
    h = g                                            # 3.13: STORE_FAST_LOAD_FAST (g, g)
    return np.array(list(map(h, x)))


def closure(x, ops=(np.exp,)):
    e = ops[0]

    def inner(y):
        return np.array(list(map(e, y)))             # e is a free variable of inner
    return inner(x)


def in_a_comprehension(x, ops=(np.exp,)):
    # 3.12+ inlines the comprehension, and its f is gone when the function returns: the tuple of
    # functions it came from is what shows it
    return np.array([f(v) for f in ops for v in x])


ANSWERS = [maybe_unbound, two_locals_together, stored_and_loaded, closure, in_a_comprehension]


@pytest.mark.parametrize("answer", ANSWERS, ids=lambda f: f.__name__)
def test_a_forbidden_ufunc_reached_through_a_local_is_caught(answer):
    x = np.array([0.0, 1.0, 2.0])
    np.testing.assert_allclose(answer(x), np.exp(x))           # the answer itself works
    with pytest.raises(CheckFailed, match="np.exp"):
        with watch_calls([np.exp], name="f", lang="en"):
            answer(x)


def test_fused_loads_give_each_name_its_own_chain():
    chains = _name_chains(two_locals_together.__code__)
    assert ("local", ("f",)) in chains and ("local", ("x",)) in chains
    assert ("global", ("np", "array")) in chains


def test_every_load_opcode_of_this_python_is_known():
    """A name-loading opcode the watcher does not read would hide a forbidden call on this version."""
    from attention_course.checks import watcher

    read = watcher._LOADS | watcher._ATTRS | {"LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST"}
    # no name to follow: constants, the locals dict, builtins the compiler loads, super()
    nameless = {"LOAD_CONST", "LOAD_SMALL_INT", "LOAD_LOCALS", "LOAD_ASSERTION_ERROR",
                "LOAD_BUILD_CLASS", "LOAD_SUPER_ATTR", "INSTRUMENTED_LOAD_SUPER_ATTR",
                "LOAD_SUPER_METHOD", "LOAD_ZERO_SUPER_ATTR", "LOAD_ZERO_SUPER_METHOD",
                "LOAD_SPECIAL", "LOAD_COMMON_CONSTANT"}
    loads = {name for name in dis.opmap if "LOAD" in name}
    unread = sorted(loads - read - nameless)
    assert not unread, f"opcodes the call watcher does not read: {unread}"
