"""Checks for the exercises of notebook 01 (the library analogy).

Each check runs the learner's function on several inputs - the article's scores, batches of
rows, logits large enough to overflow a naive ``exp``, shelves whose values are wider than their
keys - and compares with the library (:func:`attention_course.softmax`,
:func:`attention_course.scaled_dot_product_attention`).
"""

from __future__ import annotations

import numpy as np

from .. import examples
from ..attention import scaled_dot_product_attention
from ..softmax import softmax
from ._core import Case, check_function

_rng = np.random.default_rng(2024)
_MATRIX_3x4 = np.round(_rng.normal(size=(3, 4)) * 2, 2)
_BATCH_2x3x5 = np.round(_rng.normal(size=(2, 3, 5)) * 2, 2)
_SHELF_KEYS = np.round(_rng.normal(size=(6, 3)), 2)        # (S=6, E=3)
_SHELF_VALUES = np.round(_rng.normal(size=(6, 2)), 2)      # (S=6, Ev=2)
_SHELF_QUERIES = np.round(_rng.normal(size=(5, 3)), 2)  # (L=5, E=3)

_SOFTMAX_HINT = {
    "zh": "先从每一行减去该行的最大值再取 exp（softmax 结果不变，但 exp 不会溢出）；"
          "沿最后一个轴求和，并用 keepdims=True 让形状能对齐。",
    "en": "subtract each row's maximum before exp (the softmax does not change, but exp cannot "
          "overflow); sum along the last axis with keepdims=True so the shapes line up.",
}


def check_stable_softmax(fn, *, lang: str | None = None) -> None:
    """Check a learner's ``stable_softmax(x)``: softmax along the last axis, overflow-safe.

    Parameters
    ----------
    fn : callable
        ``fn(x) -> ndarray`` with ``x`` of shape (..., n); must match
        ``attention_course.softmax(x, axis=-1)``.
    lang : {"zh", "en"}, optional
        Language of the message (default: the one set with ``checks.set_language``).

    Raises
    ------
    CheckFailed
        On the first input where ``fn`` differs: the article's scores, equal scores, a single
        score, a 3×4 matrix (one softmax per row), logits of ±1e4, logits all near -1e4, and a
        (2, 3, 5) batch.

    Examples
    --------
    >>> from attention_course import softmax
    >>> check_stable_softmax(lambda x: softmax(x, axis=-1), lang="en")
    ✓ stable softmax: all 7 cases pass
    """
    cases = [
        Case({"zh": "文章的分数 [0.5, 0.3, 1.2, 3.0]",
              "en": "the article's scores [0.5, 0.3, 1.2, 3.0]"},
             (examples.IT_CAT_SCORES.copy(),)),
        Case({"zh": "三个相等的分数 [1, 1, 1]", "en": "three equal scores [1, 1, 1]"},
             (np.ones(3),)),
        Case({"zh": "只有一个分数 [5.0]", "en": "a single score [5.0]"}, (np.array([5.0]),)),
        Case({"zh": "3×4 矩阵：每一行各做一次 softmax", "en": "a 3×4 matrix: one softmax per row"},
             (_MATRIX_3x4.copy(),)),
        Case({"zh": "很大的 logits [1e4, 0, -1e4]", "en": "large logits [1e4, 0, -1e4]"},
             (np.array([1e4, 0.0, -1e4]),)),
        Case({"zh": "全都接近 -1e4 的 logits [-1e4, -1e4+1, -1e4+2]",
              "en": "logits all near -1e4: [-1e4, -1e4+1, -1e4+2]"},
             (np.array([-1e4, -1e4 + 1, -1e4 + 2]),)),
        Case({"zh": "形状 (2, 3, 5) 的一批分数", "en": "a batch of scores of shape (2, 3, 5)"},
             (_BATCH_2x3x5.copy(),)),
    ]
    check_function(fn, lambda x: softmax(x, axis=-1), cases,
                   name={"zh": "稳定的 softmax", "en": "stable softmax"},
                   hint=_SOFTMAX_HINT, lang=lang)


