"""Every attention path gives the direct formula's answer, on every input the direct path takes.

The four paths: :func:`scaled_dot_product_attention` (direct), :func:`fast_attention` on its
defaults, :func:`fast_attention` with two threads, and :func:`online_softmax_attention`. The
inputs include the masks other libraries write: additive masks of ``finfo.min`` (HuggingFace),
``-1e9`` and ``-0.7 · finfo.max`` (keras, jax), ``-inf``; fully masked rows; empty batch, L or S;
float16, float32 and float64.

:data:`PATHS` and :func:`assert_paths_agree` are shared with the ports of other projects' suites
(``test_peers_*.py``), which run every case over the four paths.
"""

from functools import partial

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attention_course.multihead as multihead
from attention_course import fast_attention, online_softmax_attention, scaled_dot_product_attention

PATHS = {
    "direct": scaled_dot_product_attention,
    "fast": fast_attention,
    "fast_threads": partial(fast_attention, num_threads=2),
    "online": online_softmax_attention,
}
DTYPES = (np.float16, np.float32, np.float64)
# Relative and absolute tolerance of each dtype, for well-scaled inputs (|score| of a few units).
TOL = {np.float16: (3e-3, 3e-3), np.float32: (2e-5, 2e-5), np.float64: (1e-11, 1e-11)}
# Unit roundoff of the dtype the work is done in (float16 is computed in float32).
EPS = {np.float16: 2.0**-24, np.float32: 2.0**-24, np.float64: 2.0**-53}
EXTREMES = ("finfo.min", "-1e9", "-0.7*finfo.max", "-inf")


def extreme(name, dtype):
    """One of the blocking values other libraries use, for inputs of ``dtype``."""
    info = np.finfo(dtype)
    return {"finfo.min": float(info.min), "-1e9": -1e9, "-0.7*finfo.max": -0.7 * float(info.max),
            "-inf": -np.inf}[name]


def mask_array(values, dtype):
    """An additive mask for inputs of ``dtype``; float32 when a value is past float16's range."""
    values = np.asarray(values, np.float64)
    finite = values[np.isfinite(values)]
    if dtype == np.float16 and finite.size and np.abs(finite).max() > np.finfo(np.float16).max:
        dtype = np.float32        # -1e9 is not a float16; the library computes in float32 anyway
    return values.astype(dtype)


def tolerance(q, k, v, attn_mask=None, scale=None, **_):
    """(rtol, atol) for comparing two paths.

    Each path rounds every score, an error of about eps · |score| that exp turns into a relative
    error of the weights. A large finite mask value M enters the score too: while eps · |M| is
    small, that is one more error of the same kind; once it is large, the score is lost against
    M in every path alike (the row is uniform over its M entries, its others get weight 0).
    The output is a weighted mean of the rows of v, so its error scales with their size.
    """
    dtype = q.dtype.type
    rtol, atol = TOL[dtype]
    eps = EPS[dtype]
    s = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    if q.size and k.size:
        q64, k64 = q.astype(np.float64), k.astype(np.float64)
        exponent = float(np.abs(q64 @ np.swapaxes(k64, -1, -2)).max()) * s
    else:
        exponent = 0.0
    if attn_mask is not None and attn_mask.dtype != np.bool_:
        finite = np.abs(attn_mask[np.isfinite(attn_mask)].astype(np.float64))
        lost = finite[eps * finite >= 0.5]      # scores are lost against these entries
        kept = finite[eps * finite < 0.5]
        if lost.size:   # lost alike in every path only when far below half a float spacing
            assert 2 * exponent < eps * lost.min(), "test case: scores too large for its mask"
        exponent += kept.max(initial=0.0)
    atol += 16 * eps * exponent
    size = max(1.0, float(np.abs(v.astype(np.float64)).max())) if v.size else 1.0
    return rtol, atol * size


