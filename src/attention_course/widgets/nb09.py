"""Widget of notebook 09: a real model's attention, one sentence, one layer and one head at a time.

The prepared sentences run through the model once, when the explorer is made (every layer's
weights kept), so moving the layer or head sliders, or choosing another prepared sentence, only
redraws. Free text costs one forward pass the first time it is shown; meanwhile a note beside the
text box says that the model is computing. Beside the chosen head's map, a grid of all 30 × 9
heads gives an overview: each cell is how much that head looks at the previous token in this
sentence, with the chosen head framed. The menu names the prepared sentences in the notebook's
language; the sentences themselves are English, the language the model was mostly trained on.

The map's layout does not depend on the sentence: its cells fill the same axes whatever their
number, and the position labels and tick marks are artists the update sets, with room kept for
the widest label of every prepared sentence. So another sentence is one more frame, not a new
figure (a new figure, laid out and drawn in full, took about 0.35 s). Only a free text with more
tokens or a wider label than any prepared sentence lays the figure out again.
"""

from __future__ import annotations

import re
from functools import lru_cache

import ipywidgets as w
import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.markers import TICKDOWN, TICKLEFT
from matplotlib.patches import Rectangle
from matplotlib.transforms import offset_copy

from .. import plots
from ..pretrained import previous_token_scores, repeated_random_tokens
from .renderer import Explorer, check_lang

FREE = "free"
#: Font size (points) of the map's position labels.
LABEL_SIZE = 7

_TEXT = {
    "zh": {
        "sentence": "句子", "text": "自由输入", "layer": "层", "head": "头",
        "free": "（自由输入）", "query": "查询（提问的词，从 0 数）", "key": "键（被看的词）",
        "map": "头 {layer}.{head}（层.头，从 0 数）的注意力权重",
        "grid": "每个头看前一个词的平均权重", "grid_x": "头", "grid_y": "层",
        "repeat": "随机词重复两遍（2 × 12）", "computing": "模型正在计算……",
    },
    "en": {
        "sentence": "sentence", "text": "free text", "layer": "layer", "head": "head",
        "free": "(free text)", "query": "query (the asking token, from 0)",
        "key": "key (the token looked at)",
        "map": "head {layer}.{head} (layer.head, from 0): attention weights",
        "grid": "mean weight on the previous token", "grid_x": "head",
        "grid_y": "layer", "repeat": "random tokens repeated (2 × 12)",
        "computing": "the model is computing…",
    },
}

#: Prepared sentences (English: the model was trained mostly on English text), by key.
SENTENCES = {
    "trophy (big)": "The trophy did not fit into the suitcase because it was too big.",
    "trophy (small)": "The trophy did not fit into the suitcase because it was too small.",
    "bank (river)": "She sat on the bank of the river and watched the water.",
    "bank (money)": "He took the money out of the bank to pay the rent.",
}

#: What the menu shows for each prepared sentence, in the notebook's language: the same
#: sentences, only their names translated (the key stays the menu's value).
SENTENCE_NAMES = {
    "trophy (big)": {"zh": "奖杯（big）", "en": "trophy (big)"},
    "trophy (small)": {"zh": "奖杯（small）", "en": "trophy (small)"},
    "bank (river)": {"zh": "bank（河岸）", "en": "bank (river)"},
    "bank (money)": {"zh": "bank（银行）", "en": "bank (money)"},
}

_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


@lru_cache(maxsize=1)
def _measure() -> tuple:
    """One small Agg renderer for every label: making one per label cost more than measuring."""
    return RendererAgg(1, 1, 72), FontProperties(size=LABEL_SIZE)


@lru_cache(maxsize=4096)
def _label_width(label: str) -> float:
    """Width in points of a position label as Agg lays it out (fonts with fallback, as drawn)."""
    renderer, font = _measure()
    return renderer.get_text_width_height_descent(label, font, ismath=False)[0]


def _widest(labels) -> str:
    return max(labels, key=lambda s: (_label_width(s), s))


def _key_rotation(labels) -> int:
    # as plots.heatmap turns its column labels: Chinese upright, long Latin labels on a wide map 90°
    if any(_CJK.search(s) for s in labels):
        return 0
    return 90 if len(labels) > 6 and max(map(len, labels)) > 4 else 0


