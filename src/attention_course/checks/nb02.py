"""Checks for the exercises of notebook 02 (Q, K and V: three projections of one embedding).

Each check runs the learner's function on several inputs chosen so that the usual slips give a
different answer: a transposed W, W_Q used for the keys, K Qᵀ instead of Q Kᵀ, the two sentences
of cross-attention swapped, a cosine that forgets to divide by the lengths.
"""

from __future__ import annotations

import numpy as np

from ..attention import scaled_dot_product_attention
from ..projections import cosine_similarity, project_qkv
from ._core import Case, check_function


def _normal(seed: int, *shape, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=scale, size=shape)


def _weights(d_model: int, d_k: int, d_v: int, seed: int):
    """Three different random matrices W_Q, W_K (d_model, d_k) and W_V (d_model, d_v)."""
    rng = np.random.default_rng(seed)
    s = 1 / np.sqrt(d_model)
    return (rng.normal(scale=s, size=(d_model, d_k)), rng.normal(scale=s, size=(d_model, d_k)),
            rng.normal(scale=s, size=(d_model, d_v)))


# --------------------------------------------------------------------------- exercise 1
def _qkv_cases():
    return [
        Case({"zh": "4 个词，d_model=6,d_k=3,d_v=2（W 不是方阵）",
              "en": "4 tokens, d_model=6, d_k=3, d_v=2 (W is not square)"},
             (_normal(10, 4, 6), *_weights(6, 3, 2, seed=11))),
        Case({"zh": "3 个词，d_model=d_k=d_v=4（W 是方阵，转置不会报错）",
              "en": "3 tokens, d_model=d_k=d_v=4 (W is square: a transpose raises no error)"},
             (_normal(12, 3, 4), *_weights(4, 4, 4, seed=13))),
        Case({"zh": "只有 1 个词，d_model=5,d_k=2,d_v=3",
              "en": "a single token, d_model=5, d_k=2, d_v=3"},
             (_normal(14, 1, 5), *_weights(5, 2, 3, seed=15))),
        Case({"zh": "一批 2 个句子，X 形状 (2, 3, 5),d_k=4,d_v=2",
              "en": "a batch of 2 sentences, X of shape (2, 3, 5), d_k=4, d_v=2"},
             (_normal(16, 2, 3, 5), *_weights(5, 4, 2, seed=17))),
    ]


def check_qkv(learner, *, lang: str | None = None) -> None:
    """Check ``learner(X, W_Q, W_K, W_V) -> (Q, K, V)`` against :func:`project_qkv`.

    Parameters
    ----------
    learner : callable
        ``X: (..., L, d_model)``, ``W_Q, W_K: (d_model, d_k)``, ``W_V: (d_model, d_v)``;
        returns the tuple ``(Q, K, V)`` of shapes (..., L, d_k), (..., L, d_k), (..., L, d_v).
    lang : {"zh", "en"}, optional
        Language of the messages (default: the one set with ``checks.set_language``).

    Raises
    ------
    CheckFailed
        Names the input, the shape or values that differ, and a hint.

    Examples
    --------
    >>> check_qkv(lambda X, W_Q, W_K, W_V: (X @ W_Q, X @ W_K, X @ W_V), lang="en")
    ✓ Q, K, V from one X: all 4 cases pass
    """
    check_function(
        learner, project_qkv, _qkv_cases(), lang=lang,
        name={"zh": "从同一个 X 得到 Q、K、V", "en": "Q, K, V from one X"},
        hint={"zh": "每个词是 X 的一行，所以是 X @ W(形状 (L, d_model) @ (d_model, d_k)),"
                    "不是 X @ W.T;K 要用 W_K,V 要用 W_V；按 (Q, K, V) 的顺序返回。",
              "en": "each token is a row of X, so it is X @ W ((L, d_model) @ (d_model, d_k)), "
                    "not X @ W.T; K uses W_K and V uses W_V; return them in the order (Q, K, V)."},
    )


# --------------------------------------------------------------------------- exercise 2
def _scores(Q, K):
    return np.einsum("ld,sd->ls", Q, K)                                        # (L, S)


def _score_cases():
    q = _normal(20, 4, 3)
    return [
        Case({"zh": "4 个查询，4 个不同的键（分数矩阵不对称）",
              "en": "4 queries and 4 different keys (the score matrix is not symmetric)"},
             (q, _normal(21, 4, 3))),
        Case({"zh": "3 个查询，5 个键（L=3 ≠ S=5）", "en": "3 queries, 5 keys (L=3 ≠ S=5)"},
             (_normal(22, 3, 2), _normal(23, 5, 2))),
        Case({"zh": "Q 与 K 相同（共享 W，对称）", "en": "Q equal to K (a shared W: symmetric)"},
             (q, q.copy())),
        Case({"zh": "1 个查询，2 个键，d_k=1", "en": "1 query, 2 keys, d_k=1"},
             (np.array([[2.0]]), np.array([[3.0], [-1.0]]))),
    ]