def assert_paths_agree(q, k, v, paths=tuple(PATHS), **kw):
    """Every path in ``paths`` equals the direct formula; returns the direct output."""
    want = scaled_dot_product_attention(q, k, v, **kw)
    rtol, atol = tolerance(q, k, v, **kw)
    for name in paths:
        got = PATHS[name](q, k, v, **kw)
        assert got.dtype == want.dtype == q.dtype, name
        assert got.shape == want.shape, name
        assert np.isfinite(got).all(), name
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=atol, err_msg=f"path {name}")
    return want


@pytest.fixture(params=list(PATHS))
def mha_path(request, monkeypatch):
    """Make MultiHeadAttention compute its heads with one path (its weights stay direct)."""
    name = request.param
    if name != "direct":
        direct = multihead.scaled_dot_product_attention

        def heads(q, k, v, attn_mask=None, is_causal=False, return_weights=False):
            out = PATHS[name](q, k, v, attn_mask=attn_mask, is_causal=is_causal)
            if not return_weights:
                return out
            _, weights = direct(q, k, v, attn_mask=attn_mask, is_causal=is_causal,
                                return_weights=True)
            return out, weights

        monkeypatch.setattr(multihead, "scaled_dot_product_attention", heads)
    return name


# ---------------------------------------------------------------- properties

@st.composite
def attention_case(draw):
    dtype = draw(st.sampled_from(DTYPES))
    lead = draw(st.lists(st.integers(0, 3), min_size=0, max_size=2))

    def lead_of():
        return tuple(n if draw(st.booleans()) else 1 for n in lead)

    L, S = draw(st.integers(0, 24)), draw(st.integers(0, 24))
    E, Ev = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.normal(size=lead_of() + (L, E))
    k = rng.normal(size=lead_of() + (S, E))
    v = rng.normal(size=lead_of() + (S, Ev)) * draw(st.sampled_from([1.0, 100.0]))
    kw = {"scale": draw(st.one_of(st.none(), st.floats(0.05, 2.0)))}
    s = 1 / np.sqrt(E) if kw["scale"] is None else kw["scale"]
    if q.size and k.size:
        # Scores of at most 8 in size: 2 · 8 stays below half the spacing of float32 numbers
        # near 1e9 (64), so a row blocked by -1e9 is lost against it in every path alike.
        top = np.abs(q @ np.swapaxes(k, -1, -2)).max() * s
        if top > 8:
            q *= 8 / top
    q, k, v = q.astype(dtype), k.astype(dtype), v.astype(dtype)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    kind = draw(st.sampled_from(["none", "causal", "bool", "additive", "additive"]))
    shape = draw(st.sampled_from([(L, S), batch + (L, S), batch + (1, S), (L, 1)]))
    if kind == "causal":
        kw["is_causal"] = True
    elif kind == "bool":
        kw["attn_mask"] = rng.random(shape) < draw(st.sampled_from([0.0, 0.5, 0.9, 1.0]))
    elif kind == "additive":
        blocked = rng.random(shape) < draw(st.sampled_from([0.3, 0.7, 1.0]))
        chosen = draw(st.lists(st.sampled_from(EXTREMES), min_size=1, max_size=2, unique=True))
        blocking = np.array([extreme(c, dtype) for c in chosen])
        bias = rng.normal(size=shape) * draw(st.sampled_from([0.0, 1.0]))
        values = np.where(blocked, blocking[rng.integers(0, len(chosen), size=shape)], bias)
        kw["attn_mask"] = mask_array(values, dtype)
    return q, k, v, kw


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attention_case(), st.integers(1, 9), st.integers(1, 9))
def test_every_path_gives_the_direct_answer(case, block_q, block_k):
    q, k, v, kw = case
    assert_paths_agree(q, k, v, **kw)
    # Small blocks: a fully masked row, or the causal diagonal, falls inside and across blocks.
    rtol, atol = tolerance(q, k, v, **kw)
    want = scaled_dot_product_attention(q, k, v, **kw)
    for got in (fast_attention(q, k, v, block_q=block_q, num_threads=2, **kw),
                online_softmax_attention(q, k, v, block_q=block_q, block_k=block_k, **kw)):
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=atol)