def check_softmax_with_temperature(fn, *, lang: str | None = None) -> None:
    """Check a learner's ``softmax_with_temperature(scores, T)``: softmax of ``scores / T``.

    Parameters
    ----------
    fn : callable
        ``fn(scores, T) -> ndarray``, softmax along the last axis; must match
        ``attention_course.softmax(scores, temperature=T)``.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        On the first input where ``fn`` differs: T = 1, 0.5, 2, 0.001 (scores become 3000 -
        an unshifted ``exp`` overflows) and a 2×4 matrix with T = 3.

    Examples
    --------
    >>> from attention_course import softmax
    >>> check_softmax_with_temperature(lambda s, T: softmax(s, temperature=T), lang="en")
    ✓ softmax with temperature: all 5 cases pass
    """
    s = examples.IT_CAT_SCORES
    cases = [
        Case({"zh": "T = 1，文章的分数", "en": "T = 1, the article's scores"}, (s.copy(), 1.0)),
        Case({"zh": "T = 0.5（更尖锐）", "en": "T = 0.5 (sharper)"}, (s.copy(), 0.5)),
        Case({"zh": "T = 2（更平缓）", "en": "T = 2 (flatter)"}, (s.copy(), 2.0)),
        Case({"zh": "T = 0.001（几乎就是精确查找，分数变成 3000）",
              "en": "T = 0.001 (almost an exact lookup; scores become 3000)"}, (s.copy(), 0.001)),
        Case({"zh": "2×4 矩阵，T = 3", "en": "a 2×4 matrix, T = 3"},
             (np.stack([s, s[::-1]]), 3.0)),
    ]
    check_function(fn, lambda x, T: softmax(x, temperature=T), cases,
                   name={"zh": "带温度的 softmax", "en": "softmax with temperature"},
                   hint={"zh": "温度是用来除分数的：softmax(scores / T)。T 越小越尖锐，"
                               "T 越大越平缓；除完以后仍要减去最大值。",
                         "en": "the temperature divides the scores: softmax(scores / T). A small "
                               "T sharpens, a large T flattens; still subtract the maximum "
                               "after dividing."},
                   lang=lang)


def _weight_ratio_reference(score_a, score_b):
    # Two words inside a longer row: the other words' scores must not matter.
    w = softmax(np.array([score_a, score_b, 0.3, -1.0]))
    return float(w[0] / w[1])


def check_weight_ratio(fn, *, lang: str | None = None) -> None:
    """Check a learner's ``weight_ratio(score_a, score_b)``: how many times more weight a gets.

    Parameters
    ----------
    fn : callable
        ``fn(score_a, score_b) -> float``: the ratio of the softmax weights of two words in the
        same row, whatever the other words' scores are.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        On the first pair where ``fn`` differs from the ratio measured in a real softmax row:
        猫 vs 一只 (3.0, 1.2), the reverse, equal scores, negative scores, and a zero score.

    Examples
    --------
    >>> import math
    >>> check_weight_ratio(lambda a, b: math.exp(a - b), lang="en")
    ✓ ratio of two weights: all 5 cases pass
    """
    cases = [
        Case({"zh": "「猫」3.0 对「一只」1.2", "en": "'cat' 3.0 vs 'a' 1.2"}, (3.0, 1.2)),
        Case({"zh": "反过来：1.2 对 3.0", "en": "the other way round: 1.2 vs 3.0"}, (1.2, 3.0)),
        Case({"zh": "相等的分数 2.0 对 2.0", "en": "equal scores 2.0 vs 2.0"}, (2.0, 2.0)),
        Case({"zh": "负分数 -1.0 对 -2.5", "en": "negative scores -1.0 vs -2.5"}, (-1.0, -2.5)),
        Case({"zh": "0.5 对 0.0", "en": "0.5 vs 0.0"}, (0.5, 0.0)),
    ]
    check_function(fn, _weight_ratio_reference, cases,
                   name={"zh": "两个权重之比", "en": "ratio of two weights"},
                   hint={"zh": "softmax 的分母对同一行里的每个词都一样，约掉它之后，比值只取决于"
                               "两个分数之差。",
                         "en": "the softmax denominator is the same for every word in a row; once "
                               "it cancels, the ratio depends only on the difference of the two "
                               "scores."},
                   lang=lang)


