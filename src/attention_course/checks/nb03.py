"""Checks for the exercises of notebook 03 (scaled dot-product attention, the math).

Each check runs the learner's function on several inputs, edge cases included, with the library
functions the exercise asks the learner to rebuild forbidden (watched while the function runs,
whatever name they are bound to). When a case fails, the check also runs the usual mistakes on
that same input (no scale, softmax over the wrong axis, the upper triangle, ...): if the learner's
answer equals one of them, the message names that mistake.
"""

from __future__ import annotations

import numpy as np

from ..attention import causal_mask, padding_mask, scaled_dot_product_attention
from . import forbidden
from ._core import Case, check_function, compare, fail, get_language, run_learner
from ._core import label as _label

__all__ = ["check_attention", "check_causal_mask", "check_padding_mask", "check_score_scale"]


def _qkv(seed, L, S, E, Ev, batch=(), spread=1.0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    q = rng.normal(scale=spread, size=(*batch, L, E)).astype(dtype)
    k = rng.normal(scale=spread, size=(*batch, S, E)).astype(dtype)
    v = rng.normal(size=(*batch, S, Ev)).astype(dtype)
    return q, k, v


# --- exercise 1: scaled dot-product attention with a mask -------------------------------------

ATTENTION_NAME = _label("练习 1（带掩码的缩放点积注意力）",
                        "Exercise 1 (scaled dot-product attention with a mask)")
ATTENTION_HINT = _label(
    "按四步来：打分（只交换 k 的最后两个轴，前面的批次轴不动）、除以 √d_k（d_k 是 q 的最后一维）、"
    "屏蔽的格子在 softmax 之前换成 -inf、按行 softmax（每行先减去这一行自己的最大值），最后乘 v。"
    "整行都被屏蔽的查询输出 0；float32 进，float32 出。",
    "Follow the four steps: score (swap only k's last two axes, not the batch axes), divide by √d_k "
    "(d_k is q's last axis), put -inf where the mask is False before the softmax, softmax along each "
    "row (shifting each row by its own maximum), then multiply by v. A query whose whole row is "
    "masked outputs 0; float32 in, float32 out.",
)

PROMOTED = _label(
    "数值对了，但 float32 的输入得到了别的 dtype：NumPy 的 float64 标量（比如 np.sqrt 的结果）"
    "会把 float32 数组悄悄提升成 float64。先把它变成 Python 数，或者变成输入的 dtype。",
    "The values are right, but float32 inputs gave another dtype: a NumPy float64 scalar (such as "
    "what np.sqrt returns) silently promotes a float32 array. Turn it into a Python number, or into "
    "the input's dtype, first.")

def _masked_softmax(scores, mask, *, fill=-np.inf, shift="row", guard=True, axis=-1):
    """The softmax of a learner's usual mistakes: a given fill value, shift, guard and axis."""
    if mask is not None:
        scores = np.where(mask, scores, fill)
    if shift == "row":
        m = scores.max(axis=axis, keepdims=True)
        m = np.where(np.isfinite(m), m, 0) if guard else m
    else:
        m = scores.max()
    e = np.exp(scores - m)
    total = e.sum(axis=axis, keepdims=True)
    if guard:
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return e / total


def _attention_variants(q, k, v, mask=None):
    E = q.shape[-1]
    kt = np.swapaxes(k, -1, -2)
    scores = q @ kt / np.sqrt(E)

    def blend(weights):
        return (weights @ v).astype(q.dtype)

    def after_softmax():
        w = _masked_softmax(scores, None)
        return blend(w * mask) if mask is not None else blend(w)

    return [
        (lambda: blend(_masked_softmax(q @ kt, mask)), _label(
            "你的结果正好是“没有除以 √d_k”的注意力：分数要先除以 √d_k，再做 softmax。",
            "Your result is exactly attention without the 1/√d_k scale: divide the scores by √d_k "
            "before the softmax.")),
        (lambda: blend(_masked_softmax(q @ kt / E, mask)), _label(
            "你的结果是把分数除以了 d_k：要除以它的平方根 √d_k。",
            "Your result divides the scores by d_k: divide by its square root, √d_k, instead.")),
        (lambda: blend(_masked_softmax(scores, mask, axis=-2)), _label(
            "你的 softmax 沿错了轴（把每个键的那一列归一化了）：应该是每个查询的那一行加起来等于 1。",
            "Your softmax runs along the wrong axis (it normalises each key's column): each query's "
            "row must sum to 1.")),
        (lambda: blend(_masked_softmax(q @ k / np.sqrt(E), mask)), _label(
            "你算的是 q 乘 k 而不是 q 乘 k 的转置：k 恰好是方阵时不会报错，但数值是错的。",
            "You multiplied q by k instead of by k transposed: when k happens to be square nothing "
            "raises, but the numbers are wrong.")),
        (lambda: blend(_masked_softmax(scores, None if mask is None else ~mask)), _label(
            "你的掩码用反了：这门课约定 True 表示“参与”，False 的格子才要屏蔽。",
            "You used the mask the wrong way round: in this course True means 'takes part'; the "
            "False cells are the ones to mask.")),
        (after_softmax, _label(
            "你在 softmax 之后才乘上掩码：被屏蔽的权重变成 0 了，但剩下的一行不再加起来等于 1。"
            "要在 softmax 之前把屏蔽的分数换成 -inf。",
            "You apply the mask after the softmax: the masked weights become 0, but what is left no "
            "longer sums to 1. Replace the masked scores by -inf before the softmax.")),
        (lambda: blend(_masked_softmax(scores, mask, fill=-1e9)), _label(
            "屏蔽的分数换成了一个很大的负数而不是 -inf：整行都被屏蔽时，这一行的分数全都一样，"
            "softmax 会把它平分，而不是输出 0。",
            "You replace masked scores by a large negative number instead of -inf: when a whole row "
            "is masked its scores are all equal, and the softmax shares them out evenly instead of "
            "giving 0.")),
        (lambda: blend(_masked_softmax(scores, mask, guard=False)), _label(
            "整行都被屏蔽时，这一行的最大值是 -inf，减去它得到 NaN（-inf 减 -inf）。"
            "这种行要单独处理：输出 0。",
            "On a fully masked row the maximum is -inf, and subtracting it gives NaN (-inf minus "
            "-inf). Such rows need their own treatment: they output 0.")),
        (lambda: blend(_masked_softmax(scores, mask, shift="global")), _label(
            "你减去的是整个数组的最大值，不是每一行自己的最大值：分数大小差得很远的行，"
            "exp 会全部下溢成 0，0/0 得到 NaN。",
            "You subtract the maximum of the whole array, not each row's own: on rows whose scores "
            "are far apart in size, exp underflows to 0 for a whole row, and 0/0 is NaN.")),
    ]


def _attention_reference(q, k, v, mask=None):
    return scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _attention_cases():
    q, k, v = _qkv(5, 4, 4, 8, 3)
    different = q.copy()
    different[1] *= 400.0                          # one row of scores in the thousands, the others near 1
    masked_row = np.ones((3, 4), dtype=bool)
    masked_row[1] = False                          # query 1 may see no key at all
    masked_row[2, 0] = False
    q32, k32, v32 = _qkv(6, 3, 5, 4, 2, dtype=np.float32)
    return [
        Case(_label("L = S = 3，d_k = 3，d_v = 4，没有掩码", "L = S = 3, d_k = 3, d_v = 4, no mask"),
             _qkv(0, 3, 3, 3, 4)),
        Case(_label("L = 2 个查询，S = 5 个键（L ≠ S），d_k = 3，d_v = 2",
                    "L = 2 queries, S = 5 keys (L ≠ S), d_k = 3, d_v = 2"), _qkv(1, 2, 5, 3, 2)),
        Case(_label("L = 2，S = 4，d_k = 4（k 是方阵）", "L = 2, S = 4, d_k = 4 (k is square)"),
             _qkv(2, 2, 4, 4, 3)),
        Case(_label("带批次轴：q 的形状为 (2, 3, 4, 5)，k 为 (2, 3, 6, 5)",
                    "leading batch axes: q of shape (2, 3, 4, 5), k (2, 3, 6, 5)"),
             _qkv(3, 4, 6, 5, 2, batch=(2, 3))),
        Case(_label("因果掩码，L = S = 4", "a causal mask, L = S = 4"),
             (*_qkv(4, 4, 4, 4, 3), causal_mask(4))),
        Case(_label("第 1 行整行被屏蔽的掩码（L = 3，S = 4）",
                    "a mask whose row 1 is fully masked (L = 3, S = 4)"),
             (*_qkv(7, 3, 4, 4, 2), masked_row)),
        Case(_label("填充掩码 (B, 1, S)：一批 2 句，长度 5 和 2",
                    "a padding mask (B, 1, S): a batch of 2 sentences of lengths 5 and 2"),
             (*_qkv(8, 5, 5, 4, 3, batch=(2,)), padding_mask(np.array([5, 2]), 5))),
        Case(_label("分数大小差得很远的行：第 1 行的分数上千，其余在 1 左右",
                    "rows of very different scale: row 1's scores in the thousands, the others near 1"),
             (different, k, v, causal_mask(4))),
        Case(_label("float32 的 q、k、v（L = 3，S = 5），带填充掩码",
                    "float32 q, k, v (L = 3, S = 5), with a padding mask"),
             (q32, k32, v32, padding_mask(np.array([3]), 5)[0])),
    ]


def check_attention(learner, lang: str | None = None) -> None:
    """Check ``learner(q, k, v, mask=None)``: masked scaled dot-product attention, built by hand.

    Parameters
    ----------
    learner : callable
        ``learner(q, k, v, mask)`` with q: (..., L, d_k), k: (..., S, d_k), v: (..., S, d_v) and a
        boolean mask broadcastable to (..., L, S) (True = takes part) or None; returns (..., L, d_v)
        in the dtype of q. Compared with the library's ``scaled_dot_product_attention``; the
        library's attention and softmax functions are forbidden.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the input that differs: L ≠ S, a square k, batch axes, causal and padding masks, a
        fully masked row, rows of very different scale, float32 inputs (the result must stay
        float32).
    """
    lang = get_language(lang)
    check_function(learner, _attention_reference, _attention_cases(), mistakes=_attention_variants,
                   name=ATTENTION_NAME, hint=ATTENTION_HINT,
                   forbidden=forbidden.of("softmax", "attention"), lang=lang,
                   check_dtype=True, dtype_hint=PROMOTED)


# --- exercise 2: causal mask ----------------------------------------------------------------

CAUSAL_NAME = _label("练习 2（因果掩码）", "Exercise 2 (causal mask)")
CAUSAL_HINT = _label(
    "第 i 个查询可以看第 0..i 个键（包括它自己）。形状 (L, S)，dtype 为 bool，True 表示“参与”。"
    "L ≠ S 时三角形仍然从左上角开始。",
    "Query i may look at keys 0..i (itself included). Shape (L, S), dtype bool, True meaning "
    "'takes part'. When L ≠ S the triangle still starts in the top-left corner.",
)
NOT_BOOL = _label(
    "数值对了，但 dtype 不是 bool：0/1 的整数或浮点数掩码会被当成加到分数上的数，而不是“参与 / 不参与”。",
    "The values are right but the dtype is not bool: a 0/1 integer or float mask would be read as "
    "numbers added to the scores, not as 'takes part or not'.")


def _causal_variants(L, S):
    right = causal_mask(L, S)
    return [
        (lambda: ~right, _label(
            "你的掩码正好反了：这门课约定 True 表示“参与”（和 PyTorch 的 scaled_dot_product_attention "
            "一样），不是“被屏蔽”。",
            "Your mask is exactly inverted: in this course True means 'takes part' (as in PyTorch's "
            "scaled_dot_product_attention), not 'masked'.")),
        (lambda: np.triu(np.ones((L, S), dtype=bool)), _label(
            "你给出的是上三角：那等于让每个查询去看“未来”的键。因果掩码保留的是下三角。",
            "You returned the upper triangle, which lets each query see the future. A causal mask "
            "keeps the lower triangle.")),
        (lambda: np.tri(L, S, k=-1, dtype=bool), _label(
            "你的掩码把对角线也屏蔽了：一个词可以看它自己。",
            "Your mask masks the diagonal too: a word may look at itself.")),
        (lambda: np.tri(L, S, k=S - L, dtype=bool), _label(
            "你的三角形对齐在右下角：L ≠ S 时，这门课（和 PyTorch 的 is_causal 一样）让它从左上角开始，"
            "第 i 个查询看第 0..i 个键。",
            "Your triangle is aligned to the bottom-right corner: when L ≠ S this course (like "
            "PyTorch's is_causal) starts it in the top-left corner, query i seeing keys 0..i.")),
    ]


def check_causal_mask(learner, lang: str | None = None) -> None:
    """Check ``learner(L, S) -> (L, S) bool``, True where query i may see key j.

    Compared with the library's ``causal_mask`` (top-left aligned), which is forbidden, as is
    ``sliding_window_mask``.

    Parameters
    ----------
    learner : callable
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the (L, S) that differs: square, a single word, L < S, L > S.
    """
    lang = get_language(lang)
    cases = [
        Case(_label("L = S = 4", "L = S = 4"), (4, 4)),
        Case(_label("L = S = 1（只有一个词）", "L = S = 1 (a single word)"), (1, 1)),
        Case(_label("L = 3 个查询，S = 5 个键（L < S）", "L = 3 queries, S = 5 keys (L < S)"), (3, 5)),
        Case(_label("L = 5 个查询，S = 2 个键（L > S）", "L = 5 queries, S = 2 keys (L > S)"), (5, 2)),
        Case(_label("L = S = 7", "L = S = 7"), (7, 7)),
    ]
    check_function(learner, causal_mask, cases, mistakes=_causal_variants, name=CAUSAL_NAME, hint=CAUSAL_HINT,
                   forbidden=forbidden.of("masks"), lang=lang, check_dtype=True,
               dtype_hint=NOT_BOOL)


# --- exercise 3: padding mask ---------------------------------------------------------------

PADDING_NAME = _label("练习 3（填充掩码）", "Exercise 3 (padding mask)")
PADDING_HINT = _label(
    "长度为 n 的句子，真实的词在位置 0..n-1。形状是 (B, 1, S)，中间那个长度为 1 的轴让它能广播到每个查询上；"
    "dtype 为 bool。",
    "A sentence of length n has real words at positions 0..n-1. The shape is (B, 1, S); the middle "
    "axis of size 1 lets it broadcast over the queries; the dtype is bool.",
)


def _padding_variants(lengths, S):
    lengths = np.asarray(lengths)
    pos = np.arange(S)
    return [
        (lambda: (pos <= lengths[:, None])[:, None, :], _label(
            "差了一位：你多放进了一个填充位。长度为 n 时真实位置是 0..n-1。",
            "Off by one: you let one padding position in. With length n the real positions are "
            "0..n-1.")),
        (lambda: (pos < lengths[:, None] - 1)[:, None, :], _label(
            "差了一位：你把最后一个真实的词屏蔽了。长度为 n 时真实位置是 0..n-1。",
            "Off by one: you mask the last real word. With length n the real positions are 0..n-1.")),
        (lambda: (pos >= lengths[:, None])[:, None, :], _label(
            "你的掩码反了：True 表示“真实的词，参与计算”，填充位才是 False。",
            "Your mask is inverted: True marks the real words (they take part); padding is False.")),
        (lambda: pos < lengths[:, None], _label(
            "数值对了，但形状是 (B, S)：要在中间加一个长度为 1 的轴，变成 (B, 1, S)。",
            "The values are right but the shape is (B, S): add a middle axis of size 1 to get "
            "(B, 1, S).")),
    ]


def check_padding_mask(learner, lang: str | None = None) -> None:
    """Check ``learner(lengths, S) -> (B, 1, S) bool``, True for the real (unpadded) keys.

    Compared with the library's ``padding_mask``, which is forbidden. ``lengths`` comes as an
    int array or as a plain list.

    Parameters
    ----------
    learner : callable
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the lengths that differ: no padding, an empty sentence, a list of lengths.
    """
    lang = get_language(lang)
    cases = [
        Case(_label("lengths = [3, 1]，S = 4", "lengths = [3, 1], S = 4"), (np.array([3, 1]), 4)),
        Case(_label("lengths = [5]，S = 5（没有填充）", "lengths = [5], S = 5 (no padding)"),
             (np.array([5]), 5)),
        Case(_label("lengths = [0, 2]，S = 2（有一个空句子）", "lengths = [0, 2], S = 2 (an empty sentence)"),
             (np.array([0, 2]), 2)),
        Case(_label("lengths = [4, 6, 1]，S = 6", "lengths = [4, 6, 1], S = 6"), (np.array([4, 6, 1]), 6)),
        Case(_label("lengths 是 Python 列表 [2, 3]，S = 4", "lengths as a Python list [2, 3], S = 4"),
             ([2, 3], 4)),
    ]
    check_function(learner, padding_mask, cases, mistakes=_padding_variants, name=PADDING_NAME,
                   hint=PADDING_HINT, forbidden=forbidden.of("masks"), lang=lang, check_dtype=True,
                   dtype_hint=NOT_BOOL)


# --- exercise 4: the scale when q and k have variance σ² ----------------------------------

SCALE_NAME = _label("练习 4（方差为 σ² 时的缩放）", "Exercise 4 (the scale when the variance is σ²)")
SCALE_HINT = _label(
    "q·k 是 d_k 项 q_i k_i 之和。两个相互独立、均值为 0 的数相乘，乘积的方差是两者方差的乘积；"
    "独立的项相加，方差也相加。先算出 q·k 的方差，再想：乘上一个数 c，方差会变成原来的几倍？",
    "q·k is a sum of d_k terms q_i k_i. For two independent numbers of mean 0, the variance of "
    "their product is the product of their variances; for independent terms added up, the "
    "variances add up too. Work out the variance of q·k first, then ask: multiplying by a number "
    "c multiplies the variance by what?",
)
#: Pairs (q, k) drawn to show the learner what their scale does; enough for two decimals.
_SCALE_SAMPLES = 20_000


def _scale_reference(d_k, variance):
    return 1.0 / (variance * np.sqrt(d_k))


def _measured_variance(c, d_k, variance, seed=0):
    """Variance of c·(q·k) over random q, k with independent entries of mean 0 and ``variance``."""
    rng = np.random.default_rng(seed)
    q = rng.normal(scale=np.sqrt(variance), size=(_SCALE_SAMPLES, d_k))
    k = rng.normal(scale=np.sqrt(variance), size=(_SCALE_SAMPLES, d_k))
    return float(np.var(c * np.einsum("nd,nd->n", q, k)))


def check_score_scale(learner, lang: str | None = None) -> None:
    """Check ``learner(d_k, variance) -> float``: the factor that gives the scores variance 1.

    q and k have independent entries of mean 0 and variance ``variance`` (σ²); the learner returns
    the number c for which c·(q·k) has variance 1 (for ``variance = 1`` it is the 1/√d_k of the
    notebook). On a wrong answer the message also gives the variance that the learner's c
    produces, measured on 20,000 random pairs.

    Parameters
    ----------
    learner : callable
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the (d_k, σ²) that differs.
    """
    lang = get_language(lang)
    cases = [(64, 1.0), (16, 4.0), (256, 0.25), (10, 2.0), (1, 9.0)]
    for d_k, variance in cases:
        label = _label(f"d_k = {d_k}，σ² = {variance}", f"d_k = {d_k}, σ² = {variance}")
        got = run_learner(learner, d_k, variance, name=SCALE_NAME, label=label, hint=SCALE_HINT, lang=lang)
        expected = _scale_reference(d_k, variance)
        reason = compare(got, expected, lang=lang)
        if reason:
            try:
                measured = _measured_variance(float(got), d_k, variance)
                reason += {"zh": f"；用你的 c，2 万对随机的 q、k 算出的分数方差是 {measured:.3g}，应为 1",
                           "en": f"; with your c, the scores of 20,000 random pairs (q, k) have "
                                 f"variance {measured:.3g}, where 1 was wanted"}[lang]
            except (TypeError, ValueError, OverflowError):
                pass
            fail(SCALE_NAME, label, reason, hint=SCALE_HINT, lang=lang)
    print({"zh": f"✓ {SCALE_NAME['zh']}：{len(cases)} 个测试用例全部通过",
           "en": f"✓ {SCALE_NAME['en']}: all {len(cases)} cases pass"}[lang])


from ._core import fresh_on_call  # noqa: E402 - last, once the module is complete

fresh_on_call(__name__)
