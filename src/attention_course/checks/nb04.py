"""Checks for the exercises of notebook 04 (multi-head attention).

Each check runs the learner's function on several inputs, edge cases included, and compares it
with the library (:class:`~attention_course.MultiHeadAttention` and
:mod:`~attention_course.grouped`). Library functions that would give the answer away are
forbidden, watched while the learner's function runs. When a case fails, the usual mistakes are
run on the same input; if the learner's answer equals one of them, the message names it.
"""

from __future__ import annotations

import numpy as np

from ..attention import scaled_dot_product_attention
from ..grouped import GroupedQueryAttention, grouped_query_attention
from ..multihead import merge_heads
from . import forbidden
from .cases import Case, check_function
from .language import get_language
from .language import label as _label

__all__ = ["check_grouped_attention", "check_grouped_num_parameters", "check_head_contributions"]


def _normal(seed, *shape, dtype=np.float64):
    """Random values with a fixed seed: every entry differs, so a misplaced one shows."""
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


# --- exercise 1: each head's share of the output ----------------------------------------------

CONTRIBUTIONS_NAME = _label("练习 1（每个头对输出的贡献）", "Exercise 1 (each head's share of the output)")
CONTRIBUTIONS_HINT = _label(
    "拼接后的向量里，头 i 占第 i 段（d_v 个数）。乘 W_O 时，这一段只会碰到 W_O 里对应的那几**行**。"
    "每个头的贡献都已经是 d_model 维；把 h 份贡献加起来，应该正好等于拼接再乘 W_O 的结果。",
    "In the concatenated vector, head i owns segment i (d_v numbers). Multiplied by W_O, that "
    "segment meets only the matching **rows** of W_O. Every head's contribution is already d_model "
    "wide; the h contributions added up must give exactly the concatenation multiplied by W_O.",
)


def _contributions_reference(heads, W_O):
    heads, W_O = np.asarray(heads), np.asarray(W_O)
    h, d_v = heads.shape[-3], heads.shape[-1]
    return np.einsum("...hld,hde->...hle", heads, W_O.reshape(h, d_v, W_O.shape[-1]))


def _contributions_variants(heads, W_O):
    h, d_v = heads.shape[-3], heads.shape[-1]
    blocks = W_O.reshape(h, d_v, -1)
    return [
        (lambda: np.stack([heads[..., i, :, :] @ W_O[:, i * d_v:(i + 1) * d_v].T
                           for i in range(h)], axis=-3), _label(
            "你按**列**切了 W_O：头 i 的那一段在拼接向量里，乘法时碰到的是 W_O 的第 i 组**行**。",
            "You cut W_O by **columns**: head i's segment of the concatenated vector meets the "
            "i-th group of **rows** of W_O.")),
        (lambda: np.einsum("...hld,dhe->...hle", heads, W_O.reshape(d_v, h, -1)), _label(
            "W_O 的行切错了组：头 i 用的是连续的 d_v 行（第 i 段），不是每隔 h 行取一行。",
            "W_O's rows are grouped the wrong way: head i uses d_v consecutive rows (segment i), "
            "not every h-th row.")),
        (lambda: _contributions_reference(heads, W_O) / h, _label(
            "你的结果是正确答案除以 h：每个头的贡献不取平均，它们加起来就是输出。",
            "Your result is the right answer divided by h: the contributions are not averaged; "
            "they add up to the output.")),
        (lambda: np.einsum("...hld,de->...hle", heads, blocks[0]), _label(
            "每个头都用了 W_O 的同一块（第一段的行）：头 i 要用它自己那一段。",
            "Every head used the same block of W_O (the first segment's rows): head i needs its own.")),
        (lambda: merge_heads(heads) @ W_O, _label(
            "你返回的是所有头加起来的输出（拼接再乘 W_O）：这个练习要每个头单独的那一份，"
            "头的轴要保留。",
            "You returned the output of all heads together (concatenate, then W_O): this exercise "
            "wants each head's own share, keeping the head axis.")),
    ]


