"""Checks for the exercises of notebook 06 (the quadratic cost).

Each check runs the learner's function on several inputs, compares with the library (the cost
model, the KV-cache decoder, the merge of softmax states, the sliding-window mask), and names the
first input that differs. The library function that would answer the exercise is forbidden.
"""

from __future__ import annotations

import numpy as np

from ..attention import scaled_dot_product_attention, sliding_window_mask
from ..decoding import attend_one, merge_softmax_states, softmax_state
from . import forbidden
from .cases import Case, check_function
from .comparison import compare, precision_reason, tolerance_for
from .language import fail, get_language
from .language import label as _t
from .watcher import run_learner

__all__ = ["check_attend_new_token", "check_merge_states", "check_window_mask"]

#: The KV-cache exercises forbid every attention function of the library and the running accounts.
_ATTENTION = ("attention", "online_softmax")


# ---------------------------------------------------------------- exercise 1: one token, KV cache

def check_attend_new_token(fn, lang: str | None = None) -> None:
    """Check ``fn(q, K_cache, V_cache) -> (d_v,)``: the output of the newest token from the cache.

    Six cases against the last row of causal attention over the cached tokens: d_v ≠ d_k, a
    cache of one token (the new token's own key and value), scores large enough to overflow
    ``exp`` unless the maximum is subtracted, a wide head where the scale matters, float32 inputs.
    The library's attention functions are forbidden.
    """
    rng = np.random.default_rng(60)

    def cache(t, d_k, d_v, size=1.0, dtype=np.float64):
        q, k = rng.normal(size=(2, t, d_k)) * size
        v = rng.normal(size=(t, d_v))
        return tuple(a.astype(dtype) for a in (q[-1], k, v))

    cases = [
        Case(_t("t = 5 个词，d_k = 4，d_v = 3", "t = 5 tokens, d_k = 4, d_v = 3"), cache(5, 4, 3)),
        Case(_t("t = 1（缓存里只有新词自己）", "t = 1 (the cache holds only the new token)"),
             cache(1, 4, 2)),
        Case(_t("t = 8，d_k = 64（缩放很要紧）", "t = 8, d_k = 64 (the scale matters)"), cache(8, 64, 5)),
        Case(_t("t = 6，分数在 1000 上下（exp 会溢出）", "t = 6, scores around 1000 (exp overflows)"),
             cache(6, 16, 3, size=45.0)),
        Case(_t("t = 12，float32", "t = 12, float32"), cache(12, 8, 8, dtype=np.float32)),
        Case(_t("t = 3，d_k = 2，d_v = 6", "t = 3, d_k = 2, d_v = 6"), cache(3, 2, 6)),
    ]

    def last_row(q, K, V):
        Q = np.concatenate([np.zeros((K.shape[0] - 1, q.shape[0]), q.dtype), q[None]])   # (t, d_k)
        return scaled_dot_product_attention(Q, K, V, is_causal=True)[-1]

    name = _t("用 KV 缓存算新词", "one new token from the KV cache")
    check_function(
        fn, last_row, cases,
        name=name,
        hint=_t("新词只有一个查询，它要和缓存里的每个键比一次（包括它自己的键），"
                "分数要缩放，softmax 要稳定；混合的是值，不是键。",
                "the new token has one query, compared once with every cached key (its own "
                "included); the scores are scaled, the softmax must be stable, and what is mixed "
                "is the values, not the keys."),
        lang=lang, forbidden=forbidden.of(*_ATTENTION),
    )
    _check_no_square_matrix(fn, name, lang)


#: The exercise says "no (t, t) matrix": at t = 4096 one float64 (t, t) matrix is 128 MiB.
_LONG_CACHE, _PEAK_LIMIT_MIB = 4096, 32


