"""Checks for the exercises of notebook 06 (the quadratic cost).

Each check runs the learner's function on several inputs, compares with the cost model or the
mask of the library, and names the first input that differs.
"""

from __future__ import annotations

import numpy as np

from ..attention import sliding_window_mask
from ..cost import attention_flops, attention_memory_bytes, max_length_for_memory
from ._core import Case, check_function

GIB = 2**30


def check_predicted_flops(fn, lang: str | None = None) -> None:
    """Check ``fn(L, S, d)``: operations of one head's attention, L queries, S keys, width d.

    Examples
    --------
    >>> check_predicted_flops(lambda L, S, d: 4 * L * S * d, lang="en")
    ✓ FLOPs of attention: all 5 cases pass
    """
    cases = [
        Case({"zh": "L = S = 1024，d = 64（一个头）", "en": "L = S = 1024, d = 64 (one head)"},
             (1024, 1024, 64)),
        Case({"zh": "L = S = 4，d = 8", "en": "L = S = 4, d = 8"}, (4, 4, 8)),
        Case({"zh": "L = 3 个查询，S = 5 个键，d = 16（L ≠ S）",
              "en": "L = 3 queries, S = 5 keys, d = 16 (L ≠ S)"}, (3, 5, 16)),
        Case({"zh": "L = S = 1，d = 1（最小的情况）", "en": "L = S = 1, d = 1 (the smallest case)"},
             (1, 1, 1)),
        Case({"zh": "L = S = 80000，d = 128（很长的文本）",
              "en": "L = S = 80000, d = 128 (a very long text)"}, (80000, 80000, 128)),
    ]
    check_function(
        fn, lambda L, S, d: attention_flops(L, d, S=S), cases,
        name={"zh": "注意力的运算量", "en": "FLOPs of attention"},
        hint={"zh": "两次矩阵乘法都要算：Q @ Kᵀ 是 2·L·S·d（每一项一次乘法一次加法），"
                    "权重 @ V 又是 2·L·S·d。",
              "en": "Count both matrix products: Q @ Kᵀ is 2·L·S·d (one multiply and one add "
                    "per term), and weights @ V is another 2·L·S·d."},
        lang=lang, rtol=0, atol=0,
    )


def check_score_memory(fn, lang: str | None = None) -> None:
    """Check ``fn(n, heads, batch, dtype)``: bytes of all n×n score matrices held at once.

    Examples
    --------
    >>> check_score_memory(lambda n, heads, batch, dtype:
    ...     batch * heads * n * n * np.dtype(dtype).itemsize, lang="en")
    ✓ memory of the score matrices: all 6 cases pass
    """
    cases = [
        Case({"zh": "n = 1024，1 个头，batch 1，float32",
              "en": "n = 1024, 1 head, batch 1, float32"}, (1024, 1, 1, np.float32)),
        Case({"zh": "n = 1024，8 个头，batch 1，float32",
              "en": "n = 1024, 8 heads, batch 1, float32"}, (1024, 8, 1, np.float32)),
        Case({"zh": "n = 512，8 个头，batch 4，float32",
              "en": "n = 512, 8 heads, batch 4, float32"}, (512, 8, 4, np.float32)),
        Case({"zh": "n = 2048，16 个头，batch 2，float16",
              "en": "n = 2048, 16 heads, batch 2, float16"}, (2048, 16, 2, np.float16)),
        Case({"zh": "n = 100，12 个头，batch 3，float64",
              "en": "n = 100, 12 heads, batch 3, float64"}, (100, 12, 3, np.float64)),
        Case({"zh": "n = 1，1 个头，batch 1，float32（只有一个分数）",
              "en": "n = 1, 1 head, batch 1, float32 (a single score)"}, (1, 1, 1, np.float32)),
    ]
    check_function(
        fn,
        lambda n, heads, batch, dtype: attention_memory_bytes(n, num_heads=heads, batch=batch,
                                                              dtype=dtype),
        cases,
        name={"zh": "分数矩阵的内存", "en": "memory of the score matrices"},
        hint={"zh": "每个序列、每个头各有一张 n×n 的分数矩阵；每个元素的字节数看 dtype："
                    "np.dtype(dtype).itemsize（float32 是 4，不是 8）。",
              "en": "Every sequence and every head has its own n×n score matrix; the bytes per "
                    "entry come from the dtype: np.dtype(dtype).itemsize (4 for float32, not 8)."},
        lang=lang, rtol=0, atol=0,
    )


