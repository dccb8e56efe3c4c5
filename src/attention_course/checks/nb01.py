"""Checks for the exercises of notebook 01 (the library analogy).

Each check runs the learner's function on inputs chosen so that the classic mistakes give a
different answer: rows of very different scale (one maximum for the whole array instead of one
per row), logits that overflow a naive ``exp``, float32 input, batches of rows, L ≠ S. Where an
exercise asks the learner to write what the library already has, the check watches the calls made
while the learner's function runs and fails if the library's function is called, whatever name it
is bound to.
"""

from __future__ import annotations

import numpy as np

from .. import examples
from ..softmax import softmax
from . import forbidden
from .cases import Case, check_function
from .comparison import compare
from .language import fail, get_language
from .watcher import run_learner

__all__ = [
    "check_score_increase",
    "check_scores_for",
    "check_stable_softmax",
    "check_zero_temperature_lookup",
]

_rng = np.random.default_rng(2024)
_MATRIX_3x4 = np.round(_rng.normal(size=(3, 4)) * 2, 2)
_BATCH_2x3x5 = np.round(_rng.normal(size=(2, 3, 5)) * 2, 2)
_SHELF_KEYS = np.round(_rng.normal(size=(6, 3)), 2)        # (S=6, d_k=3)
_SHELF_VALUES = np.round(_rng.normal(size=(6, 2)), 2)      # (S=6, d_v=2)
_SHELF_QUERIES = np.round(_rng.normal(size=(5, 3)), 2)     # (L=5, d_k=3)

#: Rows whose scales differ by far more than exp can span: one shift for the whole array sends
#: whole rows to exp(-1000) = 0, and 0 / 0 is NaN.
_DIFFERENT_SCALES = np.array([[1000.0, 999.0, 998.0], [1.0, 0.0, -1.0], [-1000.0, -1001.0, -1002.0]])


