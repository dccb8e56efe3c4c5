"""Widget of notebook 02: shared or separate W_Q and W_K, and the symmetry of the scores.

With one matrix for queries and keys (``W_K = W_Q``) the score matrix ``Q Kᵀ`` equals its
own transpose: "it looks at cat" scores exactly what "cat looks at it" scores. Turning the keys by
an angle θ (``W_K = W_Q · R(θ)``, :func:`~attention_course.plane_rotation`) breaks that symmetry.
Because ``Q Kᵀ - K Qᵀ = Q (R(θ)ᵀ - R(θ)) Qᵀ`` and ``R(θ)ᵀ - R(θ)`` is ``2 sin θ`` times a fixed matrix,
the asymmetry grows as ``|sin θ|``: largest at 90°, and gone again at 180°, where the rotation is
symmetric (it just flips the sign of two axes).
"""

from __future__ import annotations

import ipywidgets as w
import numpy as np

from .. import examples
from ..plots import heatmap, set_heatmap
from ..projections import plane_rotation
from .renderer import Explorer, check_lang

_TEXT = {
    "zh": {
        "mode": "W_K",
        "shared": "共用：W_K = W_Q",
        "separate": "分开：W_K = W_Q·R(θ)",
        "angle": "θ（度）",
        "scores": "分数 QKᵀ",
        "asym": "不对称部分 |QKᵀ − KQᵀ|",
        "pair": "{a}→{b} {x:.2f} · {b}→{a} {y:.2f}",
        "max": "最大值 {m:.3f}",
        "rows": "查询（提问的词）",
        "cols": "键（被看的词）",
        "sup_shared": "W_K = W_Q：分数矩阵沿对角线对称",
        "sup_separate": "W_K = W_Q·R({deg}°)",
        "score_bar": "分数（有正有负）",
        "asym_bar": "|QKᵀ − KQᵀ|",
    },
    "en": {
        "mode": "W_K",
        "shared": "shared: W_K = W_Q",
        "separate": "separate: W_K = W_Q·R(θ)",
        "angle": "θ (degrees)",
        "scores": "scores QKᵀ",
        "asym": "asymmetric part |QKᵀ − KQᵀ|",
        "pair": "{a}→{b} {x:.2f} · {b}→{a} {y:.2f}",
        "max": "max {m:.3f}",
        "rows": "query (word asking)",
        "cols": "key (word looked at)",
        "sup_shared": "W_K = W_Q: the score matrix is symmetric about its diagonal",
        "sup_separate": "W_K = W_Q·R({deg}°)",
        "score_bar": "score (signed)",
        "asym_bar": "|QKᵀ − KQᵀ|",
    },
}


