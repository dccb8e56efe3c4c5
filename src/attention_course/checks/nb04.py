"""Checks for the exercises of notebook 04 (multi-head attention).

Each check runs the learner's function on several inputs, edge cases included, and compares it
with the library: :func:`~attention_course.split_heads`, :func:`~attention_course.merge_heads`
and :class:`~attention_course.MultiHeadAttention`.
"""

from __future__ import annotations

import numpy as np

from ..multihead import MultiHeadAttention, merge_heads, split_heads
from ._core import Case, check_function


def _labelled(shape, seed=0):
    """Random values with a fixed seed: every entry differs, so a misplaced one shows."""
    return np.random.default_rng(seed).normal(size=shape)


def check_split_heads(fn, lang=None) -> None:
    """Check ``fn(x, num_heads)`` against :func:`~attention_course.split_heads`.

    Parameters
    ----------
    fn : callable
        ``fn(x: (..., L, E), num_heads: int) -> (..., H, L, E // H)``.
    lang : {"zh", "en"}, optional

    Examples
    --------
    >>> check_split_heads(split_heads, lang="en")
    ✓ split_heads: all 6 cases pass
    """
    cases = [
        Case({"zh": "x 形状 (L=3, E=4),H=2", "en": "x of shape (L=3, E=4), H=2"},
             (_labelled((3, 4), 1), 2)),
        Case({"zh": "x 形状 (L=5, E=6),H=3", "en": "x of shape (L=5, E=6), H=3"},
             (_labelled((5, 6), 2), 3)),
        Case({"zh": "一批句子 (B=2, L=4, E=6),H=2", "en": "a batch (B=2, L=4, E=6), H=2"},
             (_labelled((2, 4, 6), 3), 2)),
        Case({"zh": "两层前置轴 (2, 3, L=2, E=8),H=4",
              "en": "two leading axes (2, 3, L=2, E=8), H=4"},
             (_labelled((2, 3, 2, 8), 4), 4)),
        Case({"zh": "H=1：一个头占满全部宽度", "en": "H=1: one head takes the whole width"},
             (_labelled((3, 4), 5), 1)),
        Case({"zh": "H=E：每个头只有 1 维", "en": "H=E: every head is 1 wide"},
             (_labelled((3, 4), 6), 4)),
    ]
    check_function(
        fn, split_heads, cases, name="split_heads", lang=lang,
        hint={"zh": "头 h 拿的是每个词的第 h 段特征 h·D:(h+1)·D。先 reshape 成 (..., L, H, D),"
                    "再交换 L 和 H 两个轴；直接 reshape 成 (..., H, L, D) 形状对了，"
                    "但每个头拿到的是别的词的数字。也别忘了前面可能还有批次轴。",
              "en": "Head h takes slice h·D:(h+1)·D of every word's features. Reshape to "
                    "(..., L, H, D) first, then swap the L and H axes; reshaping straight to "
                    "(..., H, L, D) has the right shape but hands each head other words' "
                    "numbers. Leading batch axes may come first, too."},
    )


def check_merge_heads(fn, lang=None) -> None:
    """Check ``fn(x)`` against :func:`~attention_course.merge_heads`.

    Parameters
    ----------
    fn : callable
        ``fn(x: (..., H, L, D)) -> (..., L, H * D)``.
    lang : {"zh", "en"}, optional

    Examples
    --------
    >>> check_merge_heads(merge_heads, lang="en")
    ✓ merge_heads: all 5 cases pass
    """
    cases = [
        Case({"zh": "x 形状 (H=2, L=3, D=2)", "en": "x of shape (H=2, L=3, D=2)"},
             (_labelled((2, 3, 2), 11),)),
        Case({"zh": "x 形状 (H=3, L=4, D=2)", "en": "x of shape (H=3, L=4, D=2)"},
             (_labelled((3, 4, 2), 12),)),
        Case({"zh": "一批句子 (B=2, H=4, L=3, D=2)", "en": "a batch (B=2, H=4, L=3, D=2)"},
             (_labelled((2, 4, 3, 2), 13),)),
        Case({"zh": "H=1：只有一个头", "en": "H=1: a single head"},
             (_labelled((1, 3, 4), 14),)),
        Case({"zh": "D=1：每个头只有 1 维", "en": "D=1: every head is 1 wide"},
             (_labelled((4, 3, 1), 15),)),
    ]
    check_function(
        fn, merge_heads, cases, name="merge_heads", lang=lang,
        hint={"zh": "每个词的新向量是头 0、头 1……依次拼起来：[头0 的 D 个数 | 头1 的 D 个数 | …]。"
                    "先把头轴挪到 L 后面，(..., L, H, D)，再把最后两个轴并成 H·D。",
              "en": "Each word's new vector is head 0, head 1, ... in order: [head 0's D numbers "
                    "| head 1's D numbers | ...]. Move the head axis behind L, (..., L, H, D), "
                    "then flatten the last two axes into H·D."},
    )


def _num_parameters(d_model, num_heads, bias=True):
    return MultiHeadAttention(d_model, num_heads, bias=bias).num_parameters


