"""Checks for the exercises of notebook 02 (Q, K and V: three projections of one embedding).

Each check runs the learner's function on inputs chosen so that the usual slips give a different
answer: PyTorch's packed weights used without their transpose, split in the wrong order or along
the wrong axis; projections that make "it → cat" strong but leave "cat → it" strong too; the two
sentences of cross-attention swapped; a second pair of projections whose scores are
transposed or rescaled, or that only rescales the first. Where an
exercise asks for something the library has, calls to the library's function are watched.
"""

from __future__ import annotations

import numpy as np

from .. import examples
from ..attention import scaled_dot_product_attention
from ..projections import project_qkv
from ..softmax import softmax
from . import forbidden
from .cases import Case, check_function
from .comparison import compare, precision_reason
from .language import fail, get_language
from .watcher import run_learner

__all__ = ["check_cross_attention_weights", "check_one_way", "check_qkv_from_in_proj", "check_same_scores"]


def _normal(seed: int, *shape, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=scale, size=shape)


def _weights(d_model: int, d_k: int, d_v: int, seed: int):
    """Three different random matrices W_Q, W_K (d_model, d_k) and W_V (d_model, d_v)."""
    rng = np.random.default_rng(seed)
    s = 1 / np.sqrt(d_model)
    return (rng.normal(scale=s, size=(d_model, d_k)), rng.normal(scale=s, size=(d_model, d_k)),
            rng.normal(scale=s, size=(d_model, d_v)))


# --------------------------------------------------------------------------- exercise 1
def _in_proj(d_model: int, seed: int, dtype=np.float64) -> np.ndarray:
    """A packed (3 d_model, d_model) weight whose three blocks all differ and are not symmetric."""
    return (_normal(seed, 3 * d_model, d_model) / np.sqrt(d_model)).astype(dtype)


def _qkv_from_in_proj_reference(X, in_proj_weight):
    W = np.asarray(in_proj_weight)
    E = W.shape[1]
    return project_qkv(X, W[:E].T, W[E:2 * E].T, W[2 * E:].T)


def _in_proj_cases():
    return [
        Case({"zh": "4 个词，d_model = 3", "en": "4 tokens, d_model = 3"},
             (_normal(50, 4, 3), _in_proj(3, 51))),
        Case({"zh": "1 个词，d_model = 5", "en": "a single token, d_model = 5"},
             (_normal(52, 1, 5), _in_proj(5, 53))),
        Case({"zh": "一批 2 个句子，X 形状 (2, 3, 4)", "en": "a batch of 2 sentences, X of shape (2, 3, 4)"},
             (_normal(54, 2, 3, 4), _in_proj(4, 55))),
        Case({"zh": "float32，6 个词，d_model = 4", "en": "float32, 6 tokens, d_model = 4"},
             (_normal(56, 6, 4).astype(np.float32), _in_proj(4, 57, np.float32))),
    ]


def check_qkv_from_in_proj(learner, *, lang: str | None = None) -> None:
    """Check ``learner(X, in_proj_weight) -> (Q, K, V)`` for PyTorch's packed projection weight.

    Parameters
    ----------
    learner : callable
        ``X: (..., n, d_model)``, ``in_proj_weight: (3 d_model, d_model)`` in PyTorch's layout
        (query block, key block, value block, each (out, in)); returns the tuple ``(Q, K, V)``,
        each (..., n, d_model), as ``torch.nn.MultiheadAttention`` projects its input.
    lang : {"zh", "en"}, optional
        Language of the messages (default: the one set with ``checks.set_language``).

    Raises
    ------
    CheckFailed
        Names the input (a sentence, a single token, a batch, float32), the item of the tuple
        that differs and its values.
    """
    check_function(
        learner, _qkv_from_in_proj_reference, _in_proj_cases(), lang=lang,
        name={"zh": "拆开 PyTorch 打包的投影矩阵", "en": "PyTorch's packed weights"},
        hint={"zh": "先想清楚哪几行属于查询、哪几行属于键和值（沿哪个轴切？），再想 PyTorch 的"
                    "（输出，输入）布局和我们的 (d_model, d_k) 布局差了什么。d_model 是方阵的边长，"
                    "忘了这一步形状也不会报错。按 (Q, K, V) 的顺序返回。",
              "en": "first work out which rows belong to the queries, the keys and the values (cut "
                    "along which axis?), then what separates PyTorch's (out, in) layout from our "
                    "(d_model, d_k) one. The blocks are square, so forgetting that step raises no "
                    "shape error. Return them in the order (Q, K, V)."},
    )