def check_head_contributions(fn, lang=None) -> None:
    """Check ``fn(heads, W_O)``: each head's own share of the multi-head output.

    Parameters
    ----------
    fn : callable
        ``fn(heads, W_O)`` with ``heads`` (..., h, L, d_v), every head's attention output, and
        ``W_O`` (h·d_v, d_model), the output projection in the ``x @ W`` layout; returns
        (..., h, L, d_model), whose sum over the head axis is the layer's output before the
        bias. Compared with the library on square and non-square W_O, batch axes, one head, and
        float32.
    lang : {"zh", "en"}, optional
    """
    lang = get_language(lang)
    cases = [
        Case(_label("h = 3 个头，L = 4，d_v = 2，d_model = 6", "h = 3 heads, L = 4, d_v = 2, d_model = 6"),
             (_normal(1, 3, 4, 2), _normal(2, 6, 6))),
        Case(_label("W_O 不是方阵：h = 2，d_v = 3，d_model = 5",
                    "W_O not square: h = 2, d_v = 3, d_model = 5"),
             (_normal(3, 2, 3, 3), _normal(4, 6, 5))),
        Case(_label("一批句子：heads 的形状 (B=2, h=4, L=3, d_v=2)",
                    "a batch: heads of shape (B=2, h=4, L=3, d_v=2)"),
             (_normal(5, 2, 4, 3, 2), _normal(6, 8, 8))),
        Case(_label("h = 1：只有一个头", "h = 1: a single head"), (_normal(7, 1, 3, 4), _normal(8, 4, 4))),
        Case(_label("float32：h = 2，L = 2，d_v = 3，d_model = 6",
                    "float32: h = 2, L = 2, d_v = 3, d_model = 6"),
             (_normal(9, 2, 2, 3, dtype=np.float32), _normal(10, 6, 6, dtype=np.float32))),
    ]
    check_function(fn, _contributions_reference, cases, mistakes=_contributions_variants,
                   name=CONTRIBUTIONS_NAME, hint=CONTRIBUTIONS_HINT, lang=lang)


# --- exercise 2: grouped-query attention --------------------------------------------------------

GROUPED_NAME = _label("练习 2（分组查询注意力）", "Exercise 2 (grouped-query attention)")
GROUPED_HINT = _label(
    "h 个查询头按顺序分成 G 组，每组 h/G 个：头 0 到 h/G − 1 共用第 0 个键/值头，接下来的 h/G 个共用第 1 个，"
    "依此类推（不是轮流分配）。每个查询头自己做一次完整的缩放点积注意力，缩放用每个头的维度 d_k。",
    "The h query heads form G groups of h/G, in order: heads 0 to h/G − 1 share key/value head 0, "
    "the next h/G share head 1, and so on (not dealt out in turn). Every query head does a whole "
    "scaled dot-product attention of its own, scaled by the width d_k of one head.",
)


def _grouped_reference(q, k, v):
    return grouped_query_attention(q, k, v)


def _grouped_variants(q, k, v):
    h, G = q.shape[-3], k.shape[-3]
    per = h // G
    tiled = np.concatenate([k] * per, axis=-3), np.concatenate([v] * per, axis=-3)
    q_mean = q.reshape(*q.shape[:-3], G, per, *q.shape[-2:]).mean(axis=-3)
    first = np.broadcast_to(k[..., :1, :, :], (*k.shape[:-3], h, *k.shape[-2:]))
    first_v = np.broadcast_to(v[..., :1, :, :], (*v.shape[:-3], h, *v.shape[-2:]))
    return [
        (lambda: scaled_dot_product_attention(q, *tiled), _label(
            "你把键/值头轮流分给了查询头（头 i 用第 i mod G 个）：分组是按顺序连续的，"
            "前 h/G 个查询头共用第 0 个键/值头。",
            "You dealt the key/value heads out in turn (head i using number i mod G): the groups "
            "are consecutive, the first h/G query heads sharing key/value head 0.")),
        (lambda: np.repeat(scaled_dot_product_attention(q_mean, k, v), per, axis=-3), _label(
            "你先把同一组的查询头取了平均：每个查询头要保留自己的查询，只有键和值是共用的。",
            "You averaged the query heads of a group first: every query head keeps its own query; "
            "only the keys and values are shared.")),
        (lambda: scaled_dot_product_attention(q, first, first_v), _label(
            "所有查询头都用了第 0 个键/值头：每一组有它自己的键/值头。",
            "Every query head used key/value head 0: each group has its own.")),
        (lambda: grouped_query_attention(q, k, v, scale=1.0), _label(
            "分数没有除以 √d_k：每个查询头的注意力和单头时一样要缩放。",
            "The scores are not divided by √d_k: every query head's attention is scaled as a "
            "single head's is.")),
        (lambda: grouped_query_attention(q, k, v, scale=float(1 / np.sqrt(q.shape[-1] * h))), _label(
            "缩放用了所有头加起来的维度：要用一个头的维度 d_k。",
            "The scale uses the width of all heads together: use the width of one head, d_k.")),
    ]


