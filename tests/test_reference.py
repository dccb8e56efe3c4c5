"""The library against PyTorch: stored reference vectors always, a live comparison when torch imports."""

from pathlib import Path

import numpy as np
import pytest

from attention_course import MultiHeadAttention, scaled_dot_product_attention

REF = np.load(Path(__file__).parent / "reference" / "torch_reference.npz")
CASES = sorted({k.split("/")[0] for k in REF.files if "/" in k})
SDPA = [c for c in CASES if c.startswith("sdpa_")]
MHA = [c for c in CASES if c.startswith("mha_")]


def case(name):
    prefix = name + "/"
    return {k[len(prefix):]: REF[k] for k in REF.files if k.startswith(prefix)}


def test_reference_file_covers_the_promised_cases():
    expected = {"sdpa_plain", "sdpa_bool_mask", "sdpa_float_mask", "sdpa_causal_L_lt_S",
                "sdpa_causal_L_gt_S", "sdpa_fully_masked_rows", "sdpa_ev_ne_e",
                "sdpa_batched_heads", "mha_self_avg", "mha_self_per_head", "mha_key_padding",
                "mha_cross_no_bias", "mha_causal_key_padding"}
    assert expected <= set(CASES)
    assert (Path(__file__).parent / "reference" / "torch_reference.npz").stat().st_size < 2 * 2**20


@pytest.mark.parametrize("name", SDPA)
def test_sdpa_matches_torch(name):
    c = case(name)
    out = scaled_dot_product_attention(
        c["q"], c["k"], c["v"], attn_mask=c.get("attn_mask"), is_causal=bool(c["is_causal"]),
        scale=None if "scale" not in c else float(c["scale"]),
    )
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, c["out"], atol=1e-5, rtol=1e-5)


def test_fully_masked_rows_are_zero_in_both():
    c = case("sdpa_fully_masked_rows")
    empty = ~c["attn_mask"].any(-1)
    assert empty.any()
    assert np.all(c["out"][empty] == 0)
    out = scaled_dot_product_attention(c["q"], c["k"], c["v"], attn_mask=c["attn_mask"])
    assert np.all(out[empty] == 0) and np.isfinite(out).all()


def build_mha(c):
    E = c["query"].shape[-1]
    mha = MultiHeadAttention(E, 4, bias="in_proj_bias" in c)
    mha.in_proj_weight = c["in_proj_weight"]
    mha.out_proj_weight = c["out_proj_weight"]
    if "in_proj_bias" in c:
        mha.in_proj_bias, mha.out_proj_bias = c["in_proj_bias"], c["out_proj_bias"]
    return mha


@pytest.mark.parametrize("name", MHA)
def test_multihead_matches_torch_with_copied_weights(name):
    c = case(name)
    mha = build_mha(c)
    out, w = mha(c["query"], c["key"], c["key"], key_padding_mask=c.get("key_padding_mask"),
                 is_causal=bool(c.get("is_causal", False)),
                 average_attn_weights=bool(c["average"]))
    assert w.shape == c["weights"].shape
    # Where torch gives NaN (a query that may see no key) the library gives zero weights, so
    # the attention step is zero and the output is the output projection's bias.
    nan_rows = np.isnan(c["out"]).any(-1)
    assert np.isnan(c["out"][nan_rows]).all()
    np.testing.assert_allclose(out[~nan_rows], c["out"][~nan_rows], atol=1e-5, rtol=1e-5)
    bias = 0 if mha.out_proj_bias is None else mha.out_proj_bias
    np.testing.assert_allclose(out[nan_rows], np.broadcast_to(bias, out[nan_rows].shape),
                               atol=1e-6)
    w_nan = np.isnan(c["weights"])
    assert np.all(w[w_nan] == 0) and np.isfinite(w).all()
    np.testing.assert_allclose(w[~w_nan], c["weights"][~w_nan], atol=1e-5, rtol=1e-5)


def test_decoder_with_left_padding_has_rows_torch_leaves_nan():
    c = case("mha_causal_key_padding")
    assert bool(c["is_causal"]) and np.isnan(c["out"]).any() and not np.isnan(c["out"]).all()


def test_weight_layout_is_torchs():
    c = case("mha_self_avg")
    E = c["query"].shape[-1]
    assert c["in_proj_weight"].shape == (3 * E, E) and c["out_proj_weight"].shape == (E, E)
    mha = MultiHeadAttention(E, 4)
    assert mha.in_proj_weight.shape == (3 * E, E) and mha.in_proj_bias.shape == (3 * E,)
    assert mha.out_proj_weight.shape == (E, E) and mha.out_proj_bias.shape == (E,)


# ---- live comparison on random shapes, only where PyTorch is installed -------------------------

@pytest.mark.parametrize("seed", range(6))
def test_live_against_torch_on_random_shapes(seed):
    torch = pytest.importorskip("torch", reason="PyTorch not installed: stored vectors still ran")
    F = torch.nn.functional
    rng = np.random.default_rng(seed)
    batch = tuple(rng.integers(1, 3, size=rng.integers(0, 3)))
    L, S, E, Ev = (int(x) for x in rng.integers(1, 9, size=4))
    q = rng.standard_normal(batch + (L, E)).astype(np.float32)
    k = rng.standard_normal(batch + (S, E)).astype(np.float32)
    v = rng.standard_normal(batch + (S, Ev)).astype(np.float32)
    kind = seed % 3
    kwargs = {}
    if kind == 0:
        kwargs["is_causal"] = True
    elif kind == 1:
        kwargs["attn_mask"] = rng.random((L, S)) > 0.4
    else:
        kwargs["attn_mask"] = rng.standard_normal((L, S)).astype(np.float32)
    ours = scaled_dot_product_attention(q, k, v, **kwargs)
    tkw = {k_: (torch.from_numpy(v_) if isinstance(v_, np.ndarray) else v_)
           for k_, v_ in kwargs.items()}
    theirs = F.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k),
                                            torch.from_numpy(v), **tkw).numpy()
    np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=1e-5)


def test_live_multihead_against_torch_with_masks():
    torch = pytest.importorskip("torch", reason="PyTorch not installed: stored vectors still ran")
    rng = np.random.default_rng(7)
    E, H, N, L, S = 12, 3, 2, 4, 6
    ref = torch.nn.MultiheadAttention(E, H, batch_first=True)
    with torch.no_grad():
        ref.in_proj_bias.normal_()
    mha = MultiHeadAttention(E, H)
    mha.in_proj_weight = ref.in_proj_weight.detach().numpy()
    mha.in_proj_bias = ref.in_proj_bias.detach().numpy()
    mha.out_proj_weight = ref.out_proj.weight.detach().numpy()
    mha.out_proj_bias = ref.out_proj.bias.detach().numpy()
    q = rng.standard_normal((N, L, E)).astype(np.float32)
    kv = rng.standard_normal((N, S, E)).astype(np.float32)
    allowed = rng.random((L, S)) > 0.3
    allowed[:, 0] = True
    with torch.no_grad():
        t_out, t_w = ref(torch.from_numpy(q), torch.from_numpy(kv), torch.from_numpy(kv),
                         attn_mask=torch.from_numpy(~allowed), average_attn_weights=False)
    out, w = mha(q, kv, kv, attn_mask=allowed, average_attn_weights=False)
    np.testing.assert_allclose(out, t_out.numpy(), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(w, t_w.numpy(), atol=1e-5, rtol=1e-5)