def _check_no_square_matrix(fn, name, lang) -> None:
    """A cache of 4096 tokens with a peak-memory limit far below one (t, t) float64 matrix."""
    lang = get_language(lang)
    rng = np.random.default_rng(62)
    t = _LONG_CACHE
    q, K, V = rng.normal(size=64), rng.normal(size=(t, 64)), rng.normal(size=(t, 64))
    label = _t(f"t = {t}（一个 (t, t) 的 float64 矩阵要 {t * t * 8 >> 20} MiB）",
               f"t = {t} (one (t, t) float64 matrix takes {t * t * 8 >> 20} MiB)")
    measured: dict = {}
    got = run_learner(fn, q, K, V, name=name, label=label, forbidden=forbidden.of(*_ATTENTION),
                      lang=lang, memory=measured)
    used = measured["peak"] / 2**20
    if used > _PEAK_LIMIT_MIB:
        fail(name, label, _t(f"内存峰值 {used:.0f} MiB，超过允许的 {_PEAK_LIMIT_MIB} MiB："
                             "不能构造 (t, t) 矩阵",
                             f"the peak memory was {used:.0f} MiB, above the {_PEAK_LIMIT_MIB} MiB "
                             "allowed: build no (t, t) matrix"), lang=lang)
    reason = compare(got, attend_one(q, K, V), lang=lang)
    if reason:
        fail(name, label, reason, lang=lang)


# ---------------------------------------------------------------- exercise 2: merge two accounts

def _state(q, k, v):
    m, total, acc = softmax_state(q, k, v)
    return float(m), float(total), acc


def check_merge_states(fn, lang: str | None = None) -> None:
    """Check ``fn(a, b) -> (m, l, acc)``: the online-softmax account of two chunks together.

    Each input is the account ``(m, l, acc)`` of one chunk of keys for one query. Any finite
    common baseline m is accepted, as long as l and acc are expressed on it: the check moves the
    learner's l and acc onto the baseline of the library's merge before comparing them. Seven
    cases: either chunk holding the larger score, scores far from 0, one empty chunk, two empty
    chunks (no NaN allowed), float32 accounts.
    """
    lang = get_language(lang)
    name = _t("合并两本在线 softmax 的账", "merging two online-softmax accounts")
    hint = _t("两本账的基准（各自的最高分）不同，相加之前都要换算到同一个基准上；"
              "空的块 m 是 -inf，两块都空时结果也应是空账，而不是 NaN。",
              "the two accounts have different baselines (their own highest scores); bring both "
              "onto one baseline before adding them. An empty chunk has m = -inf; two empty chunks "
              "must give an empty account, not NaN.")
    rng = np.random.default_rng(61)
    q = rng.normal(size=4)
    keys, values = rng.normal(size=(10, 4)), rng.normal(size=(10, 3))
    big_q = q * (1000.0 / np.abs(keys @ q / 2.0).max())        # the largest |score| is 1000

    def two(split, query=q, dtype=np.float64):
        a = _state(query, keys[:split], values[:split])
        b = _state(query, keys[split:], values[split:])
        return (a[0], a[1], a[2].astype(dtype)), (b[0], b[1], b[2].astype(dtype))

    # Which chunk holds the maximum decides which side must be rescaled: put it on each side.
    top = int(np.argmax(keys @ q))
    rest = [i for i in range(10) if i != top]
    with_top = _state(q, keys[[top] + rest[:4]], values[[top] + rest[:4]])
    without_top = _state(q, keys[rest[4:]], values[rest[4:]])
    empty = _state(q, keys[:0], values[:0])
    cases = [
        Case(_t("两块各 5 个键", "two chunks of 5 keys"), two(5)),
        Case(_t("a 里的最高分更大", "the larger score is in a"), (with_top, without_top)),
        Case(_t("b 里的最高分更大", "the larger score is in b"), (without_top, with_top)),
        Case(_t("分数上千（exp 只能在新基准上算，直接算会溢出）",
                "scores up to 1000 (exp only on a new baseline: directly it overflows)"), two(4, big_q)),
        Case(_t("a 是空块（m = -inf，l = 0）", "a is an empty chunk (m = -inf, l = 0)"), two(0)),
        Case(_t("a、b 都是空块", "both chunks empty"), (empty, empty)),
        Case(_t("float32 的 acc", "float32 acc"), two(6, dtype=np.float32)),
    ]

    for case in cases:
        a, b = case.args
        ref = merge_softmax_states(*(tuple(np.asarray(x) for x in s) for s in (a, b)))
        m_ref, l_ref, acc_ref = float(ref[0]), float(ref[1]), ref[2]
        args = tuple((s[0], s[1], np.array(s[2])) for s in (a, b))
        got = run_learner(fn, *args, name=name, label=case.label, forbidden=forbidden.of(*_ATTENTION),
                          hint=hint, lang=lang)
        try:
            m, total, acc = got
            m, total = float(m), float(total)
            acc_arr = np.asarray(acc, dtype=np.float64)
        except (TypeError, ValueError):
            fail(name, case.label, _t(f"应返回三项 (m, l, acc)，实际得到 {got!r}",
                                      f"expected three items (m, l, acc), got {got!r}"),
                 hint=hint, lang=lang)
        if acc_arr.shape != acc_ref.shape:
            fail(name, case.label, _t(f"acc 的形状是 {acc_arr.shape}，应为 {acc_ref.shape}",
                                      f"acc has shape {acc_arr.shape}, expected {acc_ref.shape}"),
                 hint=hint, lang=lang)
        if np.isnan(m) or np.isnan(total) or np.isnan(acc_arr).any():
            fail(name, case.label, _t("结果里有 NaN", "the result contains NaN"), hint=hint, lang=lang)
        if m_ref == -np.inf:
            if total != 0 or np.any(acc_arr != 0):
                fail(name, case.label, _t(f"两块都空，l 和 acc 应为 0，实际 l = {total}，acc = {acc_arr}",
                                          f"both chunks are empty, so l and acc must be 0; got "
                                          f"l = {total}, acc = {acc_arr}"), hint=hint, lang=lang)
            continue
        if not np.isfinite(m):
            fail(name, case.label, _t(f"m = {m}：有键的时候，基准应是一个有限的数",
                                      f"m = {m}: with keys present, the baseline must be finite"),
                 hint=hint, lang=lang)
        with np.errstate(all="ignore"):
            shift = np.exp(m - m_ref)                     # moves the learner's account onto m_ref
            on_ref = (total * shift, acc_arr * shift)
        reason = precision_reason(acc, a[2], b[2], lang=lang)
        if reason:
            fail(name, case.label, reason, hint=hint, lang=lang)
        rtol, atol = tolerance_for(a[2], b[2])             # the inputs decide, not the answer
        for part, (g, e) in zip(("l", "acc"), zip(on_ref, (l_ref, acc_ref), strict=True), strict=True):
            reason = compare(np.asarray(g, dtype=np.float64), np.asarray(e, dtype=np.float64),
                             rtol=rtol, atol=atol * max(1.0, float(np.max(np.abs(e)))), lang=lang)
            if reason:
                fail(name, case.label, _t(f"{part}（换算到基准 m = {m_ref:.4g} 后）：{reason}",
                                          f"{part} (moved onto the baseline m = {m_ref:.4g}): {reason}"),
                     hint=hint, lang=lang)
    print({"zh": f"✓ {name['zh']}：{len(cases)} 个测试用例全部通过",
           "en": f"✓ {name['en']}: all {len(cases)} cases pass"}[lang])


