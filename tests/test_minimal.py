"""The short reference functions of :mod:`attention_course.minimal` compute what the library does.

Each is tested equal to the full-featured function it names, on the same inputs, in float64 (to
rounding) and float32 (it stays float32), over shapes that include the degenerate ones it supports
(one position, one head, one feature pair), with masks that block whole rows. The backward passes
are compared with :mod:`attention_course.backprop`'s pairs: ``*_forward``, then ``*_backward``.
The module's promises are tested too: at most 25 lines of code per function, shape comments, and
a pointer from each full function's docstring to its short version and back.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import math
import textwrap
import tokenize

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_course import attention, minimal, multihead, positional
from attention_course import backprop as bp

# the package's own ``softmax`` is the function, which hides the module of that name
softmax_module = importlib.import_module("attention_course.softmax")

SOME = settings(max_examples=25, deadline=None, derandomize=True, database=None)
DTYPES = [np.float64, np.float32]
TOL = {np.float64: dict(rtol=1e-12, atol=1e-12), np.float32: dict(rtol=2e-5, atol=2e-5)}

#: minimal's function name -> the full-featured function it is tested equal to
FULL = {
    "softmax": softmax_module.softmax,
    "scaled_dot_product_attention": attention.scaled_dot_product_attention,
    "split_heads": multihead.split_heads,
    "merge_heads": multihead.merge_heads,
    "apply_rotary": positional.apply_rotary,
}
BACKPROP = {name: getattr(bp, name) for name in (
    "softmax_backward", "attention_backward", "linear_backward", "embedding_backward",
    "positional_backward", "residual_backward", "layernorm_backward", "softmax_cross_entropy",
    "mha_backward")}

FUNCTIONS = {name: obj for name, obj in vars(minimal).items()
             if inspect.isfunction(obj) and obj.__module__ == minimal.__name__}

batch_shapes = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)
sizes = st.integers(1, 5)
seeds = st.integers(0, 2**16)
mask_kinds = st.sampled_from(["none", "bool", "blocked_row", "broadcast"])


def same(ours, theirs, dtype, what=""):
    """``ours`` has the dtype of the inputs and equals ``theirs`` to ``dtype``'s rounding."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    assert ours.dtype == dtype, f"{what}: {ours.dtype}, not {np.dtype(dtype)}"
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape}, not {theirs.shape}"
    np.testing.assert_allclose(ours, theirs, **TOL[dtype], err_msg=what)


def all_same(names, ours, theirs, dtype):
    ours, theirs = tuple(ours), tuple(theirs)
    assert len(ours) == len(theirs) == len(names)
    for what, a, b in zip(names, ours, theirs, strict=True):
        same(a, b, dtype, what)


