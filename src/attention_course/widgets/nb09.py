"""Widget of notebook 09: a real model's attention, one sentence, one layer and one head at a time.

The prepared sentences run through the model once, when the explorer is made (every layer's
weights kept), so moving the layer or head sliders only redraws. Free text costs one forward pass
the first time it is shown. Beside the chosen head's map, a grid of all 30 × 9 heads gives an
overview: each cell is how much that head looks at the previous token in this sentence, with the
chosen head framed.
"""

from __future__ import annotations

import ipywidgets as w
from matplotlib.patches import Rectangle

from .. import plots
from ..pretrained import previous_token_scores, repeated_random_tokens
from .renderer import Explorer, check_lang

FREE = "free"

_TEXT = {
    "zh": {
        "sentence": "句子", "text": "自由输入", "layer": "层", "head": "头",
        "free": "（自由输入）", "query": "查询（位置，从 0 数）", "key": "键",
        "map": "头 {layer}.{head}（层.头，从 0 数）的注意力权重",
        "grid": "每个头看前一个词的平均权重", "grid_x": "头", "grid_y": "层",
        "repeat": "随机词重复两遍（2 × 12）",
    },
    "en": {
        "sentence": "sentence", "text": "free text", "layer": "layer", "head": "head",
        "free": "(free text)", "query": "query (position, from 0)", "key": "key",
        "map": "head {layer}.{head} (layer.head, from 0): attention weights",
        "grid": "mean weight on the previous token", "grid_x": "head",
        "grid_y": "layer", "repeat": "random tokens repeated (2 × 12)",
    },
}

#: Prepared sentences (English: the model was trained mostly on English text).
SENTENCES = {
    "trophy (big)": "The trophy did not fit into the suitcase because it was too big.",
    "trophy (small)": "The trophy did not fit into the suitcase because it was too small.",
    "bank (river)": "She sat on the bank of the river and watched the water.",
    "bank (money)": "He took the money out of the bank to pay the rent.",
}


class RealModelExplorer(Explorer):
    """Choose a sentence, a layer and a head of a loaded model; see that head's map and all heads.

    Parameters
    ----------
    model : attention_course.pretrained.PretrainedModel, optional
        Default: :func:`attention_course.pretrained.load` (the installed SmolLM2-135M).
    lang : {"zh", "en"}
    sentence : str
        Starting sentence, a key of :data:`SENTENCES`, the repeat, or ``"free"``.
    layer, head : int
        Starting head, counted from 0.

    Attributes
    ----------
    data : dict
        ``tokens`` (labels "position:token"); ``layer``; ``head``; ``weights`` (T, T) of that head;
        ``grid`` (n_layers, H), each head's mean weight on the previous token in this sentence.

    Examples
    --------
    >>> from attention_course import pretrained
    >>> ex = RealModelExplorer(pretrained.load(), lang="en")
    >>> ex.compute(sentence="trophy (big)", text="", layer=13, head=8)["weights"].shape
    (15, 15)
    """

    figsize = (11, 5.2)

    def __init__(self, model=None, lang: str = "en", sentence: str = "trophy (big)",
                 layer: int = 13, head: int = 8):
        self.lang = check_lang(lang)
        if model is None:
            from ..pretrained import load

            model = load()
        self.model = model
        text = _TEXT[lang]
        c = model.config
        self._prepared = {name: model.encode(s) for name, s in SENTENCES.items()}
        self._prepared["repeat"] = repeated_random_tokens(12, seed=0).tolist()
        options = [(name, name) for name in SENTENCES] + [(text["repeat"], "repeat"),
                                                         (text["free"], FREE)]
        if sentence not in self._prepared and sentence != FREE:
            raise ValueError(f"sentence must be one of {list(self._prepared)} or 'free'; "
                             f"got {sentence!r}")
        self._maps = {}
        for name, ids in self._prepared.items():           # once: every layer of every sentence
            self._maps[name] = self._run(ids)
        style = {"description_width": "initial"}
        controls = {
            "sentence": w.Dropdown(options=options, value=sentence, description=text["sentence"],
                                   style=style),
            "text": w.Text(value="The cat sat on the mat because it was tired.",
                           description=text["text"], continuous_update=False, style=style,
                           layout=w.Layout(width="28em")),
            "layer": w.IntSlider(min=0, max=c.n_layers - 1, value=layer,
                                 description=text["layer"], style=style),
            "head": w.IntSlider(min=0, max=c.H - 1, value=head, description=text["head"],
                                style=style),
        }
        super().__init__(controls, columns=2)

    def _run(self, ids):
        _, weights = self.model.forward(ids, return_weights=True)
        return {"ids": list(ids), "weights": weights, "grid": previous_token_scores(weights)}

    def compute(self, sentence: str, text: str, layer: int, head: int) -> dict:
        if sentence == FREE:
            key = ("free", text)
            if key not in self._maps:
                if len(self._maps) > 20:                   # free texts kept: a bounded few
                    for old in [k for k in self._maps if isinstance(k, tuple)][:5]:
                        del self._maps[old]
                self._maps[key] = self._run(self.model.encode(text or " "))
            run = self._maps[key]
        else:
            run = self._maps[sentence]
        pieces = self.model.token_strings(run["ids"])
        return {"tokens": [f"{i}:{p}" for i, p in enumerate(pieces)], "layer": int(layer),
                "head": int(head), "weights": run["weights"][layer, head], "grid": run["grid"]}

    def layout_key(self, data: dict):
        return tuple(data["tokens"])

    def build(self, fig, data: dict) -> dict:
        text = _TEXT[self.lang]
        ax_map, ax_grid = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
        tokens = data["tokens"]
        plots.heatmap(data["weights"], tokens, tokens, ax=ax_map, title=" ", vmin=0.0, vmax=1.0,
                      annotate=False, xlabel=text["key"], ylabel=text["query"])
        ax_map.tick_params(labelsize=7)
        n_layers, H = data["grid"].shape
        plots.heatmap(data["grid"], [str(i) for i in range(n_layers)], [str(h) for h in range(H)],
                      ax=ax_grid, title=text["grid"], vmin=0.0, vmax=1.0, annotate=False,
                      xlabel=text["grid_x"], ylabel=text["grid_y"])
        ax_grid.tick_params(labelsize=6)
        frame = Rectangle((-0.5, -0.5), 1, 1, fill=False, edgecolor="tab:red", linewidth=2)
        ax_grid.add_patch(frame)
        fig.tight_layout()
        return {"map": ax_map, "grid": ax_grid, "frame": frame, "title": ax_map.title}

    def update(self, art: dict, data: dict) -> list:
        text = _TEXT[self.lang]
        changed = plots.set_heatmap(art["map"], data["weights"])
        changed += plots.set_heatmap(art["grid"], data["grid"])
        art["frame"].set_xy((data["head"] - 0.5, data["layer"] - 0.5))
        art["title"].set_text(text["map"].format(layer=data["layer"], head=data["head"]))
        return [*changed, art["frame"], art["title"]]

