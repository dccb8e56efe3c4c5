"""Write reference vectors from PyTorch for the library's tests.

Run once by a maintainer who has PyTorch (`pip install torch==2.13.0`, CPU build):

    python tests/reference/make_reference.py

It writes tests/reference/torch_reference.npz (small, committed). The course itself never needs
torch: the tests read the stored arrays.

Keys are ``<case>/<name>``. Boolean masks are stored in this library's convention
(True = takes part); the conversion for torch's nn.MultiheadAttention (True = ignore) happens here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

OUT = Path(__file__).with_name("torch_reference.npz")


def t(x):
    return torch.from_numpy(np.ascontiguousarray(x))


def sdpa_cases(rng):
    def qkv(batch, L, S, E, Ev):
        return (rng.standard_normal(batch + (L, E)).astype(np.float32),
                rng.standard_normal(batch + (S, E)).astype(np.float32),
                rng.standard_normal(batch + (S, Ev)).astype(np.float32))

    cases = {}
    q, k, v = qkv((2,), 5, 7, 8, 8)
    cases["sdpa_plain"] = dict(q=q, k=k, v=v)
    q, k, v = qkv((2,), 5, 7, 8, 8)
    cases["sdpa_scale"] = dict(q=q, k=k, v=v, scale=np.float32(0.3))
    q, k, v = qkv((2,), 6, 6, 8, 8)
    mask = rng.random((2, 6, 6)) > 0.3
    mask[..., 0] = True                         # every row keeps at least one key
    cases["sdpa_bool_mask"] = dict(q=q, k=k, v=v, attn_mask=mask)
    q, k, v = qkv((2,), 4, 6, 8, 8)
    fmask = rng.standard_normal((4, 6)).astype(np.float32)
    fmask[1, 2] = -np.inf
    cases["sdpa_float_mask"] = dict(q=q, k=k, v=v, attn_mask=fmask)
    q, k, v = qkv((1,), 3, 6, 4, 4)
    cases["sdpa_causal_L_lt_S"] = dict(q=q, k=k, v=v, is_causal=True)
    q, k, v = qkv((1,), 6, 3, 4, 4)
    cases["sdpa_causal_L_gt_S"] = dict(q=q, k=k, v=v, is_causal=True)
    q, k, v = qkv((2,), 4, 5, 8, 8)
    mask = np.ones((2, 4, 5), bool)
    mask[0, 1] = False                          # one query that may see nothing
    mask[1, 3] = False
    cases["sdpa_fully_masked_rows"] = dict(q=q, k=k, v=v, attn_mask=mask)
    q, k, v = qkv((2,), 5, 6, 8, 3)
    cases["sdpa_ev_ne_e"] = dict(q=q, k=k, v=v)
    q, k, v = qkv((2, 4), 7, 7, 16, 16)         # (batch, heads, L, E)
    mask = (rng.random((1, 4, 7, 7)) > 0.2) | np.eye(7, dtype=bool)
    cases["sdpa_batched_heads"] = dict(q=q, k=k, v=v, attn_mask=mask)
    for c in cases.values():
        kwargs = {}
        if "attn_mask" in c:
            kwargs["attn_mask"] = t(c["attn_mask"])
        if c.get("is_causal"):
            kwargs["is_causal"] = True
        if "scale" in c:
            kwargs["scale"] = float(c["scale"])
        out = F.scaled_dot_product_attention(t(c["q"]), t(c["k"]), t(c["v"]), **kwargs)
        c["out"] = out.numpy()
        c["is_causal"] = np.bool_(c.get("is_causal", False))
    return cases


def mha_cases(rng):
    cases = {}
    E, H = 16, 4
    for name, kw in {
        "mha_self_avg": dict(average=True, padding=False, cross=False, bias=True),
        "mha_self_per_head": dict(average=False, padding=False, cross=False, bias=True),
        "mha_key_padding": dict(average=False, padding=True, cross=False, bias=True),
        "mha_cross_no_bias": dict(average=True, padding=False, cross=True, bias=False),
    }.items():
        torch.manual_seed(len(cases))
        mha = torch.nn.MultiheadAttention(E, H, bias=kw["bias"], batch_first=True)
        if kw["bias"]:
            with torch.no_grad():   # torch initialises biases to zero; make them count
                mha.in_proj_bias.normal_()
                mha.out_proj.bias.normal_()
        N, L = 2, 5
        S = 7 if kw["cross"] else L
        query = rng.standard_normal((N, L, E)).astype(np.float32)
        key = rng.standard_normal((N, S, E)).astype(np.float32) if kw["cross"] else query
        c = dict(query=query, key=key,
                 in_proj_weight=mha.in_proj_weight.detach().numpy().copy(),
                 out_proj_weight=mha.out_proj.weight.detach().numpy().copy(),
                 average=np.bool_(kw["average"]))
        if kw["bias"]:
            c["in_proj_bias"] = mha.in_proj_bias.detach().numpy().copy()
            c["out_proj_bias"] = mha.out_proj.bias.detach().numpy().copy()
        torch_kpm = None
        if kw["padding"]:
            lengths = np.array([S, S - 2])
            real = np.arange(S)[None, :] < lengths[:, None]       # True = a real key (ours)
            c["key_padding_mask"] = real
            torch_kpm = t(~real)                                   # torch: True = padding
        with torch.no_grad():
            out, w = mha(t(query), t(key), t(key), key_padding_mask=torch_kpm,
                         need_weights=True, average_attn_weights=kw["average"])
        c["out"], c["weights"] = out.numpy(), w.numpy()
        cases[name] = c
    cases["mha_causal_key_padding"] = mha_causal_padding_case(rng)
    return cases


def mha_causal_padding_case(rng):
    """A decoder with padding: torch's causal attn_mask plus a key_padding_mask.

    Sequence 0 is left-padded, so its first queries see no key: torch gives NaN there.
    """
    E, H, N, L = 16, 4, 3, 6
    torch.manual_seed(11)
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True)
    with torch.no_grad():
        mha.in_proj_bias.normal_()
        mha.out_proj.bias.normal_()
    query = rng.standard_normal((N, L, E)).astype(np.float32)
    real = np.ones((N, L), bool)                 # True = a real key (ours)
    real[0, :2] = False                          # left padding
    real[1, 4:] = False                          # right padding
    blocked = np.triu(np.ones((L, L), bool), 1)  # torch: True = may not attend
    with torch.no_grad():
        out, w = mha(t(query), t(query), t(query), attn_mask=t(blocked),
                     key_padding_mask=t(~real), is_causal=True, need_weights=True,
                     average_attn_weights=False)
    return dict(query=query, key=query, key_padding_mask=real, is_causal=np.bool_(True),
                in_proj_weight=mha.in_proj_weight.detach().numpy().copy(),
                out_proj_weight=mha.out_proj.weight.detach().numpy().copy(),
                in_proj_bias=mha.in_proj_bias.detach().numpy().copy(),
                out_proj_bias=mha.out_proj.bias.detach().numpy().copy(),
                average=np.bool_(False), out=out.numpy(), weights=w.numpy())


def main():
    rng = np.random.default_rng(2017)
    flat = {}
    for name, case in {**sdpa_cases(rng), **mha_cases(rng)}.items():
        for key, value in case.items():
            flat[f"{name}/{key}"] = np.asarray(value)
    flat["torch_version"] = np.array(torch.__version__)
    np.savez_compressed(OUT, **flat)
    print(f"wrote {OUT.name}: {len(flat)} arrays, {OUT.stat().st_size / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