# ---------------------------------------------------------------- exercise 3: the window mask

def check_window_mask(fn, lang: str | None = None) -> None:
    """Check ``fn(n, r)``: a boolean (n, n) mask of the sliding window of radius r.

    Six cases, among them r = 0, a window longer than the sentence and a single word. Loops are
    refused; the library's mask functions are forbidden.
    """
    cases = [
        Case(_t("n = 6，r = 1（每边一个邻居）", "n = 6, r = 1 (one neighbour each side)"), (6, 1)),
        Case(_t("n = 7，r = 2", "n = 7, r = 2"), (7, 2)),
        Case(_t("n = 5，r = 0（只看自己）", "n = 5, r = 0 (each word sees only itself)"), (5, 0)),
        Case(_t("n = 4，r = 10（窗口比句子还长）", "n = 4, r = 10 (window longer than the sentence)"),
             (4, 10)),
        Case(_t("n = 1，r = 3（只有一个词）", "n = 1, r = 3 (a single word)"), (1, 3)),
        Case(_t("n = 9，r = 3", "n = 9, r = 3"), (9, 3)),
    ]
    check_function(
        fn, lambda n, r: sliding_window_mask(n, r), cases,
        name=_t("滑动窗口掩码", "sliding-window mask"),
        hint=_t("用两个形状不同的位置数组广播出一张 (n, n) 的表，再想清楚哪些 (i, j) 在窗口里；"
                "两边各 r 个邻居再加上自己，结果要是布尔数组。",
                "broadcast two position arrays of different shapes into an (n, n) table, then decide "
                "which (i, j) are inside the window: r neighbours on each side plus the word itself, "
                "as a boolean array."),
        lang=lang, forbidden=forbidden.of("masks"), no_loops=True,
    )


from .fresh import fresh_on_call  # noqa: E402 - last, once the module is complete

fresh_on_call(__name__)
