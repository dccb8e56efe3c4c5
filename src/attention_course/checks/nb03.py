"""Checks for the exercises of notebook 03 (scaled dot-product attention, the math).

Each check compares the learner's function with the library on several inputs, edge cases
included. Before that, it tries the function on one small probe input and compares the answer
with the usual mistakes (no scale, softmax over the wrong axis, the upper triangle, ...): when
one matches, the failure message names that mistake instead of giving a general hint.
"""

from __future__ import annotations

import numpy as np

from ..attention import causal_mask, padding_mask, scaled_dot_product_attention
from ..softmax import softmax
from ._core import Case, check_function

__all__ = ["check_attention", "check_causal_mask", "check_padding_mask", "check_stable_softmax"]


def _label(zh: str, en: str) -> dict:
    return {"zh": zh, "en": en}


def _matching_hint(learner, args, variants, default):
    """The hint of the first known mistake that ``learner(*args)`` reproduces, else ``default``.

    An unfinished stub's NotImplementedError goes through; any other error is left for
    :func:`check_function`, which reports it together with the input that caused it.
    """
    if not callable(learner):
        return default
    try:
        with np.errstate(all="ignore"):
            got = learner(*args)
    except NotImplementedError:
        raise
    except Exception:
        return default
    for wrong, hint in variants:
        try:
            g = np.asarray(got)
            same = g.shape == wrong.shape and g.dtype.kind == wrong.dtype.kind and (
                np.array_equal(g, wrong) if wrong.dtype == np.bool_
                else np.allclose(g, wrong, rtol=1e-6, atol=1e-9, equal_nan=True))
        except Exception:
            same = False
        if same:
            return hint
    return default


def _rng_qkv(seed, L, S, E, Ev, batch=(), spread=1.0):
    rng = np.random.default_rng(seed)
    q = rng.normal(scale=spread, size=(*batch, L, E))
    k = rng.normal(scale=spread, size=(*batch, S, E))
    v = rng.normal(size=(*batch, S, Ev))
    return q, k, v


# --- exercise 1: scaled dot-product attention --------------------------------------------------

ATTENTION_NAME = _label("练习 1（缩放点积注意力）", "Exercise 1 (scaled dot-product attention)")
ATTENTION_HINT = _label(
    "按四步来：scores = q @ kᵀ，转置只交换 k 的最后两个轴：np.swapaxes(k, -1, -2)"
    "（带批次轴时 .T 会把所有轴都倒过来）；除以 √d_k，d_k = q.shape[-1]；"
    "softmax 沿最后一个轴（每个查询一行）；最后乘 v。",
    "Follow the four steps: scores = q @ kᵀ (swap k's last two axes: np.swapaxes(k, -1, -2)); "
    "with leading batch axes, .T would reverse all of them; divide by √d_k with "
    "d_k = q.shape[-1]; softmax along the last axis (one row per query); then multiply by v.",
)


def _attention_variants(q, k, v):
    E = q.shape[-1]
    kt = np.swapaxes(k, -1, -2)
    return [
        (softmax(q @ kt) @ v, _label(
            "你的结果正好是「没有除以 √d_k」的注意力：分数要先除以 √d_k，再做 softmax。",
            "Your result is exactly attention without the 1/√d_k scale: divide the scores by "
            "√d_k before the softmax.")),
        (softmax(q @ kt / E) @ v, _label(
            "你的结果是把分数除以了 d_k：要除以它的平方根 √d_k，而不是 d_k 本身。",
            "Your result divides the scores by d_k: divide by its square root, √d_k, instead.")),
        (softmax(q @ kt / np.sqrt(E), axis=-2) @ v, _label(
            "你的 softmax 沿错了轴（把每个键的那一列归一化了）：应该是每个查询的那一行"
            "（axis=-1）加起来等于 1。",
            "Your softmax runs along the wrong axis (it normalises each key's column): each "
            "query's row (axis=-1) must sum to 1.")),
        (softmax(q @ k / np.sqrt(E)) @ v, _label(
            "你算的是 q @ k 而不是 q @ kᵀ：k 恰好是方阵时不会报错，但数值是错的；"
            "不是方阵时形状就对不上。要交换 k 的最后两个轴。",
            "You computed q @ k instead of q @ kᵀ: when k happens to be square nothing raises but "
            "the numbers are wrong; otherwise the shapes do not fit. Swap k's last two axes.")),
    ]