def check_grouped_attention(fn, lang=None) -> None:
    """Check ``fn(q, k, v)``: grouped-query attention, h query heads sharing G key/value heads.

    Parameters
    ----------
    fn : callable
        ``fn(q, k, v)`` with q (..., h, L, d_k), k (..., G, S, d_k), v (..., G, S, d_v), G dividing
        h; returns (..., h, L, d_v). Compared with :func:`~attention_course.grouped_query_attention`
        with half as many key/value heads as query heads, a single one (multi-query), as many
        (multi-head), batch axes, L ≠ S and float32. The
        library's grouped attention (function, layer and ``repeat_kv``) is forbidden;
        ``scaled_dot_product_attention`` is allowed.
    lang : {"zh", "en"}, optional
    """
    lang = get_language(lang)

    def qkv(seed, h, G, L, S, d_k, d_v, batch=(), dtype=np.float64):
        return (_normal(seed, *batch, h, L, d_k, dtype=dtype),
                _normal(seed + 1, *batch, G, S, d_k, dtype=dtype),
                _normal(seed + 2, *batch, G, S, d_v, dtype=dtype))

    cases = [
        Case(_label("h = 4 个查询头，G = 2 个键/值头，L = S = 3",
                    "h = 4 query heads, G = 2 key/value heads, L = S = 3"),
             qkv(10, 4, 2, 3, 3, 4, 2)),
        Case(_label("G = 1（多查询注意力）：h = 4，L = 2，S = 5", "G = 1 (multi-query): h = 4, L = 2, S = 5"),
             qkv(20, 4, 1, 2, 5, 3, 3)),
        Case(_label("G = h = 3（就是多头注意力）", "G = h = 3 (plain multi-head attention)"),
             qkv(30, 3, 3, 4, 4, 2, 2)),
        Case(_label("一批句子：B = 2，h = 6，G = 2", "a batch: B = 2, h = 6, G = 2"),
             qkv(40, 6, 2, 3, 4, 4, 3, batch=(2,))),
        Case(_label("h = 6，G = 3，L = 2 个查询，S = 4 个键", "h = 6, G = 3, L = 2 queries, S = 4 keys"),
             qkv(50, 6, 3, 2, 4, 5, 2)),
        Case(_label("float32：h = 4，G = 2", "float32: h = 4, G = 2"),
             qkv(60, 4, 2, 3, 3, 4, 4, dtype=np.float32)),
    ]
    check_function(fn, _grouped_reference, cases, mistakes=_grouped_variants, name=GROUPED_NAME,
                   hint=GROUPED_HINT, forbidden=forbidden.of("grouped"), lang=lang)


# --- exercise 3: parameters of a grouped-query layer ---------------------------------------------

PARAMETERS_NAME = _label("练习 3（分组查询注意力层的参数个数）",
                         "Exercise 3 (the parameters of a grouped-query layer)")
PARAMETERS_HINT = _label(
    "数四个投影：W_Q 和 W_O 和多头注意力一样大；W_K 和 W_V 只为 G 个键/值头投影，"
    "每个键/值头的维度和一个查询头一样（d_k）。"
    "带偏置时，每个投影的偏置和它的输出维度相同。",
    "Count four projections: W_Q and W_O are as large as in multi-head attention; W_K and W_V "
    "project only for the G key/value heads, each as wide as one query head (d_k). With biases, each "
    "projection's bias is as wide as its output.",
)


