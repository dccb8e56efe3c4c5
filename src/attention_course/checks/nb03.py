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
from .cases import Case, check_function
from .comparison import compare
from .language import fail, get_language
from .language import label as _label
from .watcher import run_learner

__all__ = ["check_attention", "check_continuation_mask", "check_packed_mask", "check_score_scale"]


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


# --- exercise 2: the causal mask of a continuation ----------------------------------------

CONTINUATION_NAME = _label("练习 2（续写时的因果掩码）", "Exercise 2 (the causal mask of a continuation)")
CONTINUATION_HINT = _label(
    "已经读过的 S − L 个词排在前面，第 i 个查询站在位置 S − L + i：它可以看这个位置和它前面的所有键，"
    "已经读过的词也算。形状 (L, S)，dtype 为 bool，True 表示“参与”。L = S 时结果就是第 4 节的掩码。",
    "The S − L words already read come first, and query i stands at position S − L + i: it may "
    "look at the key there and at every key before it, the words already read included. Shape "
    "(L, S), dtype bool, True meaning 'takes part'. For L = S the result is section 4's mask.",
)
NOT_BOOL = _label(
    "数值对了，但 dtype 不是 bool：0/1 的整数或浮点数掩码会被当成加到分数上的数，而不是“参与 / 不参与”。",
    "The values are right but the dtype is not bool: a 0/1 integer or float mask would be read as "
    "numbers added to the scores, not as 'takes part or not'.")


def _continuation_reference(L, S):
    position = S - L + np.arange(L)                                    # (L,): where each query stands
    return np.arange(S)[None, :] <= position[:, None]                  # (L, S)


def _continuation_variants(L, S):
    right = _continuation_reference(L, S)
    only_new = np.zeros((L, S), dtype=bool)
    only_new[:, S - L:] = np.tri(L, dtype=bool)
    return [
        (lambda: causal_mask(L, S), _label(
            "你的三角形从左上角开始，像第 4 节那样：那时第 i 个查询就站在位置 i。"
            "这里前面还有 S − L 个已经读过的词，第 i 个查询站在位置 S − L + i。",
            "Your triangle starts in the top-left corner, as in section 4, where query i stood at "
            "position i. Here S − L words already read come first, and query i stands at position "
            "S − L + i.")),
        (lambda: only_new, _label(
            "你的查询看不到已经读过的词：留着它们的键，正是为了让新词能看它们。",
            "Your queries cannot see the words already read: their keys are kept precisely so that "
            "the new words can look at them.")),
        (lambda: ~right, _label(
            "你的掩码正好反了：这门课约定 True 表示“参与”，不是“被屏蔽”。",
            "Your mask is exactly inverted: in this course True means 'takes part', not 'masked'.")),
        (lambda: np.eye(L, S, k=S - L, dtype=bool), _label(
            "你的每个查询只看它自己那一个位置：前面的键也都可以看。",
            "Each of your queries sees only its own position: it may see every key before it too.")),
        (lambda: np.tri(L, S, k=S - L - 1, dtype=bool), _label(
            "你的掩码把每个查询自己的位置也屏蔽了：一个词可以看它自己。",
            "Your mask masks each query's own position too: a word may look at itself.")),
        (lambda: ~np.tri(L, S, k=S - L - 1, dtype=bool), _label(
            "你给出的是上三角：那等于让每个查询去看“未来”的键。",
            "You returned the upper triangle, which lets each query see the future.")),
    ]


def check_continuation_mask(learner, lang: str | None = None) -> None:
    """Check ``learner(L, S) -> (L, S) bool`` for L new queries after S − L keys already read.

    Query i stands at position S − L + i and may see the keys at that position and before it.
    For L = S this is the library's ``causal_mask``; calling the library's masks is allowed.

    Parameters
    ----------
    learner : callable
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the (L, S) that differs: L = S, a single new word, several new words after some
        already read; and naming the mistake when it recognises it (the top-left triangle, the
        words already read left out, an inverted mask, a masked diagonal, the upper triangle).
    """
    lang = get_language(lang)
    cases = [
        Case(_label("L = S = 4（还没有读过的词）", "L = S = 4 (no words read before)"), (4, 4)),
        Case(_label("L = 1 个新词，S = 5 个键", "L = 1 new word, S = 5 keys"), (1, 5)),
        Case(_label("L = 3 个新词，S = 7 个键", "L = 3 new words, S = 7 keys"), (3, 7)),
        Case(_label("L = 2 个新词，S = 3 个键", "L = 2 new words, S = 3 keys"), (2, 3)),
        Case(_label("L = S = 1", "L = S = 1"), (1, 1)),
        Case(_label("L = 5 个新词，S = 9 个键", "L = 5 new words, S = 9 keys"), (5, 9)),
    ]
    check_function(learner, _continuation_reference, cases, mistakes=_continuation_variants,
                   name=CONTINUATION_NAME, hint=CONTINUATION_HINT, lang=lang, check_dtype=True,
                   dtype_hint=NOT_BOOL)