def check_score_matrix(learner, *, lang: str | None = None) -> None:
    """Check ``learner(Q, K) -> S`` with ``S[i, j] = q_i · k_j`` (no scaling yet).

    Parameters
    ----------
    learner : callable
        ``Q: (L, d_k)``, ``K: (S, d_k)``; returns the score matrix, shape (L, S).
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed

    Examples
    --------
    >>> check_score_matrix(lambda Q, K: Q @ K.T, lang="en")
    ✓ score matrix Q Kᵀ: all 4 cases pass
    """
    check_function(
        learner, _scores, _score_cases(), lang=lang,
        name={"zh": "分数矩阵 Q Kᵀ", "en": "score matrix Q Kᵀ"},
        hint={"zh": "第 i 行属于第 i 个查询：S[i, j] = Q[i] · K[j]，即 Q @ K.T，形状 (L, S)。"
                    "K @ Q.T 是它的转置——只有 Q 与 K 相同时两者才相等。",
              "en": "row i belongs to query i: S[i, j] = Q[i] · K[j], that is Q @ K.T, of shape "
                    "(L, S). K @ Q.T is its transpose - equal only when Q and K are the same."},
    )


# --------------------------------------------------------------------------- exercise 3
def _cross_weights(X_query, X_source, W_Q, W_K):
    q = X_query @ W_Q                                                           # (L, d_k)
    k = X_source @ W_K                                                          # (S, d_k)
    _, weights = scaled_dot_product_attention(q, k, k, return_weights=True)    # (L, S)
    return weights


def _cross_cases():
    W_Q, W_K, _ = _weights(6, 4, 4, seed=31)
    return [
        Case({"zh": "中文句子 3 个词提问，英文句子 5 个词被查（L=3,S=5）",
              "en": "a 3-word Chinese sentence asks, a 5-word English one answers (L=3, S=5)"},
             (_normal(30, 3, 6), _normal(32, 5, 6), W_Q, W_K)),
        Case({"zh": "两个句子都是 4 个词（L = S，换错来源不会报错）",
              "en": "both sentences have 4 words (L = S: swapped sources raise no error)"},
             (_normal(33, 4, 6), _normal(34, 4, 6), W_Q, W_K)),
        Case({"zh": "被查的句子只有 1 个词（每行权重都是 1）",
              "en": "the sentence looked at has a single word (every weight is 1)"},
             (_normal(35, 3, 6), _normal(36, 1, 6), W_Q, W_K)),
        Case({"zh": "很大的分数（嵌入乘以 40，分数上千）",
              "en": "very large scores (embeddings times 40, scores in the thousands)"},
             (40 * _normal(37, 2, 6), 40 * _normal(38, 3, 6), W_Q, W_K)),
    ]


def check_cross_attention_weights(learner, *, lang: str | None = None) -> None:
    """Check ``learner(X_query, X_source, W_Q, W_K) -> weights`` of cross-attention.

    The queries come from ``X_query`` (L tokens), the keys from ``X_source`` (S tokens); the
    weights are ``softmax(Q Kᵀ / sqrt(d_k))`` row by row, shape (L, S).

    Parameters
    ----------
    learner : callable
        ``X_query: (L, d_model)``, ``X_source: (S, d_model)``, ``W_Q, W_K: (d_model, d_k)``.
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed

    Examples
    --------
    >>> from attention_course import softmax
    >>> def weights(X_query, X_source, W_Q, W_K):
    ...     Q, K = X_query @ W_Q, X_source @ W_K
    ...     return softmax(Q @ K.T / np.sqrt(K.shape[-1]), axis=-1)
    >>> check_cross_attention_weights(weights, lang="en")
    ✓ cross-attention weights: all 4 cases pass
    """
    check_function(
        learner, _cross_weights, _cross_cases(), lang=lang,
        name={"zh": "交叉注意力权重", "en": "cross-attention weights"},
        hint={"zh": "Q 来自提问的句子 X_query（用 W_Q），K 来自被查的句子 X_source（用 W_K）；"
                    "分数 Q @ K.T 除以 √d_k，再对每一行（axis=-1）做 softmax。结果形状是 (L, S)。"
                    "库里的 softmax 先减去每行最大值，分数很大时也不会溢出。",
              "en": "Q comes from the asking sentence X_query (with W_Q), K from the sentence "
                    "looked at, X_source (with W_K); divide the scores Q @ K.T by √d_k, then "
                    "softmax each row (axis=-1). The result has shape (L, S). The library's "
                    "softmax subtracts each row's maximum, so large scores do not overflow."},
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
    ]


def check_cosine(learner, *, lang: str | None = None) -> None:
    """Check ``learner(a, b)``: the cosine similarity along the last axis.

    Parameters
    ----------
    learner : callable
        ``a, b: (..., d)``, broadcast against each other; returns shape (...), 0 where either
        vector is zero (as :func:`cosine_similarity` does).
    lang : {"zh", "en"}, optional

    Raises
    ------
    CheckFailed

    Examples
    --------
    >>> check_cosine(cosine_similarity, lang="en")
    ✓ cosine similarity: all 6 cases pass
    """
    check_function(
        learner, cosine_similarity, _cosine_cases(), lang=lang,
        name={"zh": "余弦相似度", "en": "cosine similarity"},
        hint={"zh": "点积要除以两个向量长度的乘积：(a·b) / (|a|·|b|)，都沿最后一个轴算"
                    "(np.sum(..., axis=-1)、np.linalg.norm(..., axis=-1))；长度为 0 时返回 0。",
              "en": "divide the dot product by the product of both lengths: (a·b) / (|a|·|b|), "
                    "all along the last axis (np.sum(..., axis=-1), np.linalg.norm(..., axis=-1)); "
                    "return 0 where a length is 0."},
    )