def check_num_parameters(fn, lang=None) -> None:
    """Check ``fn(d_model, num_heads, bias)`` against ``MultiHeadAttention(...).num_parameters``.

    Parameters
    ----------
    fn : callable
        ``fn(d_model: int, num_heads: int, bias: bool) -> int``.
    lang : {"zh", "en"}, optional

    Examples
    --------
    >>> check_num_parameters(lambda d, h, bias: 4 * d * d + 4 * d * bias, lang="en")
    ✓ number of parameters: all 6 cases pass
    """
    cases = [
        Case({"zh": "Vaswani 等人的基础模型：d_model=512, h=8，带偏置",
              "en": "the base model of Vaswani et al.: d_model=512, h=8, with biases"},
             (512, 8, True)),
        Case({"zh": "d_model=512, h=8，不带偏置", "en": "d_model=512, h=8, no biases"},
             (512, 8, False)),
        Case({"zh": "d_model=12, h=3，带偏置", "en": "d_model=12, h=3, with biases"},
             (12, 3, True)),
        Case({"zh": "d_model=12, h=1：一个全宽的头", "en": "d_model=12, h=1: one full-width head"},
             (12, 1, True)),
        Case({"zh": "d_model=12, h=12：每个头 1 维，不带偏置",
              "en": "d_model=12, h=12: heads 1 wide, no biases"},
             (12, 12, False)),
        Case({"zh": "d_model=64, h=4，带偏置", "en": "d_model=64, h=4, with biases"},
             (64, 4, True)),
    ]
    check_function(
        fn, _num_parameters, cases, name={"zh": "参数个数", "en": "number of parameters"},
        lang=lang, rtol=0.0, atol=0.0,
        hint={"zh": "数四个矩阵：W_Q、W_K、W_V（H 个头合起来各是 d×d）和输出的 W_O(d×d);"
                    "带偏置时每个矩阵再加 d 个偏置。头数只决定怎么切，不改变总数。",
              "en": "Count four matrices: W_Q, W_K, W_V (all heads together, d×d each) and the "
                    "output W_O (d×d); with biases, each matrix adds d more. The number of "
                    "heads only decides how they are cut, not how many there are."},
    )


def _forward_reference(x, W_q, W_k, W_v, W_o, num_heads):
    """The library's layer loaded with article-layout weights (x @ W), no biases."""
    mha = MultiHeadAttention(x.shape[-1], num_heads, bias=False, dtype=np.float64)
    mha.in_proj_weight = np.concatenate([W_q.T, W_k.T, W_v.T])   # (3E, E), torch (out, in)
    mha.out_proj_weight = W_o.T
    return mha(x, need_weights=False)[0]


def _forward_case(label, shape, num_heads, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    E = shape[-1]
    x = scale * rng.normal(size=shape)
    W_q, W_k, W_v, W_o = (rng.normal(scale=1 / np.sqrt(E), size=(E, E)) for _ in range(4))
    return Case(label, (x, W_q, W_k, W_v, W_o, num_heads))


def check_multi_head_forward(fn, lang=None) -> None:
    """Check ``fn(x, W_q, W_k, W_v, W_o, num_heads)`` against :class:`MultiHeadAttention`.

    Parameters
    ----------
    fn : callable
        ``fn(x: (..., L, E), W_q, W_k, W_v, W_o: (E, E), num_heads: int) -> (..., L, E)``;
        weights in the articles' layout (``x @ W``), no biases.
    lang : {"zh", "en"}, optional

    Examples
    --------
    >>> def forward(x, W_q, W_k, W_v, W_o, num_heads):
    ...     mha = MultiHeadAttention(x.shape[-1], num_heads, bias=False, dtype=np.float64)
    ...     mha.in_proj_weight = np.concatenate([W_q.T, W_k.T, W_v.T])
    ...     mha.out_proj_weight = W_o.T
    ...     return mha(x)[0]
    >>> check_multi_head_forward(forward, lang="en")
    ✓ multi-head attention: all 6 cases pass
    """
    cases = [
        _forward_case({"zh": "x 形状 (L=4, E=6),H=2", "en": "x of shape (L=4, E=6), H=2"},
                      (4, 6), 2, 21),
        _forward_case({"zh": "x 形状 (L=5, E=12),H=3", "en": "x of shape (L=5, E=12), H=3"},
                      (5, 12), 3, 22),
        _forward_case({"zh": "H=1：一个全宽的头", "en": "H=1: one full-width head"},
                      (4, 6), 1, 23),
        _forward_case({"zh": "H=E：每个头只有 1 维", "en": "H=E: heads 1 wide"},
                      (3, 4), 4, 24),
        _forward_case({"zh": "一批句子 (B=2, L=3, E=8),H=4", "en": "a batch (B=2, L=3, E=8), H=4"},
                      (2, 3, 8), 4, 25),
        _forward_case({"zh": "很大的输入（分数上百，softmax 要稳定）",
                       "en": "large inputs (scores in the hundreds: softmax must be stable)"},
                      (4, 6), 2, 26, scale=30.0),
    ]
    check_function(
        fn, _forward_reference, cases,
        name={"zh": "多头注意力", "en": "multi-head attention"}, lang=lang,
        hint={"zh": "步骤：Q=x@W_q、K=x@W_k、V=x@W_v；各自切成 H 个头；每个头做缩放点积注意力"
                    "(除以 √(E/H)，不是 √E)；把各头的输出按顺序拼接（不是取平均）；最后乘 W_o。",
              "en": "Steps: Q = x @ W_q, K = x @ W_k, V = x @ W_v; split each into H heads; "
                    "scaled dot-product attention per head (divide by √(E/H), not √E); "
                    "concatenate the heads' outputs in order (do not average them); "
                    "finally multiply by W_o."},
    )
