"""The backward passes: finite differences in float64, PyTorch autograd in float32, dtypes, masks.

Finite differences: every gradient is compared with central differences of the loss
``sum(output * R)`` (R random, so that every output entry matters), Richardson-extrapolated from
eps = 1e-3 and 5e-4, which brings the numerical gradient to about 1e-12 absolute accuracy; the
relative error (``gradcheck.relative_error``, elementwise, with a floor of 1e-5: entries smaller
than that, such as the key bias's gradient that is zero in exact arithmetic, must agree to 1e-11
absolute) must be <= 1e-6.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import attention_course
from attention_course import MultiHeadAttention, scaled_dot_product_attention
from attention_course.backprop import (
    attention_backward,
    attention_forward,
    embedding_backward,
    embedding_forward,
    layernorm_backward,
    layernorm_forward,
    linear_backward,
    linear_forward,
    mha_backward,
    mha_forward,
    positional_backward,
    positional_forward,
    residual_backward,
    residual_forward,
    softmax_backward,
    softmax_cross_entropy,
    softmax_forward,
)
from attention_course.gradcheck import numerical_gradient, relative_error
from attention_course.positional import sinusoidal_positional_encoding

TOL = 1e-6
FLOOR = 1e-5
FEW = settings(max_examples=12, deadline=None, derandomize=True, database=None)
REF_PATH = Path(__file__).parent / "reference" / "backprop_reference.npz"
REF = np.load(REF_PATH)
MHA_KEYS = ("in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias")


# ---- helpers ------------------------------------------------------------------------------------

def fd(f, x):
    """Central differences, Richardson-extrapolated: error O(eps⁴) instead of O(eps²)."""
    coarse = numerical_gradient(f, x, eps=1e-3)
    fine = numerical_gradient(f, x, eps=5e-4)
    return (4 * fine - coarse) / 3


def assert_matches_fd(loss, wrt: dict, analytic: dict):
    """Each array in ``wrt`` (read by ``loss``) has gradient ``analytic[name]``."""
    for name, x in wrt.items():
        assert analytic[name].shape == x.shape, name
        err = relative_error(analytic[name], fd(loss, x), floor=FLOOR)
        assert err <= TOL, f"d{name}: relative error {err:.2e}"


def case(name):
    prefix = name + "/"
    return {k[len(prefix):]: REF[k] for k in REF.files if k.startswith(prefix)}


def close32(ours, theirs, what):
    assert ours.dtype == np.float32, what
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5, err_msg=what)


def params_of(c):
    return {k: c[k] for k in MHA_KEYS if k in c}


def make_mask(rng, kind, shape):
    """A mask of the given kind for scores of ``shape`` (..., L, S); None for 'none'/'causal'."""
    if kind == "bool":
        return rng.random(shape) > 0.4
    if kind == "bool_empty_row":                 # at least one query sees no key at all
        m = rng.random(shape) > 0.4
        m[..., 0, :] = False
        return m
    if kind == "float":
        m = rng.standard_normal(shape)
        m[rng.random(shape) < 0.3] = -np.inf
        return m
    return None


batch_shapes = st.lists(st.integers(1, 2), min_size=0, max_size=2).map(tuple)
dims = st.integers(1, 4)
seeds = st.integers(0, 2**16)


# ---- softmax ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["none", "bool", "bool_empty_row", "float"])
@settings(FEW, max_examples=4)
@given(batch=batch_shapes, n=st.integers(1, 6), seed=seeds)
def test_softmax_backward_matches_finite_differences(kind, batch, n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(batch + (2, n))
    mask = make_mask(rng, kind, batch + (2, n))
    R = rng.standard_normal(x.shape)
    y, cache = softmax_forward(x, mask)
    dx = softmax_backward(R, cache)
    assert_matches_fd(lambda: float((softmax_forward(x, mask)[0] * R).sum()), {"x": x}, {"x": dx})


def test_softmax_forward_is_the_library_softmax_and_empty_rows_are_zero():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    y, _ = softmax_forward(x)
    np.testing.assert_array_equal(y, attention_course.softmax(x))
    mask = np.ones((3, 5), bool)
    mask[1] = False
    y, cache = softmax_forward(x, mask)
    dx = softmax_backward(np.ones((3, 5), np.float32), cache)
    assert np.all(y[1] == 0) and np.all(dx[1] == 0) and np.isfinite(dx).all()
    # an additive mask of 0 and -inf is the same as the boolean one
    y_add, _ = softmax_forward(x, np.where(mask, 0, -np.inf).astype(np.float32))
    np.testing.assert_array_equal(y, y_add)


# ---- scaled dot-product attention ---------------------------------------------------------------

ATTN_KINDS = ["none", "bool", "bool_empty_row", "float", "causal", "broadcast_kv"]


@pytest.mark.parametrize("kind", ATTN_KINDS)
@settings(FEW, max_examples=4)
@given(batch=batch_shapes, L=dims, S=dims, E=dims, Ev=dims, scaled=st.booleans(), seed=seeds)
def test_attention_backward_matches_finite_differences(kind, batch, L, S, E, Ev, scaled, seed):
    rng = np.random.default_rng(seed)
    kv_batch = () if kind == "broadcast_kv" else batch     # k, v shared by every sequence
    q = rng.standard_normal(batch + (L, E))
    k = rng.standard_normal(kv_batch + (S, E))
    v = rng.standard_normal(kv_batch + (S, Ev))
    mask = make_mask(rng, kind, batch + (L, S))
    causal = kind == "causal"
    scale = 0.7 if scaled else None
    R = rng.standard_normal(batch + (L, Ev))
    out, w, cache = attention_forward(q, k, v, attn_mask=mask, is_causal=causal, scale=scale)
    dq, dk, dv = attention_backward(R, cache)

    def loss():
        return float((attention_forward(q, k, v, mask, causal, scale)[0] * R).sum())

    assert_matches_fd(loss, {"q": q, "k": k, "v": v}, {"q": dq, "k": dk, "v": dv})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal", "bool_empty_row"])
def test_attention_forward_is_scaled_dot_product_attention(dtype, kind):
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 4, 6, 8)).astype(dtype) for _ in range(3))
    mask = make_mask(rng, kind, (4, 6, 6))
    out, w, _ = attention_forward(q, k, v, attn_mask=mask, is_causal=kind == "causal")
    ref_out, ref_w = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=kind == "causal",
                                                  return_weights=True)
    np.testing.assert_array_equal(out, ref_out)
    np.testing.assert_array_equal(w, ref_w)
    assert out.dtype == w.dtype == dtype


def test_no_gradient_reaches_a_masked_key_from_the_rows_that_mask_it():
    rng = np.random.default_rng(3)
    L, S = 5, 6
    q, k, v = rng.standard_normal((L, 4)), rng.standard_normal((S, 4)), rng.standard_normal((S, 3))
    mask = np.ones((L, S), bool)
    hidden_from = [0, 2, 3]
    mask[hidden_from, 4] = False                     # key 4 is hidden from queries 0, 2, 3
    _, w, cache = attention_forward(q, k, v, attn_mask=mask)
    dout = np.zeros((L, 3))
    dout[hidden_from] = rng.standard_normal((3, 3))  # only those queries send a gradient
    dq, dk, dv = attention_backward(dout, cache)
    assert np.all(dk[4] == 0) and np.all(dv[4] == 0)
    assert np.abs(dk[[0, 1, 2, 3, 5]]).min(axis=1).max() > 0    # the other keys do get one
    # the queries that see key 4 do pass gradient to it
    dout_all = rng.standard_normal((L, 3))
    _, dk_all, dv_all = attention_backward(dout_all, cache)
    assert np.abs(dk_all[4]).max() > 0 and np.abs(dv_all[4]).max() > 0
    # and the same with the additive form of the mask, and with the causal triangle
    _, _, cache_f = attention_forward(q, k, v, attn_mask=np.where(mask, 0.0, -np.inf))
    _, dk_f, dv_f = attention_backward(dout, cache_f)
    assert np.all(dk_f[4] == 0) and np.all(dv_f[4] == 0)
    _, _, cache_c = attention_forward(q, k, v, is_causal=True)
    dout_c = np.zeros((L, 3))
    dout_c[:3] = 1.0                                 # queries 0-2 see keys 0-2 only
    _, dk_c, dv_c = attention_backward(dout_c, cache_c)
    assert np.all(dk_c[3:] == 0) and np.all(dv_c[3:] == 0) and np.abs(dv_c[:3]).min() > 0


def test_fully_masked_query_gets_zero_output_and_zero_gradient():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((3, 4)) for _ in range(3))
    mask = np.ones((3, 3), bool)
    mask[1] = False
    out, w, cache = attention_forward(q, k, v, attn_mask=mask)
    dq, dk, dv = attention_backward(np.ones((3, 4)), cache)
    assert np.all(out[1] == 0) and np.all(w[1] == 0) and np.all(dq[1] == 0)
    assert all(np.isfinite(a).all() for a in (dq, dk, dv))


# ---- linear -------------------------------------------------------------------------------------

@FEW
@given(batch=batch_shapes, n_in=dims, n_out=dims, bias=st.booleans(), seed=seeds)
def test_linear_backward_matches_finite_differences(batch, n_in, n_out, bias, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(batch + (3, n_in))
    W = rng.standard_normal((n_out, n_in))
    b = rng.standard_normal(n_out) if bias else None
    R = rng.standard_normal(batch + (3, n_out))
    _, cache = linear_forward(x, W, b)
    dx, dW, db = linear_backward(R, cache)
    assert (db is None) == (not bias)
    wrt, analytic = {"x": x, "W": W}, {"x": dx, "W": dW}
    if bias:
        wrt["b"], analytic["b"] = b, db
    assert_matches_fd(lambda: float((linear_forward(x, W, b)[0] * R).sum()), wrt, analytic)


# ---- multi-head attention ----------------------------------------------------------------------

MHA_KINDS = ["self_causal", "cross_key_padding", "attn_mask_bool", "float_mask_padding",
             "causal_padding", "no_bias"]


def random_params(rng, E, bias=True, dtype=np.float64):
    p = {"in_proj_weight": rng.standard_normal((3 * E, E)) / np.sqrt(E),
         "out_proj_weight": rng.standard_normal((E, E)) / np.sqrt(E)}
    if bias:
        p["in_proj_bias"] = rng.standard_normal(3 * E)
        p["out_proj_bias"] = rng.standard_normal(E)
    return {k: v.astype(dtype) for k, v in p.items()}


def mha_inputs(rng, kind, B, L, S, E, H, dtype=np.float64):
    """query, key, value, params and the keyword arguments of one multi-head case."""
    self_attention = kind in ("self_causal", "attn_mask_bool", "no_bias", "causal_padding")
    query = rng.standard_normal((B, L, E)).astype(dtype)
    if self_attention:
        S = L
        key = value = query
    else:
        key, value = (rng.standard_normal((B, S, E)).astype(dtype) for _ in range(2))
    kw = {}
    if kind in ("self_causal",):
        kw["is_causal"] = True
    if kind in ("cross_key_padding", "causal_padding"):
        real = np.ones((B, S), bool)
        real[0, S // 2:] = False                  # the first sequence is padded
        kw["key_padding_mask"] = real
        kw["is_causal"] = kind == "causal_padding"
    if kind == "attn_mask_bool":
        kw["attn_mask"] = rng.random((L, S)) > 0.4
    if kind == "float_mask_padding":
        kw["attn_mask"] = rng.standard_normal((H, L, S)).astype(dtype)
        kw["key_padding_mask"] = np.where(rng.random((B, S)) > 0.3, 0.0, -np.inf).astype(dtype)
    params = random_params(rng, E, bias=kind != "no_bias", dtype=dtype)
    return query, key, value, params, kw


@pytest.mark.parametrize("kind", MHA_KINDS)
@settings(FEW, max_examples=2)                   # each example nudges ~4·E² weights one by one
@given(B=st.integers(1, 2), L=dims, S=dims, head_dim=st.integers(1, 3), H=st.integers(1, 2), seed=seeds)
def test_mha_backward_matches_finite_differences(kind, B, L, S, head_dim, H, seed):
    rng = np.random.default_rng(seed)
    E = H * head_dim
    query, key, value, params, kw = mha_inputs(rng, kind, B, L, S, E, H)
    if key is query:                             # independent arrays, so each gradient is checked
        key, value = query.copy(), query.copy()
    out, w, cache = mha_forward(query, key, value, params, H, **kw)
    R = rng.standard_normal(out.shape)
    dquery, dkey, dvalue, grads = mha_backward(R, cache)
    assert set(grads) == set(params)

    def loss():
        return float((mha_forward(query, key, value, params, H, **kw)[0] * R).sum())

    assert_matches_fd(loss, {"query": query, "key": key, "value": value, **params},
                      {"query": dquery, "key": dkey, "value": dvalue, **grads})


@pytest.mark.parametrize("kind", MHA_KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mha_forward_is_multi_head_attention(kind, dtype):
    rng = np.random.default_rng(2)
    H, E = 2, 8
    query, key, value, params, kw = mha_inputs(rng, kind, 3, 5, 6, E, H, dtype)
    mha = MultiHeadAttention(E, H, bias="in_proj_bias" in params, dtype=dtype)
    for name, value_ in params.items():
        setattr(mha, name, value_)
    out, w, _ = mha_forward(query, key, value, params, H, **kw)
    ref_out, ref_w = mha(query, key, value, average_attn_weights=False, **kw)
    # equal up to rounding: mha_forward makes one matrix product over all positions, the class one
    # per sequence, and BLAS may sum in another order
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(out, ref_out, rtol=tol, atol=tol)
    np.testing.assert_allclose(w, ref_w, rtol=tol, atol=tol)
    assert np.array_equal(w == 0, ref_w == 0)     # the same entries masked
    assert out.dtype == w.dtype == dtype and w.shape == (3, H, 5, key.shape[1])


def test_mha_padded_keys_get_no_gradient():
    rng = np.random.default_rng(6)
    query, key, value, params, kw = mha_inputs(rng, "cross_key_padding", 2, 4, 6, 4, 2)
    out, w, cache = mha_forward(query, key, value, params, 2, **kw)
    _, dkey, dvalue, _ = mha_backward(rng.standard_normal(out.shape), cache)
    padded = ~kw["key_padding_mask"]
    assert padded.any() and np.all(w[0][..., padded[0]] == 0)
    assert np.all(dkey[padded] == 0) and np.all(dvalue[padded] == 0)
    assert np.abs(dkey[~padded]).max() > 0


# ---- embedding, positional encoding, residual, LayerNorm, cross-entropy -------------------------

@FEW
@given(B=st.integers(1, 3), n=st.integers(1, 5), vocab=st.integers(1, 5), E=dims, seed=seeds)
def test_embedding_and_learned_positional_match_finite_differences(B, n, vocab, E, seed):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, vocab, size=(B, n))
    table, pe = rng.standard_normal((vocab, E)), rng.standard_normal((n + 2, E))
    R = rng.standard_normal((B, n, E))

    def forward():
        x, c_emb = embedding_forward(tokens, table)
        y, c_pos = positional_forward(x, pe)
        return y, c_emb, c_pos

    y, c_emb, c_pos = forward()
    dx, dpe = positional_backward(R, c_pos)
    dtable = embedding_backward(dx, c_emb)
    assert np.all(dpe[n:] == 0)                  # positions beyond n were not used
    assert_matches_fd(lambda: float((forward()[0] * R).sum()), {"table": table, "pe": pe},
                      {"table": dtable, "pe": dpe})


def test_sinusoidal_encoding_keeps_float32_and_passes_the_gradient_through():
    x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
    pe = sinusoidal_positional_encoding(10, 8)                       # float64 table
    y, cache = positional_forward(x, pe)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, x + pe[:5], rtol=1e-6)
    dy = np.arange(80, dtype=np.float32).reshape(2, 5, 8)
    dx, dpe = positional_backward(dy, cache)
    np.testing.assert_array_equal(dx, dy)
    assert dx.dtype == np.float32 and dpe.shape == (10, 8)


@FEW
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple), seed=seeds)
def test_residual_and_layernorm_match_finite_differences(shape, seed):
    rng = np.random.default_rng(seed)
    # E = 1 normalises to 0 and E = 2 to ±1 whatever x (dx then is only eps's tiny effect): E >= 3
    E = shape[-1] + 2
    x, fx = rng.standard_normal(shape[:-1] + (E,)), rng.standard_normal(shape[:-1] + (E,))
    gamma, beta = rng.standard_normal(E), rng.standard_normal(E)
    R = rng.standard_normal(x.shape)

    def forward():
        h, c_res = residual_forward(x, fx)
        y, c_ln = layernorm_forward(h, gamma, beta)
        return y, c_res, c_ln

    _, c_res, c_ln = forward()
    dh, dgamma, dbeta = layernorm_backward(R, c_ln)
    dx, dfx = residual_backward(dh, c_res)
    assert_matches_fd(lambda: float((forward()[0] * R).sum()),
                      {"x": x, "fx": fx, "gamma": gamma, "beta": beta},
                      {"x": dx, "fx": dfx, "gamma": dgamma, "beta": dbeta})


@FEW
@given(batch=st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple), C=st.integers(1, 5),
       masked=st.booleans(), seed=seeds)
def test_cross_entropy_gradient_matches_finite_differences(batch, C, masked, seed):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal(batch + (C,)) * 3
    targets = rng.integers(0, C, size=batch)
    mask = rng.random(batch) > 0.5 if masked else None
    if masked:
        targets[~mask] = -1                      # positions that do not count may hold anything
    loss, dlogits = softmax_cross_entropy(logits, targets, mask)
    assert_matches_fd(lambda: softmax_cross_entropy(logits, targets, mask)[0], {"logits": logits},
                      {"logits": dlogits})


def test_cross_entropy_values():
    logits = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]], dtype=np.float32))
    loss, d = softmax_cross_entropy(logits, np.array([0, 2]))
    assert loss == pytest.approx(-(np.log(0.5) + np.log(0.8)) / 2, rel=1e-6)
    assert d.dtype == np.float32
    loss, d = softmax_cross_entropy(logits, np.array([0, 2]), mask=np.array([False, True]))
    assert loss == pytest.approx(-np.log(0.8), rel=1e-6) and np.all(d[0] == 0)
    loss, d = softmax_cross_entropy(logits, np.array([0, 2]), mask=np.zeros(2, bool))
    assert loss == 0.0 and np.all(d == 0)


# ---- against PyTorch autograd: stored float32 vectors -------------------------------------------

def test_reference_file_covers_every_operation():
    cases = {k.split("/")[0] for k in REF.files if "/" in k}
    assert {"softmax_bool_mask", "softmax_float_mask", "sdpa_bool_mask", "sdpa_float_mask",
            "sdpa_causal", "sdpa_causal_L_lt_S", "sdpa_scale", "linear", "mha_self_causal",
            "mha_cross_key_padding", "mha_no_bias_attn_mask", "embedding_positional", "layernorm",
            "cross_entropy", "cross_entropy_mask", "adam_3_steps"} <= cases
    assert REF_PATH.stat().st_size < 256 * 1024


@pytest.mark.parametrize("name", ["softmax_bool_mask", "softmax_float_mask"])
def test_softmax_matches_torch_stored(name):
    c = case(name)
    y, cache = softmax_forward(c["x"], c["mask"])
    close32(y, c["y"], "y")
    close32(softmax_backward(c["dy"], cache), c["dx"], "dx")


@pytest.mark.parametrize("name", ["sdpa_bool_mask", "sdpa_float_mask", "sdpa_causal",
                                  "sdpa_causal_L_lt_S", "sdpa_scale"])
def test_attention_matches_torch_stored(name):
    c = case(name)
    scale = float(c["scale"]) if "scale" in c else None
    out, _, cache = attention_forward(c["q"], c["k"], c["v"], attn_mask=c.get("attn_mask"),
                                      is_causal=bool(c["is_causal"]), scale=scale)
    close32(out, c["out"], "out")
    for g, key in zip(attention_backward(c["dout"], cache), ("dq", "dk", "dv"), strict=True):
        close32(g, c[key], key)


def test_linear_matches_torch_stored():
    c = case("linear")
    y, cache = linear_forward(c["x"], c["weight"], c["bias"])
    close32(y, c["y"], "y")
    for g, key in zip(linear_backward(c["dy"], cache), ("dx", "dweight", "dbias"), strict=True):
        close32(g, c[key], key)


def check_mha_against(c, res):
    kw = {"is_causal": bool(c["is_causal"])}
    for key in ("attn_mask", "key_padding_mask"):
        if key in c:
            kw[key] = c[key]
    params = params_of(c)
    out, w, cache = mha_forward(c["query"], c["key"], c["value"], params, int(c["num_heads"]), **kw)
    close32(out, res["out"], "out")
    close32(w, res["weights"], "weights")
    dquery, dkey, dvalue, grads = mha_backward(c["dout"], cache)
    for ours, key in ((dquery, "dquery"), (dkey, "dkey"), (dvalue, "dvalue")):
        close32(ours, res[key], key)
    assert set(grads) == set(params)
    for key, g in grads.items():
        close32(g, res[f"d_{key}"], key)


@pytest.mark.parametrize("name", ["mha_self_causal", "mha_cross_key_padding", "mha_no_bias_attn_mask"])
def test_mha_matches_torch_stored(name):
    c = case(name)
    check_mha_against(c, c)


def test_embedding_positional_matches_torch_stored():
    c = case("embedding_positional")
    x, c_emb = embedding_forward(c["tokens"], c["table"])
    y, c_pos = positional_forward(x, c["pe"])
    close32(y, c["y"], "y")
    dx, dpe = positional_backward(c["dy"], c_pos)
    close32(dpe, c["dpe"], "dpe")
    close32(embedding_backward(dx, c_emb), c["dtable"], "dtable")


def test_layernorm_matches_torch_stored():
    c = case("layernorm")
    y, cache = layernorm_forward(c["x"], c["gamma"], c["beta"])
    close32(y, c["y"], "y")
    for g, key in zip(layernorm_backward(c["dy"], cache), ("dx", "dgamma", "dbeta"), strict=True):
        close32(g, c[key], key)


@pytest.mark.parametrize("name", ["cross_entropy", "cross_entropy_mask"])
def test_cross_entropy_matches_torch_stored(name):
    c = case(name)
    loss, dlogits = softmax_cross_entropy(c["logits"], c["targets"], c.get("mask"))
    assert loss == pytest.approx(float(c["loss"]), rel=1e-5)
    close32(dlogits, c["dlogits"], "dlogits")


# ---- against PyTorch autograd, live, on fresh random inputs (only where torch imports) ----------

@pytest.fixture
def gen():
    pytest.importorskip("torch", reason="PyTorch not installed: the stored vectors still ran")
    path = REF_PATH.with_name("make_backprop_reference.py")
    spec = importlib.util.spec_from_file_location("make_backprop_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("seed", range(4))
def test_live_attention_against_torch(gen, seed):
    rng = np.random.default_rng(100 + seed)
    batch = tuple(int(b) for b in rng.integers(1, 3, size=rng.integers(0, 3)))
    L, S, E, Ev = (int(x) for x in rng.integers(1, 7, size=4))
    q, k, v = (rng.standard_normal(batch + shape).astype(np.float32)
               for shape in ((L, E), (S, E), (S, Ev)))
    dout = rng.standard_normal(batch + (L, Ev)).astype(np.float32)
    kw = [{"is_causal": True}, {"attn_mask": (rng.random((L, S)) > 0.4) | (np.arange(S) == 0)},
          {"attn_mask": rng.standard_normal((L, S)).astype(np.float32)}, {"scale": 0.3}][seed]
    res = gen.torch_sdpa(q, k, v, dout, **kw)
    out, _, cache = attention_forward(q, k, v, **kw)
    close32(out, res["out"], "out")
    for g, key in zip(attention_backward(dout, cache), ("dq", "dk", "dv"), strict=True):
        close32(g, res[key], key)


@pytest.mark.parametrize("kind", ["self_causal", "cross_key_padding", "attn_mask_bool", "no_bias"])
def test_live_mha_against_torch(gen, kind):
    rng = np.random.default_rng(7)
    query, key, value, params, kw = mha_inputs(rng, kind, 2, 4, 5, 8, 2, np.float32)
    if kind == "attn_mask_bool":
        kw["attn_mask"][:, 0] = True             # torch gives NaN for a query that sees nothing
    dout = rng.standard_normal((2, 4, 8)).astype(np.float32)
    res = gen.torch_mha(query, key.copy(), value.copy(), params, 2, dout, **kw)
    c = {"query": query, "key": key, "value": value, "dout": dout, "num_heads": 2,
         "is_causal": kw.pop("is_causal", False), **kw, **params}
    check_mha_against(c, res)


def test_live_layernorm_cross_entropy_linear_embedding_against_torch(gen):
    rng = np.random.default_rng(8)
    x, gamma, beta, dy = (rng.standard_normal(s).astype(np.float32)
                          for s in ((3, 4, 7), (7,), (7,), (3, 4, 7)))
    res = gen.torch_layernorm(x, gamma, beta, dy)
    y, cache = layernorm_forward(x, gamma, beta)
    close32(y, res["y"], "y")
    for g, key in zip(layernorm_backward(dy, cache), ("dx", "dgamma", "dbeta"), strict=True):
        close32(g, res[key], key)
    logits, targets = rng.standard_normal((4, 6, 9)).astype(np.float32), rng.integers(0, 9, (4, 6))
    mask = rng.random((4, 6)) > 0.5
    res = gen.torch_cross_entropy(logits, targets, mask)
    loss, dlogits = softmax_cross_entropy(logits, targets, mask)
    assert loss == pytest.approx(float(res["loss"]), rel=1e-5)
    close32(dlogits, res["dlogits"], "dlogits")
    W, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    dy = rng.standard_normal((3, 4, 5)).astype(np.float32)
    res = gen.torch_linear(x, W, dy, b)
    _, cache = linear_forward(x, W, b)
    for g, key in zip(linear_backward(dy, cache), ("dx", "dweight", "dbias"), strict=True):
        close32(g, res[key], key)
    tokens = rng.integers(0, 6, size=(4, 5))
    table, pe, dy = (rng.standard_normal(s).astype(np.float32) for s in ((6, 3), (8, 3), (4, 5, 3)))
    res = gen.torch_embedding_positional(tokens, table, pe, dy)
    e, c_emb = embedding_forward(tokens, table)
    _, c_pos = positional_forward(e, pe)
    dx, dpe = positional_backward(dy, c_pos)
    close32(dpe, res["dpe"], "dpe")
    close32(embedding_backward(dx, c_emb), res["dtable"], "dtable")


# ---- float32 in, float32 out --------------------------------------------------------------------

def test_float32_in_float32_out_even_with_a_float64_upstream_gradient():
    rng = np.random.default_rng(5)
    f32 = np.float32
    q, k, v = (rng.standard_normal((2, 3, 4)).astype(f32) for _ in range(3))
    out, w, cache = attention_forward(q, k, v, is_causal=True, scale=0.5)
    grads = attention_backward(np.ones(out.shape), cache)           # a float64 dout
    assert out.dtype == w.dtype == f32 and all(g.dtype == f32 for g in grads)
    y, cache = softmax_forward(q, np.ones(4, bool))
    assert y.dtype == f32 and softmax_backward(np.ones(y.shape), cache).dtype == f32
    W, b = rng.standard_normal((5, 4)).astype(f32), np.zeros(5, f32)
    y, cache = linear_forward(q, W, b)
    assert y.dtype == f32 and all(g.dtype == f32 for g in linear_backward(np.ones(y.shape), cache))


def test_a_whole_float32_model_stays_float32():
    """Embedding, learned and sinusoidal positions, MHA, residual, LayerNorm, head, loss: no float64."""
    rng = np.random.default_rng(9)
    f32 = np.float32
    B, n, E, V, H = 2, 5, 8, 7, 2
    tokens, targets = rng.integers(0, V, (B, n)), rng.integers(0, V, (B, n))
    table = rng.standard_normal((V, E)).astype(f32)
    params = random_params(rng, E, dtype=f32)
    gamma, beta = np.ones(E, f32), np.zeros(E, f32)
    W, b = rng.standard_normal((V, E)).astype(f32), np.zeros(V, f32)
    for pe in (rng.standard_normal((n, E)).astype(f32), sinusoidal_positional_encoding(n, E)):
        x, c_emb = embedding_forward(tokens, table)
        h, c_pos = positional_forward(x, pe)
        a, w, c_mha = mha_forward(h, h, h, params, H, is_causal=True)
        r, c_res = residual_forward(h, a)
        z, c_ln = layernorm_forward(r, gamma, beta)
        logits, c_lin = linear_forward(z, W, b)
        loss, dlogits = softmax_cross_entropy(logits, targets)
        dz, dW, db = linear_backward(dlogits, c_lin)
        dr, dgamma, dbeta = layernorm_backward(dz, c_ln)
        dh, da = residual_backward(dr, c_res)
        dq, dk, dv, grads = mha_backward(da, c_mha)
        dx, dpe = positional_backward(dh + dq + dk + dv, c_pos)
        dtable = embedding_backward(dx, c_emb)
        arrays = [x, h, a, w, r, z, logits, dlogits, dz, dW, db, dr, dgamma, dbeta, dh, da, dq, dk, dv,
                  dx, dtable, *grads.values()]
        assert all(arr.dtype == f32 for arr in arrays), [arr.dtype for arr in arrays]
        assert dpe.dtype == pe.dtype and isinstance(loss, float) and np.isfinite(loss)


# ---- bad input gets a message that names the argument and the shapes -----------------------------

def _attention_cache():
    return attention_forward(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 5)))[2]


def _linear_cache():
    return linear_forward(np.ones((2, 3)), np.ones((4, 3)))[1]


_P4 = {"in_proj_weight": np.ones((12, 4)), "out_proj_weight": np.ones((4, 4))}
_X = np.ones((2, 3, 4))

BAD = [
    (lambda: attention_forward(np.ones((2, 3), np.float16), np.ones((4, 3), np.float16),
                               np.ones((4, 3), np.float16)), TypeError, "need float32 or float64"),
    (lambda: attention_forward(np.ones((2, 3)), np.ones((4, 2)), np.ones((4, 3))), ValueError,
     "q and k must share the last axis E"),
    (lambda: attention_backward(np.ones((2, 4)), _attention_cache()), ValueError,
     "dout has shape (2, 4); it must have the shape of the forward's output, (2, 5)"),
    (lambda: attention_backward(np.ones((2, 5)), _linear_cache()), TypeError,
     "cache comes from linear_forward; attention_backward needs the cache of attention_forward"),
    (lambda: attention_backward(np.ones((2, 5)), None), TypeError, "cache must be the cache returned"),
    (lambda: softmax_forward(np.ones((2, 3)), mask=np.ones(4, bool)), ValueError, "mask has shape (4,)"),
    (lambda: softmax_forward(np.ones(3, int)), TypeError, "x must have a floating dtype"),
    (lambda: linear_forward(np.ones((2, 3)), np.ones((4, 5))), ValueError,
     "weight has shape (4, 5) and x has shape (2, 3)"),
    (lambda: linear_forward(np.ones((2, 3)), np.ones((4, 3)), np.ones(3)), ValueError,
     "bias has shape (3,); it must be (out_features,) = (4,)"),
    (lambda: linear_forward(np.ones((2, 3), np.float32), np.ones((4, 3))), TypeError,
     "x=float32, weight=float64"),
    (lambda: linear_backward(np.ones((2, 3)), _linear_cache()), ValueError,
     "dy has shape (2, 3); it must have the shape of the forward's output, (2, 4)"),
    (lambda: mha_forward(_X, _X, _X, {"out_proj_weight": np.ones((4, 4))}, 2), KeyError,
     "params needs 'in_proj_weight'"),
    (lambda: mha_forward(_X, _X, _X, {**_P4, "in_proj_weight": np.ones((8, 4))}, 2), ValueError,
     "params['in_proj_weight'] has shape (8, 4); it must be (3E, E)"),
    (lambda: mha_forward(_X, _X, _X, {**_P4, "in_proj_bias": np.ones(4)}, 2), ValueError,
     "params['in_proj_bias'] has shape (4,); with E=4 it must be (12,)"),
    (lambda: mha_forward(_X, _X, _X, {**_P4, "in_weight": np.ones(4)}, 2), KeyError,
     "unknown keys ['in_weight']"),
    (lambda: mha_forward(_X, _X, _X, _P4, 3), ValueError, "num_heads=3 must divide E=4"),
    (lambda: mha_forward(np.ones((2, 3, 5)), _X, _X, _P4, 2), ValueError,
     "query has shape (2, 3, 5); its last axis must be E=4"),
    (lambda: mha_forward(_X, _X, np.ones((2, 6, 4)), _P4, 2), ValueError,
     "key and value must have the same number of positions S"),
    (lambda: mha_forward(_X, _X, _X, _P4, 2, is_causal=True, attn_mask=np.ones((3, 3), bool)),
     ValueError, "cannot be combined"),
    (lambda: mha_forward(_X, _X, _X, _P4, 2, key_padding_mask=np.ones((2, 5), bool)), ValueError,
     "key_padding_mask has shape (2, 5)"),
    (lambda: embedding_forward(np.ones((2, 3)), np.ones((5, 4))), TypeError,
     "tokens must be integer token ids; got dtype float64"),
    (lambda: embedding_forward(np.array([[0, 5]]), np.ones((5, 4))), ValueError,
     "tokens must lie in [0, vocab=5)"),
    (lambda: positional_forward(np.ones((2, 6, 4)), np.ones((5, 4))), ValueError,
     "pe has shape (5, 4); for x of shape (2, 6, 4) it must be (max_len, E=4) with max_len >= n=6"),
    (lambda: residual_forward(np.ones((2, 3)), np.ones((3, 2))), ValueError,
     "x has shape (2, 3) and fx has shape (3, 2)"),
    (lambda: layernorm_forward(np.ones((2, 3)), np.ones(4), np.zeros(3)), ValueError,
     "gamma has shape (4,); for x of shape (2, 3) it must be (E,) = (3,)"),
    (lambda: softmax_cross_entropy(np.ones((2, 3)), np.array([0, 1, 2])), ValueError,
     "targets has shape (3,); for logits of shape (2, 3) it must be (2,)"),
    (lambda: softmax_cross_entropy(np.ones((2, 3)), np.array([0, 3])), ValueError,
     "targets must lie in [0, C=3)"),
    (lambda: softmax_cross_entropy(np.ones((2, 3)), np.array([0.0, 1.0])), TypeError,
     "targets must be integer class ids"),
    (lambda: softmax_cross_entropy(np.ones((2, 3)), np.array([0, 1]), mask=np.ones(2)), TypeError,
     "mask must be boolean"),
]


@pytest.mark.parametrize("call, error, words", BAD, ids=[w[:40] for _, _, w in BAD])
def test_bad_input_is_named(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert words in str(info.value)
