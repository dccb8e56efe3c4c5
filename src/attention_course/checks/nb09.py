"""Checks for the exercises of notebook 09 (attention in a real language model).

The checks run on small random layers and synthetic attention maps, not on the 135M-parameter
model, so they take milliseconds and need no model file when graded out of process. Before the
cases a probe input is compared with the usual mistakes (RoPE on the two halves instead of pairs,
no causal mask, key/value heads shared the wrong way, a transposed projection; the token itself
instead of the one after it; K and V as wide as Q, the output layer forgotten); when one matches,
the message names it.
"""

from __future__ import annotations

import numpy as np

from .. import pretrained
from ..grouped import grouped_query_attention
from ..positional import apply_rotary
from . import forbidden
from .cases import Case, check_function, matching_hint
from .isolated import rebuildable
from .language import fail, get_language
from .language import label as _label
from .watcher import run_learner

__all__ = ["check_core_share", "check_induction_score", "check_layer_attention"]


# --- exercise 1: one layer's attention from the raw weights ---------------------------------------

LAYER_NAME = _label("练习 1（从原始权重算出一层的注意力）",
                    "Exercise 1 (one layer's attention from the raw weights)")
LAYER_HINT = _label(
    "顺序是：RMSNorm（每行除以它平方均值加 eps 后的平方根，再乘 attn_norm）→ 投影（权重按"
    "（输出，输入）存放，要乘它的转置）→ 按头拆开 → 对 q 和 k 做 RoPE（相邻的两个分量组成一对，"
    "各按自己的频率转）→ 相邻的几个查询头共用一个键/值头 → 缩放、因果掩码、softmax。",
    "In order: RMSNorm (each row divided by the square root of its mean square plus eps, then "
    "times attn_norm) → projections (the weights are stored (out, in), so multiply by their "
    "transpose) → split into heads → RoPE on q and k (neighbouring components form the pairs, "
    "each turned at its own frequency) → consecutive query heads share one key/value head → "
    "scale, causal mask, softmax.")


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _layer_weights(x, p, positions, H, G, base, eps, *, rope="pairs", causal=True,
                   sharing="block", transpose=False):
    """The reference (defaults) and the classic mistakes (other settings)."""
    T, E = x.shape
    d = E // H
    h = _rms(x, p["attn_norm"], eps)

    def proj(W):
        return h @ (W if transpose and W.shape[0] == W.shape[1] else W.T)

    q = proj(p["W_q"]).reshape(T, H, d).transpose(1, 0, 2)
    k = proj(p["W_k"]).reshape(T, G, d).transpose(1, 0, 2)
    if rope == "pairs":
        q, k = apply_rotary(q, positions, base), apply_rotary(k, positions, base)
    elif rope == "halves":
        perm = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])
        inv = np.argsort(perm)
        q = apply_rotary(q[..., inv], positions, base)[..., perm]
        k = apply_rotary(k[..., inv], positions, base)[..., perm]
    if sharing == "cyclic":                      # head h reads kv head h % G
        k_full = k[np.arange(H) % G]
        v = np.zeros((H, T, d), x.dtype)
        _, w = grouped_query_attention(q, k_full, v, is_causal=causal, return_weights=True)
        return w
    v = np.zeros((G, T, d), x.dtype)
    _, w = grouped_query_attention(q, k, v, is_causal=causal, return_weights=True)
    return w


def _reference_layer(x, p, positions, H, G, base, eps):
    return _layer_weights(x, p, positions, H, G, base, eps)


def _layer_case(seed, T, E, H, G, dtype=np.float64, offset=0, base=10000.0):
    rng = np.random.default_rng(seed)
    d = E // H
    x = (rng.standard_normal((T, E)) * 2).astype(dtype)
    p = {"attn_norm": (1 + 0.3 * rng.standard_normal(E)).astype(dtype),
         "W_q": (rng.standard_normal((H * d, E)) * 0.6).astype(dtype),
         "W_k": (rng.standard_normal((G * d, E)) * 0.6).astype(dtype),
         "W_v": (rng.standard_normal((G * d, E)) * 0.6).astype(dtype)}
    return (x, p, np.arange(offset, offset + T), H, G, base, 1e-5)