def _parameters_reference(d_model, num_heads, num_kv_heads, bias=True):
    # the layer's own shapes, without allocating a layer of 8192 × 8192 weights
    shapes = GroupedQueryAttention.parameter_shapes(d_model, num_heads, num_kv_heads, bias=bias)
    return int(sum(np.prod(shape) for shape in shapes.values()))


def _parameters_variants(d, h, G, bias=True):
    kv = G * (d // h)
    b = 1 if bias else 0
    return [
        (lambda: 4 * d * d + 4 * d * b, _label(
            "你数的是普通多头注意力（G = h）的参数：W_K 和 W_V 只需要为 G 个键/值头投影。",
            "You counted plain multi-head attention (G = h): W_K and W_V only project for the G "
            "key/value heads.")),
        (lambda: 2 * d * d + 2 * d * G * d + b * (2 * d + 2 * G * d), _label(
            "W_K 和 W_V 的维度算成了 G·d_model：每个键/值头只有一个头的维度 d_k = d_model/h。",
            "You made W_K and W_V G·d_model wide: each key/value head is one head wide, "
            "d_k = d_model/h.")),
        (lambda: d * d + 2 * d * kv + b * (d + 2 * kv), _label(
            "少了输出投影 W_O（和它的偏置）。",
            "The output projection W_O (and its bias) is missing.")),
        (lambda: 2 * d * d + 2 * d * kv + (d + 2 * kv + d), _label(
            "bias=False 时不该有偏置。", "With bias=False there are no biases.")),
        (lambda: 2 * d * d + 2 * d * kv + b * 4 * d, _label(
            "偏置数错了：W_K 和 W_V 的偏置只有 G·d_k 维，不是 d_model 维。",
            "The biases are miscounted: those of W_K and W_V are only G·d_k wide, not d_model.")),
        (lambda: d * d + 3 * d * kv + b * (d + 3 * kv), _label(
            "W_Q 也按 G 个头算了：查询头还是 h 个，W_Q 和多头注意力里一样大。",
            "You counted W_Q for G heads too: there are still h query heads, and W_Q is as large as "
            "in multi-head attention.")),
    ]


def check_grouped_num_parameters(fn, lang=None) -> None:
    """Check ``fn(d_model, num_heads, num_kv_heads, bias=True) -> int``, the parameters of a layer.

    Compared with ``GroupedQueryAttention(d_model, num_heads, num_kv_heads, bias).num_parameters``
    on G = h, G = 1, sizes of published models and small ones, with and without biases. Building
    the layer (grouped or multi-head) is forbidden: the answer is a count.

    Parameters
    ----------
    fn : callable
    lang : {"zh", "en"}, optional
    """
    lang = get_language(lang)
    cases = [
        Case(_label("d_model = 512，h = G = 8（普通多头注意力），带偏置",
                    "d_model = 512, h = G = 8 (plain multi-head), with biases"), (512, 8, 8, True)),
        Case(_label("d_model = 512，h = 8，G = 1（多查询），带偏置",
                    "d_model = 512, h = 8, G = 1 (multi-query), with biases"), (512, 8, 1, True)),
        Case(_label("d_model = 512，h = 8，G = 2，不带偏置", "d_model = 512, h = 8, G = 2, no biases"),
             (512, 8, 2, False)),
        Case(_label("d_model = 8192，h = 64，G = 8，不带偏置（一个 700 亿参数模型的一层）",
                    "d_model = 8192, h = 64, G = 8, no biases (one layer of a 70-billion-parameter model)"),
             (8192, 64, 8, False)),
        Case(_label("d_model = 12，h = 6，G = 3，带偏置", "d_model = 12, h = 6, G = 3, with biases"),
             (12, 6, 3, True)),
    ]
    check_function(fn, _parameters_reference, cases, mistakes=_parameters_variants, name=PARAMETERS_NAME,
                   hint=PARAMETERS_HINT, forbidden=forbidden.of("layers"), lang=lang)


from .fresh import fresh_on_call  # noqa: E402 - last, once the module is complete

fresh_on_call(__name__)
