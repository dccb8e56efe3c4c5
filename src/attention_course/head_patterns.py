"""Attention heads whose weights are set by hand, to show what trained heads have been found to do.

Nothing here is learned. Studies of trained Transformers (Clark et al. 2019, "What does BERT
look at?"; Voita et al. 2019, "Analyzing multi-head self-attention") found heads that look at
the previous or the next token, heads that spread out almost evenly, heads that send a pronoun
to the noun it refers to, heads that point at rare content words, and heads that park their
attention on the first token. This module writes such heads by hand into an ordinary
:class:`~attention_course.multihead.MultiHeadAttention`, so that a notebook can show each
head's pattern with the real layer computing it.

The embeddings are hand-made too. Each row is::

    [ position one-hot (MAX_LEN) | pronoun | antecedent | noun | last word | meaning ... ]

The flags are annotations written by hand: a trained model has to work out from context
(for the trophy sentence, from "too big") which noun a pronoun means; here we simply mark it.
"""

from __future__ import annotations

import numpy as np

from .examples import toy_embeddings
from .multihead import MultiHeadAttention

#: Longest sentence the hand-made embeddings can place (one one-hot slot per position).
MAX_LEN = 14

#: Columns of the hand-made embedding after the position one-hot (columns 0..MAX_LEN-1): the
#: flags "I am the pronoun", "I am the noun it refers to", "I am a noun", "I am the last word".
PRONOUN_COLUMN, ANTECEDENT_COLUMN, NOUN_COLUMN, LAST_COLUMN = MAX_LEN, MAX_LEN + 1, MAX_LEN + 2, MAX_LEN + 3
_PRONOUN, _ANTECEDENT, _NOUN, _LAST = PRONOUN_COLUMN, ANTECEDENT_COLUMN, NOUN_COLUMN, LAST_COLUMN
_FEATURES = MAX_LEN + 4
#: The gap between the score of the key a hand-set head wants and the others, after the scale.
SHARPNESS = 8.0

#: The patterns a hand-set head can follow, in the order a growing layer adds them.
PATTERNS = ("previous", "antecedent", "uniform", "next", "nouns", "first")

#: One head asked both of the first two questions: the previous word, and for the pronoun also
#: its noun, with equal scores. A layer of one head uses it (:func:`layer_patterns`), so that its
#: one budget is shared between the two relations instead of given to the first pattern.
SHARED = "both"

#: What each pattern is called in the figures.
PATTERN_NAMES = {
    "previous": {"zh": "前一个词", "en": "previous word"},
    "antecedent": {"zh": "代词 → 所指名词", "en": "pronoun → its noun"},
    "uniform": {"zh": "平均摊开", "en": "spread evenly"},
    "next": {"zh": "后一个词", "en": "next word"},
    "nouns": {"zh": "名词", "en": "the nouns"},
    "first": {"zh": "句首词", "en": "first word"},
    "both": {"zh": "前一个词和所指名词（同一份预算）", "en": "previous word and its noun (one budget)"},
}

#: Who is who in ``examples.TROPHY``: token indices of the pronoun, the noun it refers to, and
#: the nouns. Tests check these against the token lists.
TROPHY_ROLES = {
    "zh": {"pronoun": 5, "antecedent": 0, "nouns": (0, 3)},   # 它 -> 奖杯; 奖杯, 手提箱
    "en": {"pronoun": 9, "antecedent": 1, "nouns": (1, 7)},   # it -> trophy; trophy, suitcase
}