# --------------------------------------------------------------------------- exercise 2
_ONE_WAY_NAME = {"zh": "单向的关系", "en": "a one-way relation"}
_ONE_WAY_HINT = {
    "zh": "你可以为每个词挑选它的查询和键：如果能找到一个列向量 w，让 X 乘上它只在第 m 个词上"
          "得到 1、其余词上得到 0，就能决定哪些词提问、哪些词回答（各行线性无关时，伪逆或最小二乘"
          "能找到这样的 w）。词 j 的那一行总得把预算给某个词：给谁，才不会给 i？分数要多大，"
          "权重才能到 0.9？",
    "en": "you may pick each word's query and key: if you find a column vector w such that X times "
          "w is 1 on word m and 0 on every other word, you decide which words ask and which answer "
          "(with independent rows, the pseudo-inverse or least squares finds such a w). Word j's "
          "row must spend its budget somewhere: where, so that it does not go to i? How large must "
          "a score be for a weight of 0.9?",
}


def _one_way_cases():
    it_is_a_cat = examples.toy_embeddings(examples.IT_IS_A_CAT["en"], 8, seed=3)   # notebook 02's X
    return [
        Case({"zh": "第 1 节的“它 是 一只 猫”，i = 0（它），j = 3（猫）",
              "en": "section 1's 'it is a cat', i = 0 (it), j = 3 (cat)"}, (it_is_a_cat, 0, 3)),
        Case({"zh": "随机的 5 个词，d_model = 8，i = 4，j = 1",
              "en": "5 random words, d_model = 8, i = 4, j = 1"}, (_normal(60, 5, 8), 4, 1)),
        Case({"zh": "方阵：3 个词，d_model = 3，i = 1，j = 2",
              "en": "a square X: 3 words, d_model = 3, i = 1, j = 2"}, (_normal(61, 3, 3), 1, 2)),
        Case({"zh": "2 个词，d_model = 4，i = 1，j = 0", "en": "2 words, d_model = 4, i = 1, j = 0"},
             (_normal(62, 2, 4), 1, 0)),
        Case({"zh": "float32 的 4 个词，d_model = 6，i = 2，j = 0",
              "en": "4 words in float32, d_model = 6, i = 2, j = 0"},
             (_normal(63, 4, 6).astype(np.float32), 2, 0)),
        # far from orthogonal rows: X.T in place of the pseudo-inverse gives 0.5 / 0.5 here
        Case({"zh": "两个方向很接近的词 [1, 0, 0] 和 [0.9, 0.3, 0]，i = 0，j = 1",
              "en": "two words pointing almost the same way, [1, 0, 0] and [0.9, 0.3, 0], i = 0, j = 1"},
             (np.array([[1.0, 0.0, 0.0], [0.9, 0.3, 0.0]]), 0, 1)),
    ]


def _one_way_weights(X, W_Q, W_K):
    """The attention weights A (n, n) that the learner's projections give (NaN if they overflow)."""
    Q, K = X @ W_Q, X @ W_K
    scores = Q @ K.T / np.sqrt(K.shape[-1])                                    # (n, n)
    if not np.isfinite(scores).all():
        return np.full(scores.shape, np.nan)
    return softmax(scores, axis=-1)