def check_attention(learner, lang: str | None = None) -> None:
    """Check ``learner(q, k, v) -> softmax(q kᵀ / √d_k) v`` against the library.

    Parameters
    ----------
    learner : callable
        ``learner(q, k, v)`` with q: (..., L, E), k: (..., S, E), v: (..., S, Ev), returning
        (..., L, Ev).
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the input that differs: L ≠ S, E ≠ Ev, leading batch axes, large scores.

    Examples
    --------
    >>> check_attention(scaled_dot_product_attention, lang="en")
    ✓ Exercise 1 (scaled dot-product attention): all 5 cases pass
    """
    probe = _rng_qkv(7, 2, 4, 4, 3)          # L=2, S=4=E: q @ k runs, so its numbers can be seen
    hint = _matching_hint(learner, probe, _attention_variants(*probe), ATTENTION_HINT)
    cases = [
        Case(_label("L = S = 3 个位置，E = 4", "L = S = 3 positions, E = 4"),
             _rng_qkv(0, 3, 3, 4, 4)),
        Case(_label("L = 2 个查询，S = 5 个键（L ≠ S），E = 3，Ev = 2",
                    "L = 2 queries, S = 5 keys (L ≠ S), E = 3, Ev = 2"),
             _rng_qkv(1, 2, 5, 3, 2)),
        Case(_label("L = 2，S = 4，E = 4（k 是方阵）", "L = 2, S = 4, E = 4 (k is square)"),
             _rng_qkv(2, 2, 4, 4, 3)),
        Case(_label("带批次轴：q 的形状为 (2, 3, 4, 5)",
                    "leading batch axes: q of shape (2, 3, 4, 5)"),
             _rng_qkv(3, 4, 6, 5, 2, batch=(2, 3))),
        Case(_label("E = 64，分数很大（不缩放时 softmax 会饱和）",
                    "E = 64, large scores (the softmax saturates without the scale)"),
             _rng_qkv(4, 3, 4, 64, 2, spread=2.0)),
    ]
    check_function(learner, scaled_dot_product_attention, cases, name=ATTENTION_NAME,
                   hint=hint, lang=lang)


# --- exercise 2: causal mask ----------------------------------------------------------------

CAUSAL_NAME = _label("练习 2（因果掩码）", "Exercise 2 (causal mask)")
CAUSAL_HINT = _label(
    "第 i 个查询可以看第 0..i 个键：mask[i, j] = (j <= i)，形状 (L, S)，dtype 为 bool，"
    "True 表示「参与」。L ≠ S 时三角形仍然从左上角开始。",
    "Query i may look at keys 0..i: mask[i, j] = (j <= i), shape (L, S), dtype bool, True "
    "meaning 'takes part'. When L ≠ S the triangle still starts in the top-left corner.",
)


def _causal_variants(L, S):
    right = causal_mask(L, S)
    not_bool = _label(
        "数值对了，但 dtype 不是 bool：0/1 的整数或浮点数掩码会被当成加到分数上的数，"
        "而不是「参与 / 不参与」。",
        "The values are right but the dtype is not bool: a 0/1 integer or float mask would be "
        "read as numbers added to the scores, not as 'takes part or not'.")
    return [
        (~right, _label(
            "你的掩码正好反了：这门课约定 True 表示「参与」（和 PyTorch 的 "
            "scaled_dot_product_attention 一样），不是「被挡住」。",
            "Your mask is exactly inverted: in this course True means 'takes part' (as in "
            "PyTorch's scaled_dot_product_attention), not 'blocked'.")),
        (np.triu(np.ones((L, S), dtype=bool)), _label(
            "你给出的是上三角：那等于让每个查询去看「未来」的键。"
            "因果掩码保留的是下三角（j <= i）。",
            "You returned the upper triangle, which lets each query see the future. A causal "
            "mask keeps the lower triangle (j <= i).")),
        (np.tri(L, S, k=-1, dtype=bool), _label(
            "你的掩码把对角线也挡住了：一个词可以看它自己（j <= i，而不是 j < i）。",
            "Your mask blocks the diagonal too: a word may look at itself (j <= i, not j < i).")),
        (np.tri(L, S, k=S - L, dtype=bool), _label(
            "你的三角形对齐在右下角：L ≠ S 时，这门课（和 PyTorch 的 is_causal 一样）"
            "让它从左上角开始，第 i 个查询看第 0..i 个键。",
            "Your triangle is aligned to the bottom-right corner: when L ≠ S this course (like "
            "PyTorch's is_causal) starts it in the top-left corner, query i seeing keys 0..i.")),
        (right.astype(int), not_bool),
        (right.astype(float), not_bool),
    ]