def check_layer_attention(learner, lang: str | None = None) -> None:
    """Check ``learner(x, p, positions, H, G, base, eps) -> weights (H, T, T)``.

    Parameters
    ----------
    learner : callable
        ``x`` (T, E) the residual stream entering the layer; ``p`` a dict with ``attn_norm``
        (E,), ``W_q`` (H·d_k, E), ``W_k`` and ``W_v`` (G·d_k, E) in the (out, in) layout;
        ``positions`` (T,) ints; ``H``, ``G`` heads; ``base`` RoPE's base; ``eps`` RMSNorm's.
        Returns the causal attention weights of every query head.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the input: H = G, G = 1, positions not starting at 0, float32, T = 1.
    """
    calls = forbidden.of("attention", "grouped", "rotary")
    probe = _layer_case(7, 5, 16, 4, 2)
    variants = [
        (_layer_weights(*probe, rope="halves"), _label(
            "RoPE 转错了对：这里成对的是相邻的两维 (0, 1)、(2, 3)……，不是前一半和后一半"
            "（那是 Hugging Face 在另一种行顺序下的写法；GGUF 文件里的 W_Q、W_K 是按相邻成对存的）。",
            "RoPE on the wrong pairs: here the pairs are neighbours (0, 1), (2, 3), ..., not the "
            "first half with the second (Hugging Face's rotate_half, which goes with another row "
            "order; the GGUF stores W_Q and W_K for neighbouring pairs).")),
        (_layer_weights(*probe, causal=False), _label(
            "没有因果掩码：语言模型的第 t 个词只能看位置 0..t，后面的键权重必须是 0。",
            "No causal mask: in a language model token t sees only positions 0..t; the weights "
            "on later keys must be 0.")),
        (_layer_weights(*probe, sharing="cyclic"), _label(
            "键/值头共享错了：连续的 H/G 个查询头共用一个键/值头，头 h 读第 h // (H/G) 个，"
            "不是第 h % G 个。",
            "Key/value heads shared the wrong way: consecutive query heads share one, head h "
            "reads key/value head h // (H/G), not h % G.")),
        (_layer_weights(*probe, transpose=True), _label(
            "投影转置了：权重按（输出，输入）存，投影要乘的是它的转置。",
            "A transposed projection: the weights are stored (out, in), so a projection "
            "multiplies by their transpose.")),
        (_layer_weights(*probe, rope="none"), _label(
            "没做 RoPE：q 和 k 在打分前都要按位置旋转。", "No RoPE: q and k must be rotated by "
            "position before the scores.")),
    ]
    hint = matching_hint(learner, probe, variants, LAYER_HINT, calls, rtol=1e-5, atol=1e-7)
    cases = [
        Case(_label("T = 6，E = 16，H = 4 个查询头，G = 2 个键/值头",
                    "T = 6, E = 16, H = 4 query heads, G = 2 key/value heads"),
             _layer_case(0, 6, 16, 4, 2)),
        Case(_label("H = 6，G = 3，位置从 10 开始", "H = 6, G = 3, positions starting at 10"),
             _layer_case(1, 5, 24, 6, 3, offset=10)),
        Case(_label("G = 1（所有查询头共用一个键/值头），base 100000",
                    "G = 1 (one key/value head for all), base 100000"),
             _layer_case(2, 4, 16, 4, 1, base=100000.0)),
        Case(_label("G = H = 2（普通多头）", "G = H = 2 (plain multi-head)"), _layer_case(3, 5, 8, 2, 2)),
        Case(_label("float32，H = 9，G = 3（SmolLM2 的分组）", "float32, H = 9, G = 3 (SmolLM2's grouping)"),
             _layer_case(4, 7, 36, 9, 3, dtype=np.float32)),
        Case(_label("只有一个词 T = 1", "a single token, T = 1"), _layer_case(5, 1, 16, 4, 2)),
    ]
    check_function(learner, _reference_layer, cases, name=LAYER_NAME, hint=hint, lang=lang,
                   forbidden=calls)


# --- exercise 2: an induction score of your own ---------------------------------------------------

INDUCTION_NAME = _label("练习 2（自己设计的归纳分数）", "Exercise 2 (an induction score of your own)")
INDUCTION_HINT = _label(
    "归纳头在第二遍里，从当前词跳回它上一次出现的位置的下一个位置（t − period + 1），"
    "而不是那个词本身（t − period），也不是前一个词（t − 1）；只看第二遍的查询。",
    "An induction head, in the second copy, looks back to the position just after the earlier "
    "occurrence of the current token (t - period + 1): not that occurrence itself (t - period), "
    "not the previous token (t - 1); use the queries of the second copy only.")

N_TOP = 4