def _row(A, r) -> str:
    return "[" + ", ".join(f"{x:.3f}" for x in A[r]) + "]"


def check_one_way(learner, *, lang: str | None = None) -> None:
    """Check ``learner(X, i, j) -> (W_Q, W_K)``: word i attends to word j, word j not to word i.

    Parameters
    ----------
    learner : callable
        ``X: (n, d_model)`` with independent rows, ``i`` and ``j`` two different positions;
        returns two matrices of shape (d_model, d_k), the same d_k ≥ 1. In the weights
        ``softmax(Q Kᵀ / √d_k)`` with ``Q = X W_Q`` and ``K = X W_K``, row i must give at least
        0.9 to column j, and row j at most 0.1 to column i.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        On the first input where the shapes are wrong, a weight is NaN, word i gives word j
        less than 0.9, or word j gives word i more than 0.1: notebook 02's sentence, random
        words, a square X, two words, float32 embeddings, and two words whose embeddings point
        almost the same way.
    """
    lang = get_language(lang)
    say = {
        "zh": {"pair": "应返回 (W_Q, W_K) 两个矩阵，实际得到 {got}",
               "shape": "W_Q 的形状是 {q}，W_K 的形状是 {k}；两者都应是 (d_model, d_k) = ({d}, …)，d_k 相同",
               "nan": "权重里有 NaN 或 inf（分数太大溢出了？）",
               "ij": "词 {i} 给词 {j} 的权重是 {w:.3f}，应至少 0.9；这一行的权重：{row}",
               "ji": "词 {j} 给词 {i} 的权重是 {w:.3f}，应至多 0.1；这一行的权重：{row}",
               "ok": "✓ {name}：{n} 个测试用例全部通过"},
        "en": {"pair": "expected the pair (W_Q, W_K), got {got}",
               "shape": "W_Q has shape {q} and W_K {k}; both must be (d_model, d_k) = ({d}, ...) "
                        "with the same d_k",
               "nan": "the weights contain NaN or inf (did the scores overflow?)",
               "ij": "word {i} gives word {j} a weight of {w:.3f}; it must be at least 0.9. "
                     "That row's weights: {row}",
               "ji": "word {j} gives word {i} a weight of {w:.3f}; it must be at most 0.1. "
                     "That row's weights: {row}",
               "ok": "✓ {name}: all {n} cases pass"},
    }[lang]
    cases = _one_way_cases()
    for case in cases:
        X, i, j = case.args
        got = run_learner(learner, X.copy(), i, j, name=_ONE_WAY_NAME, label=case.label,
                          hint=_ONE_WAY_HINT, lang=lang)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            fail(_ONE_WAY_NAME, case.label, say["pair"].format(got=type(got).__name__),
                 hint=_ONE_WAY_HINT, lang=lang)
        W_Q, W_K = (np.asarray(w) for w in got)
        d = X.shape[1]
        if (W_Q.ndim != 2 or W_K.ndim != 2 or W_Q.shape[0] != d or W_K.shape[0] != d
                or W_Q.shape[1] != W_K.shape[1] or W_Q.shape[1] < 1):
            fail(_ONE_WAY_NAME, case.label, say["shape"].format(q=W_Q.shape, k=W_K.shape, d=d),
                 hint=_ONE_WAY_HINT, lang=lang)
        with np.errstate(all="ignore"):
            A = _one_way_weights(X.astype(np.result_type(X, W_Q, W_K, np.float32)), W_Q, W_K)
        if not np.isfinite(A).all():
            fail(_ONE_WAY_NAME, case.label, say["nan"], hint=_ONE_WAY_HINT, lang=lang)
        if not A[i, j] >= 0.9:
            fail(_ONE_WAY_NAME, case.label, say["ij"].format(i=i, j=j, w=A[i, j], row=_row(A, i)),
                 hint=_ONE_WAY_HINT, lang=lang)
        if not A[j, i] <= 0.1:
            fail(_ONE_WAY_NAME, case.label, say["ji"].format(i=i, j=j, w=A[j, i], row=_row(A, j)),
                 hint=_ONE_WAY_HINT, lang=lang)
    print(say["ok"].format(name=_ONE_WAY_NAME[lang], n=len(cases)))