def check_causal_mask(learner, lang: str | None = None) -> None:
    """Check ``learner(L, S) -> (L, S) bool``, True where query i may see key j (j <= i).

    Parameters
    ----------
    learner : callable
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the (L, S) that differs.

    Examples
    --------
    >>> check_causal_mask(causal_mask, lang="en")
    ✓ Exercise 2 (causal mask): all 5 cases pass
    """
    hint = _matching_hint(learner, (3, 5), _causal_variants(3, 5), CAUSAL_HINT)
    cases = [
        Case(_label("L = S = 4", "L = S = 4"), (4, 4)),
        Case(_label("L = S = 1（只有一个词）", "L = S = 1 (a single word)"), (1, 1)),
        Case(_label("L = 3 个查询，S = 5 个键（L < S）", "L = 3 queries, S = 5 keys (L < S)"),
             (3, 5)),
        Case(_label("L = 5 个查询，S = 2 个键（L > S）", "L = 5 queries, S = 2 keys (L > S)"),
             (5, 2)),
        Case(_label("L = S = 7", "L = S = 7"), (7, 7)),
    ]
    check_function(learner, causal_mask, cases, name=CAUSAL_NAME, hint=hint, lang=lang)


# --- exercise 3: padding mask ---------------------------------------------------------------

PADDING_NAME = _label("练习 3（填充掩码）", "Exercise 3 (padding mask)")
PADDING_HINT = _label(
    "长度为 n 的句子，前 n 个位置（0..n-1）是真实的词：mask[b, 0, j] = (j < lengths[b])。"
    "形状是 (B, 1, S)，中间那个长度为 1 的轴让它能广播到每个查询上。",
    "A sentence of length n has real words at positions 0..n-1: mask[b, 0, j] = "
    "(j < lengths[b]). The shape is (B, 1, S); the middle axis of size 1 lets it broadcast "
    "over the queries.",
)


def _padding_variants(lengths, S):
    lengths = np.asarray(lengths)
    pos = np.arange(S)
    return [
        ((pos <= lengths[:, None])[:, None, :], _label(
            "差了一位：你多放进了一个填充位。长度为 n 时真实位置是 0..n-1，所以用 j < n，"
            "不是 j <= n。",
            "Off by one: you let one padding position in. With length n the real positions "
            "are 0..n-1, so use j < n, not j <= n.")),
        ((pos < lengths[:, None] - 1)[:, None, :], _label(
            "差了一位：你把最后一个真实的词挡住了。长度为 n 时真实位置是 0..n-1（j < n）。",
            "Off by one: you block the last real word. With length n the real positions are "
            "0..n-1 (j < n).")),
        ((pos >= lengths[:, None])[:, None, :], _label(
            "你的掩码反了：True 表示「真实的词，参与计算」，填充位才是 False。",
            "Your mask is inverted: True marks the real words (they take part); padding is "
            "False.")),
        (pos < lengths[:, None], _label(
            "数值对了，但形状是 (B, S)：要在中间加一个长度为 1 的轴，变成 (B, 1, S)，"
            "例如 mask[:, None, :]。",
            "The values are right but the shape is (B, S): add a middle axis of size 1 to get "
            "(B, 1, S), e.g. mask[:, None, :].")),
    ]


def check_padding_mask(learner, lang: str | None = None) -> None:
    """Check ``learner(lengths, S) -> (B, 1, S) bool``, True for the real (unpadded) keys.

    Parameters
    ----------
    learner : callable
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the lengths that differ.

    Examples
    --------
    >>> check_padding_mask(padding_mask, lang="en")
    ✓ Exercise 3 (padding mask): all 4 cases pass
    """
    hint = _matching_hint(learner, (np.array([2, 4]), 5), _padding_variants([2, 4], 5),
                          PADDING_HINT)
    cases = [
        Case(_label("lengths = [3, 1]，S = 4", "lengths = [3, 1], S = 4"), (np.array([3, 1]), 4)),
        Case(_label("lengths = [5]，S = 5（没有填充）", "lengths = [5], S = 5 (no padding)"),
             (np.array([5]), 5)),
        Case(_label("lengths = [0, 2]，S = 2（有一个空句子）",
                    "lengths = [0, 2], S = 2 (an empty sentence)"),
             (np.array([0, 2]), 2)),
        Case(_label("lengths = [4, 6, 1]，S = 6", "lengths = [4, 6, 1], S = 6"),
             (np.array([4, 6, 1]), 6)),
    ]
    check_function(learner, padding_mask, cases, name=PADDING_NAME, hint=hint, lang=lang)