def normal(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def make_mask(rng, kind, batch, L, S):
    """A boolean mask (True = takes part) for scores of shape batch + (L, S), or None."""
    if kind == "none":
        return None
    if kind == "broadcast":                          # one (L, S) mask for every batch entry
        return rng.random((L, S)) > 0.4
    mask = rng.random(batch + (L, S)) > 0.4
    if kind == "blocked_row":                        # the first query may see no key at all
        mask[..., 0, :] = False
    return mask


# ---- what the module promises ---------------------------------------------------------------------

def test_every_function_is_tested_here():
    assert set(FUNCTIONS) == set(FULL) | set(BACKPROP)


def code_lines(fn) -> list[str]:
    """The lines of ``fn``'s body that hold code: no docstring, no blank or comment-only line."""
    source = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(source).body[0]
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    lines = source.splitlines()[body[0].lineno - 1:node.end_lineno]
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def shape_comments(fn) -> list[str]:
    source = textwrap.dedent(inspect.getsource(fn))
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [t.string for t in tokens if t.type == tokenize.COMMENT and t.string.startswith("# (")]


def test_the_line_count_leaves_out_docstring_blanks_and_comments():
    def f(x):
        """Doc.

        More doc.
        """
        # a comment

        y = x + 1                       # (n,) a trailing comment keeps the line
        return (y,
                y)

    assert code_lines(f) == ["y = x + 1                       # (n,) a trailing comment keeps the line",
                             "return (y,", "y)"]
    assert shape_comments(f) == ["# (n,) a trailing comment keeps the line"]


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_is_at_most_25_lines_of_code(name):
    n = len(code_lines(FUNCTIONS[name]))
    assert n <= 25, f"minimal.{name} has {n} lines of code; the module promises at most 25"


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_has_shape_comments(name):
    assert shape_comments(FUNCTIONS[name]), f"minimal.{name} has no shape comment such as '# (..., L, S)'"


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_function_names_its_full_version_and_has_an_example(name):
    full = {**FULL, **BACKPROP}[name]
    doc = FUNCTIONS[name].__doc__
    assert f"{full.__module__}.{full.__name__}" in doc, f"minimal.{name} does not name {full.__qualname__}"
    assert ">>>" in doc, f"minimal.{name} has no example"


@pytest.mark.parametrize("name", sorted(FULL))
def test_each_full_function_points_to_its_short_version(name):
    assert f":func:`attention_course.minimal.{name}`" in FULL[name].__doc__, (
        f"add 'The short version to read: :func:`attention_course.minimal.{name}`.' to the "
        f"docstring of {FULL[name].__module__}.{name}")


@pytest.mark.parametrize("name", sorted(BACKPROP))
def test_each_backprop_function_points_to_its_short_version(name):
    assert f":func:`attention_course.minimal.{name}`" in BACKPROP[name].__doc__, (
        f"add 'The short version to read: :func:`attention_course.minimal.{name}`.' to the "
        f"docstring of attention_course.backprop.{name}")


# ---- forward ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(batch=batch_shapes, n=sizes, seed=seeds, blocked=st.sampled_from(["none", "some", "rows"]))
def test_softmax(dtype, batch, n, seed, blocked):
    rng = np.random.default_rng(seed)
    x = normal(rng, batch + (3, n), dtype) * dtype(4)
    if blocked != "none":
        x[rng.random(x.shape) < 0.3] = -np.inf
    if blocked == "rows":
        x[..., 0, :] = -np.inf                       # a row with nothing allowed: zeros
    same(minimal.softmax(x), softmax_module.softmax(x), dtype)


def test_softmax_of_huge_scores_does_not_overflow():
    x = np.array([[1e4, 0.0], [-1e4, 1e4]])
    same(minimal.softmax(x), softmax_module.softmax(x), np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(batch=batch_shapes, L=sizes, S=sizes, E=sizes, Ev=sizes, kind=mask_kinds, seed=seeds)
def test_scaled_dot_product_attention(dtype, batch, L, S, E, Ev, kind, seed):
    rng = np.random.default_rng(seed)
    q, k, v = normal(rng, batch + (L, E), dtype), normal(rng, batch + (S, E), dtype), \
        normal(rng, batch + (S, Ev), dtype)
    mask = make_mask(rng, kind, batch, L, S)
    out, weights = minimal.scaled_dot_product_attention(q, k, v, mask)
    full_out, full_weights = attention.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                                    return_weights=True)
    same(out, full_out, dtype, "out")
    same(weights, full_weights, dtype, "weights")


@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(batch=batch_shapes, L=sizes, H=st.integers(1, 4), D=st.integers(1, 3), seed=seeds)
def test_split_and_merge_heads(dtype, batch, L, H, D, seed):
    x = normal(np.random.default_rng(seed), batch + (L, H * D), dtype)
    split = minimal.split_heads(x, H)
    same(split, multihead.split_heads(x, H), dtype, "split_heads")
    same(minimal.merge_heads(split), multihead.merge_heads(split), dtype, "merge_heads")
    same(minimal.merge_heads(split), x, dtype, "merge_heads undoes split_heads")


@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(batch=batch_shapes, L=sizes, pairs=st.integers(1, 4), given_positions=st.booleans(),
       base=st.sampled_from([10.0, 10000.0, 500000.0]), seed=seeds)
def test_apply_rotary(dtype, batch, L, pairs, given_positions, base, seed):
    rng = np.random.default_rng(seed)
    x = normal(rng, batch + (L, 2 * pairs), dtype)
    positions = rng.integers(0, 2000, L) if given_positions else None
    same(minimal.apply_rotary(x, positions, base=base),
         positional.apply_rotary(x, positions, base=base), dtype)


# ---- backward: each against backprop's forward/backward pair ----------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(batch=batch_shapes, n=sizes, kind=mask_kinds, seed=seeds)
def test_softmax_backward(dtype, batch, n, kind, seed):
    rng = np.random.default_rng(seed)
    x, dy = normal(rng, batch + (3, n), dtype), normal(rng, batch + (3, n), dtype)
    mask = make_mask(rng, kind, batch, 3, n)
    _, cache = bp.softmax_forward(x, mask)
    blocked = x if mask is None else np.where(mask, x, -np.inf)       # the mask as -inf scores
    same(minimal.softmax_backward(dy, blocked), bp.softmax_backward(dy, cache), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(batch=batch_shapes, L=sizes, S=sizes, E=sizes, Ev=sizes, kind=mask_kinds, seed=seeds)
def test_attention_backward(dtype, batch, L, S, E, Ev, kind, seed):
    rng = np.random.default_rng(seed)
    q, k, v = normal(rng, batch + (L, E), dtype), normal(rng, batch + (S, E), dtype), \
        normal(rng, batch + (S, Ev), dtype)
    dout = normal(rng, batch + (L, Ev), dtype)
    mask = make_mask(rng, kind, batch, L, S)
    _, _, cache = bp.attention_forward(q, k, v, attn_mask=mask)
    all_same(("dq", "dk", "dv"), minimal.attention_backward(dout, q, k, v, mask),
             bp.attention_backward(dout, cache), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(batch=batch_shapes, n_in=sizes, n_out=sizes, bias=st.booleans(), seed=seeds)
def test_linear_backward(dtype, batch, n_in, n_out, bias, seed):
    rng = np.random.default_rng(seed)
    x, weight = normal(rng, batch + (2, n_in), dtype), normal(rng, (n_out, n_in), dtype)
    b = normal(rng, (n_out,), dtype) if bias else None
    dy = normal(rng, batch + (2, n_out), dtype)
    _, cache = bp.linear_forward(x, weight, b)
    dx, dweight, dbias = minimal.linear_backward(dy, x, weight)
    full_dx, full_dweight, full_dbias = bp.linear_backward(dy, cache)
    same(dx, full_dx, dtype, "dx")
    same(dweight, full_dweight, dtype, "dweight")
    if bias:
        same(dbias, full_dbias, dtype, "dbias")
    else:
        assert full_dbias is None


@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(B=st.integers(1, 3), n=sizes, vocab=st.integers(1, 6), E=sizes, seed=seeds)
def test_embedding_backward(dtype, B, n, vocab, E, seed):
    rng = np.random.default_rng(seed)
    tokens, table = rng.integers(0, vocab, (B, n)), normal(rng, (vocab, E), dtype)
    dx = normal(rng, (B, n, E), dtype)
    _, cache = bp.embedding_forward(tokens, table)
    same(minimal.embedding_backward(dx, tokens, table), bp.embedding_backward(dx, cache), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(B=st.integers(1, 3), n=sizes, extra=st.integers(0, 3), E=sizes, seed=seeds)
def test_positional_backward(dtype, B, n, extra, E, seed):
    rng = np.random.default_rng(seed)
    x, dy = normal(rng, (B, n, E), dtype), normal(rng, (B, n, E), dtype)
    pe = normal(rng, (n + extra, E), dtype)             # rows past n: positions no sequence used
    _, cache = bp.positional_forward(x, pe)
    all_same(("dx", "dpe"), minimal.positional_backward(dy, pe), bp.positional_backward(dy, cache), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(batch=batch_shapes, E=sizes, seed=seeds)
def test_residual_backward(dtype, batch, E, seed):
    rng = np.random.default_rng(seed)
    x, fx, dy = (normal(rng, batch + (E,), dtype) for _ in range(3))
    _, cache = bp.residual_forward(x, fx)
    all_same(("dx", "dfx"), minimal.residual_backward(dy), bp.residual_backward(dy, cache), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(batch=batch_shapes, E=st.integers(2, 6), eps=st.sampled_from([1e-5, 1e-2, 0.0]), seed=seeds)
def test_layernorm_backward(dtype, batch, E, eps, seed):
    rng = np.random.default_rng(seed)
    x, dy = normal(rng, batch + (3, E), dtype), normal(rng, batch + (3, E), dtype)
    gamma, beta = normal(rng, (E,), dtype), normal(rng, (E,), dtype)
    _, cache = bp.layernorm_forward(x, gamma, beta, eps)
    all_same(("dx", "dgamma", "dbeta"), minimal.layernorm_backward(dy, x, gamma, eps),
             bp.layernorm_backward(dy, cache), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(batch=st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple), C=st.integers(1, 6),
       masked=st.sampled_from(["none", "some", "all"]), seed=seeds)
def test_softmax_cross_entropy(dtype, batch, C, masked, seed):
    rng = np.random.default_rng(seed)
    logits, targets = normal(rng, batch + (C,), dtype) * dtype(3), rng.integers(0, C, batch)
    mask = {"none": None, "some": rng.random(batch) > 0.3, "all": np.zeros(batch, bool)}[masked]
    loss, dlogits = minimal.softmax_cross_entropy(logits, targets, mask)
    full_loss, full_dlogits = bp.softmax_cross_entropy(logits, targets, mask)
    assert isinstance(loss, float)
    np.testing.assert_allclose(loss, full_loss, **TOL[dtype])
    same(dlogits, full_dlogits, dtype, "dlogits")


@pytest.mark.parametrize("dtype", DTYPES)
@SOME
@given(B=st.integers(1, 2), L=sizes, S=sizes, H=st.integers(1, 3), d_k=st.integers(1, 3),
       kind=st.sampled_from(["none", "bool", "blocked_row", "broadcast", "self", "no_bias"]), seed=seeds)
def test_mha_backward(dtype, B, L, S, H, d_k, kind, seed):
    rng = np.random.default_rng(seed)
    E = H * d_k
    query = normal(rng, (B, L, E), dtype)
    key, value = (query, query) if kind == "self" else (normal(rng, (B, S, E), dtype) for _ in range(2))
    S = key.shape[-2]
    params = {"in_proj_weight": normal(rng, (3 * E, E), dtype), "in_proj_bias": normal(rng, (3 * E,), dtype),
              "out_proj_weight": normal(rng, (E, E), dtype), "out_proj_bias": normal(rng, (E,), dtype)}
    full_params = dict(params)
    if kind == "no_bias":                            # zeros here, None (no bias at all) there
        params["in_proj_bias"], params["out_proj_bias"] = np.zeros(3 * E, dtype), np.zeros(E, dtype)
        full_params["in_proj_bias"] = full_params["out_proj_bias"] = None
    mask = make_mask(rng, kind if kind in ("bool", "blocked_row", "broadcast") else "none", (B, H), L, S)
    dout = normal(rng, (B, L, E), dtype)
    _, _, cache = bp.mha_forward(query, key, value, full_params, H, attn_mask=mask)
    *ours, grads = minimal.mha_backward(dout, query, key, value, params, H, mask)
    *theirs, full_grads = bp.mha_backward(dout, cache)
    all_same(("dquery", "dkey", "dvalue"), ours, theirs, dtype)
    assert set(full_grads) <= set(grads)
    for name, g in full_grads.items():
        same(grads[name], g, dtype, name)


def test_a_loss_over_no_position_is_zero_not_minus_zero():
    logits, targets, none = np.zeros((2, 3)), np.zeros(2, dtype=int), np.zeros(2, dtype=bool)
    for loss, _ in (minimal.softmax_cross_entropy(logits, targets, none),
                    bp.softmax_cross_entropy(logits, targets, none)):
        assert loss == 0.0 and math.copysign(1.0, loss) == 1.0