# --------------------------------------------------------------------------- exercise 3
def _cross_weights(X_query, X_source, W_Q, W_K):
    q = X_query @ W_Q                                                           # (L, d_k)
    k = X_source @ W_K                                                          # (S, d_k)
    _, weights = scaled_dot_product_attention(q, k, k, return_weights=True)    # (L, S)
    return weights


def _cross_cases():
    W_Q, W_K, _ = _weights(6, 4, 4, seed=31)
    return [
        Case({"zh": "中文句子 3 个词提问，英文句子 5 个词作答（L = 3，S = 5）",
              "en": "a 3-word Chinese sentence asks, a 5-word English one answers (L=3, S=5)"},
             (_normal(30, 3, 6), _normal(32, 5, 6), W_Q, W_K)),
        Case({"zh": "两个句子都是 4 个词（L = S，换错来源不会报错）",
              "en": "both sentences have 4 words (L = S: swapped sources raise no error)"},
             (_normal(33, 4, 6), _normal(34, 4, 6), W_Q, W_K)),
        Case({"zh": "被看的句子只有 1 个词（每行权重都是 1）",
              "en": "the sentence looked at has a single word (every weight is 1)"},
             (_normal(35, 3, 6), _normal(36, 1, 6), W_Q, W_K)),
        Case({"zh": "很大的分数（嵌入乘以 40，分数上千）",
              "en": "very large scores (embeddings times 40, scores in the thousands)"},
             (40 * _normal(37, 2, 6), 40 * _normal(38, 3, 6), W_Q, W_K)),
        Case({"zh": "float32：2 个词提问，4 个词被看", "en": "float32: 2 words ask, 4 are looked at"},
             tuple(a.astype(np.float32) for a in (_normal(39, 2, 6), _normal(40, 4, 6), W_Q, W_K))),
    ]


def check_cross_attention_weights(learner, *, lang: str | None = None) -> None:
    """Check ``learner(X_query, X_source, W_Q, W_K) -> weights`` of cross-attention.

    The queries come from ``X_query`` (L tokens), the keys from ``X_source`` (S tokens); the
    weights are ``softmax(Q Kᵀ / sqrt(d_k))`` row by row, shape (L, S).

    Parameters
    ----------
    learner : callable
        ``X_query: (L, d_model)``, ``X_source: (S, d_model)``, ``W_Q, W_K: (d_model, d_k)``.
        It must not call (or be) the library's attention functions; its softmax is allowed.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        On the first input that differs: L ≠ S, L = S (a swap of the sentences raises no error
        there), a single word looked at, scores in the thousands, float32 inputs.
    """
    check_function(
        learner, _cross_weights, _cross_cases(), lang=lang,
        name={"zh": "交叉注意力权重", "en": "cross-attention weights"},
        hint={"zh": "查询来自提问的句子 X_query（用 W_Q），键来自被看的句子 X_source（用 W_K）；"
                    "分数要除以 √d_k，d_k 是键的维度；每个查询在自己那一行上做 softmax。结果有 L 行、"
                    "S 列。库里的 softmax 会先减去每行最大值，分数很大时也不会溢出。",
              "en": "the queries come from the asking sentence X_query (with W_Q), the keys from the "
                    "sentence looked at, X_source (with W_K); divide the scores by √d_k, d_k being "
                    "the width of the keys; each query gets a softmax over its own row. The result "
                    "has L rows and S columns. The library's softmax subtracts each row's maximum, "
                    "so large scores do not overflow."},
        forbidden=forbidden.of("attention"),
    )


