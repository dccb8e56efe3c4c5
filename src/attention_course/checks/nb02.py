"""Checks for the exercises of notebook 02 (Q, K and V: three projections of one embedding).

Each check runs the learner's function on inputs chosen so that the usual slips give a different
answer: PyTorch's packed weights used without their transpose, split in the wrong order or along
the wrong axis; projections that make "it → cat" strong but leave "cat → it" strong too; the two
sentences of cross-attention swapped; a cosine that forgets to divide by the lengths. Where an
exercise asks for something the library has, calls to the library's function are watched.
"""

from __future__ import annotations

import numpy as np

from .. import examples
from ..attention import scaled_dot_product_attention
from ..projections import cosine_similarity, project_qkv
from ..softmax import softmax
from . import forbidden
from ._core import Case, check_function, fail, get_language, run_learner


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
        name={"zh": "拆开 PyTorch 打包的权重", "en": "PyTorch's packed weights"},
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
def _cosine_cases():
    return [
        Case({"zh": "两个长度不是 1 的向量", "en": "two vectors whose length is not 1"},
             (np.array([3.0, 4.0, 0.0]), np.array([1.0, 2.0, 2.0]))),
        Case({"zh": "方向相同、长度不同（应为 1）",
              "en": "same direction, different lengths (should be 1)"},
             (np.array([1.0, -2.0, 0.5]), np.array([5.0, -10.0, 2.5]))),
        Case({"zh": "方向相反（应为 -1）", "en": "opposite directions (should be -1)"},
             (np.array([0.5, 1.5]), np.array([-2.0, -6.0]))),
        Case({"zh": "逐行比较：两个 (3, 4) 矩阵，结果形状 (3,)",
              "en": "row by row: two (3, 4) matrices, result of shape (3,)"},
             (_normal(40, 3, 4, scale=3.0), _normal(41, 3, 4, scale=0.2))),
        Case({"zh": "一个向量对 3 行（广播），结果形状 (3,)",
              "en": "one vector against 3 rows (broadcast), result of shape (3,)"},
             (np.array([1.0, 2.0, -1.0, 0.0]), _normal(42, 3, 4, scale=2.0))),
        Case({"zh": "其中一个是零向量（应为 0，而不是 nan）",
              "en": "one of them is the zero vector (should be 0, not nan)"},
             (np.zeros(3), np.array([1.0, 2.0, 3.0]))),
        Case({"zh": "float32：两个 (2, 5) 矩阵逐行比较", "en": "float32: two (2, 5) matrices row by row"},
             (_normal(43, 2, 5).astype(np.float32), _normal(44, 2, 5).astype(np.float32))),
    ]


def check_cosine(learner, *, lang: str | None = None) -> None:
    """Check ``learner(a, b)``: the cosine similarity along the last axis.

    Parameters
    ----------
    learner : callable
        ``a, b: (..., d)``, broadcast against each other; returns shape (...), 0 where either
        vector is zero (as :func:`cosine_similarity` does). It must contain no loop and must not
        call (or be) :func:`cosine_similarity`.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed
        On the first input that differs: vectors whose length is not 1, the same and opposite
        directions, rows of two matrices, one vector against several rows, a zero vector,
        float32 rows; or when the function loops or calls the library's cosine.
    """
    check_function(
        learner, cosine_similarity, _cosine_cases(), lang=lang,
        name={"zh": "余弦相似度", "en": "cosine similarity"},
        hint={"zh": "点积要除以两个向量长度的乘积，点积和长度都沿最后一个轴算，这样一次就能算完"
                    "所有行；长度为 0 的地方不能去除，要直接给 0。",
              "en": "divide the dot product by the product of both lengths, both taken along the last "
                    "axis so that all rows are done at once; where a length is 0, do not divide: "
                    "give 0."},
        forbidden=forbidden.of("cosine"), no_loops=True,
    )


from ._core import fresh_on_call  # noqa: E402 - last, once the module is complete

fresh_on_call(__name__)
