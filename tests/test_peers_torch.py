"""Cases from PyTorch's suites, ported: ``test/test_transformers.py`` (scaled_dot_product_attention)
and ``test/nn/test_multihead_attention.py`` (nn.MultiheadAttention).

Every case without returned weights runs over the four paths (direct, fast, fast with two
threads, online). Cases about ``need_weights`` and ``average_attn_weights`` run on the direct
path: only it returns weights. The stored reference vectors (``test_reference.py``) need no
torch; the live comparisons at the end, a hypothesis differential test included, run when torch
imports and are skipped otherwise.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_paths_agree import (
    EXTREMES,
    PATHS,
    assert_paths_agree,
    extreme,
    mask_array,
    mha_path,  # noqa: F401  (a fixture)
    tolerance,
)

from attention_course import MultiHeadAttention
from attention_course.multihead import from_torch_mha_mask

# ---------------------------------------------------------------- SDPA: masks that broadcast


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("mask_shape", [(7, 9), (1, 1, 7, 9), (2, 1, 7, 9), (1, 3, 7, 9),
                                        (2, 3, 1, 9), (2, 1, 1, 9), (1, 9), (3, 7, 9)])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_mask_broadcasts_like_the_expanded_mask(path, mask_shape, kind):
    rng = np.random.default_rng(0)
    B, H, L, S, E = 2, 3, 7, 9, 8
    q = rng.normal(size=(B, H, L, E)).astype(np.float32)
    k, v = (rng.normal(size=(B, H, S, E)).astype(np.float32) for _ in range(2))
    if kind == "bool":
        mask = rng.random(mask_shape) < 0.7
    else:
        mask = np.where(rng.random(mask_shape) < 0.7, rng.normal(size=mask_shape), -np.inf)
        mask = mask.astype(np.float32)
    expanded = np.ascontiguousarray(np.broadcast_to(mask, (B, H, L, S)))
    got = assert_paths_agree(q, k, v, paths=(path,), attn_mask=mask)
    want = PATHS[path](q, k, v, attn_mask=expanded)
    np.testing.assert_allclose(got, want, atol=2e-6)


def test_sdpa_mask_that_does_not_broadcast_is_refused():
    q = np.zeros((2, 3, 7, 8), np.float32)
    k = np.zeros((2, 3, 9, 8), np.float32)
    for path in PATHS.values():
        with pytest.raises(ValueError, match=r"attn_mask has shape \(7, 7\); it must broadcast"):
            path(q, k, k, attn_mask=np.ones((7, 7), bool))


# ---------------------------------------------------------------- SDPA: causal when L != S

@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("shape", [(2, 2, 16, 16, 8), (2, 2, 16, 32, 8), (2, 2, 32, 16, 8),
                                   (1, 1, 23, 56, 15)])
def test_sdpa_causal_upper_left_and_lower_right(path, shape):
    B, H, L, S, E = shape
    rng = np.random.default_rng(1)
    q = rng.normal(size=(B, H, L, E)).astype(np.float32)
    k, v = (rng.normal(size=(B, H, S, E)).astype(np.float32) for _ in range(2))
    # is_causal is torch's upper-left variant: query i sees keys 0..i.
    upper_left = assert_paths_agree(q, k, v, paths=(path,), is_causal=True)
    np.testing.assert_allclose(upper_left, PATHS[path](q, k, v, attn_mask=np.tri(L, S, dtype=bool)),
                               atol=1e-6)
    # The lower-right variant (torch.nn.attention.bias.causal_lower_right) is an ordinary mask:
    # the last query sees every key. With L > S its first L - S queries see none: zeros here.
    lower_right = np.tri(L, S, S - L, dtype=bool)
    out = assert_paths_agree(q, k, v, paths=(path,), attn_mask=lower_right)
    np.testing.assert_allclose(out[..., -1, :], PATHS[path](q[..., -1:, :], k, v)[..., 0, :],
                               atol=1e-6)
    if L > S:
        assert np.all(out[..., : L - S, :] == 0)
    if L == S:
        np.testing.assert_allclose(out, upper_left, atol=1e-6)


@pytest.mark.parametrize("path", list(PATHS))
def test_sdpa_fully_masked_rows_are_zero_not_nan(path):
    # torch's "safe softmax" (2.5 and later): a query with every key blocked gives zeros.
    rng = np.random.default_rng(2)
    q, k, v = (rng.normal(size=(2, 4, 6, 8)).astype(np.float32) for _ in range(3))
    keep = rng.random((2, 4, 6, 6)) < 0.5
    keep[:, :, 2] = False
    for mask in (keep, np.where(keep, 0.0, -np.inf).astype(np.float32)):
        out = assert_paths_agree(q, k, v, paths=(path,), attn_mask=mask)
        assert np.all(out[:, :, 2] == 0) and np.isfinite(out).all()


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("scale", [0.125, 1.0, 3.0])
def test_sdpa_scale_multiplies_the_scores(path, scale):
    rng = np.random.default_rng(3)
    q, k, v = (rng.normal(size=(2, 5, 16)).astype(np.float64) for _ in range(3))
    # scale · q·k equals the default 1/sqrt(E) applied to q rescaled by scale · sqrt(E).
    got = PATHS[path](q, k, v, scale=scale)
    np.testing.assert_allclose(got, PATHS[path](q * (scale * 4.0), k, v), atol=1e-12)


@pytest.mark.parametrize("path", list(PATHS))
def test_sdpa_value_width_may_differ(path):
    rng = np.random.default_rng(4)
    q, k = rng.normal(size=(3, 4, 8)), rng.normal(size=(3, 6, 8))
    v = rng.normal(size=(3, 6, 5))
    out = assert_paths_agree(q, k, v, paths=(path,), is_causal=True)
    assert out.shape == (3, 4, 5)


# ---------------------------------------------------------------- MHA: weights (direct path)

def make_mha(E=8, H=4, seed=0, bias=True):
    mha = MultiHeadAttention(E, H, bias=bias, seed=seed, dtype=np.float64)
    if bias:
        rng = np.random.default_rng(seed)
        mha.in_proj_bias = rng.normal(size=3 * E)
        mha.out_proj_bias = rng.normal(size=E)
    return mha


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("average", [True, False])
@pytest.mark.parametrize("padding", [None, "bool", "float"])
def test_mha_need_weights_average_and_key_padding(need_weights, average, padding):
    N, L, S, E, H = 3, 2, 5, 8, 4
    rng = np.random.default_rng(5)
    mha = make_mha(E, H)
    query, key = rng.normal(size=(N, L, E)), rng.normal(size=(N, S, E))
    real = np.ones((N, S), bool)
    real[1, 3:] = False
    real[2, :] = False                       # a sequence of padding only
    kpm = {None: None, "bool": real, "float": np.where(real, 0.0, -np.inf)}[padding]
    out, w = mha(query, key, key, key_padding_mask=kpm, need_weights=need_weights,
                 average_attn_weights=average)
    assert out.shape == (N, L, E)
    if not need_weights:
        assert w is None
        return
    per_head = mha(query, key, key, key_padding_mask=kpm, average_attn_weights=False)[1]
    assert per_head.shape == (N, H, L, S)
    assert w.shape == ((N, L, S) if average else (N, H, L, S))
    np.testing.assert_allclose(w, per_head.mean(1) if average else per_head, atol=1e-15)
    seen = per_head.sum(-1)
    if padding is None:
        np.testing.assert_allclose(seen, 1.0, atol=1e-12)
    else:
        assert np.all(per_head[np.broadcast_to(~real[:, None, None, :], per_head.shape)] == 0)
        np.testing.assert_allclose(seen[:2], 1.0, atol=1e-12)
        assert np.all(seen[2] == 0)          # torch: NaN; here zero weights
        np.testing.assert_allclose(out[2], np.broadcast_to(mha.out_proj_bias, (L, E)))


# ---------------------------------------------------------------- MHA: outputs (every path)

@pytest.mark.usefixtures("mha_path")
def test_mha_3d_attn_mask_equals_each_sample_with_its_own_2d_mask():
    # torch's 3-D attn_mask is (N·H, L, S), one (L, S) per sequence and head; here it is
    # (N, H, L, S). A per-sequence mask repeated over the heads equals sequence-by-sequence 2-D.
    N, L, S, E, H = 4, 2, 3, 8, 4
    rng = np.random.default_rng(6)
    mha = make_mha(E, H, seed=6)
    query, key = rng.normal(size=(N, L, E)), rng.normal(size=(N, S, E))
    keep = rng.random((N, L, S)) < 0.6
    additive = np.where(keep, 0.0, -np.inf)
    torch_3d = np.repeat(additive, H, axis=0)                 # (N·H, L, S), torch's layout
    out, _ = mha(query, key, key, attn_mask=torch_3d.reshape(N, H, L, S), need_weights=False)
    for i in range(N):
        one, _ = mha(query[i], key[i], key[i], attn_mask=additive[i], need_weights=False)
        np.testing.assert_allclose(out[i], one, atol=1e-12)


@pytest.mark.usefixtures("mha_path")
def test_mha_key_padding_equals_cutting_the_padding_off():
    # torch's test_multihead_attn_key_padding_mask idea: padded keys change nothing, so a padded
    # batch equals each sequence at its true length.
    E, H, S = 8, 2, 6
    rng = np.random.default_rng(7)
    mha = make_mha(E, H, seed=7)
    lengths = [6, 4, 1]
    query = rng.normal(size=(3, 5, E))
    key = rng.normal(size=(3, S, E))
    real = np.arange(S)[None, :] < np.array(lengths)[:, None]
    out, _ = mha(query, key, key, key_padding_mask=real, need_weights=False)
    for i, n in enumerate(lengths):
        one, _ = mha(query[i], key[i, :n], key[i, :n], need_weights=False)
        np.testing.assert_allclose(out[i], one, atol=1e-12)


@pytest.mark.usefixtures("mha_path")
def test_mha_masks_written_for_torch_through_the_helper():
    # The same torch-style masks (True = blocked) as boolean and as additive masks.
    E, H, L = 8, 2, 5
    rng = np.random.default_rng(8)
    mha = make_mha(E, H, seed=8)
    x = rng.normal(size=(2, L, E))
    torch_attn = np.triu(np.ones((L, L), bool), 1)
    torch_pad = np.array([[False] * L, [False, False, False, True, True]])
    a, _ = mha(x, attn_mask=from_torch_mha_mask(torch_attn),
               key_padding_mask=from_torch_mha_mask(torch_pad), need_weights=False)
    b, _ = mha(x, attn_mask=np.where(torch_attn, -np.inf, 0.0),
               key_padding_mask=np.where(torch_pad, -np.inf, 0.0), need_weights=False)
    c, _ = mha(x, is_causal=True, key_padding_mask=~torch_pad, need_weights=False)
    np.testing.assert_allclose(a, b, atol=1e-12)
    np.testing.assert_allclose(a, c, atol=1e-12)


# ---------------------------------------------------------------- live, when torch imports

def torch_or_skip():
    return pytest.importorskip("torch", reason="PyTorch not installed: stored vectors still ran")


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("average", [True, False])
@pytest.mark.parametrize("masks", ["none", "attn", "padding", "both", "causal_padding"])
def test_live_mha_against_torch(need_weights, average, masks):
    torch = torch_or_skip()
    E, H, N, L, S = 12, 3, 3, 4, 4
    rng = np.random.default_rng(9)
    torch.manual_seed(9)
    ref = torch.nn.MultiheadAttention(E, H, batch_first=True)
    with torch.no_grad():
        ref.in_proj_bias.normal_()
        ref.out_proj.bias.normal_()
    mha = MultiHeadAttention(E, H)
    mha.in_proj_weight = ref.in_proj_weight.detach().numpy()
    mha.in_proj_bias = ref.in_proj_bias.detach().numpy()
    mha.out_proj_weight = ref.out_proj.weight.detach().numpy()
    mha.out_proj_bias = ref.out_proj.bias.detach().numpy()
    query = rng.normal(size=(N, L, E)).astype(np.float32)
    key = rng.normal(size=(N, S, E)).astype(np.float32)
    t_attn = rng.random((L, S)) < 0.3                        # torch's convention
    t_attn[:, 1] = False
    t_pad = np.zeros((N, S), bool)
    t_pad[1, 2:] = True
    t_kw, kw = {}, {}
    if masks in ("attn", "both"):
        t_kw["attn_mask"], kw["attn_mask"] = torch.from_numpy(t_attn), from_torch_mha_mask(t_attn)
    if masks in ("padding", "both", "causal_padding"):
        t_kw["key_padding_mask"] = torch.from_numpy(t_pad)
        kw["key_padding_mask"] = from_torch_mha_mask(t_pad)
    if masks == "causal_padding":
        t_kw["attn_mask"] = torch.from_numpy(np.triu(np.ones((L, S), bool), 1))
        t_kw["is_causal"] = kw["is_causal"] = True
    with torch.no_grad():
        t_out, t_w = ref(torch.from_numpy(query), torch.from_numpy(key), torch.from_numpy(key),
                         need_weights=need_weights, average_attn_weights=average, **t_kw)
    out, w = mha(query, key, key, need_weights=need_weights, average_attn_weights=average, **kw)
    np.testing.assert_allclose(out, t_out.numpy(), atol=2e-5, rtol=1e-5)
    if need_weights:
        np.testing.assert_allclose(w, t_w.numpy(), atol=2e-5, rtol=1e-5)
    else:
        assert w is None and t_w is None


@st.composite
def torch_case(draw):
    dtype = draw(st.sampled_from([np.float16, np.float32, np.float64]))
    lead = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=2)))
    L, S = draw(st.integers(0, 20)), draw(st.integers(0, 20))
    E, Ev = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = rng.normal(size=lead + (L, E))
    k = rng.normal(size=lead + (S, E))
    v = rng.normal(size=lead + (S, Ev))
    scale = draw(st.one_of(st.none(), st.floats(0.05, 2.0)))
    s = 1 / np.sqrt(E) if scale is None else scale
    if q.size and k.size:
        top = np.abs(q @ np.swapaxes(k, -1, -2)).max() * s
        if top > 8:                          # keeps -1e9 swamping the scores alike everywhere
            q *= 8 / top
    q, k, v = q.astype(dtype), k.astype(dtype), v.astype(dtype)
    kw = {"scale": scale}
    kind = draw(st.sampled_from(["none", "causal", "bool", "additive", "additive"]))
    shape = draw(st.sampled_from([(L, S), lead + (L, S), lead + (1, S)]))
    if kind == "causal":
        kw["is_causal"] = True
    elif kind == "bool":
        kw["attn_mask"] = rng.random(shape) < draw(st.sampled_from([0.0, 0.5, 1.0]))
    elif kind == "additive":
        chosen = draw(st.sampled_from(EXTREMES))
        blocked = rng.random(shape) < draw(st.sampled_from([0.3, 1.0]))
        values = np.where(blocked, extreme(chosen, dtype), rng.normal(size=shape))
        mask = mask_array(values, dtype)
        if mask.dtype != dtype:               # torch wants the mask in q's dtype: -1e9 in float16
            mask = mask_array(np.where(blocked, -np.inf, values), dtype)
        kw["attn_mask"] = mask
    return q, k, v, kw


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(torch_case())
def test_live_every_path_against_torch_sdpa(case):
    torch = torch_or_skip()
    q, k, v, kw = case
    t_kw = {key: torch.from_numpy(val) if isinstance(val, np.ndarray) else val
            for key, val in kw.items()}
    with torch.no_grad():
        theirs = torch.nn.functional.scaled_dot_product_attention(
            torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), **t_kw).numpy()
    rtol, atol = tolerance(q, k, v, **kw)
    if q.dtype == np.float16:
        atol *= 2                           # torch rounds its float16 output once more
    for name, path in PATHS.items():
        ours = path(q, k, v, **kw)
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, name
        np.testing.assert_allclose(ours.astype(np.float64), theirs.astype(np.float64),
                                   rtol=rtol, atol=atol, err_msg=f"path {name}")


def test_live_torch_extreme_masks_average_fully_masked_rows():
    torch = torch_or_skip()
    rng = np.random.default_rng(10)
    for dtype in (np.float32, np.float64):
        q, k, v = (rng.normal(size=(2, 4, 8)).astype(dtype) for _ in range(3))
        for name in ("finfo.min", "-0.7*finfo.max"):
            mask = np.zeros((4, 4), dtype)
            mask[1] = extreme(name, dtype)
            theirs = torch.nn.functional.scaled_dot_product_attention(
                *(torch.from_numpy(a) for a in (q, k, v)), attn_mask=torch.from_numpy(mask))
            for path in PATHS.values():
                ours = path(q, k, v, attn_mask=mask)
                np.testing.assert_allclose(ours, theirs.numpy(), atol=1e-6, rtol=1e-5)
                np.testing.assert_allclose(ours[:, 1], v.mean(1), atol=1e-6, rtol=1e-5)