# --------------------------------------------------------------------------- exercise 4
_SAME_SCORES_NAME = {"zh": "两对矩阵，同一个注意力", "en": "two pairs, one attention"}
_SAME_SCORES_HINT = {
    "zh": "分数是 X (W_Q W_Kᵀ) Xᵀ：只要中间这个 d_model × d_model 的矩阵不变，对任何 X 分数都不变。"
          "在 W_Q 的右边乘一个 d_k × d_k 的矩阵，W_Kᵀ 的左边要配上什么，乘积才不变？一个数和它的倒数"
          "是最简单的一种，这里不算；想想旋转，或者别的可逆矩阵。",
    "en": "the scores are X (W_Q W_Kᵀ) Xᵀ: as long as the d_model × d_model matrix in the middle stays "
          "the same, so do the scores, for every X. If W_Q is multiplied on the right by a d_k × d_k "
          "matrix, what must stand on the left of W_Kᵀ for the product to stay the same? A number and "
          "its inverse are the simplest case and do not count here; think of a rotation, or of "
          "another invertible matrix.",
}
_SAME_SCORES_SAY = {
    "zh": {"pair": "应返回 (W_Q2, W_K2) 两个矩阵，实际得到 {got}",
           "shape": "W_Q2 的形状是 {q}，W_K2 的形状是 {k}；两者都应和原来一样是 {want}",
           "nan": "W_Q2 或 W_K2 里有 NaN 或 inf",
           "scores": "对一个形状 {x} 的随机 X，分数 X W_Q2 (X W_K2)ᵀ 和原来的不同：{reason}",
           "swapped": "你的分数是原来的转置：W_Q 和 W_K 的角色换了，“i 看 j”变成了“j 看 i”。",
           "scaled": "你的分数是原来的 {c:.3g} 倍：两边乘上的东西没有互相抵消。",
           "multiple": "{which}2 是原来 {which} 的倍数（{c:.3g} 倍）；要的是一个不只是缩放的新矩阵"},
    "en": {"pair": "expected the pair (W_Q2, W_K2), got {got}",
           "shape": "W_Q2 has shape {q} and W_K2 {k}; both must keep the shape {want}",
           "nan": "W_Q2 or W_K2 contains NaN or inf",
           "scores": "for a random X of shape {x}, the scores X W_Q2 (X W_K2)ᵀ differ from the "
                     "original ones: {reason}",
           "swapped": "your scores are the transpose of the original ones: W_Q and W_K swapped roles, "
                      "so 'i looks at j' became 'j looks at i'.",
           "scaled": "your scores are {c:.3g} times the original ones: what you multiplied on the two "
                     "sides does not cancel out.",
           "multiple": "{which}2 is a multiple of {which} ({c:.3g} times it); a new matrix that is "
                       "more than a rescaling is asked for"},
}


def _same_scores_cases():
    W_Q, W_K, _ = _weights(8, 4, 4, seed=70)
    W_Q3, W_K3, _ = _weights(3, 3, 3, seed=72)
    return [
        Case({"zh": "d_model = 8，d_k = 4", "en": "d_model = 8, d_k = 4"}, (W_Q, W_K)),
        Case({"zh": "d_model = 5，d_k = 2", "en": "d_model = 5, d_k = 2"}, _weights(5, 2, 2, seed=71)[:2]),
        Case({"zh": "方阵：d_model = d_k = 3", "en": "square matrices: d_model = d_k = 3"}, (W_Q3, W_K3)),
        Case({"zh": "float32，d_model = 6，d_k = 3", "en": "float32, d_model = 6, d_k = 3"},
             tuple(w.astype(np.float32) for w in _weights(6, 3, 3, seed=73)[:2])),
        Case({"zh": "Python 列表，d_model = 4，d_k = 2", "en": "Python lists, d_model = 4, d_k = 2"},
             tuple(w.round(3).tolist() for w in _weights(4, 2, 2, seed=74)[:2])),
    ]


