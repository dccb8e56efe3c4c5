"""Widgets of notebook 01, the library analogy: the softmax budget and the library shelf.

- :class:`BudgetExplorer` - four raw scores and a temperature; the weights always share a
  budget of 1.
- :class:`LibraryExplorer` - pick a question, see how much each book contributes and the note
  that comes out, with a soft (softmax) or an exact (best book only) lookup.
"""

from __future__ import annotations

import textwrap

import ipywidgets as w
import numpy as np

from .. import examples
from ..plots import bar_artists, set_bars, weight_bars
from ..softmax import softmax
from .renderer import Explorer, check_lang

_TEXT = {
    "zh": {
        "temperature": "温度 T",
        "scores_title": "原始分数（“它”对每个词）",
        "weights_title": "softmax 权重（T = {t:.2f}，总和 = {total:.3f}）",
        "question": "问题",
        "soft": "软查找（softmax）",
        "exact": "精确查找（只取最好的书）",
        "book_weights": "每本书分到的权重",
        "note": "你的笔记（按权重混合的内容）",
        "soft_short": "软查找",
        "exact_short": "精确查找",
    },
    "en": {
        "temperature": "temperature T",
        "scores_title": "raw scores (of 'it' for each word)",
        "weights_title": "softmax weights (T = {t:.2f}, sum = {total:.3f})",
        "question": "question",
        "soft": "soft lookup (softmax)",
        "exact": "exact lookup (best book only)",
        "book_weights": "weight given to each book",
        "note": "your note (contents mixed by weight)",
        "soft_short": "soft lookup",
        "exact_short": "exact lookup",
    },
}


def library_lookup(query, keys, values, mode: str = "soft"):
    """Look one question up on a shelf: weights over the books and the blended content.

    Parameters
    ----------
    query : array_like, shape (E,)
        The question, in the same feature space as the spine labels.
    keys : ndarray, shape (S, E)
        One spine label per book.
    values : ndarray, shape (S, Ev)
        One content per book; Ev need not equal E.
    mode : {"soft", "exact"}
        ``"soft"``: softmax of the scores ``keys @ query``. ``"exact"``: all the weight on the
        best-scoring book (the first one on a tie), as a plain index lookup would do.

    Returns
    -------
    scores : ndarray, shape (S,)
        How well each label answers the question (a plain dot product, no scaling).
    weights : ndarray, shape (S,)
        Sum to 1.
    blend : ndarray, shape (Ev,)
        ``weights @ values``: the note you take home.

    Examples
    --------
    >>> keys = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> values = np.array([[10.0], [20.0]])
    >>> scores, weights, blend = library_lookup([2.0, 0.0], keys, values)
    >>> weights.round(3), blend.round(2)
    (array([0.881, 0.119]), array([11.19]))
    >>> library_lookup([2.0, 0.0], keys, values, mode="exact")[2]
    array([10.])
    """
    q = np.asarray(query, dtype=float)
    keys = np.asarray(keys, dtype=float)
    values = np.asarray(values, dtype=float)
    if q.ndim != 1 or keys.ndim != 2 or q.shape[0] != keys.shape[1]:
        raise ValueError(
            f"query must be (E,) and keys (S, E) with the same E; got query {q.shape}, "
            f"keys {keys.shape}"
        )
    if values.ndim != 2 or values.shape[0] != keys.shape[0]:
        raise ValueError(
            f"values must be (S, Ev) with one row per key; got keys {keys.shape}, "
            f"values {values.shape}"
        )
    scores = keys @ q                                   # (S,)
    if mode == "soft":
        weights = softmax(scores)
    elif mode == "exact":
        weights = np.zeros_like(scores)
        weights[np.argmax(scores)] = 1.0
    else:
        raise ValueError(f"mode must be 'soft' or 'exact'; got {mode!r}")
    return scores, weights, weights @ values            # blend: (Ev,)


def _wrap(labels, width: int = 12):
    # Long English titles would overlap under narrow bars; Chinese ones have no spaces and stay.
    return [textwrap.fill(str(label), width) for label in labels]