# --- exercise 4: stable softmax -------------------------------------------------------------

SOFTMAX_NAME = _label("练习 4（稳定的 softmax）", "Exercise 4 (stable softmax)")
SOFTMAX_HINT = _label(
    "沿最后一个轴：先减去每行的最大值再 exp；整行都是 -inf 时最大值也是 -inf，这时改成减 0；"
    "和为 0 的行输出 0。结果的 dtype 要和输入一样（float32 进，float32 出）。",
    "Along the last axis: subtract each row's maximum before exp; when a whole row is -inf its "
    "maximum is -inf too, so shift by 0 instead; rows that sum to 0 give 0. Keep the input's "
    "dtype (float32 in, float32 out).",
)


def _softmax_variants(x):
    with np.errstate(all="ignore"):
        e = np.exp(x)
        naive = e / e.sum(-1, keepdims=True)
        shifted = np.exp(x - x.max(-1, keepdims=True))
        no_guard = shifted / shifted.sum(-1, keepdims=True)
    return [
        (naive, _label(
            "你的结果和直接 exp 的朴素 softmax 一样：分数大时 exp 溢出成 inf，inf/inf 得到 NaN。"
            "先减去每行的最大值。",
            "Your result matches the naive softmax: exp of a large score overflows to inf, and "
            "inf/inf is NaN. Subtract each row's maximum first.")),
        (no_guard, _label(
            "减最大值这一步对了，但整行都是 -inf（全被挡住）时，-inf - (-inf) 是 NaN。"
            "这种行的最大值换成 0，并让和为 0 的行输出 0。",
            "You subtract the maximum, but on a row that is entirely -inf (fully masked) "
            "-inf - (-inf) is NaN. Use 0 as that row's maximum and give rows that sum to 0 a "
            "result of 0.")),
        (softmax(x, axis=0), _label(
            "你的 softmax 沿错了轴：应该是每一行（最后一个轴，axis=-1）加起来等于 1。",
            "Your softmax runs along the wrong axis: each row (the last axis, axis=-1) must sum "
            "to 1.")),
    ]


def check_stable_softmax(learner, lang: str | None = None) -> None:
    """Check ``learner(x)``: softmax along the last axis, stable, zeros for all -inf rows.

    Parameters
    ----------
    learner : callable
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        Naming the input that differs: large logits, float32, a fully masked row, a batch.

    Examples
    --------
    >>> check_stable_softmax(softmax, lang="en")
    ✓ Exercise 4 (stable softmax): all 5 cases pass
    """
    probe = np.array([[1000.0, 999.0, 0.0], [1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf]])
    hint = _matching_hint(learner, (probe,), _softmax_variants(probe), SOFTMAX_HINT)
    rng = np.random.default_rng(0)
    cases = [
        Case(_label("文章里的分数 [0.5, 0.3, 1.2, 3.0]",
                    "the article's scores [0.5, 0.3, 1.2, 3.0]"),
             (np.array([0.5, 0.3, 1.2, 3.0]),)),
        Case(_label("很大的分数 [[1e4, 0, -1e4], [100, 101, 102]]",
                    "large logits [[1e4, 0, -1e4], [100, 101, 102]]"),
             (np.array([[1e4, 0.0, -1e4], [100.0, 101.0, 102.0]]),)),
        Case(_label("float32 的分数 [100, 90, 80]", "float32 logits [100, 90, 80]"),
             (np.array([100.0, 90.0, 80.0], dtype=np.float32),)),
        Case(_label("第二行全被挡住：[[0, 1, -inf], [-inf, -inf, -inf]]",
                    "a fully masked second row: [[0, 1, -inf], [-inf, -inf, -inf]]"),
             (np.array([[0.0, 1.0, -np.inf], [-np.inf, -np.inf, -np.inf]]),)),
        Case(_label("形状 (2, 3, 4) 的一批分数", "a batch of scores of shape (2, 3, 4)"),
             (rng.normal(size=(2, 3, 4)),)),
    ]
    check_function(learner, softmax, cases, name=SOFTMAX_NAME, hint=hint, lang=lang,
                   check_dtype=True)