class SymmetryExplorer(Explorer):
    """Toggle shared/separate W_Q and W_K, turn W_K by θ, and watch the scores' symmetry.

    The sentence is 它 是 一只 猫 / "it is a cat" with :func:`examples.toy_embeddings` and a
    seeded random W_Q that stands in for a learned one (the embeddings and W_Q of notebook 02).

    Parameters
    ----------
    lang : {"zh", "en"}
        Language of the labels and of the sentence.
    d_model, d_k : int
        Embedding width and query/key width (``d_k >= 2``: the rotation needs a plane).
    seed : int
        Seeds the embeddings and W_Q (3, as in notebook 02).

    Attributes
    ----------
    data : dict
        ``tokens`` (list of n str), ``shared`` (bool), ``angle`` (degrees, float),
        ``scores`` (ndarray (n, n): Q Kᵀ), ``asymmetry`` (float: max |Q Kᵀ - K Qᵀ|, 0 when
        shared), ``asym_matrix`` (ndarray (n, n): |Q Kᵀ - K Qᵀ|), ``forward`` (score of the first
        word looking at the last), ``backward`` (the last looking at the first), ``score_limit``
        and ``asym_limit`` (fixed colour ranges, the same for every θ so that pictures can be
        compared).

    Examples
    --------
    >>> ex = SymmetryExplorer(lang="en")
    >>> ex.compute(shared=True, angle=0)["asymmetry"]
    0.0
    >>> ex.compute(shared=False, angle=90)["asymmetry"] > 0
    True
    """

    def __init__(self, lang: str = "en", *, d_model: int = 8, d_k: int = 4, seed: int = 3):
        self.lang = check_lang(lang)
        text = _TEXT[self.lang]
        self.tokens = list(examples.IT_IS_A_CAT[self.lang])
        # The embedding table is looked up with the English words in both languages, so that
        # 它/it and 猫/cat get the same vectors and both editions show the same numbers.
        x = examples.toy_embeddings(examples.IT_IS_A_CAT["en"], d_model, seed=seed)  # (n, d_model)
        rng = np.random.default_rng(seed)
        self.W_q = rng.normal(size=(d_model, d_k)) / np.sqrt(d_model)          # (d_model, d_k)
        self.d_k = d_k
        self._x = x
        self._q = x @ self.W_q                                                 # (n, d_k)
        # Cauchy-Schwarz: no rotation of the keys can push |q_i·k_j| above max |q|², so this
        # range holds for every θ and the colours of two settings mean the same numbers.
        self._score_limit = float((self._q ** 2).sum(-1).max())
        # Q Kᵀ - K Qᵀ is sin θ times its value at 90°: that value bounds the asymmetry.
        s90 = self._q @ (self._q @ plane_rotation(d_k, np.pi / 2)).T
        self._asym_limit = float(np.abs(s90 - s90.T).max())
        controls = {
            "shared": w.ToggleButtons(
                options=[(text["shared"], True), (text["separate"], False)], value=False,
                description=text["mode"], style={"button_width": "auto"}),
            "angle": w.IntSlider(value=60, min=0, max=180, step=5, description=text["angle"],
                                 continuous_update=True),
        }
        super().__init__(controls, columns=1)
        # In shared mode there is nothing to turn; grey the slider out so that is visible.
        self.controls["shared"].observe(self._sync_slider, names="value")
        self._sync_slider()

    def _sync_slider(self, _change=None) -> None:
        self.controls["angle"].disabled = bool(self.controls["shared"].value)

    def compute(self, shared: bool, angle: float) -> dict:
        """Scores and their asymmetry for one setting (pure: no widgets, no plotting).

        Parameters
        ----------
        shared : bool
            ``W_K = W_Q`` (the angle is then ignored).
        angle : float
            θ in degrees for ``W_K = W_Q · R(θ)``, R turning the first two axes of the
            d_k-dimensional query/key space.

        Returns
        -------
        dict
            See the class's ``data`` attribute.
        """
        if shared:
            keys = self._q      # W_K is W_Q, so K is Q: the very same projection
        else:
            keys = self._x @ (self.W_q @ plane_rotation(self.d_k, np.deg2rad(angle)))  # (n, d_k)
        scores = self._q @ keys.T                                               # (n, n)
        asym = np.abs(scores - scores.T)
        return {
            "tokens": self.tokens,
            "shared": bool(shared),
            "angle": float(angle),
            "scores": scores,
            "asym_matrix": asym,
            "asymmetry": float(asym.max()),
            "forward": float(scores[0, -1]),
            "backward": float(scores[-1, 0]),
            "score_limit": self._score_limit,
            "asym_limit": self._asym_limit,
        }

    figsize = (9, 3.6)

    def build(self, fig, data: dict) -> dict:
        """Two heatmaps: the scores, and how far they are from symmetric."""
        text = _TEXT[self.lang]
        tokens = data["tokens"]
        axes = fig.subplots(1, 2)
        lim = data["score_limit"]
        # Fixed ranges (see compute): the same colour is the same number at every θ.
        heatmap(data["scores"], tokens, tokens, ax=axes[0], vmin=-lim, vmax=lim, title="\n",
                xlabel=text["cols"], ylabel=text["rows"], cbar_label=text["score_bar"])
        heatmap(data["asym_matrix"], tokens, tokens, ax=axes[1], cmap="Oranges", vmin=0.0,
                vmax=data["asym_limit"], title="\n", xlabel=text["cols"],
                cbar_label=text["asym_bar"])
        sup = fig.suptitle(" ")
        fig.tight_layout()
        return {"scores": axes[0], "asym": axes[1], "sup": sup}

    def update(self, art: dict, data: dict) -> list:
        text = _TEXT[self.lang]
        tokens = data["tokens"]
        art["scores"].title.set_text(text["scores"] + "\n" + text["pair"].format(
            a=tokens[0], b=tokens[-1], x=data["forward"], y=data["backward"]))
        art["asym"].title.set_text(text["asym"] + "\n" + text["max"].format(m=data["asymmetry"]))
        art["sup"].set_text(text["sup_shared"] if data["shared"]
                            else text["sup_separate"].format(deg=round(data["angle"])))
        return [*set_heatmap(art["scores"], data["scores"]),
                *set_heatmap(art["asym"], data["asym_matrix"]),
                art["scores"].title, art["asym"].title, art["sup"]]