def _multiple_of(a: np.ndarray, b: np.ndarray, tol: float):
    """The c with b = c·a when b is (within tol, relative) a multiple of a, else None."""
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    c = float(a @ b / (a @ a))
    return c if np.linalg.norm(b - c * a) <= tol * max(np.linalg.norm(b), 1e-300) else None


def check_same_scores(learner, *, lang: str | None = None) -> None:
    """Check ``learner(W_Q, W_K) -> (W_Q2, W_K2)``: another pair of projections with the same scores.

    Parameters
    ----------
    learner : callable
        ``W_Q, W_K: (d_model, d_k)`` with d_k ≥ 2, as arrays or nested lists; returns two matrices
        of the same shapes with ``X W_Q2 (X W_K2)ᵀ = X W_Q (X W_K)ᵀ`` for every X, neither a
        multiple of the matrix it replaces.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        On the first pair where the result is not two matrices of the right shapes, the scores
        differ on a random X (named when they are transposed or rescaled), or a new matrix is
        only a multiple of the old one: rectangular, square, float32 and list inputs.
    """
    lang = get_language(lang)
    say = _SAME_SCORES_SAY[lang]
    name, hint = _SAME_SCORES_NAME, _SAME_SCORES_HINT
    cases = _same_scores_cases()
    for n_case, case in enumerate(cases):
        W_Q, W_K = (np.asarray(w) for w in case.args)
        args = [w.copy() if isinstance(w, np.ndarray) else [list(row) for row in w] for w in case.args]
        got = run_learner(learner, *args, name=name, label=case.label, hint=hint, lang=lang)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            fail(name, case.label, say["pair"].format(got=type(got).__name__), hint=hint, lang=lang)
        reason = precision_reason(tuple(got), *case.args, lang=lang)
        if reason:                                    # the one dtype rule of every check
            fail(name, case.label, reason, hint=hint, lang=lang)
        try:
            W_Q2, W_K2 = (np.asarray(w, dtype=np.result_type(np.asarray(w), np.float32)) for w in got)
        except (TypeError, ValueError):
            fail(name, case.label, say["pair"].format(got=type(got).__name__), hint=hint, lang=lang)
        if W_Q2.shape != W_Q.shape or W_K2.shape != W_K.shape:
            fail(name, case.label, say["shape"].format(q=W_Q2.shape, k=W_K2.shape, want=W_Q.shape),
                 hint=hint, lang=lang)
        if not (np.isfinite(W_Q2).all() and np.isfinite(W_K2).all()):
            fail(name, case.label, say["nan"], hint=hint, lang=lang)
        X = _normal(80 + n_case, 6, W_Q.shape[0])                       # (6, d_model)
        Xg = X.astype(np.result_type(W_Q2, W_K2))                       # the learner's precision
        expected = (X @ W_Q) @ (X @ W_K).T                              # (6, 6)
        scores = (Xg @ W_Q2) @ (Xg @ W_K2).T
        reason = compare(scores, expected, lang=lang)
        if reason:
            found = hint
            if compare(scores, expected.T, lang=lang) is None:
                found = say["swapped"]
            else:
                c = _multiple_of(expected, scores, 1e-3)
                if c is not None:
                    found = say["scaled"].format(c=c)
            fail(name, case.label, say["scores"].format(x=X.shape, reason=reason), hint=found, lang=lang)
        tol = 1e-4 if np.result_type(W_Q2, W_K2) == np.float32 else 1e-9
        for which, old, new in (("W_Q", W_Q, W_Q2), ("W_K", W_K, W_K2)):
            c = _multiple_of(old, new, tol)
            if c is not None:
                fail(name, case.label, say["multiple"].format(which=which, c=c), hint=hint, lang=lang)
    print({"zh": f"✓ {name['zh']}：{len(cases)} 个测试用例全部通过",
           "en": f"✓ {name['en']}: all {len(cases)} cases pass"}[lang])


from .fresh import fresh_on_call  # noqa: E402 - last, once the module is complete

fresh_on_call(__name__)