# --------------------------------------------------------------------------- exercise 1
def check_stable_softmax(fn, *, lang: str | None = None) -> None:
    """Check a learner's ``stable_softmax(x)``: softmax along the last axis, overflow-safe.

    Parameters
    ----------
    fn : callable
        ``fn(x) -> ndarray`` with ``x`` of shape (..., n); compared with the library's softmax
        along the last axis. It must not call (or be) the library's softmax.
    lang : {"zh", "en"}, optional
        Language of the message (default: the one set with ``checks.set_language``).

    Raises
    ------
    CheckFailed
        On the first input where ``fn`` differs: the scores of "it is a cat", equal scores, a single
        score, a 3×4 matrix (one softmax per row), logits of ±1e4, logits all near -1e4, a
        (2, 3, 5) batch, rows of very different scale, and float32 rows (one of them with
        logits that overflow float32's exp).
    """
    cases = [
        Case({"zh": "“它 是 一只 猫”的分数 [0.5, 0.3, 1.2, 3.0]",
              "en": "the scores of 'it is a cat' [0.5, 0.3, 1.2, 3.0]"},
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
        Case({"zh": "尺度相差很大的三行：[1000, 999, 998]、[1, 0, -1]、[-1000, -1001, -1002]",
              "en": "three rows of very different scale: [1000, 999, 998], [1, 0, -1], "
                    "[-1000, -1001, -1002]"},
             (_DIFFERENT_SCALES.copy(),)),
        Case({"zh": "float32 的“它 是 一只 猫”分数", "en": "the scores of 'it is a cat' in float32"},
             (examples.IT_CAT_SCORES.astype(np.float32),)),
        Case({"zh": "float32 的 logits [80, 90, 100]（float32 的 exp(100) 会溢出）",
              "en": "float32 logits [80, 90, 100] (exp(100) overflows in float32)"},
             (np.array([80.0, 90.0, 100.0], dtype=np.float32),)),
    ]
    check_function(fn, lambda x: softmax(x, axis=-1), cases,
                   name={"zh": "稳定的 softmax", "en": "stable softmax"},
                   hint={"zh": "exp 会溢出，但给一行里的每个分数减去同一个数，softmax 不变。"
                               "减哪个数才能让每一行都安全：整个数组的，还是每一行自己的？"
                               "沿最后一个轴求和时，形状要能和原数组对齐。",
                         "en": "exp overflows, but subtracting one number from every score of a row "
                               "leaves its softmax unchanged. Which number keeps every row safe: "
                               "one for the whole array, or one per row? When you sum along the "
                               "last axis, keep a shape that lines up with the input."},
                   forbidden=forbidden.of("softmax"), lang=lang)


# --------------------------------------------------------------------------- exercise 2
_SCORES_FOR_NAME = {"zh": "把 softmax 倒过来", "en": "softmax run backwards"}
_SCORES_FOR_HINT = {
    "zh": "softmax 先取 exp 再除以总和；哪个运算能把 exp 撤销？给一行加上同一个数，权重不变，"
          "所以可以把每一行挪到最大值为 0 的位置。批量输入时，每一行各挪各的。",
    "en": "softmax takes exp, then divides by the total; which operation undoes exp? Adding one "
          "number to a row leaves its weights alone, so each row can be shifted until its largest "
          "score is 0. In a batch, each row gets its own shift.",
}


def _scores_for_cases():
    w = examples.IT_CAT_ARTICLE_WEIGHTS
    return [
        Case({"zh": "凭眼估的权重 [0.05, 0.04, 0.13, 0.78]",
              "en": "weights guessed by eye [0.05, 0.04, 0.13, 0.78]"}, (w.copy(),)),
        Case({"zh": "平均分配 [0.25, 0.25, 0.25, 0.25]", "en": "an even split [0.25, 0.25, 0.25, 0.25]"},
             (np.full(4, 0.25),)),
        Case({"zh": "几乎全给一个词 [0.998, 0.001, 0.001]",
              "en": "almost everything to one word [0.998, 0.001, 0.001]"},
             (np.array([0.998, 0.001, 0.001]),)),
        Case({"zh": "两行：[0.7, 0.2, 0.1] 和 [1e-6, 0.4999995, 0.4999995]",
              "en": "two rows: [0.7, 0.2, 0.1] and [1e-6, 0.4999995, 0.4999995]"},
             (np.array([[0.7, 0.2, 0.1], [1e-6, 0.5 - 5e-7, 0.5 - 5e-7]]),)),
        Case({"zh": "float32 的凭眼估的权重", "en": "weights guessed by eye, in float32"},
             (w.astype(np.float32),)),
    ]


def check_scores_for(fn, *, lang: str | None = None) -> None:
    """Check a learner's ``scores_for(weights)``: scores whose softmax gives ``weights`` back.

    Parameters
    ----------
    fn : callable
        ``fn(weights) -> ndarray`` with ``weights`` of shape (..., n), rows positive and summing
        to 1. The result must have the same shape, its softmax along the last axis must equal
        ``weights``, and the largest score of every row must be 0.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        On the first input where the shape, the softmax of the answer or the maxima of its rows
        are wrong: weights guessed by eye, an even split, a nearly one-hot row, two rows of very
        different scale, and float32 weights.
    """
    lang = get_language(lang)
    prefix = {"zh": {"softmax": "你的分数做完 softmax 后不等于这组权重：",
                     "max": "每一行最大的分数应为 0："},
              "en": {"softmax": "the softmax of your scores is not these weights: ",
                     "max": "the largest score of each row should be 0: "}}[lang]
    cases = _scores_for_cases()
    for case in cases:
        weights = case.args[0]
        got = run_learner(fn, weights.copy(), name=_SCORES_FOR_NAME, label=case.label,
                          hint=_SCORES_FOR_HINT, lang=lang)
        reason = None
        if np.shape(got) != weights.shape:
            reason = {"zh": f"形状是 {np.shape(got)}，应为 {weights.shape}",
                      "en": f"shape {np.shape(got)}, expected {weights.shape}"}[lang]
        else:
            got = np.asarray(got)
            got = got if np.issubdtype(got.dtype, np.floating) else got.astype(float)
            reason = compare(softmax(got, axis=-1), weights, lang=lang)
            if reason is not None:
                reason = prefix["softmax"] + reason
            else:
                top = got.max(axis=-1)                      # one maximum per row
                top = float(top) if top.ndim == 0 else top
                reason = compare(top, 0.0 if isinstance(top, float) else np.zeros_like(top), lang=lang)
                reason = None if reason is None else prefix["max"] + reason
        if reason is not None:
            fail(_SCORES_FOR_NAME, case.label, reason, hint=_SCORES_FOR_HINT, lang=lang)
    print({"zh": f"✓ {_SCORES_FOR_NAME['zh']}：{len(cases)} 个测试用例全部通过",
           "en": f"✓ {_SCORES_FOR_NAME['en']}: all {len(cases)} cases pass"}[lang])


# --------------------------------------------------------------------------- exercise 3
def _score_increase_reference(scores, k, target):
    """The increase found by search, not by formula: the wheel learners install holds no answer.

    Word k's weight grows with the increase, so bisection on the library's softmax finds it; 200
    halvings of a bracket of width 2^11 leave far less than float64's spacing.
    """
    s = np.asarray(scores, dtype=float)

    def weight(delta):
        shifted = s.copy()
        shifted[k] += delta
        return softmax(shifted)[k]

    lo, hi = -1.0, 1.0
    while weight(lo) > target:
        lo *= 2
    while weight(hi) < target:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if weight(mid) < target else (lo, mid)
    return float((lo + hi) / 2)


def check_score_increase(fn, *, lang: str | None = None) -> None:
    """Check a learner's ``score_increase(scores, k, target)``: how much score ``k`` must rise.

    Parameters
    ----------
    fn : callable
        ``fn(scores, k, target) -> float`` with ``scores`` of shape (n,); after adding the
        result to ``scores[k]``, the softmax weight of word ``k`` must be ``target``.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        On the first input where ``fn`` differs from the exact increase: "cat" raised to 0.9,
        "it" raised to 0.5, "cat" lowered to 0.5 (a negative answer), two equal scores, scores
        near 1000 (a plain ``exp`` overflows), and float32 scores.
    """
    s = examples.IT_CAT_SCORES
    cases = [
        Case({"zh": "“它 是 一只 猫”的分数，让“猫”（k = 3）的权重变成 0.9",
              "en": "the scores of 'it is a cat', 'cat' (k = 3) to weight 0.9"}, (s.copy(), 3, 0.9)),
        Case({"zh": "“它 是 一只 猫”的分数，让“它”（k = 0）的权重变成 0.5",
              "en": "the scores of 'it is a cat', 'it' (k = 0) to weight 0.5"}, (s.copy(), 0, 0.5)),
        Case({"zh": "“它 是 一只 猫”的分数，让“猫”（k = 3）的权重降到 0.5（答案为负）",
              "en": "the scores of 'it is a cat', 'cat' (k = 3) down to weight 0.5 (a negative answer)"},
             (s.copy(), 3, 0.5)),
        Case({"zh": "两个相等的分数 [0, 0]，k = 0，权重 0.75",
              "en": "two equal scores [0, 0], k = 0, weight 0.75"}, (np.zeros(2), 0, 0.75)),
        Case({"zh": "接近 1000 的分数 [1000, 999, 998]，k = 2，权重 0.5",
              "en": "scores near 1000 [1000, 999, 998], k = 2, weight 0.5"},
             (np.array([1000.0, 999.0, 998.0]), 2, 0.5)),
        Case({"zh": "float32 的“它 是 一只 猫”分数，k = 1，权重 0.2",
              "en": "the scores of 'it is a cat' in float32, k = 1, weight 0.2"},
             (s.astype(np.float32), 1, 0.2)),
    ]
    check_function(fn, _score_increase_reference, cases,
                   name={"zh": "分数要提高多少", "en": "how much to raise a score"},
                   hint={"zh": "别忘了预算：第 k 个词的权重变大，其余的权重都会变小，所以不能只看"
                               "它自己的权重涨了几倍。试着比较第 k 个词的权重和其余权重之和，"
                               "分数加 δ 前后这个比值怎样变？分数很大时，也别让 exp 溢出。",
                         "en": "remember the budget: as word k's weight grows, all the others shrink, "
                               "so it is not enough to ask by what factor its own weight grows. "
                               "Compare word k's weight with the total of the others: how does that "
                               "ratio change when δ is added to score k? With large scores, do not "
                               "let exp overflow."},
                   lang=lang)


# --------------------------------------------------------------------------- exercise 4
def _zero_temperature_reference(queries, keys, values):
    scores = np.asarray(queries) @ np.asarray(keys).T                  # (L, S)
    top = scores == scores.max(axis=-1, keepdims=True)                  # each row's tied best books
    return (top / top.sum(axis=-1, keepdims=True)) @ np.asarray(values)  # (L, d_v)


def check_zero_temperature_lookup(fn, *, lang: str | None = None) -> None:
    """Check a learner's ``zero_temperature_lookup(queries, keys, values)``: the limit T → 0.

    Parameters
    ----------
    fn : callable
        ``fn(queries, keys, values) -> ndarray`` with ``queries`` (L, d_k), ``keys`` (S, d_k)
        and ``values`` (S, d_v), returning (L, d_v): each question's note when its weights are
        the softmax of its raw dot-product scores divided by a temperature T that tends to 0.
        The function must contain no loop and must not call (or be) the library's softmax or
        attention.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        On the first shelf where ``fn`` differs: the course's shelf with its three questions
        (one of them ties two books), that tied question alone (L = 1), three books tied, a
        question that scores every book alike, questions whose best scores differ from row to
        row, a best score ahead by only 0.001, values wider than the keys, a seeded random shelf
        (L = 5, S = 6) and the course's shelf in float32; or when the function loops or calls the
        library's softmax or attention.
    """
    questions = np.array(list(examples.QUESTIONS["en"].values()))       # (L=3, d_k=4)
    keys, values = examples.BOOK_KEYS, examples.BOOK_VALUES
    diagonal_keys = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [-1.0, 0.0]])     # (S=4, d_k=2)
    diagonal_values = np.array([[1.0, 0.0, 3.0], [0.0, 1.0, -3.0], [2.0, 2.0, 0.0], [5.0, 5.0, 5.0]])
    cases = [
        Case({"zh": "书架与它的三个问题（L = 3，S = 4；“猫和量子物理”有两本书并列第一）",
              "en": "the shelf with its three questions (L = 3, S = 4; 'Cats and quantum physics' "
                    "ties two books)"},
             (questions.copy(), keys.copy(), values.copy())),
        Case({"zh": "只有一个问题“猫和量子物理”（L = 1，两本书并列第一）",
              "en": "one question alone, 'Cats and quantum physics' (L = 1, two books tie)"},
             (questions[2:3].copy(), keys.copy(), values.copy())),
        Case({"zh": "三本书并列第一：问题 [1, 1]，分数 1、1、1、-1",
              "en": "three books tie: question [1, 1], scores 1, 1, 1, -1"},
             (np.array([[1.0, 1.0]]), diagonal_keys, diagonal_values)),
        Case({"zh": "问题 [0, 0]：每本书的分数都是 0",
              "en": "question [0, 0]: every book scores 0"},
             (np.zeros((1, 2)), diagonal_keys, diagonal_values)),
        Case({"zh": "两个问题，各行最高分不同（2 和 0.1）",
              "en": "two questions whose best scores differ (2 and 0.1)"},
             (np.array([[2.0, 0.0], [0.0, 0.1]]), diagonal_keys, diagonal_values)),
        Case({"zh": "第一名只领先 0.001：分数 2.000 和 1.999",
              "en": "the best book ahead by only 0.001: scores 2.000 and 1.999"},
             (np.array([[2.0, 1.999]]), np.eye(2), np.array([[1.0, 0.0], [0.0, 1.0]]))),
        Case({"zh": "随机书架：L = 5，S = 6，d_k = 3，d_v = 2",
              "en": "a random shelf: L = 5, S = 6, d_k = 3, d_v = 2"},
             (_SHELF_QUERIES.copy(), _SHELF_KEYS.copy(), _SHELF_VALUES.copy())),
        Case({"zh": "float32 的书架与三个问题", "en": "the shelf and its three questions in float32"},
             (questions.astype(np.float32), keys.astype(np.float32), values.astype(np.float32))),
    ]
    check_function(fn, _zero_temperature_reference, cases,
                   name={"zh": "温度趋于 0 的查找", "en": "the lookup at T → 0"},
                   hint={"zh": "两个权重之比是 e 的（分数之差 / T）次方：T → 0 时，比这一行最高分低的书，"
                               "权重和最高分那本相比趋于 0；并列最高分的几本书权重始终相等，"
                               "而权重加起来总是 1。每个问题只看自己那一行的最高分，最后混合的是值，不是键。",
                         "en": "the ratio of two weights is e to the power (score difference / T): as "
                               "T → 0, a book below its row's best score gets a weight that vanishes "
                               "next to the best one's; books tied for the best keep equal weights, "
                               "and the weights always sum to 1. Each question has its own best score; "
                               "mix the values, not the keys."},
                   forbidden=forbidden.of("softmax", "attention"), no_loops=True, lang=lang)


from .fresh import fresh_on_call  # noqa: E402 - last, once the module is complete

fresh_on_call(__name__)
