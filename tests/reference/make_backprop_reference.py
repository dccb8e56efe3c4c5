"""Write PyTorch autograd gradients for the tests of the backward passes and of Adam.

Run once by a maintainer who has PyTorch (`pip install torch==2.13.0`, CPU build):

    python tests/reference/make_backprop_reference.py

It writes tests/reference/backprop_reference.npz (small, committed): float32 inputs, the upstream
gradient, and torch's outputs and gradients. The course never needs torch; tests/test_backprop.py
and tests/test_optim.py read the stored arrays, and call the ``torch_*`` functions below for live
comparisons when torch happens to be installed.

Keys are ``<case>/<name>``. Boolean masks are stored in this library's convention (True = takes
part); the conversion for torch (``masked_fill`` of the blocked entries, nn.MultiheadAttention's
True = ignore) happens here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

OUT = Path(__file__).with_name("backprop_reference.npz")


def t(x, grad=False):
    out = torch.from_numpy(np.ascontiguousarray(x))
    return out.requires_grad_(True) if grad else out


def g(x):
    return x.grad.detach().numpy().copy()


# ---- one torch function per operation: numpy in, dict of numpy out ----------------------------

def torch_softmax(x, dy, mask=None):
    x_ = t(x, grad=True)
    z = x_
    if mask is not None:
        z = x_.masked_fill(~t(mask), float("-inf")) if mask.dtype == np.bool_ else x_ + t(mask)
    y = torch.softmax(z, dim=-1)
    y.backward(t(dy))
    return {"y": y.detach().numpy(), "dx": g(x_)}


def torch_sdpa(q, k, v, dout, attn_mask=None, is_causal=False, scale=None):
    q_, k_, v_ = t(q, True), t(k, True), t(v, True)
    kwargs = {"is_causal": bool(is_causal)}
    if attn_mask is not None:
        kwargs["attn_mask"] = t(attn_mask)
    if scale is not None:
        kwargs["scale"] = float(scale)
    out = F.scaled_dot_product_attention(q_, k_, v_, **kwargs)
    out.backward(t(dout))
    return {"out": out.detach().numpy(), "dq": g(q_), "dk": g(k_), "dv": g(v_)}


def torch_linear(x, weight, dy, bias=None):
    x_, w_ = t(x, True), t(weight, True)
    b_ = None if bias is None else t(bias, True)
    y = F.linear(x_, w_, b_)
    y.backward(t(dy))
    res = {"y": y.detach().numpy(), "dx": g(x_), "dweight": g(w_)}
    if b_ is not None:
        res["dbias"] = g(b_)
    return res


def torch_mha(query, key, value, params, num_heads, dout, attn_mask=None, is_causal=False,
              key_padding_mask=None):
    """nn.MultiheadAttention (batch_first) with the given weights; masks in this library's convention."""
    E = query.shape[-1]
    bias = params.get("in_proj_bias") is not None
    mha = torch.nn.MultiheadAttention(E, num_heads, bias=bias, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(t(params["in_proj_weight"]))
        mha.out_proj.weight.copy_(t(params["out_proj_weight"]))
        if bias:
            mha.in_proj_bias.copy_(t(params["in_proj_bias"]))
            mha.out_proj.bias.copy_(t(params["out_proj_bias"]))
    L, S = query.shape[-2], key.shape[-2]
    if is_causal:
        attn_mask = np.tri(L, S, dtype=bool)
    torch_mask = None
    if attn_mask is not None:
        torch_mask = t(~attn_mask) if attn_mask.dtype == np.bool_ else t(attn_mask)
    torch_kpm = None
    if key_padding_mask is not None:
        torch_kpm = (t(~key_padding_mask) if key_padding_mask.dtype == np.bool_
                     else t(key_padding_mask))
    q_, k_, v_ = t(query, True), t(key, True), t(value, True)
    out, w = mha(q_, k_, v_, attn_mask=torch_mask, key_padding_mask=torch_kpm, need_weights=True,
                 average_attn_weights=False)
    out.backward(t(dout))
    res = {"out": out.detach().numpy(), "weights": w.detach().numpy(), "dquery": g(q_),
           "dkey": g(k_), "dvalue": g(v_), "d_in_proj_weight": g(mha.in_proj_weight),
           "d_out_proj_weight": g(mha.out_proj.weight)}
    if bias:
        res["d_in_proj_bias"] = g(mha.in_proj_bias)
        res["d_out_proj_bias"] = g(mha.out_proj.bias)
    return res


def torch_embedding_positional(tokens, table, pe, dy):
    table_, pe_ = t(table, True), t(pe, True)
    n = tokens.shape[-1]
    y = F.embedding(t(tokens), table_) + pe_[:n]
    y.backward(t(dy))
    return {"y": y.detach().numpy(), "dtable": g(table_), "dpe": g(pe_)}


def torch_layernorm(x, gamma, beta, dy, eps=1e-5):
    x_, g_, b_ = t(x, True), t(gamma, True), t(beta, True)
    y = F.layer_norm(x_, (x.shape[-1],), g_, b_, eps)
    y.backward(t(dy))
    return {"y": y.detach().numpy(), "dx": g(x_), "dgamma": g(g_), "dbeta": g(b_)}


def torch_cross_entropy(logits, targets, mask=None):
    logits_ = t(logits, True)
    C = logits.shape[-1]
    tgt = targets.astype(np.int64)
    if mask is not None:
        tgt = np.where(mask, tgt, -100)
    loss = F.cross_entropy(logits_.reshape(-1, C), t(tgt.reshape(-1)), ignore_index=-100)
    loss.backward()
    return {"loss": np.float32(loss.item()), "dlogits": g(logits_)}


def torch_adam(params, grads_per_step, lr, betas, eps, weight_decay=0.0):
    """Parameters after each step of torch.optim.Adam fed the given gradients."""
    tensors = {k: torch.tensor(v) for k, v in params.items()}
    opt = torch.optim.Adam(list(tensors.values()), lr=lr, betas=betas, eps=eps,
                           weight_decay=weight_decay)
    after = []
    for grads in grads_per_step:
        for k, p in tensors.items():
            p.grad = torch.tensor(grads[k])
        opt.step()
        after.append({k: p.detach().numpy().copy() for k, p in tensors.items()})
    return after


# ---- the stored cases --------------------------------------------------------------------------

def normal(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def mha_params(rng, E, bias=True):
    p = {"in_proj_weight": normal(rng, 3 * E, E) / np.float32(np.sqrt(E)),
         "out_proj_weight": normal(rng, E, E) / np.float32(np.sqrt(E))}
    if bias:
        p["in_proj_bias"] = normal(rng, 3 * E)
        p["out_proj_bias"] = normal(rng, E)
    return p


def cases(rng):
    out = {}
    # softmax
    x, dy = normal(rng, 3, 6), normal(rng, 3, 6)
    mask = rng.random((3, 6)) > 0.4
    mask[:, 0] = True                           # torch gives NaN for a fully masked row
    out["softmax_bool_mask"] = dict(x=x, dy=dy, mask=mask, **torch_softmax(x, dy, mask))
    x, dy = normal(rng, 2, 3, 5), normal(rng, 2, 3, 5)
    fmask = normal(rng, 3, 5)
    fmask[1, 2] = -np.inf
    out["softmax_float_mask"] = dict(x=x, dy=dy, mask=fmask, **torch_softmax(x, dy, fmask))

    # scaled dot-product attention
    def sdpa_case(batch, L, S, E, Ev, **kw):
        q, k, v = normal(rng, *batch, L, E), normal(rng, *batch, S, E), normal(rng, *batch, S, Ev)
        dout = normal(rng, *batch, L, Ev)
        res = torch_sdpa(q, k, v, dout, **kw)
        c = dict(q=q, k=k, v=v, dout=dout, is_causal=np.bool_(kw.get("is_causal", False)), **res)
        if kw.get("attn_mask") is not None:
            c["attn_mask"] = kw["attn_mask"]
        if kw.get("scale") is not None:
            c["scale"] = np.float32(kw["scale"])
        return c

    bmask = rng.random((2, 5, 6)) > 0.3
    bmask[..., 0] = True
    out["sdpa_bool_mask"] = sdpa_case((2,), 5, 6, 4, 3, attn_mask=bmask)
    fmask = normal(rng, 4, 6)
    fmask[2, 1] = -np.inf
    out["sdpa_float_mask"] = sdpa_case((2,), 4, 6, 8, 8, attn_mask=fmask)
    out["sdpa_causal"] = sdpa_case((2, 2), 5, 5, 4, 4, is_causal=True)
    out["sdpa_causal_L_lt_S"] = sdpa_case((1,), 3, 6, 4, 2, is_causal=True)
    out["sdpa_scale"] = sdpa_case((2,), 4, 4, 8, 8, scale=0.7)

    # linear
    x, W, b = normal(rng, 2, 5, 4), normal(rng, 3, 4), normal(rng, 3)
    dy = normal(rng, 2, 5, 3)
    out["linear"] = dict(x=x, weight=W, bias=b, dy=dy, **torch_linear(x, W, dy, b))

    # multi-head attention, torch's in_proj layout
    E, H, B, L, S = 8, 2, 2, 5, 6
    p = mha_params(rng, E)
    x, dout = normal(rng, B, L, E), normal(rng, B, L, E)
    res = torch_mha(x, x.copy(), x.copy(), p, H, dout, is_causal=True)
    out["mha_self_causal"] = dict(query=x, key=x, value=x, dout=dout, num_heads=np.int64(H),
                                  is_causal=np.bool_(True), **p, **res)
    p = mha_params(rng, E)
    query, key, value = normal(rng, B, L, E), normal(rng, B, S, E), normal(rng, B, S, E)
    real = np.arange(S)[None, :] < np.array([S, S - 2])[:, None]    # True = real key (ours)
    dout = normal(rng, B, L, E)
    res = torch_mha(query, key, value, p, H, dout, key_padding_mask=real)
    out["mha_cross_key_padding"] = dict(query=query, key=key, value=value, dout=dout,
                                        num_heads=np.int64(H), is_causal=np.bool_(False),
                                        key_padding_mask=real, **p, **res)
    p = mha_params(rng, E, bias=False)
    amask = rng.random((L, L)) > 0.3
    amask[:, 0] = True
    x, dout = normal(rng, B, L, E), normal(rng, B, L, E)
    res = torch_mha(x, x.copy(), x.copy(), p, 4, dout, attn_mask=amask)
    out["mha_no_bias_attn_mask"] = dict(query=x, key=x, value=x, dout=dout, num_heads=np.int64(4),
                                        is_causal=np.bool_(False), attn_mask=amask, **p, **res)

    # token embedding plus learned positional encoding
    tokens = rng.integers(0, 7, size=(3, 5))
    tokens[0, :2] = 3                           # a repeated token: its gradient rows add up
    table, pe, dy = normal(rng, 7, 4), normal(rng, 9, 4), normal(rng, 3, 5, 4)
    out["embedding_positional"] = dict(tokens=tokens, table=table, pe=pe, dy=dy,
                                       **torch_embedding_positional(tokens, table, pe, dy))

    # LayerNorm
    x, gamma, beta, dy = normal(rng, 2, 3, 6), normal(rng, 6), normal(rng, 6), normal(rng, 2, 3, 6)
    out["layernorm"] = dict(x=x, gamma=gamma, beta=beta, dy=dy,
                            **torch_layernorm(x, gamma, beta, dy))

    # cross-entropy, with positions that do not count
    logits = normal(rng, 3, 4, 5) * np.float32(3)
    targets = rng.integers(0, 5, size=(3, 4))
    mask = rng.random((3, 4)) > 0.3
    mask[0, 0] = True
    out["cross_entropy_mask"] = dict(logits=logits, targets=targets, mask=mask,
                                     **torch_cross_entropy(logits, targets, mask))
    logits, targets = normal(rng, 6, 3), rng.integers(0, 3, size=6)
    out["cross_entropy"] = dict(logits=logits, targets=targets,
                                **torch_cross_entropy(logits, targets))

    # three Adam steps
    params = {"w": normal(rng, 3, 4), "b": normal(rng, 4)}
    grads = [{k: normal(rng, *v.shape) for k, v in params.items()} for _ in range(3)]
    after = torch_adam(params, grads, lr=1e-2, betas=(0.9, 0.999), eps=1e-8)
    c = {"lr": np.float64(1e-2)}
    for k in params:
        c[f"param_{k}"] = params[k]
        for i in range(3):
            c[f"grad{i}_{k}"] = grads[i][k]
            c[f"after{i}_{k}"] = after[i][k]
    out["adam_3_steps"] = c
    return out


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(2017)
    flat = {}
    for name, case in cases(rng).items():
        for key, value in case.items():
            flat[f"{name}/{key}"] = np.asarray(value)
    flat["torch_version"] = np.array(torch.__version__)
    np.savez_compressed(OUT, **flat)
    print(f"wrote {OUT.name}: {len(flat)} arrays, {OUT.stat().st_size / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