# ---------------------------------------------------------------- the cases, one by one

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", EXTREMES)
def test_fully_masked_row_under_each_blocking_value(dtype, name):
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 4, 8)).astype(dtype), rng.normal(size=(2, 5, 8)).astype(dtype)
    v = rng.normal(size=(2, 5, 3)).astype(dtype)
    values = np.zeros((4, 5))
    values[1] = extreme(name, dtype)          # fully masked
    values[2, 1:] = extreme(name, dtype)      # only key 0 left
    mask = mask_array(values, dtype)
    out = assert_paths_agree(q, k, v, attn_mask=mask)
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(out[:, 2].astype(np.float64), v[:, 0].astype(np.float64),
                               rtol=rtol, atol=atol)
    if name == "-inf":
        assert np.all(out[:, 1] == 0)         # nothing to look at: zeros, never NaN
    elif np.finfo(np.float32 if dtype == np.float16 else dtype).eps * abs(values[1, 0]) > 1:
        # The scores are lost against the mask in the working precision: a plain mean of v,
        # which is what PyTorch gives too.
        np.testing.assert_allclose(out[:, 1].astype(np.float64),
                                   v.astype(np.float64).mean(-2), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [
    ((0, 3, 5, 8), (0, 3, 6, 8), (0, 3, 6, 4)),     # empty batch
    ((2, 0, 8), (2, 6, 8), (2, 6, 4)),               # L = 0
    ((2, 5, 8), (2, 0, 8), (2, 0, 4)),               # S = 0: nothing to look at
    ((1, 5, 8), (3, 0, 8), (1, 0, 4)),               # S = 0 with broadcasting
], ids=["batch", "L", "S", "S-broadcast"])
@pytest.mark.parametrize("kind", ["none", "causal", "bool", "additive"])
def test_empty_axes(dtype, shapes, kind):
    q, k, v = (np.ones(s, dtype) for s in shapes)
    L, S = q.shape[-2], k.shape[-2]
    kw = {"causal": {"is_causal": True},
          "bool": {"attn_mask": np.ones((L, S), bool)},
          "additive": {"attn_mask": np.full((L, S), np.finfo(dtype).min, dtype)}}.get(kind, {})
    out = assert_paths_agree(q, k, v, **kw)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    assert out.shape == batch + (L, v.shape[-1])
    assert np.all(out == 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_bool_and_additive_masks_of_the_same_blocks_agree(dtype):
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(3, 2, 7, 4)).astype(dtype) for _ in range(3))
    keep = rng.random((3, 1, 7, 7)) < 0.6
    keep[0, 0, 3] = False                      # a fully masked row
    outs = [assert_paths_agree(q, k, v, attn_mask=keep)]
    for name in EXTREMES[:-1]:                 # finite blocking values: the row averages v
        additive = mask_array(np.where(keep, 0.0, extreme(name, dtype)), dtype)
        outs.append(assert_paths_agree(q, k, v, attn_mask=additive))
    outs.append(assert_paths_agree(q, k, v, attn_mask=np.where(keep, 0.0, -np.inf).astype(dtype)))
    rtol, atol = TOL[dtype]
    rows = keep.any(-1)[..., None] & np.ones_like(outs[0], bool)   # rows that see some key
    for out in outs[1:]:
        np.testing.assert_allclose(out[rows].astype(np.float64), outs[0][rows].astype(np.float64),
                                   rtol=rtol, atol=atol)


@pytest.mark.parametrize("S", [0, 5])
@pytest.mark.parametrize("mask", [np.array([[False]]), np.array([[True]]), np.zeros((1, 1), np.float32)])
def test_a_mask_with_one_key_column_broadcasts_over_every_key(mask, S):
    # The key axis of length 1 stretches over S keys, S = 0 included (a case hypothesis found).
    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, 3, 4)).astype(np.float32)
    k, v = rng.normal(size=(2, S, 4)).astype(np.float32), rng.normal(size=(2, S, 3)).astype(np.float32)
    want = scaled_dot_product_attention(q, k, v, attn_mask=mask)
    for got in (fast_attention(q, k, v, attn_mask=mask, block_q=1, num_threads=2),
                online_softmax_attention(q, k, v, attn_mask=mask, block_q=1, block_k=1)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