def hand_made_embeddings(tokens, roles, d_model: int = 96, seed: int = 0) -> np.ndarray:
    """One hand-made embedding per token: position, role flags, and a random "meaning".

    Parameters
    ----------
    tokens : sequence of str, length L (2 <= L <= MAX_LEN)
    roles : dict
        ``{"pronoun": int, "antecedent": int, "nouns": tuple of int}``, token indices.
    d_model : int
        Width of each embedding; at least ``MAX_LEN + 5``.
    seed : int
        Seed of the meaning part (:func:`~attention_course.examples.toy_embeddings`).

    Returns
    -------
    ndarray, float64, shape (L, d_model)
        Columns ``0..MAX_LEN-1``: position one-hot; then the pronoun, antecedent, noun and
        last-word flags; the rest: meaning, which only the values use.

    Examples
    --------
    >>> x = hand_made_embeddings(["it", "is", "a", "cat"],
    ...                          {"pronoun": 0, "antecedent": 3, "nouns": (3,)}, d_model=24)
    >>> x.shape, x[2, :4].tolist(), x[:, MAX_LEN].tolist()
    ((4, 24), [0.0, 0.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0])
    """
    tokens = list(tokens)
    L = len(tokens)
    if not 2 <= L <= MAX_LEN:
        raise ValueError(f"the hand-made embeddings place 2 to {MAX_LEN} tokens; got {L}")
    if not isinstance(d_model, (int, np.integer)) or d_model < _FEATURES + 1:
        raise ValueError(f"d_model must be an int >= {_FEATURES + 1}; got {d_model!r}")
    pronoun, antecedent, nouns = _check_roles(roles, L)
    x = np.zeros((L, d_model))
    x[np.arange(L), np.arange(L)] = 1.0
    x[pronoun, _PRONOUN] = 1.0
    x[antecedent, _ANTECEDENT] = 1.0
    x[list(nouns), _NOUN] = 1.0
    x[L - 1, _LAST] = 1.0
    x[:, _FEATURES:] = toy_embeddings(tokens, d_model - _FEATURES, seed=seed)
    return x


def _check_roles(roles, L):
    try:
        pronoun, antecedent = int(roles["pronoun"]), int(roles["antecedent"])
        nouns = tuple(int(i) for i in roles["nouns"])
    except (KeyError, TypeError) as exc:
        raise ValueError(
            "roles must be a dict with 'pronoun' (int), 'antecedent' (int) and 'nouns' "
            f"(ints); got {roles!r} ({exc})"
        ) from None
    for i in (pronoun, antecedent, *nouns):
        if not 0 <= i < L:
            raise ValueError(f"role index {i} is outside the sentence (0..{L - 1})")
    if pronoun == antecedent:
        raise ValueError("the pronoun and its antecedent must be different tokens")
    return pronoun, antecedent, nouns


def head_gain(head_dim: int, sharpness: float = SHARPNESS) -> float:
    """The entry written into W_Q and W_K where a query and a key should match.

    A match contributes ``gain² / sqrt(head_dim)`` to the scaled score; the gain is chosen so that
    this equals ``sharpness``.

    Examples
    --------
    >>> round(head_gain(16, 8.0) ** 2 / 4, 6)            # √16 = 4
    8.0
    """
    return float(np.sqrt(sharpness * np.sqrt(head_dim)))


def _head_weights(pattern: str, E: int, D: int, gain: float):
    """Article-layout (E, D) query and key matrices and the query bias of one head."""
    W_q, W_k, b_q = np.zeros((E, D)), np.zeros((E, D)), np.zeros(D)
    pos = np.arange(MAX_LEN)
    channel = MAX_LEN          # one spare head dimension for flag-to-flag matches
    if pattern in ("previous", SHARED):
        W_q[pos, pos] = gain                    # query i asks for "position i"
        W_k[pos[:-1], pos[1:]] = gain           # key j answers "position j+1"
        W_k[0, 0] = gain                        # the first word has no previous word: itself
        if pattern == SHARED:                   # the pronoun's noun scores as high as its neighbour
            W_q[_PRONOUN, channel] = gain
            W_k[_ANTECEDENT, channel] = gain
    elif pattern == "next":
        W_q[pos, pos] = gain
        W_k[pos[1:], pos[:-1]] = gain           # key j answers "position j-1"
        W_q[_LAST, channel] = gain              # the last word has no next word: itself
        W_k[_LAST, channel] = gain
    elif pattern == "antecedent":
        W_q[pos, pos] = gain                    # everyone matches itself...
        W_k[pos, pos] = gain
        W_q[_PRONOUN, channel] = 2 * gain       # ...but a pronoun matches its noun twice as well
        W_k[_ANTECEDENT, channel] = gain
    elif pattern == "nouns":
        b_q[channel] = gain                     # the same question from every word
        W_k[_NOUN, channel] = gain
    elif pattern == "first":
        b_q[channel] = gain
        W_k[0, channel] = gain                  # only position 0 answers it
    elif pattern != "uniform":                  # uniform: all scores 0, softmax spreads evenly
        raise ValueError(f"unknown pattern {pattern!r}; choose from {(*PATTERNS, SHARED)}")
    return W_q, W_k, b_q