def _soft_lookup_reference(queries, keys, values):
    return scaled_dot_product_attention(queries, keys, values, scale=1.0)     # (L, Ev)


def check_soft_lookup(fn, *, lang: str | None = None) -> None:
    """Check a learner's ``soft_lookup(queries, keys, values)``: every question at once.

    Parameters
    ----------
    fn : callable
        ``fn(queries, keys, values) -> ndarray`` with ``queries`` (L, E), ``keys`` (S, E) and
        ``values`` (S, Ev), returning one blended note per question, (L, Ev). Scores are plain
        dot products (no scaling), softmax runs over the S books of each question; must match
        ``scaled_dot_product_attention(queries, keys, values, scale=1.0)``.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        On the first shelf where ``fn`` differs: the course's shelf with its three questions,
        one question alone (L = 1), values wider than the keys (Ev = 3, E = 2), a single book
        (S = 1), questions whose scores reach 1500, and a seeded random shelf (L = 5, S = 6,
        E = 3, Ev = 2).

    Examples
    --------
    >>> from attention_course import softmax
    >>> check_soft_lookup(lambda q, k, v: softmax(q @ k.T, axis=-1) @ v, lang="en")
    ✓ soft lookup: all 6 cases pass
    """
    questions = np.array(list(examples.QUESTIONS["en"].values()))       # (L=3, E=4)
    keys, values = examples.BOOK_KEYS, examples.BOOK_VALUES
    wide_keys = np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])          # (S=3, E=2)
    wide_values = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0], [0.5, 0.5, 0.0]])   # (S=3, Ev=3)
    cases = [
        Case({"zh": "书架与它的三个问题（L = 3,S = 4）",
              "en": "the shelf with its three questions (L = 3, S = 4)"},
             (questions.copy(), keys.copy(), values.copy())),
        Case({"zh": "只有一个问题「猫和量子物理」（L = 1，两本书并列第一）",
              "en": "one question alone, 'Cats and quantum physics' (L = 1, two books tie)"},
             (questions[2:3].copy(), keys.copy(), values.copy())),
        Case({"zh": "值比键宽：E = 2,Ev = 3", "en": "values wider than keys: E = 2, Ev = 3"},
             (np.array([[1.0, 0.5], [-0.5, 2.0]]), wide_keys, wide_values)),
        Case({"zh": "书架上只有一本书（S = 1）", "en": "a shelf with a single book (S = 1)"},
             (np.array([[0.3, -0.2], [2.0, 1.0]]), np.array([[1.0, 2.0]]),
              np.array([[4.0, 5.0, 6.0]]))),
        Case({"zh": "分数高达 1500 的问题（问题 × 500）",
              "en": "questions whose scores reach 1500 (questions × 500)"},
             (questions * 500, keys.copy(), values.copy())),
        Case({"zh": "随机书架：L = 5,S = 6,E = 3,Ev = 2",
              "en": "a random shelf: L = 5, S = 6, E = 3, Ev = 2"},
             (_SHELF_QUERIES.copy(), _SHELF_KEYS.copy(), _SHELF_VALUES.copy())),
    ]
    check_function(fn, _soft_lookup_reference, cases,
                   name={"zh": "软查找", "en": "soft lookup"},
                   hint={"zh": "分数 = 每个问题和每个键的点积（不要缩放），每个问题在自己那一行的"
                               "所有书上做 softmax(axis=-1)，再用权重去混合值（不是键）；"
                               "每本书都算进去，不只是最好的那本。",
                         "en": "scores = dot product of every question with every key (no "
                               "scaling); softmax over each question's own row of books "
                               "(axis=-1), then mix the values (not the keys) - every book "
                               "counts, not only the best one."},
                   lang=lang)