def _synthetic_maps(seed, n_layers, H, period, n_induction=N_TOP):
    """Maps (n_layers, H, 2P, 2P) with planted heads of several kinds; returns maps and the
    induction heads. Distractors copy an induction head's look-back one step off (duplicate
    token, t - P), look at the previous token, or sink on token 0."""
    rng = np.random.default_rng(seed)
    T = 2 * period
    logits = rng.normal(size=(n_layers, H, T, T)) * 0.5
    cells = rng.permutation(n_layers * H)
    kinds = ["induction"] * n_induction + ["duplicate"] * 3 + ["previous"] * 3 + ["sink"] * 3
    planted = {}
    for cell, kind in zip(cells, kinds, strict=False):
        planted[(int(cell // H), int(cell % H))] = kind
    t = np.arange(T)
    for (layer, head), kind in planted.items():
        strength = rng.uniform(4.0, 6.0)
        m = logits[layer, head]
        if kind == "induction":
            m[t[period:], t[period:] - period + 1] += strength
        elif kind == "duplicate":
            m[t[period:], t[period:] - period] += strength + 2
        elif kind == "previous":
            m[t[1:], t[1:] - 1] += strength + 2
        elif kind == "sink":
            m[:, 0] += strength + 2
    causal = np.tril(np.ones((T, T), dtype=bool))
    logits = np.where(causal, logits, -np.inf)
    w = np.exp(logits - logits.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    induction = {cell for cell, kind in planted.items() if kind == "induction"}
    return w, induction


def _top(scores, k):
    s = np.asarray(scores, dtype=np.float64)
    order = np.argsort(s.ravel(), kind="stable")[::-1][:k]
    return {(int(i // s.shape[1]), int(i % s.shape[1])) for i in order}


def check_induction_score(learner, lang: str | None = None) -> None:
    """Check ``learner(weights, period) -> scores (n_layers, H)``: its top heads must be the
    planted induction heads.

    Any score of your own design passes when its :data:`N_TOP` highest heads are exactly the
    induction heads, among heads that look at the same token in the first copy, at the previous
    token, or at token 0.

    Parameters
    ----------
    learner : callable
        ``weights`` (n_layers, H, 2·period, 2·period), ``period`` int.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the input whose top heads are not the induction heads.
    """
    lang = get_language(lang)
    calls = forbidden.of("head_scores")
    if not callable(learner):
        check_function(learner, None, [], name=INDUCTION_NAME, lang=lang)
    settings = [(0, 6, 9, 12), (1, 4, 9, 20), (2, 8, 6, 8), (3, 5, 9, 16)]
    probe_maps, _ = _synthetic_maps(99, 6, 9, 12)
    variants = [
        (_offset_score(probe_maps, 12, 0), _label(
             "你看的是第一次出现的那个词本身（t − period）：那是“重复词头”，归纳头看的是它后面那个词。",
             "You score the earlier occurrence itself (t - period): that is a duplicate-token "
             "head; an induction head looks at the token after it.")),
        (_prev_score(probe_maps), _label(
            "你量的是看前一个词的头（t − 1）：那是归纳电路的第一步，不是归纳头。",
            "You measure heads that look at the previous token (t - 1): the circuit's first "
            "step, not the induction head.")),
    ]
    hint = matching_hint(learner, (probe_maps, 12), variants, INDUCTION_HINT, calls, rtol=1e-5, atol=1e-7)
    passed = 0
    for seed, n_layers, H, period in settings:
        maps, expected = _synthetic_maps(seed, n_layers, H, period)
        label = _label(f"{n_layers} 层 × {H} 头，period = {period}，种子 {seed}",
                       f"{n_layers} layers × {H} heads, period = {period}, seed {seed}")
        got = run_learner(learner, maps.copy(), period, name=INDUCTION_NAME, label=label,
                          forbidden=calls, hint=hint, lang=lang)
        shape = np.shape(got)
        if shape != (n_layers, H):
            fail(INDUCTION_NAME, label, _label(f"形状是 {shape}，应为 {(n_layers, H)}",
                                               f"shape {shape}, expected {(n_layers, H)}")[lang],
                 hint=hint, lang=lang)
        if not np.all(np.isfinite(np.asarray(got, dtype=np.float64))):
            fail(INDUCTION_NAME, label, _label("分数里有 NaN 或 inf", "the scores hold NaN or inf")[lang],
                 hint=hint, lang=lang)
        top = _top(got, N_TOP)
        if top != expected:
            fmt = ", ".join(f"{a}.{b}" for a, b in sorted(top))
            want = ", ".join(f"{a}.{b}" for a, b in sorted(expected))
            fail(INDUCTION_NAME, label,
                 _label(f"分数最高的 {N_TOP} 个头是 {fmt}，归纳头是 {want}",
                        f"your top {N_TOP} heads are {fmt}; the induction heads are {want}")[lang],
                 hint=hint, lang=lang)
        passed += 1
    ok = {"zh": f"✓ {INDUCTION_NAME['zh']}：{passed} 个测试用例全部通过",
          "en": f"✓ {INDUCTION_NAME['en']}: all {passed} cases pass"}
    print(ok[lang])


def _offset_score(w, period, extra):
    T = w.shape[-1]
    t = np.arange(period, T)
    return w[..., t, t - period + extra].mean(-1)


def _prev_score(w):
    t = np.arange(1, w.shape[-1])
    return w[..., t, t - 1].mean(-1)


# --- exercise 3: where the n² core takes over -------------------------------------------------------

SHARE_NAME = _label("练习 3（n² 核心占多少运算）", "Exercise 3 (the share of the n² core)")
SHARE_HINT = _label(
    "每个乘加算 2 次运算。每层有四个投影（K 和 V 只有 G 个头宽）和 MLP 的三个矩阵，它们随 T 线性"
    "增长；核心对每个查询头有打分和加权求和两步，随 T 的平方增长。所有层加起来，再加上最后通向"
    "词表的输出层，用核心除以总数。",
    "Count 2 operations per multiply-add. Each layer has four projections (K and V only G heads "
    "wide) and the MLP's three matrices, all growing with T; the core has two steps per query "
    "head, the scores and the weighted sum, growing with the square of T. Add up the layers and "
    "the output layer to the vocabulary, and divide the core by the total.")


def _reference_share(config, T):
    f = pretrained.forward_flops(config, T)
    return f["attention_core"] / sum(f.values())


def _share_variant(config, T, *, kv_full=False, no_output=False, linear_core=False):
    c = config
    kv = (c.H if kv_full else c.G) * c.d_k
    proj = 2 * T * c.d_model * (c.H * c.d_k + 2 * kv) + 2 * T * c.H * c.d_k * c.d_model
    mlp = 2 * T * 3 * c.d_model * c.d_ff
    core = 4 * c.H * (T if linear_core else T * T) * c.d_k
    total = c.n_layers * (proj + mlp + core) + (0 if no_output else 2 * T * c.d_model * c.vocab_size)
    return c.n_layers * core / total


@rebuildable
def _config(**sizes) -> pretrained.Config:
    """A model's sizes; the grade of record makes the same in its worker (not data: a dataclass)."""
    return pretrained.Config(**sizes)


def check_core_share(learner, lang: str | None = None) -> None:
    """Check ``learner(config, T) -> float``: the attention core's share of a forward pass's
    operations (:func:`~attention_course.pretrained.forward_flops`).

    Parameters
    ----------
    learner : callable
        ``config`` a :class:`~attention_course.pretrained.Config`, ``T`` int tokens.
    lang : {"zh", "en"}, optional
    """
    calls = forbidden.of("model_cost")
    smol = _config(n_layers=30, d_model=576, H=9, G=3, d_k=64, d_ff=1536,
                             vocab_size=49152, context_length=8192, rope_base=1e5, rms_eps=1e-5)
    mha = _config(n_layers=4, d_model=128, H=4, G=4, d_k=32, d_ff=512, vocab_size=1000,
                            context_length=4096, rope_base=1e4, rms_eps=1e-5)
    mqa = _config(n_layers=2, d_model=64, H=8, G=1, d_k=8, d_ff=100, vocab_size=300,
                            context_length=4096, rope_base=1e4, rms_eps=1e-5)
    probe = (smol, 1000)
    variants = [
        (_share_variant(smol, 1000, kv_full=True), _label(
            "k 和 v 的投影按 H 个头算了：分组查询注意力里它们只有 G·d_k 宽。",
            "You counted the k and v projections with H heads: with grouped-query attention "
            "they are only G·d_k wide.")),
        (_share_variant(smol, 1000, no_output=True), _label(
            "漏了最后到词表的那一层（2·T·E·V），它在 T 小的时候占得很多。",
            "The output layer to the vocabulary (2·T·E·V) is missing; for small T it is a large "
            "part.")),
        (_share_variant(smol, 1000, linear_core=True), _label(
            "核心的运算量随 T² 增长，不是随 T：每个查询都要和每个键打分。",
            "The core grows with T², not T: every query is scored against every key.")),
    ]
    hint = matching_hint(learner, probe, variants, SHARE_HINT, calls, rtol=1e-5, atol=1e-7)
    cases = [
        Case(_label("SmolLM2，T = 64", "SmolLM2, T = 64"), (smol, 64)),
        Case(_label("SmolLM2，T = 4096", "SmolLM2, T = 4096"), (smol, 4096)),
        Case(_label("G = H（普通多头），T = 100", "G = H (plain multi-head), T = 100"), (mha, 100)),
        Case(_label("G = 1，T = 1", "G = 1, T = 1"), (mqa, 1)),
    ]
    check_function(learner, _reference_share, cases, name=SHARE_NAME, hint=hint, lang=lang,
                   forbidden=calls, rtol=1e-6, atol=0.0)


from .fresh import fresh_on_call  # noqa: E402 - last, once the module is complete

fresh_on_call(__name__)