# --- exercise 3: sentences packed into one row ------------------------------------------------

PACKED_NAME = _label("练习 3（拼进一行的几句话）", "Exercise 3 (sentences packed into one row)")
PACKED_HINT = _label(
    "先弄清每个位置属于第几句：第 k 句从前面各句长度之和开始，占 lengths[k] 个位置。第 i 个查询只能看"
    "同一句里的键；causal 为 True 时，还只能看不在它后面的键。形状 (S, S)，dtype 为 bool。",
    "First work out which sentence each position belongs to: sentence k starts at the sum of the "
    "lengths before it and takes lengths[k] positions. Query i may look only at keys of its own "
    "sentence; with causal True, only at those not after it. Shape (S, S), dtype bool.",
)


def _packed_reference(lengths, causal):
    lengths = np.asarray(lengths, dtype=int)
    sentence = np.repeat(np.arange(len(lengths)), lengths)             # (S,)
    mask = sentence[:, None] == sentence[None, :]                       # (S, S)
    if causal:
        mask &= np.tri(len(sentence), dtype=bool)
    return mask


def _packed_variants(lengths, causal):
    lengths = np.asarray(lengths, dtype=int)
    S = int(lengths.sum())
    ends = np.cumsum(lengths)
    shifted = np.searchsorted(ends, np.arange(S), side="left")          # boundaries one too late
    blocks_shifted = shifted[:, None] == shifted[None, :]
    return [
        (lambda: np.tri(S, dtype=bool) if causal else np.ones((S, S), dtype=bool), _label(
            "你的词越过了句子的边界：拼在一行里的各句互不相干，一个词只能看自己这句话。",
            "Your words look across sentence boundaries: the sentences packed into the row have "
            "nothing to do with each other, and a word may look only at its own sentence.")),
        (lambda: _packed_reference(lengths, False), _label(
            "causal 为 True 时，一个词不能看同一句里它后面的词。",
            "With causal True, a word must not look at the later words of its own sentence.")),
        (lambda: _packed_reference(lengths, True), _label(
            "causal 为 False 时，一个词可以看整句话，后面的词也算。",
            "With causal False, a word sees its whole sentence, the later words too.")),
        (lambda: blocks_shifted & np.tri(S, dtype=bool) if causal else blocks_shifted, _label(
            "句子的边界差了一位：第 k 句从前面各句长度之和开始，到下一句开始之前结束。",
            "The sentence boundaries are off by one: sentence k starts at the sum of the lengths "
            "before it and ends just before the next one starts.")),
        (lambda: ~_packed_reference(lengths, causal), _label(
            "你的掩码正好反了：这门课约定 True 表示“参与”，不是“被屏蔽”。",
            "Your mask is exactly inverted: in this course True means 'takes part', not 'masked'.")),
    ]


def check_packed_mask(learner, lang: str | None = None) -> None:
    """Check ``learner(lengths, causal) -> (S, S) bool`` for sentences packed into one row.

    ``S`` is the sum of the lengths; query i may see key j when both belong to the same sentence
    and, with ``causal``, j ≤ i. ``lengths`` comes as a list or as an int array; calling the
    library's masks is allowed.

    Parameters
    ----------
    learner : callable
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the lengths and the ``causal`` flag that differ: two, three and one sentences,
        one-word sentences, a list; and naming the mistake when it recognises it (across
        sentence boundaries, the causal flag ignored or applied when False, boundaries off by
        one, an inverted mask).
    """
    lang = get_language(lang)
    cases = [
        Case(_label("lengths = [3, 2]，causal = False", "lengths = [3, 2], causal = False"),
             (np.array([3, 2]), False)),
        Case(_label("lengths = [3, 2]，causal = True", "lengths = [3, 2], causal = True"),
             (np.array([3, 2]), True)),
        Case(_label("lengths = [1, 1, 1]，causal = True（每句只有一个词）",
                    "lengths = [1, 1, 1], causal = True (one word per sentence)"),
             (np.array([1, 1, 1]), True)),
        Case(_label("lengths = [4]，causal = True（只有一句）",
                    "lengths = [4], causal = True (a single sentence)"),
             (np.array([4]), True)),
        Case(_label("lengths 是 Python 列表 [2, 4, 1]，causal = False",
                    "lengths as a Python list [2, 4, 1], causal = False"), ([2, 4, 1], False)),
        Case(_label("lengths = [1, 3, 2]，causal = True", "lengths = [1, 3, 2], causal = True"),
             (np.array([1, 3, 2]), True)),
    ]
    check_function(learner, _packed_reference, cases, mistakes=_packed_variants, name=PACKED_NAME,
                   hint=PACKED_HINT, lang=lang, check_dtype=True, dtype_hint=NOT_BOOL)


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


from .fresh import fresh_on_call  # noqa: E402 - last, once the module is complete

fresh_on_call(__name__)