class BudgetExplorer(Explorer):
    """Four raw scores of 它 against 它 / 是 / 一只 / 猫 and a temperature -> softmax weights.

    Controls ``score_0`` ... ``score_3`` start at the article's scores 0.5 / 0.3 / 1.2 / 3.0;
    ``temperature`` divides every score before the softmax.

    Parameters
    ----------
    lang : {"zh", "en"}
        Language of the labels.

    Attributes
    ----------
    data : dict
        ``tokens``, ``scores`` (4,), ``temperature``, ``weights`` (4,) that sum to 1, ``total``
        (their sum) and ``top`` (index of the largest weight).

    Examples
    --------
    >>> ex = BudgetExplorer(lang="en")
    >>> ex.data["weights"].round(3), round(ex.data["total"], 6)
    (array([0.062, 0.051, 0.126, 0.761]), 1.0)
    >>> hot = ex.compute(**{**ex.values(), "temperature": 10.0})
    >>> hot["weights"].round(3)
    array([0.231, 0.226, 0.247, 0.296])
    """

    def __init__(self, lang: str = "en"):
        self.lang = check_lang(lang)
        self.tokens = list(examples.IT_IS_A_CAT[lang])
        style = {"description_width": "initial"}
        controls = {
            f"score_{i}": w.FloatSlider(
                value=float(s), min=-2.0, max=5.0, step=0.1, description=tok, style=style,
                continuous_update=True, layout=w.Layout(width="220px"),
            )
            for i, (tok, s) in enumerate(zip(self.tokens, examples.IT_CAT_SCORES, strict=True))
        }
        controls["temperature"] = w.FloatLogSlider(
            value=1.0, base=10, min=-1, max=1, step=0.05, description=_TEXT[lang]["temperature"],
            style=style, continuous_update=True, readout_format=".2f",
            layout=w.Layout(width="320px"),
        )
        super().__init__(controls, columns=4)

    def compute(self, *, score_0, score_1, score_2, score_3, temperature) -> dict:
        scores = np.array([score_0, score_1, score_2, score_3], dtype=float)
        weights = softmax(scores, temperature=float(temperature))
        return {"tokens": self.tokens, "scores": scores, "temperature": float(temperature),
                "weights": weights, "total": float(weights.sum()),
                "top": int(np.argmax(weights))}

    figsize = (8, 3)

    def build(self, fig, data: dict) -> dict:
        text = _TEXT[self.lang]
        ax_s, ax_w = fig.subplots(1, 2)
        bars = ax_s.bar(range(4), data["scores"], color="tab:gray")
        ax_s.bar_label(bars, labels=[f"{s:.1f}" for s in data["scores"]], fontsize=8)
        ax_s.set_xticks(range(4), labels=data["tokens"])
        ax_s.set_ylim(-2.2, 5.6)
        zero = ax_s.axhline(0, color="black", lw=0.6)
        ax_s.set_title(text["scores_title"], fontsize=10)
        weight_bars(data["weights"], data["tokens"], ax=ax_w, ylim=(0, 1.08), title=" ")
        ax_w.title.set_fontsize(10)
        fig.tight_layout()
        return {"scores": bar_artists(ax_s), "weights": bar_artists(ax_w), "title": ax_w.title,
                "zero": zero}

    def update(self, art: dict, data: dict) -> list:
        text = _TEXT[self.lang]
        colors = ["tab:orange" if i == data["top"] else "tab:blue" for i in range(4)]
        art["title"].set_text(text["weights_title"].format(t=data["temperature"],
                                                          total=data["total"]))
        # the zero line is drawn again over the bars, as a full draw puts it
        return [*set_bars(*art["scores"], data["scores"], fmt="{:.1f}"),
                *set_bars(*art["weights"], data["weights"], colors=colors), art["title"],
                art["zero"]]


class LibraryExplorer(Explorer):
    """Pick a question; see the weight each book gets and the note that comes out.

    The shelf is ``examples.BOOKS`` with spine labels ``BOOK_KEYS`` and contents
    ``BOOK_VALUES``; the questions are ``examples.QUESTIONS[lang]``.

    Parameters
    ----------
    lang : {"zh", "en"}
        Language of the labels and of the questions.

    Attributes
    ----------
    data : dict
        ``question``, ``mode``, ``query`` (4,), ``scores`` (4,), ``weights`` (4,) that sum to 1,
        ``blend`` (4,) over ``content_axes``, ``books``.

    Examples
    --------
    >>> ex = LibraryExplorer(lang="en")
    >>> ex.data["question"], ex.data["weights"].round(3)
    ('How do I look after a cat?', array([0.521, 0.427, 0.026, 0.026]))
    >>> ex.compute(question=ex.data["question"], mode="exact")["blend"]
    array([0.9, 0.1, 0. , 0. ])
    """

    def __init__(self, lang: str = "en"):
        self.lang = check_lang(lang)
        text = _TEXT[lang]
        self.questions = {q: np.asarray(v, dtype=float)
                          for q, v in examples.QUESTIONS[lang].items()}
        self.books = list(examples.BOOKS[lang])
        self.content_axes = list(examples.CONTENT_AXES[lang])
        controls = {
            "question": w.Dropdown(options=list(self.questions), description=text["question"],
                                   layout=w.Layout(width="320px")),
            "mode": w.ToggleButtons(options=[(text["soft"], "soft"), (text["exact"], "exact")],
                                    value="soft", style={"button_width": "190px"}),
        }
        super().__init__(controls, columns=2)

    def compute(self, *, question, mode) -> dict:
        query = self.questions[question]
        scores, weights, blend = library_lookup(query, examples.BOOK_KEYS,
                                                examples.BOOK_VALUES, mode=mode)
        return {"question": question, "mode": mode, "query": query, "scores": scores,
                "weights": weights, "blend": blend, "books": self.books,
                "content_axes": self.content_axes}

    figsize = (9, 3.4)

    def build(self, fig, data: dict) -> dict:
        text = _TEXT[self.lang]
        ax_b, ax_n = fig.subplots(1, 2)
        weight_bars(data["weights"], _wrap(data["books"]), ax=ax_b, ylim=(0, 1.08), title=" ")
        ax_b.set_ylabel(text["book_weights"])
        weight_bars(data["blend"], data["content_axes"], ax=ax_n, color="tab:green",
                    ylim=(0, 1.08), title=" ")
        ax_n.set_ylabel(text["note"])
        for ax in (ax_b, ax_n):
            ax.title.set_fontsize(10)
            ax.yaxis.label.set_fontsize(9)
            ax.tick_params(axis="x", labelsize=8)
        fig.tight_layout()
        return {"books": bar_artists(ax_b), "note": bar_artists(ax_n),
                "question": ax_b.title, "mode": ax_n.title}

    def update(self, art: dict, data: dict) -> list:
        art["question"].set_text(data["question"])
        art["mode"].set_text(_TEXT[self.lang][data["mode"] + "_short"])
        return [*set_bars(*art["books"], data["weights"]), *set_bars(*art["note"], data["blend"]),
                art["question"], art["mode"]]