def check_longest_sequence(fn, lang: str | None = None) -> None:
    """Check ``fn(budget_bytes, heads, dtype)``: the largest n whose score matrices fit.

    Examples
    --------
    >>> from attention_course.cost import max_length_for_memory
    >>> check_longest_sequence(lambda b, h, dt: max_length_for_memory(b, num_heads=h, dtype=dt),
    ...                        lang="en")
    ✓ longest sequence that fits: all 6 cases pass
    """
    cases = [
        Case({"zh": "24 GiB，1 个头，float32", "en": "24 GiB, 1 head, float32"},
             (24 * GIB, 1, np.float32)),
        Case({"zh": "24 GiB，8 个头，float32", "en": "24 GiB, 8 heads, float32"},
             (24 * GIB, 8, np.float32)),
        Case({"zh": "80 GiB，16 个头，float16", "en": "80 GiB, 16 heads, float16"},
             (80 * GIB, 16, np.float16)),
        Case({"zh": "400 字节，1 个头，float32（正好放下 10×10）",
              "en": "400 bytes, 1 head, float32 (exactly 10×10 fits)"}, (400, 1, np.float32)),
        Case({"zh": "399 字节，1 个头，float32（10×10 差一个字节）",
              "en": "399 bytes, 1 head, float32 (one byte short of 10×10)"}, (399, 1, np.float32)),
        Case({"zh": "3 字节，1 个头，float32（一个分数都放不下）",
              "en": "3 bytes, 1 head, float32 (not even one score fits)"}, (3, 1, np.float32)),
    ]
    check_function(
        fn, lambda b, heads, dtype: max_length_for_memory(b, num_heads=heads, dtype=dtype), cases,
        name={"zh": "放得下的最长序列", "en": "longest sequence that fits"},
        hint={"zh": "内存随 n² 增长，所以先算能放下多少个分数，再开平方，最后向下取整"
                    "（向上取整就放不下了）。别忘了头数和 dtype 的字节数。",
              "en": "Memory grows as n², so count how many scores fit, take the square root, "
                    "and round down (rounding up would not fit). Remember the heads and the "
                    "bytes of the dtype."},
        lang=lang, rtol=0, atol=0,
    )


def check_window_mask(fn, lang: str | None = None) -> None:
    """Check ``fn(n, r)``: a boolean (n, n) mask, True where ``|i - j| <= r``.

    Examples
    --------
    >>> from attention_course import sliding_window_mask
    >>> check_window_mask(sliding_window_mask, lang="en")
    ✓ sliding-window mask: all 6 cases pass
    """
    cases = [
        Case({"zh": "n = 6，r = 1（每边一个邻居）", "en": "n = 6, r = 1 (one neighbour each side)"},
             (6, 1)),
        Case({"zh": "n = 7，r = 2", "en": "n = 7, r = 2"}, (7, 2)),
        Case({"zh": "n = 5，r = 0（只看自己）", "en": "n = 5, r = 0 (each word sees only itself)"},
             (5, 0)),
        Case({"zh": "n = 4，r = 10（窗口比句子还长）",
              "en": "n = 4, r = 10 (window longer than the sentence)"}, (4, 10)),
        Case({"zh": "n = 1，r = 3（只有一个词）", "en": "n = 1, r = 3 (a single word)"}, (1, 3)),
        Case({"zh": "n = 9，r = 3", "en": "n = 9, r = 3"}, (9, 3)),
    ]
    check_function(
        fn, lambda n, r: sliding_window_mask(n, r), cases,
        name={"zh": "滑动窗口掩码", "en": "sliding-window mask"},
        hint={"zh": "第 i 个词能看到第 j 个词，当且仅当 |i - j| <= r：两边各 r 个邻居，再加上自己，"
                    "一行最多 2r + 1 个 True。返回布尔数组。",
              "en": "Word i sees word j exactly when |i - j| <= r: r neighbours on each side plus "
                    "itself, at most 2r + 1 True per row. Return a boolean array."},
        lang=lang,
    )