def layer_patterns(num_heads: int) -> tuple:
    """The patterns of a hand-set layer of ``num_heads`` heads, as notebook 04's explorer builds it.

    Two heads or more take the first ``num_heads`` of :data:`PATTERNS`. One head gets
    :data:`SHARED`: both relations in one budget, with equal gains set by hand, so each gets about
    half (a head with unequal gains splits its budget unequally, as notebook 04 shows).

    Examples
    --------
    >>> layer_patterns(1), layer_patterns(3)
    (('both',), ('previous', 'antecedent', 'uniform'))
    """
    if isinstance(num_heads, bool) or not isinstance(num_heads, (int, np.integer)) or not (
            1 <= num_heads <= len(PATTERNS)):
        raise ValueError(f"num_heads must be an integer from 1 to {len(PATTERNS)}; got {num_heads!r}")
    return (SHARED,) if num_heads == 1 else PATTERNS[:num_heads]


def hand_set_heads(tokens, roles, patterns=PATTERNS[:3], d_model: int = 96,
                   sharpness: float = SHARPNESS, seed: int = 0):
    """A :class:`MultiHeadAttention` whose head ``h`` follows ``patterns[h]``, set by hand.

    Parameters
    ----------
    tokens : sequence of str, length L (2 <= L <= MAX_LEN)
    roles : dict
        Token indices, see :func:`hand_made_embeddings` (e.g. ``TROPHY_ROLES["zh"]``).
    patterns : sequence of str
        One entry of :data:`PATTERNS` (or :data:`SHARED`) per head; H = ``len(patterns)`` must
        divide ``d_model``, and each head needs a width ``d_model / H >= MAX_LEN + 1``.
    d_model : int
    sharpness : float
        The score gap (after the 1/sqrt(d_head) scale) between the key a head wants and the
        rest; 8 puts about 0.99 of the weight on it.
    seed : int
        Seed of the embeddings' meaning part.

    Returns
    -------
    x : ndarray, float64, shape (L, d_model)
        The hand-made embeddings.
    mha : MultiHeadAttention
        float64 weights. Values: head h passes on slice ``h*D:(h+1)*D`` of the embedding;
        ``out_proj_weight`` is the identity, so the output is the heads' concatenation.

    Examples
    --------
    >>> tokens = ["it", "is", "a", "cat"]
    >>> x, mha = hand_set_heads(tokens, {"pronoun": 0, "antecedent": 3, "nouns": (3,)},
    ...                         patterns=("previous", "antecedent"), d_model=32)
    >>> _, w = mha(x, average_attn_weights=False)          # (H, L, L)
    >>> w.argmax(-1).tolist()                              # each row's favourite key
    [[0, 0, 1, 2], [3, 1, 2, 3]]
    """
    patterns = tuple(patterns)
    if not patterns:
        raise ValueError("patterns is empty; give at least one head")
    unknown = [p for p in patterns if p not in (*PATTERNS, SHARED)]
    if unknown:
        raise ValueError(f"unknown pattern(s) {unknown}; choose from {(*PATTERNS, SHARED)}")
    H = len(patterns)
    if d_model % H:
        raise ValueError(f"d_model={d_model} is not divisible by {H} heads")
    D = d_model // H
    if D < MAX_LEN + 1:
        raise ValueError(
            f"each head is {D} wide; a hand-set head needs at least {MAX_LEN + 1} "
            f"(one slot per position plus one): use a larger d_model or fewer heads"
        )
    if not (np.isfinite(sharpness) and sharpness > 0):
        raise ValueError(f"sharpness must be a positive number; got {sharpness!r}")
    x = hand_made_embeddings(tokens, roles, d_model, seed)
    gain = head_gain(D, sharpness)
    per_head = [_head_weights(p, d_model, D, gain) for p in patterns]
    W_q = np.concatenate([w[0] for w in per_head], axis=1)   # (E, H*D): the heads side by side
    W_k = np.concatenate([w[1] for w in per_head], axis=1)   # (E, H*D)
    b_q = np.concatenate([w[2] for w in per_head])           # (H*D,)
    W_v = np.eye(d_model)                                    # head h passes on its own slice
    mha = MultiHeadAttention(d_model, H, dtype=np.float64)
    mha.in_proj_weight = np.concatenate([W_q.T, W_k.T, W_v.T])   # (3E, E), torch (out, in)
    mha.in_proj_bias = np.concatenate([b_q, np.zeros(2 * d_model)])
    mha.out_proj_weight = np.eye(d_model)
    mha.out_proj_bias = np.zeros(d_model)
    return x, mha