class RealModelExplorer(Explorer):
    """Choose a sentence, a layer and a head of a loaded model; see that head's map and all heads.

    Parameters
    ----------
    model : attention_course.pretrained.PretrainedModel, optional
        Default: :func:`attention_course.pretrained.load` (the installed SmolLM2-135M).
    lang : {"zh", "en"}
    sentence : str
        Starting sentence: a key of :data:`SENTENCES`, ``"repeat"`` or ``"free"``, or the name
        the menu shows for it in ``lang`` (``"奖杯（big）"`` for ``"trophy (big)"`` in Chinese).
    layer, head : int
        Starting head, counted from 0.

    Attributes
    ----------
    data : dict
        ``tokens`` (T labels "position:token"); ``layer``; ``head``; ``weights`` (T query, T key)
        of that head; ``grid`` (n_layers, H), each head's mean weight on the previous token in
        this sentence.
    status : ipywidgets.Label
        Beside the free-text box: says that the model is computing while a new free text runs
        through it, empty otherwise.

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
        prepared = {name: model.encode(s) for name, s in SENTENCES.items()}
        prepared["repeat"] = repeated_random_tokens(12, seed=0).tolist()
        options = [(SENTENCE_NAMES[name][lang], name) for name in SENTENCES] + [
            (text["repeat"], "repeat"), (text["free"], FREE)]
        sentence = dict(options).get(sentence, sentence)     # a name shown in the menu: its key
        if sentence not in prepared and sentence != FREE:
            raise ValueError(f"sentence must be one of {list(prepared)} or 'free' (or a name "
                             f"the menu shows); got {sentence!r}")
        # once: every layer of every prepared sentence, and its labels
        self._maps = {name: self._run(ids) for name, ids in prepared.items()}
        runs = list(self._maps.values())
        # the map's layout holds every prepared sentence: as many label places as the longest
        # has tokens, as much room as the widest label takes
        self._slots = max(len(run["tokens"]) for run in runs)
        self._room = _widest([label for run in runs for label in run["tokens"]])
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
        self.status = w.Label(value="")
        super().__init__(controls, columns=2)
        for box in self.widget.children:        # beside the text box, where the learner waits
            if controls["text"] in getattr(box, "children", ()):
                box.children = (*box.children, self.status)

    def _run(self, ids) -> dict:
        _, weights = self.model.forward(ids, return_weights=True)
        pieces = self.model.token_strings(ids)
        return {"ids": list(ids), "tokens": [f"{i}:{p}" for i, p in enumerate(pieces)],
                "weights": weights, "grid": previous_token_scores(weights)}

    @staticmethod
    def _free_key(text: str) -> tuple:
        return ("free", text)

    def _needs_forward(self, values: dict) -> bool:
        return values["sentence"] == FREE and self._free_key(values["text"]) not in self._maps

    def _on_change(self, change) -> None:
        # The note is sent to the page before the forward pass starts and cleared after it, so
        # the learner sees why this frame takes longer than a slider's.
        busy = self._needs_forward(self.values())
        if busy:
            self.status.value = _TEXT[self.lang]["computing"]
        try:
            super()._on_change(change)
        finally:
            if busy:
                self.status.value = ""

    def compute(self, sentence: str, text: str, layer: int, head: int) -> dict:
        if sentence == FREE:
            key = self._free_key(text)
            if key not in self._maps:
                if len(self._maps) > 20:                   # free texts kept: a bounded few
                    for old in [k for k in self._maps if isinstance(k, tuple)][:5]:
                        del self._maps[old]
                self._maps[key] = self._run(self.model.encode(text or " "))
            run = self._maps[key]
        else:
            run = self._maps[sentence]
        return {"tokens": list(run["tokens"]), "layer": int(layer), "head": int(head),
                "weights": run["weights"][layer, head], "grid": run["grid"]}

    def layout_key(self, data: dict):
        # (label places, the label that sets the room, the key labels' angle): the same for every
        # prepared sentence; a free text changes it only when it needs more
        tokens = data["tokens"]
        return (max(self._slots, len(tokens)), _widest([self._room, *tokens]),
                _key_rotation(tokens))

    def build(self, fig, data: dict) -> dict:
        text = _TEXT[self.lang]
        slots, room, rotation = self.layout_key(data)
        ax_map, ax_grid = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
        plots.heatmap(data["weights"], ax=ax_map, title=" ", vmin=0.0, vmax=1.0, annotate=False,
                      xlabel=text["key"], ylabel=text["query"])
        # The cells fill the axes, (0, 1) both ways, whatever the number of tokens.
        ax_map.images[0].set_extent((0.0, 1.0, 1.0, 0.0))
        ax_map.set_xlim(0.0, 1.0)
        ax_map.set_ylim(1.0, 0.0)
        # One tick per axis, its label the widest one and drawn in no colour: the axis labels
        # and tight_layout then keep room for any prepared sentence's labels.
        ax_map.set_xticks([0.5], labels=[room], rotation=rotation)
        ax_map.set_yticks([0.5], labels=[room])
        ax_map.tick_params(labelsize=LABEL_SIZE, color="none", labelcolor="none")
        # The visible ticks and labels, placed as the axis places its own.
        size, width = rcParams["xtick.major.size"], rcParams["xtick.major.width"]
        x_off = size + rcParams["xtick.major.pad"]
        y_off = rcParams["ytick.major.size"] + rcParams["ytick.major.pad"]
        x_marks = Line2D([], [], transform=ax_map.get_xaxis_transform(), marker=TICKDOWN,
                         linestyle="none", markersize=size, markeredgewidth=width,
                         color=rcParams["xtick.color"], clip_on=False)
        y_marks = Line2D([], [], transform=ax_map.get_yaxis_transform(), marker=TICKLEFT,
                         linestyle="none", markersize=rcParams["ytick.major.size"],
                         markeredgewidth=rcParams["ytick.major.width"],
                         color=rcParams["ytick.color"], clip_on=False)
        ax_map.add_artist(x_marks)
        ax_map.add_artist(y_marks)
        x_place = offset_copy(ax_map.get_xaxis_transform(), fig=fig, y=-x_off, units="points")
        y_place = offset_copy(ax_map.get_yaxis_transform(), fig=fig, x=-y_off, units="points")
        x_labels = [ax_map.text(0.0, 0.0, "", transform=x_place, rotation=rotation, ha="center",
                                va="top", fontsize=LABEL_SIZE, clip_on=False, in_layout=False)
                    for _ in range(slots)]
        y_labels = [ax_map.text(0.0, 0.0, "", transform=y_place, ha="right",
                                va="center_baseline", fontsize=LABEL_SIZE, clip_on=False,
                                in_layout=False)
                    for _ in range(slots)]
        n_layers, H = data["grid"].shape
        plots.heatmap(data["grid"], [str(i) for i in range(n_layers)], [str(h) for h in range(H)],
                      ax=ax_grid, title=text["grid"], vmin=0.0, vmax=1.0, annotate=False,
                      xlabel=text["grid_x"], ylabel=text["grid_y"])
        ax_grid.tick_params(labelsize=6)
        frame = Rectangle((-0.5, -0.5), 1, 1, fill=False, edgecolor="tab:red", linewidth=2)
        ax_grid.add_patch(frame)
        fig.tight_layout()
        return {"map": ax_map.images[0], "grid": ax_grid, "frame": frame, "title": ax_map.title,
                "x_marks": x_marks, "y_marks": y_marks, "x_labels": x_labels,
                "y_labels": y_labels}

    def update(self, art: dict, data: dict) -> list:
        text = _TEXT[self.lang]
        tokens = data["tokens"]
        T = len(tokens)
        centres = (np.arange(T) + 0.5) / T                 # cell centres, in the axes' (0, 1)
        art["map"].set_data(np.asarray(data["weights"], dtype=float))
        art["x_marks"].set_data(centres, np.zeros(T))
        art["y_marks"].set_data(np.zeros(T), centres)
        for i, (x_label, y_label) in enumerate(zip(art["x_labels"], art["y_labels"], strict=True)):
            label, at = (tokens[i], centres[i]) if i < T else ("", 0.0)
            x_label.set_text(label)
            x_label.set_x(at)
            y_label.set_text(label)
            y_label.set_y(at)
        changed = plots.set_heatmap(art["grid"], data["grid"])
        art["frame"].set_xy((data["head"] - 0.5, data["layer"] - 0.5))
        art["title"].set_text(text["map"].format(layer=data["layer"], head=data["head"]))
        return [art["map"], art["x_marks"], art["y_marks"], *art["x_labels"], *art["y_labels"],
                *changed, art["frame"], art["title"]]
