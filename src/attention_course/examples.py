"""The running examples of the course, in both languages.

Every number here is made by hand or by a fixed seed, so that each notebook prints the same
output on every run.
"""

from __future__ import annotations

import numpy as np

#: 它 是 一只 猫 - "it is a cat", the sentence of the intuition article.
IT_IS_A_CAT = {"zh": ["它", "是", "一只", "猫"], "en": ["it", "is", "a", "cat"]}

#: The article's raw scores of the query 它 against each word, and the normalised figures it
#: prints as illustration. ``softmax(IT_CAT_SCORES)`` is what the math actually gives.
IT_CAT_SCORES = np.array([0.5, 0.3, 1.2, 3.0])
IT_CAT_ARTICLE_WEIGHTS = np.array([0.05, 0.04, 0.13, 0.78])

#: The trophy and the suitcase: "it" refers to the trophy.
TROPHY = {
    "zh": ["奖杯", "没能", "塞进", "手提箱", "因为", "它", "太", "大", "了"],
    "en": ["the", "trophy", "did", "not", "fit", "in", "the", "suitcase", "because", "it",
           "was", "too", "big"],
}

#: 苹果 as fruit and as company.
APPLE = {
    "zh": {"fruit": ["我", "吃", "苹果"], "company": ["苹果", "发布", "新机"]},
    "en": {"fruit": ["I", "ate", "an", "apple"], "company": ["Apple", "released", "a", "phone"]},
}

#: "bank" by a river and "bank" for money.
BANK = {
    "en": {"river": ["the", "river", "bank", "flooded"], "money": ["the", "bank", "lent", "money"]},
    "zh": {"river": ["河", "岸", "被", "淹"], "money": ["银行", "发放", "贷款"]},
}

#: Word order matters: 狗咬人 (dog bites man) vs 人咬狗 (man bites dog).
DOG_BITES_MAN = {"zh": (["狗", "咬", "人"], ["人", "咬", "狗"]),
                 "en": (["dog", "bites", "man"], ["man", "bites", "dog"])}

#: A small shelf for the library analogy. Each book has a spine label (the key, hand-made
#: features) and a content (the value). Feature axes: cats, pets/care, poetry, physics.
FEATURES = {"zh": ["猫", "宠物护理", "诗歌", "物理"], "en": ["cats", "pet care", "poetry", "physics"]}
BOOKS = {
    "zh": ["猫咪饲养手册", "宠物护理", "唐诗三百首", "量子力学"],
    "en": ["Cat Keeping Handbook", "Pet Care", "300 Tang Poems", "Quantum Mechanics"],
}
BOOK_KEYS = np.array([
    [2.0, 1.0, 0.0, 0.0],   # cat handbook: mostly cats, some care
    [0.8, 2.0, 0.0, 0.0],   # pet care: care first, a little about cats
    [0.0, 0.0, 2.0, 0.0],   # poems
    [0.0, 0.0, 0.0, 2.0],   # quantum mechanics
])
#: What each book hands over. Content axes: feeding, deworming, verse, equations.
CONTENT_AXES = {"zh": ["喂养", "驱虫", "诗句", "公式"], "en": ["feeding", "deworming", "verse", "equations"]}
BOOK_VALUES = np.array([
    [0.9, 0.1, 0.0, 0.0],
    [0.3, 0.7, 0.0, 0.0],
    [0.0, 0.0, 1.0, 0.0],
    [0.0, 0.0, 0.0, 1.0],
])
#: Questions a reader may carry into the library (queries in the key's feature space).
QUESTIONS = {
    "zh": {"怎么照顾猫？": [1.0, 1.0, 0.0, 0.0], "想读诗": [0.0, 0.0, 1.5, 0.0],
           "猫和量子物理": [1.0, 0.0, 0.0, 1.0]},
    "en": {"How do I look after a cat?": [1.0, 1.0, 0.0, 0.0], "I want poems": [0.0, 0.0, 1.5, 0.0],
           "Cats and quantum physics": [1.0, 0.0, 0.0, 1.0]},
}


