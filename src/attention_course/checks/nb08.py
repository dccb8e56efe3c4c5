"""Checks for the exercises of notebook 08 (two layers that cooperate: an induction circuit).

Each check runs the learner's function on several inputs (float32 included, batch sizes and
lengths that differ so that a swapped axis shows) and compares with a reference written here.
Before the cases, a probe input is compared with the usual mistakes (a duplicate-token score
instead of an induction score, an index off by one, W_O left out, the table transposed, a
negative index that wraps around, ...); when one matches, the message names that mistake.
"""

from __future__ import annotations

import numpy as np

from ..tiny_model import AttentionOnlyModel
from . import forbidden
from .cases import Case, check_function
from .language import label as _label

__all__ = ["check_induction_score", "check_k_composition", "check_weight_on_offset"]


def _weights(rng, B, n, causal=False, dtype=np.float64):
    """Random attention weights (B, n, n), each row summing to 1 (causal: zero above the diagonal)."""
    w = rng.random((B, n, n)) ** 3
    if causal:
        w = np.tril(w)
    return (w / w.sum(-1, keepdims=True)).astype(dtype)


def _repeats(rng, B, n, vocab):
    """Token rows with repeats in them (some random, some periodic)."""
    tokens = rng.integers(0, vocab, size=(B, n))
    for b in range(0, B, 2):
        period = int(rng.integers(2, max(3, n // 2)))
        tokens[b] = np.resize(rng.permutation(vocab)[:period], n)
    return tokens


# --- exercise 1: the induction score ------------------------------------------------------------

def _targets(tokens, shift=1, upto_self=True):
    """(B, n, n) bool: key j is a target of query t (key position j - shift holds t's token)."""
    B, n = tokens.shape
    t, j = np.arange(n)[:, None], np.arange(n)[None, :]
    src = j - shift                                              # where the earlier copy stands
    ok = (src >= 0) & (src < n) & ((src < t) if upto_self else (src <= t))
    same = tokens[:, None, :] == tokens[:, :, None]              # (B, t, s): token s equals token t
    hit = np.take_along_axis(same, np.broadcast_to(np.clip(src, 0, n - 1), (B, n, n)), axis=2)
    return hit & ok


def _reference_induction(weights, tokens):
    weights, tokens = np.asarray(weights, dtype=np.float64), np.asarray(tokens)
    match = _targets(tokens)
    counted = match.any(-1)                                      # queries whose token came before
    return float((weights * match).sum(-1)[counted].mean())


def _induction_variants_values(weights, tokens):
    w = np.asarray(weights, dtype=np.float64)
    dup = _targets(tokens, shift=0)
    before = _targets(tokens, shift=-1)
    match = _targets(tokens)
    with_self = _targets(tokens, upto_self=False)
    return [
        (float((w * dup).sum(-1)[dup.any(-1)].mean()), _label(
            "你算的是“同一个词”的权重：键位置上的词等于查询的词。归纳头看的是它后面那个位置：键 j 的"
            "前一个词（位置 j − 1）等于查询的词。",
            "You measured the weight on earlier copies of the same token. An induction head looks "
            "one position further: at keys j whose previous token (position j − 1) equals the "
            "query's token.")),
        (float((w * before).sum(-1)[before.any(-1)].mean()), _label(
            "位置差反了一位：要找的是键 j 的前一个位置 j − 1 上有查询的词，不是 j + 1。",
            "The offset points the wrong way: the query's token must stand at j − 1, just before "
            "key j, not at j + 1.")),
        (float((w * match).sum(-1).mean()), _label(
            "你对所有查询取了平均，包括前面从没出现过它那个词的查询（它们没有目标，这一项是 0）。"
            "只对有目标的查询取平均。",
            "You averaged over every query, including those whose token never came before (they "
            "have no target and score 0). Average over the queries that have a target.")),
        (float((w * with_self).sum(-1)[with_self.any(-1)].mean()), _label(
            "你把查询自己也算成了“前面出现过的同一个词”：键 j = t + 1 不算，之前的那次出现要在 t 之前。",
            "You counted the query itself as an earlier copy, so key j = t + 1 counted: the copy "
            "must stand before position t.")),
    ]


INDUCTION_NAME = _label("练习 1（归纳分数）", "Exercise 1 (the induction score)")
INDUCTION_HINT = _label(
    "对每个查询位置 t，目标是所有满足 1 ≤ j ≤ t 且 tokens[j − 1] == tokens[t] 的键 j；把这些键上的"
    "权重加起来，再对至少有一个目标的查询取平均（对所有批次一起）。比较 tokens[:, None, :] 和 "
    "tokens[:, :, None] 能一次得到所有“同一个词”的位置对。",
    "For each query position t the targets are the keys j with 1 ≤ j ≤ t and tokens[j − 1] == "
    "tokens[t]; add up the weights on them, then average over the queries that have at least one "
    "target (over the whole batch). Comparing tokens[:, None, :] with tokens[:, :, None] gives "
    "every pair of equal tokens at once.",
)


def check_induction_score(learner, lang: str | None = None) -> None:
    """Check ``learner(weights, tokens) -> float``, the induction score of one head.

    ``weights`` (B, n, n) are one head's attention weights, ``tokens`` (B, n) the inputs. The
    score is the weight a query puts on keys j (1 ≤ j ≤ t) whose previous token equals the
    query's token, averaged over the queries that have such a key.

    Parameters
    ----------
    learner : callable
    lang : {"zh", "en"}, optional
    """
    rng = np.random.default_rng(8)
    probe = (_weights(rng, 3, 9), _repeats(rng, 3, 9, 4))
    periodic = np.resize(np.array([3, 1, 4, 0]), (2, 10))
    exact = np.zeros((2, 10, 10))
    exact[:, np.arange(10), np.maximum(np.arange(10) - 3, 0)] = 1.0   # every query 3 back
    cases = [
        Case(_label("随机权重，B = 3，n = 9，4 个词", "random weights, B = 3, n = 9, 4 tokens"), probe),
        Case(_label("因果权重，B = 2，n = 12，6 个词", "causal weights, B = 2, n = 12, 6 tokens"),
             (_weights(rng, 2, 12, causal=True), _repeats(rng, 2, 12, 6))),
        Case(_label("周期 4 的序列，每个查询看 3 个位置之前：归纳分数为 1",
                    "period 4, every query looks 3 back: a perfect induction head"),
             (exact, periodic)),
        Case(_label("float32 权重，B = 4，n = 7", "float32 weights, B = 4, n = 7"),
             (_weights(rng, 4, 7, dtype=np.float32), _repeats(rng, 4, 7, 3))),
        Case(_label("一行的词各不相同、一行有重复，B = 2，n = 6",
                    "one row of distinct tokens, one with repeats, B = 2, n = 6"),
             (_weights(rng, 2, 6), np.array([[0, 1, 2, 3, 4, 5], [1, 1, 2, 1, 2, 2]]))),
    ]
    check_function(learner, _reference_induction, cases, name=INDUCTION_NAME, hint=INDUCTION_HINT,
                   mistakes=_induction_variants, forbidden=forbidden.of("head_scores"), lang=lang)


# --- exercise 2: the K-composition table --------------------------------------------------------

def _reference_k_composition(E, W_Q, W_K, W_V0, W_O0):
    return (E @ W_Q) @ (E @ W_V0 @ W_O0 @ W_K).T


def _k_variants_values(E, W_Q, W_K, W_V0, W_O0):
    right = _reference_k_composition(E, W_Q, W_K, W_V0, W_O0)
    variants = [
        (right.T, _label(
            "表转置了：行是查询的词（E W_Q），列是被层 0 写进去的词。",
            "The table is transposed: rows are the query's token (E W_Q), columns the token that "
            "layer 0 wrote into the key's position.")),
        ((E @ W_Q) @ (E @ W_K).T, _label(
            "这是 07 那张直接的查询-键表：少了层 0 那一步 E W_V⁽⁰⁾ W_O⁽⁰⁾，它把前一个词写进了键的位置。",
            "This is 07's direct query-key table: it misses layer 0's step E W_V⁽⁰⁾ W_O⁽⁰⁾, which "
            "wrote the previous token into the key's position.")),
    ]
    if W_V0.shape[1] == W_K.shape[0]:
        variants.append(((E @ W_Q) @ (E @ W_V0 @ W_K).T, _label(
            "少了 W_O⁽⁰⁾：头的输出要先经过 W_O 才回到残差流。",
            "W_O⁽⁰⁾ is missing: a head's output goes through W_O before it is back in the "
            "residual stream.")))
    return variants


K_NAME = _label("练习 2（K 组合表）", "Exercise 2 (the K-composition table)")
K_HINT = _label(
    "查询一侧是 E W_Q（层 1 的头）；键一侧是层 0 的头写进残差流的东西 E W_V⁽⁰⁾ W_O⁽⁰⁾，"
    "再经过层 1 的 W_K。形状：E (vocab, d_model)，W_Q、W_K (d_model, d_k)，W_V⁽⁰⁾ (d_model, d_k)，"
    "W_O⁽⁰⁾ (d_k, d_model)；结果 (vocab, vocab)。",
    "The query side is E W_Q (the layer-1 head); the key side is what layer 0's head writes into "
    "the residual stream, E W_V⁽⁰⁾ W_O⁽⁰⁾, read through layer 1's W_K. Shapes: E (vocab, d_model), "
    "W_Q and W_K (d_model, d_k), W_V⁽⁰⁾ (d_model, d_k), W_O⁽⁰⁾ (d_k, d_model); the result is "
    "(vocab, vocab).",
)


def _k_case(rng, vocab, d_model, d_k, d_k0, dtype=np.float64):
    E = rng.standard_normal((vocab, d_model))
    W_Q, W_K = (rng.standard_normal((d_model, d_k)) / np.sqrt(d_model) for _ in range(2))
    W_V0 = rng.standard_normal((d_model, d_k0)) / np.sqrt(d_model)
    W_O0 = rng.standard_normal((d_k0, d_model)) / np.sqrt(d_k0)
    return tuple(a.astype(dtype) for a in (E, W_Q, W_K, W_V0, W_O0))


def check_k_composition(learner, lang: str | None = None) -> None:
    """Check ``learner(E, W_Q, W_K, W_V0, W_O0) -> (vocab, vocab)``, the K-composition table.

    The table is ``(E W_Q)(E W_V0 W_O0 W_K)ᵀ``: row i, the query's token; column j, the token that
    layer 0's head copied into the key's position. One case is a real model's weights
    (:meth:`AttentionOnlyModel.k_composition_table`).

    Parameters
    ----------
    learner : callable
    lang : {"zh", "en"}, optional
    """
    rng = np.random.default_rng(8)
    probe = _k_case(rng, 5, 6, 3, 3)
    model = AttentionOnlyModel(7, d_model=8, n_layers=2, d_k=4, max_len=6, seed=3)
    w0, w1 = model.head_weights(0, 0), model.head_weights(1, 0)
    cases = [
        Case(_label("5 个词，d_model = 6，d_k = 3", "5 tokens, d_model = 6, d_k = 3"), probe),
        Case(_label("8 个词，d_model = 4，两层的 d_k 不同（2 和 5）",
                    "8 tokens, d_model = 4, different d_k in the two layers (2 and 5)"),
             _k_case(rng, 8, 4, 2, 5)),
        Case(_label("float32，3 个词，d_model = 10，d_k = 4", "float32, 3 tokens, d_model = 10, d_k = 4"),
             _k_case(rng, 3, 10, 4, 4, np.float32)),
        Case(_label("一个两层模型（7 个词）的权重", "the weights of a two-layer model (7 tokens)"),
             (model.params["embed"], w1["W_Q"], w1["W_K"], w0["W_V"], w0["W_O"])),
    ]
    check_function(learner, _reference_k_composition, cases, name=K_NAME, hint=K_HINT,
                   mistakes=_k_variants, lang=lang,
                   forbidden=(AttentionOnlyModel.k_composition_table, AttentionOnlyModel.query_key_table))


# --- exercise 3: the weight on one offset -------------------------------------------------------

def _reference_offset(weights, offset):
    weights = np.asarray(weights)
    n = weights.shape[-1]
    t = np.arange(offset, n)
    return weights[:, t, t - offset].mean(axis=0)


def _offset_variants_values(weights, offset):
    n = weights.shape[-1]
    t = np.arange(n)
    return [
        (weights[:, t, t - offset].mean(axis=0), _label(
            "负的下标绕到了行尾：t < offset 的位置前面没有 offset 个词，要去掉，结果的长度是 n − offset。",
            "A negative index wrapped around to the end of the row: positions t < offset have no "
            "key offset back; leave them out, so the result has n − offset entries.")),
        (weights[:, t[offset:] - offset, t[offset:]].mean(axis=0), _label(
            "行和列反了：weights[b, t, j] 的 t 是查询（行），j 是键（列）。",
            "Rows and columns are swapped: in weights[b, t, j], t is the query (row) and j the key "
            "(column).")),
        (weights[:, t[offset:], t[offset:] - offset].mean(axis=1), _label(
            "平均取错了轴：要对批次（第 0 轴）取平均，每个位置留一个数。",
            "The mean is over the wrong axis: average over the batch (axis 0), one number per "
            "position.")),
    ]


OFFSET_NAME = _label("练习 3（某个距离上的权重）", "Exercise 3 (the weight on one offset)")
OFFSET_HINT = _label(
    "对 t = offset, …, n − 1，取 weights[:, t, t − offset]（查询 t 给 offset 个位置之前那个键的权重），"
    "再对批次取平均；结果的形状是 (n − offset,)。",
    "For t = offset, ..., n − 1 take weights[:, t, t − offset] (the weight query t gives the key "
    "offset positions back) and average over the batch; the result has shape (n − offset,).",
)


def check_weight_on_offset(learner, lang: str | None = None) -> None:
    """Check ``learner(weights, offset) -> (n - offset,)``: mean weight on the key ``offset`` back.

    Parameters
    ----------
    learner : callable
    lang : {"zh", "en"}, optional
    """
    rng = np.random.default_rng(8)
    probe = (_weights(rng, 3, 7), 2)
    cases = [
        Case(_label("随机权重，B = 3，n = 7，offset = 2", "random weights, B = 3, n = 7, offset = 2"), probe),
        Case(_label("因果权重，B = 5，n = 10，offset = 1", "causal weights, B = 5, n = 10, offset = 1"),
             (_weights(rng, 5, 10, causal=True), 1)),
        Case(_label("offset = 0：对角线", "offset = 0: the diagonal"), (_weights(rng, 2, 6), 0)),
        Case(_label("float32，B = 1，n = 9，offset = 8", "float32, B = 1, n = 9, offset = 8"),
             (_weights(rng, 1, 9, dtype=np.float32), 8)),
    ]
    check_function(learner, _reference_offset, cases, name=OFFSET_NAME, hint=OFFSET_HINT,
                   mistakes=_offset_variants, forbidden=forbidden.of("head_scores"), lang=lang)


def _as_mistakes(values):
    """``values(*args) -> [(answer, hint)]`` as ``check_function``'s ``mistakes=``."""
    def mistakes(*args):
        return [((lambda answer=answer: answer), hint) for answer, hint in values(*args)]
    return mistakes


_induction_variants = _as_mistakes(_induction_variants_values)
_k_variants = _as_mistakes(_k_variants_values)
_offset_variants = _as_mistakes(_offset_variants_values)


from .fresh import fresh_on_call  # noqa: E402 - last, once the module is complete

fresh_on_call(__name__)
