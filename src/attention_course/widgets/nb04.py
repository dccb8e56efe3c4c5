"""Widget of notebook 04: pick the number of heads and one head, watch its heatmap.

The heads are the hand-set ones of :mod:`attention_course.head_patterns` on the trophy sentence
(set by hand, not learned). Beside the chosen head the figure shows the heads' average, which is
what ``MultiHeadAttention`` (and PyTorch) return by default.
"""

from __future__ import annotations

import ipywidgets as w

from .. import examples, head_patterns, plots
from .renderer import Explorer, check_lang

#: Head counts offered; each divides the hand-set layer's width.
HEAD_COUNTS = (1, 2, 3, 4, 6)
D_MODEL = 96

_TEXT = {
    "zh": {
        "num_heads": "头数 h",
        "head": "看第几个头",
        "average": "{H} 个头的平均（默认返回的权重）",
        "head_title": "头 {h}（编号 0–{last}）：{name}",
        "query": "查询（提问的词）",
        "key": "键（被看的词）",
        "suptitle": "{H} 个头 × 每头 {D} 维 = {E} 维；参数 {n:,} 个（与 h 无关）",
    },
    "en": {
        "num_heads": "heads h",
        "head": "show head",
        "average": "average of {H} heads (the default weights returned)",
        "head_title": "head {h} (heads 0–{last}): {name}",
        "query": "query (word asking)",
        "key": "key (word looked at)",
        "suptitle": "{H} heads × {D} wide = {E}; {n:,} parameters (whatever h is)",
    },
}


class HeadExplorer(Explorer):
    """Choose h (the first h hand-set patterns) and one head; see its weights and the average.

    Parameters
    ----------
    lang : {"zh", "en"}
        Language of the sentence and the labels.
    num_heads : int
        Starting number of heads, one of :data:`HEAD_COUNTS`.
    head : int
        Starting head (0-based).

    Attributes
    ----------
    data : dict
        ``tokens``; ``num_heads``; ``head``; ``head_dim``; ``patterns`` (one name per head);
        ``weights`` (H, L, L), every head; ``shown`` (L, L), the chosen head's weights;
        ``average`` (L, L), their mean over heads; ``num_parameters``.

    Examples
    --------
    >>> ex = HeadExplorer(lang="en")
    >>> ex.data["weights"].shape, ex.data["patterns"][ex.data["head"]]
    ((3, 13, 13), 'antecedent')
    >>> ex.compute(num_heads=6, head=5)["weights"].shape      # what setting the controls does
    (6, 13, 13)
    """

    def __init__(self, lang: str = "en", num_heads: int = 3, head: int = 1):
        check_lang(lang)
        if num_heads not in HEAD_COUNTS:
            raise ValueError(f"num_heads must be one of {HEAD_COUNTS}; got {num_heads!r}")
        self.lang = lang
        self.tokens = examples.TROPHY[lang]
        self.roles = head_patterns.TROPHY_ROLES[lang]
        text = _TEXT[lang]
        count = w.Dropdown(options=list(HEAD_COUNTS), value=num_heads,
                           description=text["num_heads"], style={"description_width": "initial"})
        pick = w.IntSlider(min=0, max=num_heads - 1, value=min(head, num_heads - 1),
                           description=text["head"], style={"description_width": "initial"})
        # Registered before Explorer's own observer, so the slider's range is right when the
        # figure is redrawn.
        count.observe(self._fit_head_range, names="value")
        super().__init__({"num_heads": count, "head": pick}, columns=2)

    def _fit_head_range(self, change) -> None:
        self.controls["head"].max = change["new"] - 1      # clamps the value if it is too big

    def compute(self, num_heads: int, head: int) -> dict:
        patterns = head_patterns.layer_patterns(num_heads)   # one head: both relations, one budget
        head = min(max(int(head), 0), num_heads - 1)
        x, mha = head_patterns.hand_set_heads(self.tokens, self.roles, patterns, d_model=D_MODEL)
        _, weights = mha(x, average_attn_weights=False)     # (H, L, L)
        return {
            "tokens": list(self.tokens), "num_heads": num_heads, "head": head,
            "head_dim": mha.head_dim, "patterns": list(patterns), "weights": weights,
            "shown": weights[head], "average": weights.mean(axis=0),
            "num_parameters": mha.num_parameters,
        }

    figsize = (10, 4.2)

    def build(self, fig, data: dict) -> dict:
        text = _TEXT[self.lang]
        tokens = data["tokens"]
        axes = fig.subplots(1, 2)
        for ax, matrix in ((axes[0], data["shown"]), (axes[1], data["average"])):
            # weights: one colour scale, 0 to 1, for every head and every h
            plots.heatmap(matrix, tokens, tokens, ax=ax, title=" ", vmin=0.0, vmax=1.0,
                          fmt="{:.2f}", annotate=len(tokens) <= 10, xlabel=text["key"],
                          ylabel=text["query"])
            ax.tick_params(axis="x", labelsize=8)      # upright Chinese words must not run together
        sup = fig.suptitle(" ")
        fig.tight_layout()
        return {"head": axes[0], "average": axes[1], "sup": sup}

    def update(self, art: dict, data: dict) -> list:
        text = _TEXT[self.lang]
        H, h = data["num_heads"], data["head"]
        name = head_patterns.PATTERN_NAMES[data["patterns"][h]][self.lang]
        art["head"].title.set_text(text["head_title"].format(h=h, last=H - 1, name=name))
        art["average"].title.set_text(text["average"].format(H=H))
        art["sup"].set_text(text["suptitle"].format(H=H, D=data["head_dim"], E=D_MODEL,
                                                    n=data["num_parameters"]))
        return [*plots.set_heatmap(art["head"], data["shown"]),
                *plots.set_heatmap(art["average"], data["average"]),
                art["head"].title, art["average"].title, art["sup"]]