def toy_embeddings(tokens, d_model: int, seed: int = 0) -> np.ndarray:
    """A fixed random embedding per distinct token within one call.

    The same token gets the same row everywhere in ``tokens``. The table is drawn for the sorted
    set of distinct tokens, so two *separate* calls agree on a token only when their token sets
    are equal: embed two sentences in one call (and split the rows) to compare them.

    Parameters
    ----------
    tokens : sequence of str, length L
    d_model : int
    seed : int

    Returns
    -------
    ndarray, float64, shape (L, d_model)
        Rows drawn from N(0, 1/d_model), so a row has norm close to 1.

    Examples
    --------
    >>> x = toy_embeddings(["a", "b", "a"], 4)
    >>> x.shape, bool((x[0] == x[2]).all())
    ((3, 4), True)
    """
    tokens = list(tokens)
    vocab = sorted(set(tokens))
    rng = np.random.default_rng(seed)
    table = rng.normal(scale=1 / np.sqrt(d_model), size=(len(vocab), d_model))
    index = {t: i for i, t in enumerate(vocab)}
    return table[[index[t] for t in tokens]]


#: A hand-made embedding table in which context can really move a word's meaning (notebook 02).
#: Every axis means something; every number was set by hand, none was learned. The ambiguous
#: words (apple / 苹果, bank) sit half-way between their two senses. Chinese and English words
#: of the same meaning share one row, so the table also serves cross-attention (translation).
MEANING_AXES = {
    "zh": ["食物", "科技", "河流", "金钱", "东西", "人", "虚词"],
    "en": ["food", "tech", "river", "money", "thing", "person", "function word"],
}
_MEANING_ROWS = {
    #           food tech river money thing person function
    "i":        [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    "ate":      [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "an":       [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    "a":        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    "the":      [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    "apple":    [0.5, 0.5, 0.0, 0.0, 1.0, 0.0, 0.0],
    "released": [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    "phone":    [0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0],
    "river":    [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0],
    "bank":     [0.0, 0.0, 0.5, 0.5, 1.0, 0.0, 0.0],
    "flooded":  [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
    "lent":     [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
    "money":    [0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0],
}
_MEANING_ROWS.update({"我": _MEANING_ROWS["i"], "吃": _MEANING_ROWS["ate"],
                      "苹果": _MEANING_ROWS["apple"], "发布": _MEANING_ROWS["released"],
                      "新机": _MEANING_ROWS["phone"]})

#: Hand-made projections for the meaning table (d_model = 7, d_k = 2). Query axis 0: "a noun
#: looking for the word that sets the topic"; key axis 0: "I set the topic" (verbs and topic
#: nouns; a noun's own ``thing`` lowers it, so a verb sets the topic more than a noun does);
#: axis 1: function words, which nobody here asks for.
MEANING_W_Q = np.zeros((7, 2))
MEANING_W_Q[4, 0] = 4.0                       # thing -> "which topic am I in?"
MEANING_W_K = np.zeros((7, 2))
MEANING_W_K[0:4, 0] = 1.0                     # food, tech, river, money -> "I set the topic"
MEANING_W_K[4, 0] = -0.5                      # a noun sets it less than a verb
MEANING_W_K[6, 1] = 1.0                       # function words
#: The value hands over the embedding itself, so outputs can be read on the meaning axes.
MEANING_W_V = np.eye(7)


def meaning_embeddings(tokens) -> np.ndarray:
    """Rows of the hand-made meaning table (:data:`MEANING_AXES`) for ``tokens``.

    Parameters
    ----------
    tokens : sequence of str, length L
        Words of :data:`APPLE` or :data:`BANK` (English looked up in lower case).

    Returns
    -------
    ndarray, float64, shape (L, 7)

    Examples
    --------
    >>> meaning_embeddings(["苹果"]).tolist() == meaning_embeddings(["Apple"]).tolist()
    True
    """
    tokens = list(tokens)
    missing = [t for t in tokens if t.lower() not in _MEANING_ROWS]
    if missing:
        raise ValueError(f"tokens {missing} are not in the meaning table; it holds "
                         f"{sorted(_MEANING_ROWS)}")
    return np.array([_MEANING_ROWS[t.lower()] for t in tokens], dtype=float)
